"""android_host/ packaging without an Android SDK: the p4a manifest hook on a sample manifest, a
lint of buildozer.spec, the service entry's settings, and a compile check of the real ML Kit /
LiteRT-LM backends against hand-written stub jars (stubs only: nothing here ran on a device)."""

from __future__ import annotations

import configparser
import importlib.util
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

HOST = Path(__file__).resolve().parents[1] / "android_host"
SAMPLE = Path(__file__).resolve().parent / "android" / "sample_manifest.xml"
A = "{http://schemas.android.com/apk/res/android}"


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem.replace("/", "_"), path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    return load(HOST / "p4a_hook.py")


def test_the_hook_adds_the_fgs_subtype_permissions_and_unexports_the_service(hook):
    root = ET.fromstring(hook.patch_manifest(SAMPLE.read_text()))
    (service,) = root.find("application").findall("service")
    assert service.get(f"{A}exported") == "false"
    assert service.get(f"{A}foregroundServiceType") == "specialUse"
    (prop,) = service.findall("property")
    assert prop.get(f"{A}name") == "android.app.PROPERTY_SPECIAL_USE_FGS_SUBTYPE"
    permissions = {e.get(f"{A}name") for e in root.findall("uses-permission")}
    assert permissions == set(hook.PERMISSIONS)
    libraries = {e.get(f"{A}name") for e in root.find("application").findall("uses-native-library")}
    assert "libOpenCL.so" in libraries


def test_the_hook_is_idempotent(hook):
    once = hook.patch_manifest(SAMPLE.read_text())
    assert hook.patch_manifest(once) == once


def test_the_hook_refuses_a_manifest_without_the_oamd_service(hook):
    with pytest.raises(ValueError, match="ServiceOamd"):
        hook.patch_manifest(
            '<manifest xmlns:android="http://schemas.android.com/apk/res/android">'
            "<application/></manifest>"
        )


def test_the_hook_rewrites_the_rendered_manifest_in_the_dist(hook, tmp_path):
    manifest = tmp_path / "src" / "main" / "AndroidManifest.xml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(SAMPLE.read_text())

    class Dist:
        dist_dir = str(tmp_path)

    class Toolchain:
        _dist = Dist()

    hook.after_apk_build(Toolchain())
    assert "PROPERTY_SPECIAL_USE_FGS_SUBTYPE" in manifest.read_text()


def test_buildozer_spec_declares_the_aar_the_host_apk_and_a_pinned_p4a():
    spec = configparser.ConfigParser()
    spec.read(HOST / "buildozer.spec")
    app = spec["app"]
    name, entry, *options = app["services"].split(":")
    assert (name, entry) == ("Oamd", "service/main.py")
    assert {"foreground", "sticky", "foregroundServiceType=specialUse"} <= set(options)
    assert (HOST / entry).is_file()
    assert int(app["android.minapi"]) >= 26 and int(app["android.api"]) >= 35
    assert app["p4a.bootstrap"] == "service_library" and app["android.release_artifact"] == "aar"
    assert spec["app@hostapk"]["p4a.bootstrap"] == "service_only"
    assert app["p4a.branch"].startswith("v2026.")
    assert (HOST / app["p4a.hook"]).is_file()
    permissions = {p.strip() for p in app["android.permissions"].split(",")}
    assert {"FOREGROUND_SERVICE", "FOREGROUND_SERVICE_SPECIAL_USE", "INTERNET"} <= permissions
    deps = app["android.gradle_dependencies"]
    assert "com.google.mlkit:genai-prompt:" in deps and "litertlm-android:" in deps
    for source in app["android.add_src"].split(","):
        assert (HOST / source.strip()).is_dir()


def test_the_service_entry_reads_its_json_argument(monkeypatch):
    entry = load(HOST / "service" / "main.py")
    monkeypatch.setenv("PYTHON_SERVICE_ARGUMENT", '{"backend": "litert", "model": "/m"}')
    assert entry._settings() == {"backend": "litert", "model": "/m"}
    monkeypatch.setenv("PYTHON_SERVICE_ARGUMENT", "not json")
    assert entry._settings() == {}


def test_the_real_backends_compile_against_the_stub_jars(tmp_path):
    if shutil.which("javac") is None:
        pytest.skip("no javac on PATH (install a JDK, e.g. openjdk-17-jdk-headless)")
    sources = [
        str(p)
        for folder in ("stubs", "java", "java_android")
        for p in sorted((HOST / folder).rglob("*.java"))
    ]
    done = subprocess.run(
        [
            "javac",
            "-Xlint:all,-options",
            "-Werror",
            "--release",
            "8",
            "-d",
            str(tmp_path),
            *sources,
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "org" / "oamd" / "host" / "MlKitBackend.class").is_file()
    assert (tmp_path / "org" / "oamd" / "host" / "LiteRtBackend.class").is_file()

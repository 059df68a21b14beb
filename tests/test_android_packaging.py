"""android_host/ packaging without an Android SDK: the p4a hook (manifest on a sample, JDK check,
oamd copy), buildozer.spec against what the daemon imports and what p4a can build, the launcher's
class name, the service entry's settings, and a compile check of the real ML Kit / LiteRT-LM
backends against hand-written stub jars (stubs only: nothing here ran on a device)."""

from __future__ import annotations

import ast
import configparser
import importlib.metadata
import importlib.util
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HOST = Path(__file__).resolve().parents[1] / "android_host"
SAMPLE = Path(__file__).resolve().parent / "android" / "sample_manifest.xml"
P4A_RECIPES = Path(__file__).resolve().parent / "android" / "p4a_recipes.txt"
"""``pythonforandroid/recipes/`` at the spec's ``p4a.commit`` (a snapshot: no network here)."""
P4A_PYTHON = {"python_version": "3.14", "python_full_version": "3.14.2", "sys_platform": "android"}
"""The environment markers of p4a's python3 recipe (3.14.2 at that commit)."""
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
    generic, service = root.find("application").findall("service")
    assert generic.get(f"{A}name") == "org.kivy.android.PythonService"
    assert generic.get(f"{A}exported") == "false"
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


def spec() -> configparser.ConfigParser:
    parsed = configparser.ConfigParser()
    parsed.read(HOST / "buildozer.spec")
    return parsed


def test_buildozer_spec_declares_the_aar_the_host_apk_and_a_pinned_p4a():
    spec_ = spec()
    app = spec_["app"]
    name, entry, *options = app["services"].split(":")
    assert (name, entry) == ("Oamd", "service/main.py")
    assert {"foreground", "foregroundServiceType=specialUse"} <= set(options)
    assert "sticky" not in options  # a background restart cannot use AICore (README)
    assert (HOST / entry).is_file()
    assert int(app["android.minapi"]) >= 26 and int(app["android.api"]) >= 35
    assert app["p4a.bootstrap"] == "service_library" and app["android.release_artifact"] == "aar"
    assert spec_["app@hostapk"]["p4a.bootstrap"] == "service_only"
    assert app["p4a.branch"].startswith("v2026.")
    assert len(app["p4a.commit"]) == 40
    assert app["p4a.commit"][:8] in P4A_RECIPES.read_text().splitlines()[0]
    assert (HOST / app["p4a.hook"]).is_file()
    assert (HOST / app["p4a.local_recipes"]).is_dir()
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


SOFT_IMPORTS = {"colorama", "rich", "better-exceptions"}
"""Imported by ``structlog.dev`` only when present (a dev tool may install them beside oamd);
structlog works without them, and the phone's Python has none."""


def requirements() -> set[str]:
    listed = spec()["app"]["requirements"].split(",")
    return {canonicalize_name(r.strip()) for r in listed} - {"python3"}


def traced_distributions() -> set[str]:
    """The distributions whose modules the daemon loads on the service path: the service entry's
    oamd imports, a scripted stdio session, and one log line (structlog loads at the first one;
    ``serve`` logs where stdio may not)."""
    code = (
        "import atexit, json, sys\n"
        "def dump():\n"
        "    tops = {m.split('.')[0] for m in list(sys.modules)}\n"
        "    sys.stderr.write('MODULES ' + json.dumps(sorted(tops)) + '\\n')\n"
        "atexit.register(dump)\n"
        "import oamd.daemon, oamd.serve, oamd.backends.android.jvm, oamd.backends.android.litert, oamd.backends.android.mlkit\n"
        "from oamd.log import get_logger\n"
        "from oamd.cli import main\n"
        "get_logger('oamd.serve').debug('traced')\n"
        "sys.exit(main(['stdio']))\n"
    )
    requests = [
        ("initialize", {"protocolVersion": "1.0", "client": {"name": "tests"}}),
        (
            "session/create",
            {"session": "s", "model": {"type": "scripted", "steps": [{"text": "Hi"}]}},
        ),
        ("session/respond", {"session": "s", "prompt": "Hi.", "stream": True}),
    ]
    lines = "".join(
        json.dumps({"jsonrpc": "2.0", "id": n, "method": m, "params": p}) + "\n"
        for n, (m, p) in enumerate(requests)
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=lines, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"result"') == len(requests), done.stdout
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("MODULES ")]
    tops = set(json.loads(line.removeprefix("MODULES "))) - set(sys.stdlib_module_names)
    owners = importlib.metadata.packages_distributions()
    found = {canonicalize_name(d) for top in tops for d in owners.get(top, [])}
    # oamd is copied in; setuptools: the editable install
    return found - {"oamd", "setuptools"} - SOFT_IMPORTS


def closure(names: set[str]) -> set[str]:
    """``names`` and their dependencies as p4a's Python would install them."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in importlib.metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(
                {**P4A_PYTHON, "extra": ""}
            ):
                todo.append(canonicalize_name(requirement.name))
    return seen


def test_the_spec_requires_exactly_what_the_service_path_imports():
    # pyjnius: service/main.py's own import (the daemon loads it only on a JVM)
    assert "from jnius import" in (HOST / "service" / "main.py").read_text()
    needed = closure(traced_distributions()) | {"pyjnius"}
    required = requirements()
    assert required - needed == set(), "required but never imported on the service path"
    assert needed - required == set(), "imported on the service path but not required"
    assert {"pydantic", "pydantic-core", "rpds-py", "jsonschema", "httpx"} & required == set()


def test_every_requirement_has_a_p4a_recipe_or_a_pure_python_wheel():
    p4a = {canonicalize_name(x) for x in P4A_RECIPES.read_text().splitlines()[1:]}
    local = {canonicalize_name(p.name) for p in (HOST / "p4a-recipes").iterdir() if p.is_dir()}
    for name in requirements() - p4a - local:
        wheel = importlib.metadata.distribution(name).read_text("WHEEL") or ""
        assert "Root-Is-Purelib: true" in wheel, f"{name}: no p4a recipe and not pure Python"
    assert "orjson" not in p4a and "orjson" in local  # Rust: built by the local recipe


def test_the_local_orjson_recipe_builds_it_like_p4as_rust_recipes():
    source = (HOST / "p4a-recipes" / "orjson" / "__init__.py").read_text()
    assert "RustCompiledComponentsRecipe" in source and 'site_packages_name = "orjson"' in source


def test_the_launcher_starts_the_class_p4a_generates_from_the_spec():
    app = spec()["app"]
    name = app["services"].split(":")[0]
    expected = (
        f"{app['package.domain']}.{app['package.name']}".lower() + f".Service{name.capitalize()}"
    )
    tree = ast.parse((HOST / "main.py").read_text())
    constants = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant | ast.Dict)
    }
    assert constants["SERVICE_CLASS"] == expected
    assert constants["SETTINGS"]["backend"] == "litert"
    assert f"{expected}.prepare(" in (HOST / "README.md").read_text()
    assert expected.endswith(load(HOST / "p4a_hook.py").SERVICE_SUFFIX)


@pytest.mark.parametrize(
    ("text", "major"),
    [("javac 21.0.5", 21), ("javac 17.0.15\n", 17), ("javac 1.8.0_392", 8), ("javac 25", 25)],
)
def test_the_hook_reads_the_jdk_version(hook, text, major):
    assert hook.java_major(text) == major


def test_the_hook_refuses_a_jdk_older_than_21_with_the_reason(hook, tmp_path):
    javac = tmp_path / "javac"
    javac.write_text("#!/bin/sh\necho 'javac 17.0.15' >&2\n")
    javac.chmod(0o755)
    with pytest.raises(hook.BuildEnvironmentError, match=r"JDK 17; .*needs JDK >= 21"):
        hook.check_jdk(str(javac))
    javac.write_text("#!/bin/sh\necho 'javac 21.0.5'\n")
    assert hook.check_jdk(str(javac)) == 21


def test_the_hook_copies_oamd_into_the_app_without_the_typed_client(hook, tmp_path):
    (tmp_path / "oamd").mkdir()
    (tmp_path / "oamd" / "stale.py").write_text("")
    copied = hook.copy_oamd(tmp_path)
    assert (copied / "daemon" / "wiring.py").is_file() and (
        copied / "backends" / "android" / "litert.py"
    ).is_file()
    assert not (copied / "client").exists() and not (copied / "stale.py").exists()
    assert not list(copied.rglob("__pycache__"))


def test_the_hook_checks_the_jdk_and_copies_oamd_before_the_build(hook, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(hook, "check_jdk", lambda: calls.append("jdk"))

    class Args:
        private = str(tmp_path)

    class Toolchain:
        args = Args()

    hook.before_apk_build(Toolchain())
    assert calls == ["jdk"] and (tmp_path / "oamd" / "serve").is_dir()


@pytest.mark.parametrize(
    ("summary", "code"),
    [
        ("SKIPPED [3] tests/android/jvm_support.py:46: pyjnius is not installed", 1),
        ("SKIPPED [1] tests/test_android_packaging.py:300: no javac on PATH", 1),
        ("SKIPPED [1] tests/test_backend_llamacpp.py:20: no model", 0),
    ],
)
def test_ci_fails_when_javac_exists_but_android_tests_skipped(tmp_path, summary, code):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = (
        ("make", f"echo '{summary}'"),
        ("javac", "echo 'javac 21'"),
        ("id", "echo 1000"),  # not root: .ci/run installs nothing (Mono, Chromium) from a test
    )
    for name, body in fakes:
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    done = subprocess.run(
        ["bash", str(HOST.parent / ".ci" / "run")],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == code, done.stderr

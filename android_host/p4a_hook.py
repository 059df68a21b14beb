"""p4a hook (buildozer ``p4a.hook``): the JDK check, oamd's source, and the manifest entries p4a's
templates cannot express.

``before_apk_build`` (the Python dist is built, the app directory not yet packed):

- refuses a JDK older than 21 (``javac -version``; LiteRT-LM ships Java 21 class files, which an
  older ``javac``/D8 cannot read), with the reason;
- copies the repository's ``oamd`` package (without ``oamd/client``, the typed client that needs
  pydantic) into the app directory p4a packs (``--private``), so the service imports it.

p4a renders ``<service android:name="….ServiceOamd" android:foregroundServiceType="specialUse"
android:process=":service_oamd" android:exported="true"/>`` with no children and, for the
``service_library`` (AAR) bootstrap, no ``<uses-permission>`` at all. After p4a renders the
manifest and before Gradle assembles, ``after_apk_build`` rewrites it (idempotently) to:

- add the ``PROPERTY_SPECIAL_USE_FGS_SUBTYPE`` ``<property>`` the ``specialUse`` type requires;
- make the service ``exported="false"`` (only the game's own APK starts it), and so p4a's generic
  ``org.kivy.android.PythonService``, which the ``service_only`` (host APK) template declares
  exported whenever ``service/main.py`` exists (it would throw on another app's Intent);
- declare INTERNET, FOREGROUND_SERVICE, FOREGROUND_SERVICE_SPECIAL_USE, POST_NOTIFICATIONS;
- add ``<uses-native-library libOpenCL.so required=false>`` for LiteRT-LM's GPU backend.

``patch_manifest`` is pure (text in, text out) so it is tested on a sample manifest.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

ANDROID = "http://schemas.android.com/apk/res/android"
SERVICE_SUFFIX = ".ServiceOamd"
"""p4a names the class ``Service<Name>`` after ``services = Oamd:…`` in buildozer.spec."""

FGS_SUBTYPE = (
    "Runs an on-device language model for the game in the foreground, which the game's "
    "characters use as agents; ends with the game."
)
PERMISSIONS = (
    "android.permission.INTERNET",
    "android.permission.FOREGROUND_SERVICE",
    "android.permission.FOREGROUND_SERVICE_SPECIAL_USE",
    "android.permission.POST_NOTIFICATIONS",
)
NATIVE_LIBRARIES = ("libOpenCL.so", "libvndksupport.so")
GENERIC_SERVICE = "org.kivy.android.PythonService"
"""Declared, exported, by p4a's ``service_only`` manifest when the app has ``service/main.py``."""

MIN_JDK = 21
"""LiteRT-LM's AAR holds Java 21 class files (major version 65)."""

OAMD_SOURCE = Path(__file__).resolve().parents[1] / "oamd"
"""The repository's ``oamd`` package (this hook lives in ``android_host/``)."""

OAMD_LEFT_OUT = ("client", "__pycache__")
"""Not on the service path: the typed client (pydantic) and bytecode caches."""


class BuildEnvironmentError(RuntimeError):
    """The build machine cannot build the AAR (e.g. a JDK older than ``MIN_JDK``)."""


def java_major(version_text: str) -> int:
    """The major version in ``javac -version`` output (``javac 21.0.5`` → 21, ``javac 1.8.0`` → 8).

    Raises:
        BuildEnvironmentError: the text names no version.
    """
    found = re.search(r"\b(\d+)(?:\.(\d+))?", version_text)
    if found is None:
        raise BuildEnvironmentError(f"cannot read a Java version from {version_text!r}")
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def check_jdk(javac: str | None = None) -> int:
    """The JDK's major version, when it is at least ``MIN_JDK``.

    Raises:
        BuildEnvironmentError: no ``javac``, or one older than ``MIN_JDK``.
    """
    javac = javac or shutil.which("javac")
    if javac is None:
        raise BuildEnvironmentError(f"no javac on PATH: install a JDK >= {MIN_JDK}")
    done = subprocess.run([javac, "-version"], capture_output=True, text=True, check=False)
    major = java_major(done.stdout + done.stderr)
    if major < MIN_JDK:
        raise BuildEnvironmentError(
            f"{javac} is JDK {major}; oamd's AAR needs JDK >= {MIN_JDK} (LiteRT-LM ships Java "
            f"{MIN_JDK} class files): install one and point JAVA_HOME and PATH at it"
        )
    return major


def copy_oamd(app_dir: Path, source: Path = OAMD_SOURCE) -> Path:
    """Copies ``source`` (the ``oamd`` package) to ``app_dir/oamd``, replacing an earlier copy."""
    target = app_dir / "oamd"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*OAMD_LEFT_OUT))
    return target


def _a(name: str) -> str:
    return f"{{{ANDROID}}}{name}"


def patch_manifest(text: str) -> str:
    """The manifest with oamd's entries added; unchanged entries are left as they are.

    Raises:
        ValueError: the manifest has no ``<application>`` or no oamd service.
    """
    ET.register_namespace("android", ANDROID)
    root = ET.fromstring(text)
    application = root.find("application")
    if application is None:
        raise ValueError("manifest has no <application>")
    services = [
        s for s in application.findall("service") if s.get(_a("name"), "").endswith(SERVICE_SUFFIX)
    ]
    if not services:
        raise ValueError(f"manifest declares no service ending in {SERVICE_SUFFIX}")
    have = {e.get(_a("name")) for e in root.findall("uses-permission")}
    for index, permission in enumerate(p for p in PERMISSIONS if p not in have):
        element = ET.Element("uses-permission", {_a("name"): permission})
        root.insert(index, element)
    for generic in application.findall("service"):
        if generic.get(_a("name")) == GENERIC_SERVICE:
            generic.set(_a("exported"), "false")
    for service in services:
        service.set(_a("exported"), "false")
        if service.get(_a("foregroundServiceType")) is None:
            service.set(_a("foregroundServiceType"), "specialUse")
        subtype = "android.app.PROPERTY_SPECIAL_USE_FGS_SUBTYPE"
        if not any(p.get(_a("name")) == subtype for p in service.findall("property")):
            ET.SubElement(service, "property", {_a("name"): subtype, _a("value"): FGS_SUBTYPE})
    libraries = {e.get(_a("name")) for e in application.findall("uses-native-library")}
    for library in NATIVE_LIBRARIES:
        if library not in libraries:
            ET.SubElement(
                application, "uses-native-library", {_a("name"): library, _a("required"): "false"}
            )
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def _manifest_path(toolchain) -> Path:
    return Path(toolchain._dist.dist_dir) / "src" / "main" / "AndroidManifest.xml"


def before_apk_build(toolchain) -> None:
    """p4a hook point: the dist is built; the app directory (``--private``) is not yet packed."""
    check_jdk()
    copy_oamd(Path(toolchain.args.private))


def after_apk_build(toolchain) -> None:
    """p4a hook point: the manifest is rendered, Gradle has not run yet."""
    path = _manifest_path(toolchain)
    path.write_text(patch_manifest(path.read_text(encoding="utf-8")), encoding="utf-8")

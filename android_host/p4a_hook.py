"""p4a hook (buildozer ``p4a.hook``): the manifest entries p4a's templates cannot express.

p4a renders ``<service android:name="….ServiceOamd" android:foregroundServiceType="specialUse"
android:process=":service_oamd" android:exported="true"/>`` with no children and, for the
``service_library`` (AAR) bootstrap, no ``<uses-permission>`` at all. After p4a renders the
manifest and before Gradle assembles, ``after_apk_build`` rewrites it (idempotently) to:

- add the ``PROPERTY_SPECIAL_USE_FGS_SUBTYPE`` ``<property>`` the ``specialUse`` type requires;
- make the service ``exported="false"`` (only the game's own APK starts it);
- declare INTERNET, FOREGROUND_SERVICE, FOREGROUND_SERVICE_SPECIAL_USE, POST_NOTIFICATIONS;
- add ``<uses-native-library libOpenCL.so required=false>`` for LiteRT-LM's GPU backend.

``patch_manifest`` is pure (text in, text out) so it is tested on a sample manifest.
"""

from __future__ import annotations

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


def after_apk_build(toolchain) -> None:
    """p4a hook point: the manifest is rendered, Gradle has not run yet."""
    path = _manifest_path(toolchain)
    path.write_text(patch_manifest(path.read_text(encoding="utf-8")), encoding="utf-8")

"""Host-APK launcher (``service_only`` bootstrap): starts the oamd service, then finishes.

The embedded AAR (``service_library``) has no launcher: the game starts the service itself (see
README). The argument is passed through to ``service/main.py`` as ``PYTHON_SERVICE_ARGUMENT``.
"""

from __future__ import annotations

import json

from jnius import autoclass

SERVICE_CLASS = "org.oamd.host.oamd.ServiceOamd"
"""p4a's generated class: ``<package.domain>.<package.name>.Service<Name>`` (``Name.capitalize()``
of ``services = Oamd:…``); tests/test_android_packaging.py derives it from buildozer.spec."""

SETTINGS = {"backend": "litert", "tcp": "127.0.0.1:0"}
"""LiteRT-LM: ML Kit (AICore) refuses a caller that is not in front, and this launcher finishes.
Without ``model``, ``service/main.py`` loads ``<files dir>/oamd/model.litertlm``."""

activity = autoclass("org.kivy.android.PythonActivity").mActivity
# service_only's generated class has no prepare(): this activity has unpacked the app already
autoclass(SERVICE_CLASS).start(activity, json.dumps(SETTINGS))
activity.finish()

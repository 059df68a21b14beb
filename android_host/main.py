"""Host-APK launcher (``service_only`` bootstrap): starts the oamd service, then finishes.

The embedded AAR (``service_library``) has no launcher: the game starts the service itself (see
README). The argument is passed through to ``service/main.py`` as ``PYTHON_SERVICE_ARGUMENT``.
"""

from __future__ import annotations

import json

from jnius import autoclass

SERVICE_CLASS = "org.oamd.host.ServiceOamd"
"""p4a's generated class: ``<package.domain>.<package.name>.Service<Name>``."""

activity = autoclass("org.kivy.android.PythonActivity").mActivity
autoclass(SERVICE_CLASS).start(activity, json.dumps({"backend": "mlkit", "tcp": "127.0.0.1:0"}))
activity.finish()

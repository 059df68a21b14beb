"""The p4a service entry: oamd serving the game from inside the game's own APK.

Runs in the service's process (``:service_Oamd``: p4a keeps the name's case) as started by p4a's
``PythonService``. Reads its settings from ``PYTHON_SERVICE_ARGUMENT`` (a JSON object, all keys
optional):

    {"backend": "litert" | "mlkit", "model": "<path to .litertlm>", "abstract": "oamd",
     "tcp": "127.0.0.1:0", "contextTokens": 4096}

and serves the bridge protocol on the abstract socket ``@<package>.<abstract>`` (the app's own
package first, so two games embedding oamd on one phone cannot collide; same APK, so same SELinux
categories), one generation at a time (a phone runs one on-device model), and, when ``tcp`` is
given, on token-protected loopback TCP; the ready line and the token are written to
``<files dir>/oamd/`` for the game to read. The default backend is LiteRT-LM (``model`` defaults to
``<files dir>/oamd/model.litertlm``): ML Kit goes through AICore, which serves only an app in
front. Java classes are loaded here, on the service's own Java-started thread, because
``FindClass`` from the JVM worker thread only sees the system class loader on Android.
Unverified on a device: see README's checklist.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio

from oamd.backends.android.jvm import JvmRuntime
from oamd.backends.android.litert import LiteRtModel
from oamd.backends.android.mlkit import MlKitModel
from oamd.daemon import default_config
from oamd.serve import ServeOptions, serve

DEFAULT_BACKEND = "litert"
"""ML Kit (``"mlkit"``) only while the game is in front (AICore's error 30 otherwise)."""

DEFAULT_ABSTRACT_NAME = "oamd"
"""The abstract socket name's last part (``@<package>.oamd``) when the start argument gives none."""

MAX_GENERATIONS = 1
"""Generations running at once (``--max-generations``): one model on one phone; more would only
queue inside AICore or LiteRT-LM, or run out of memory."""


def _settings() -> dict:
    raw = os.environ.get("PYTHON_SERVICE_ARGUMENT") or "{}"
    try:
        value = json.loads(raw)
    except ValueError:
        value = {}
    return value if isinstance(value, dict) else {}


def _service():  # -> android.app.Service (a Context)
    from jnius import autoclass

    return autoclass("org.kivy.android.PythonService").mService


def _files_dir() -> Path:
    return Path(_service().getFilesDir().getAbsolutePath())


def abstract_name(settings: dict, package: str) -> str:
    """``<package>.<abstract>``: the app's package always comes first."""
    return f"{package}.{settings.get('abstract') or DEFAULT_ABSTRACT_NAME}"


def serve_options(settings: dict, package: str, state: Path) -> ServeOptions:
    """What ``main`` serves: the package's abstract socket, optional TCP, one generation."""
    return ServeOptions(
        abstract=[abstract_name(settings, package)],
        tcp=[settings["tcp"]] if settings.get("tcp") else [],
        token_file=str(state / "token"),
        ready_file=str(state / "ready.json"),
        max_generations=MAX_GENERATIONS,
    )


def build_model(settings: dict, runtime: JvmRuntime):  # -> LanguageModel
    from jnius import autoclass  # on this (Java-started) thread: the app class loader

    autoclass("org.oamd.host.GenerationSink")
    if settings.get("backend", DEFAULT_BACKEND) == "litert":
        backend_class = autoclass("org.oamd.host.LiteRtBackend")
        cache = str(_files_dir() / "litert-cache")
        model = settings.get("model") or str(_files_dir() / "oamd" / "model.litertlm")
        context = int(settings.get("contextTokens", 4096))
        return LiteRtModel(backend_class(model, cache, context), runtime)
    # the service is the Context ML Kit is initialised with in this (:service) process
    return MlKitModel(autoclass("org.oamd.host.MlKitBackend")(_service()), runtime)


def main() -> None:
    settings = _settings()
    runtime = JvmRuntime.start()
    model = build_model(settings, runtime)
    state = _files_dir() / "oamd"
    state.mkdir(parents=True, exist_ok=True)
    options = serve_options(settings, str(_service().getPackageName()), state)
    anyio.run(serve, default_config(system_model=model), options)


if __name__ == "__main__":
    main()

"""The daemon: its method set and configuration (``wiring``), one connection however it arrives
(``connection``), and the ``initialize`` answered before the event loop exists
(``early_initialize``)."""

from oamd.bridge.state import DaemonConfig
from oamd.daemon.connection import ConnectionTap, open_connection, serve_stdio, serve_stream
from oamd.daemon.wiring import build_registry, default_config

__all__ = [
    "ConnectionTap",
    "DaemonConfig",
    "build_registry",
    "default_config",
    "open_connection",
    "serve_stdio",
    "serve_stream",
]

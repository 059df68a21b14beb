"""JSON-RPC: lines ⇄ messages, the registry, dispatch in arrival order, one writer, one error boundary.

The connection (and the event loop's libraries with it) loads when first asked for, so the registry
and the error table can be used before the loop exists (``oamd.daemon.early_initialize``).
"""

from typing import TYPE_CHECKING, Any

from oamd.rpc.errors import CODES, error_object, to_wire_error
from oamd.rpc.registry import Deferred, Handler, Registry, Reply, Request, Result

if TYPE_CHECKING:
    from oamd.rpc.connection import Connection, Lifecycle, PendingCall

__all__ = [
    "CODES",
    "Connection",
    "Deferred",
    "Handler",
    "Lifecycle",
    "PendingCall",
    "Registry",
    "Reply",
    "Request",
    "Result",
    "error_object",
    "to_wire_error",
]

_CONNECTION_NAMES = ("Connection", "Lifecycle", "PendingCall")


def __getattr__(name: str) -> Any:
    if name in _CONNECTION_NAMES:
        from oamd.rpc import connection

        return getattr(connection, name)
    raise AttributeError(f"module 'oamd.rpc' has no attribute {name!r}")

"""JSON-RPC: lines ⇄ messages, the registry, dispatch in arrival order, one writer, one error boundary."""

from oamd.rpc.connection import Connection, Lifecycle, PendingCall
from oamd.rpc.errors import CODES, error_object, to_wire_error
from oamd.rpc.registry import Deferred, Handler, Registry, Reply, Request, Result

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

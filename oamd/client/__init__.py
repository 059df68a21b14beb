"""An async client of the bridge protocol, for tests, benches, the demo and Python hosts."""

from oamd.client._client import (
    Client,
    ConnectionClosed,
    NotificationCallback,
    RpcError,
    ToolHandler,
)
from oamd.client._connect import connect_stdio, connect_stream, connect_tcp, connect_unix
from oamd.client._recorder import Recorder

__all__ = [
    "Client",
    "ConnectionClosed",
    "NotificationCallback",
    "Recorder",
    "RpcError",
    "ToolHandler",
    "connect_stdio",
    "connect_stream",
    "connect_tcp",
    "connect_unix",
]

"""A client of the bridge protocol, for Python hosts, tests, benches and the demo.

``Client`` speaks the protocol as dicts (``connect_stdio``, ``connect_unix``, ``connect_tcp``,
``connect_stream``); it needs nothing beyond oamd's own dependencies. The methods' results as
pydantic models (``SessionRespondResult``…) need the ``client`` extra (``pip install
'oamd[client]'``); their names are imported on first use, so the dict-level client never loads
pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from oamd.client._client import (
    Client,
    ConnectionClosed,
    NotificationCallback,
    RpcError,
    ToolHandler,
)
from oamd.client._connect import connect_stdio, connect_stream, connect_tcp, connect_unix
from oamd.client._recorder import Recorder

if TYPE_CHECKING:  # the result models, loaded by __getattr__ below
    from oamd.client._results import (
        Availability,
        Capabilities,
        ContentGenerateResult,
        Decision,
        Emotion,
        InitializeResult,
        NpcCreateResult,
        NpcTalkResult,
        ServerInfo,
        SessionCreateResult,
        SessionRespondResult,
        Step,
        ToolCall,
        ToolCallRecord,
        Usage,
        WorldCreateResult,
        WorldGetResult,
        WorldRemoveResult,
        WorldSetResult,
    )

__all__ = [
    "Availability",
    "Capabilities",
    "Client",
    "ConnectionClosed",
    "ContentGenerateResult",
    "Decision",
    "Emotion",
    "InitializeResult",
    "NotificationCallback",
    "NpcCreateResult",
    "NpcTalkResult",
    "Recorder",
    "RpcError",
    "ServerInfo",
    "SessionCreateResult",
    "SessionRespondResult",
    "Step",
    "ToolCall",
    "ToolCallRecord",
    "ToolHandler",
    "Usage",
    "WorldCreateResult",
    "WorldGetResult",
    "WorldRemoveResult",
    "WorldSetResult",
    "connect_stdio",
    "connect_stream",
    "connect_tcp",
    "connect_unix",
]

_TYPED_MODULES = {
    "oamd.client._results": [
        "Availability",
        "Capabilities",
        "ContentGenerateResult",
        "Decision",
        "Emotion",
        "InitializeResult",
        "NpcCreateResult",
        "NpcTalkResult",
        "ServerInfo",
        "SessionCreateResult",
        "SessionRespondResult",
        "Step",
        "ToolCall",
        "ToolCallRecord",
        "Usage",
        "WorldCreateResult",
        "WorldGetResult",
        "WorldRemoveResult",
        "WorldSetResult",
    ],
}
_TYPED = {name: module for module, names in _TYPED_MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _TYPED.get(name)
    if module is None:
        raise AttributeError(f"module 'oamd.client' has no attribute {name!r}")
    try:
        value = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name != "pydantic" and not (exc.name or "").startswith("pydantic"):
            raise
        raise ImportError(f"oamd.client.{name} needs pydantic: pip install 'oamd[client]'") from exc
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

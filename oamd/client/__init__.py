"""A client of the bridge protocol, for Python hosts, tests, benches and the demo.

Two levels over one connection:

- ``Client`` speaks the protocol as dicts (``connect_stdio``, ``connect_unix``, ``connect_tcp``,
  ``connect_stream``); it needs nothing beyond oamd's own dependencies.
  ``client.on_notification(method, handler)`` calls a handler (plain or ``async def``) with every
  notification of a method.
- ``Bridge`` is the typed API on top of it: ``@bridge.tool`` client tools, ``Session`` /
  ``Npc`` / ``World`` handles, ``decide`` and ``generate``, results as pydantic models. It needs
  the ``client`` extra (``pip install 'oamd[client]'``); its names are imported on first use, so
  the dict-level client never loads pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from oamd.client._client import Client
from oamd.client._connect import connect_stdio, connect_stream, connect_tcp, connect_unix
from oamd.client._correlation import NotificationCallback
from oamd.client._errors import ConnectionClosed, RpcError
from oamd.client._notifications import NotificationHandler
from oamd.client._recorder import Recorder
from oamd.client._tool_calls import ToolHandler

if TYPE_CHECKING:  # the typed API, loaded by __getattr__ below
    from oamd.client._bridge import Bridge
    from oamd.client._npc import Npc
    from oamd.client._params import EventCallback, TextCallback
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
    from oamd.client._session import Session
    from oamd.client._tools import ToolContext, ToolError, ToolFunction
    from oamd.client._world import World

__all__ = [
    "Availability",
    "Bridge",
    "Capabilities",
    "Client",
    "ConnectionClosed",
    "ContentGenerateResult",
    "Decision",
    "Emotion",
    "EventCallback",
    "InitializeResult",
    "NotificationCallback",
    "NotificationHandler",
    "Npc",
    "NpcCreateResult",
    "NpcTalkResult",
    "Recorder",
    "RpcError",
    "ServerInfo",
    "Session",
    "SessionCreateResult",
    "SessionRespondResult",
    "Step",
    "TextCallback",
    "ToolCall",
    "ToolCallRecord",
    "ToolContext",
    "ToolError",
    "ToolFunction",
    "ToolHandler",
    "Usage",
    "World",
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
    "oamd.client._bridge": ["Bridge"],
    "oamd.client._npc": ["Npc"],
    "oamd.client._params": ["EventCallback", "TextCallback"],
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
    "oamd.client._session": ["Session"],
    "oamd.client._tools": ["ToolContext", "ToolError", "ToolFunction"],
    "oamd.client._world": ["World"],
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
        raise ImportError(
            f"oamd.client.{name} needs pydantic: pip install pydantic (the 'client' extra)"
        ) from exc
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

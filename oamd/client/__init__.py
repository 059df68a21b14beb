"""A client of the bridge protocol, for Python hosts, tests, benches and the demo.

Two levels over one connection:

- ``Client`` speaks the protocol as dicts (``connect_stdio``, ``connect_unix``, ``connect_tcp``,
  ``connect_stream``); it needs nothing beyond oamd's own dependencies.
  ``client.on_notification(method, handler)`` calls a handler (plain or ``async def``) with every
  notification of a method.
- ``Bridge`` is the typed API on top of it: ``@bridge.tool`` client tools, ``Session`` /
  ``Npc`` / ``World`` handles, ``decide``, ``decide_many`` and ``generate``: a typed call for
  every protocol method (snake_case keywords, a misspelt one raising ``TypeError``; ``timeout=``
  on each, a timed-out turn cancelled), results as pydantic models. ``bridge.on(method,
  handler)``, ``Session.on_event``, ``Npc.on_event`` and ``World.subscribe(path, handler)`` hand
  notifications to handlers as models (``_events``). It needs
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
    from oamd.client._events import (
        EmotionEvent,
        LineDeltaEvent,
        LineResetEvent,
        ModelStepEvent,
        NpcEvent,
        NpcEventNotification,
        PartialEvent,
        SessionEvent,
        SessionEventNotification,
        TextEvent,
        ToolCallCompletedEvent,
        ToolCallStartedEvent,
        ToolCancel,
        WorldChange,
    )
    from oamd.client._game_results import (
        DecideManyResult,
        Decision,
        DecisionFailure,
        ErrorData,
        ErrorObject,
        NpcCreateResult,
        NpcListResult,
        NpcSummary,
        NpcTalkResult,
        NpcUpdateResult,
        Subscription,
        WorldCreateResult,
        WorldGetResult,
        WorldListResult,
        WorldRemoveResult,
        WorldSetResult,
        WorldSummary,
        WorldUnsubscribeResult,
    )
    from oamd.client._model_requests import DecisionRequest
    from oamd.client._npc import Npc
    from oamd.client._params import EventCallback, TextCallback
    from oamd.client._results import (
        Availability,
        Capabilities,
        ContentGenerateResult,
        Emotion,
        InitializeResult,
        SchemaValidateResult,
        ServerInfo,
        SessionAck,
        SessionCompactResult,
        SessionCreateResult,
        SessionListResult,
        SessionRespondResult,
        SessionSummary,
        Step,
        ToolCall,
        ToolCallRecord,
        ToolsValidateResult,
        Usage,
        ValidatedTool,
    )
    from oamd.client._session import Session
    from oamd.client._tools import ToolContext, ToolError, ToolFunction
    from oamd.client._world import World, WorldSubscription

__all__ = [
    "Availability",
    "Bridge",
    "Capabilities",
    "Client",
    "ConnectionClosed",
    "ContentGenerateResult",
    "DecideManyResult",
    "Decision",
    "DecisionFailure",
    "DecisionRequest",
    "Emotion",
    "EmotionEvent",
    "ErrorData",
    "ErrorObject",
    "EventCallback",
    "InitializeResult",
    "LineDeltaEvent",
    "LineResetEvent",
    "ModelStepEvent",
    "NotificationCallback",
    "NotificationHandler",
    "Npc",
    "NpcCreateResult",
    "NpcEvent",
    "NpcEventNotification",
    "NpcListResult",
    "NpcSummary",
    "NpcTalkResult",
    "NpcUpdateResult",
    "PartialEvent",
    "Recorder",
    "RpcError",
    "SchemaValidateResult",
    "ServerInfo",
    "Session",
    "SessionAck",
    "SessionCompactResult",
    "SessionCreateResult",
    "SessionEvent",
    "SessionEventNotification",
    "SessionListResult",
    "SessionRespondResult",
    "SessionSummary",
    "Step",
    "Subscription",
    "TextCallback",
    "TextEvent",
    "ToolCall",
    "ToolCallCompletedEvent",
    "ToolCallRecord",
    "ToolCallStartedEvent",
    "ToolCancel",
    "ToolContext",
    "ToolError",
    "ToolFunction",
    "ToolHandler",
    "ToolsValidateResult",
    "Usage",
    "ValidatedTool",
    "World",
    "WorldChange",
    "WorldCreateResult",
    "WorldGetResult",
    "WorldListResult",
    "WorldRemoveResult",
    "WorldSetResult",
    "WorldSubscription",
    "WorldSummary",
    "WorldUnsubscribeResult",
    "connect_stdio",
    "connect_stream",
    "connect_tcp",
    "connect_unix",
]

_TYPED_MODULES = {
    "oamd.client._bridge": ["Bridge"],
    "oamd.client._events": [
        "EmotionEvent",
        "LineDeltaEvent",
        "LineResetEvent",
        "ModelStepEvent",
        "NpcEvent",
        "NpcEventNotification",
        "PartialEvent",
        "SessionEvent",
        "SessionEventNotification",
        "TextEvent",
        "ToolCallCompletedEvent",
        "ToolCallStartedEvent",
        "ToolCancel",
        "WorldChange",
    ],
    "oamd.client._game_results": [
        "DecideManyResult",
        "Decision",
        "DecisionFailure",
        "ErrorData",
        "ErrorObject",
        "NpcCreateResult",
        "NpcListResult",
        "NpcSummary",
        "NpcTalkResult",
        "NpcUpdateResult",
        "Subscription",
        "WorldCreateResult",
        "WorldGetResult",
        "WorldListResult",
        "WorldRemoveResult",
        "WorldSetResult",
        "WorldSummary",
        "WorldUnsubscribeResult",
    ],
    "oamd.client._model_requests": ["DecisionRequest"],
    "oamd.client._npc": ["Npc"],
    "oamd.client._params": ["EventCallback", "TextCallback"],
    "oamd.client._results": [
        "Availability",
        "Capabilities",
        "ContentGenerateResult",
        "Emotion",
        "InitializeResult",
        "SchemaValidateResult",
        "ServerInfo",
        "SessionAck",
        "SessionCompactResult",
        "SessionCreateResult",
        "SessionListResult",
        "SessionRespondResult",
        "SessionSummary",
        "Step",
        "ToolCall",
        "ToolCallRecord",
        "ToolsValidateResult",
        "Usage",
        "ValidatedTool",
    ],
    "oamd.client._session": ["Session"],
    "oamd.client._tools": ["ToolContext", "ToolError", "ToolFunction"],
    "oamd.client._world": ["World", "WorldSubscription"],
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

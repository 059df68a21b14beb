"""The results of the game namespaces (``npc/*``, ``decision/*``, ``world/*``) as pydantic models,
read like every result (``_results.WireModel``) and checked against ``protocol/bridge.json`` by
``tests/test_client_results.py``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from oamd.client._results import Emotion, ToolCallRecord, Usage, WireModel

__all__ = [
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
]

# ---- NPCs and decisions ------------------------------------------------------------------------


class NpcCreateResult(WireModel):
    """``npc/create`` and ``npc/restore`` (``$defs/NpcSetupResult``)."""

    npc: str
    tools: list[str]
    """Every tool the NPC has: the client's and its memory and world tools."""
    warnings: list[str]


class NpcTalkResult(WireModel):
    """``npc/talk``: the NPC's line and how the exchange left it."""

    npc: str
    line: str
    emotion: Emotion
    player_options: list[str]
    ends_conversation: bool
    tool_calls: list[ToolCallRecord]
    relationship: int
    """-100 (hostile) … 100 (devoted), after this exchange."""
    is_fallback: bool
    """The model failed; ``line`` is the persona's fallback line."""
    usage: Usage
    warnings: list[str] = Field(default_factory=list)


class Decision(WireModel):
    """``decision/decide`` (``$defs/Decision``): the option chosen and why."""

    option_id: str = Field(alias="optionID")
    reasoning: str
    confidence: int
    """0 … 100."""
    tool_calls: list[ToolCallRecord]
    usage: Usage
    is_fallback: bool
    warnings: list[str] = Field(default_factory=list)


class NpcUpdateResult(WireModel):
    """``npc/update``: applied in the NPC's order of operations, with what it warned about."""

    npc: str
    warnings: list[str]


class NpcSummary(WireModel):
    """One NPC of ``npc/list`` (``$defs/NpcSummary``)."""

    npc: str
    name: str
    role: str
    world: str | None
    model: str
    tools: list[str]
    turn_count: int
    relationship: int
    busy: bool
    pending_operations: int
    created_at: str
    """ISO 8601."""


class NpcListResult(WireModel):
    """``npc/list``: this connection's NPCs, in creation order."""

    npcs: list[NpcSummary]


class ErrorData(WireModel):
    """An error's ``data``: its stable ``code`` name and whatever the error adds."""

    code: str


class ErrorObject(WireModel):
    """A JSON-RPC error as a value (``$defs/ErrorObject``), as ``RpcError`` carries one."""

    code: int
    message: str
    data: ErrorData


class DecisionFailure(WireModel):
    """A decision of ``decision/decideMany`` that failed (``$defs/DecisionFailure``); the others
    of the batch stand."""

    error: ErrorObject


class DecideManyResult(WireModel):
    """``decision/decideMany``: one ``Decision`` or ``DecisionFailure`` per request, in order."""

    results: list[Decision | DecisionFailure]
    warnings: list[str] = Field(default_factory=list)


# ---- worlds ------------------------------------------------------------------------------------


class WorldCreateResult(WireModel):
    """``world/create``."""

    world: str
    version: int


class WorldGetResult(WireModel):
    """``world/get``: the value at ``path`` (``None`` and ``exists`` false when absent)."""

    world: str
    path: str
    value: Any
    exists: bool
    version: int


class WorldSetResult(WireModel):
    """``world/set`` and ``world/merge``: the world's version after the write."""

    world: str
    path: str
    version: int


class WorldRemoveResult(WireModel):
    """``world/remove``."""

    world: str
    path: str
    removed: bool
    old_value: Any
    version: int


class Subscription(WireModel):
    """``world/subscribe`` (``$defs/Subscription``): changes at or under ``path`` are notified."""

    subscription: str
    world: str
    path: str


class WorldUnsubscribeResult(WireModel):
    """``world/unsubscribe``."""

    subscription: str
    world: str
    path: str
    unsubscribed: Literal[True]


class WorldSummary(WireModel):
    """One world of ``world/list`` (``$defs/WorldSummary``)."""

    world: str
    version: int
    npcs: int
    """NPCs created with this world."""
    subscriptions: list[Subscription]
    created_at: str
    """ISO 8601."""


class WorldListResult(WireModel):
    """``world/list``: this connection's worlds, in creation order."""

    worlds: list[WorldSummary]

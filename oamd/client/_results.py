"""The results of the bridge's methods as pydantic models: what the typed API (``Bridge``) returns.

Each model mirrors one result schema of ``protocol/bridge.json`` (``tests/test_client_results.py``
compares their fields, required-ness and types, so the two cannot drift apart silently). Python
names are snake_case, validated from the wire's camelCase; members the daemon adds later are kept
(``model_extra``), never refused, so an older client reads a newer daemon. Results are frozen.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
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
]

Emotion = Literal[
    "neutral",
    "happy",
    "sad",
    "angry",
    "afraid",
    "surprised",
    "suspicious",
    "amused",
    "disgusted",
    "excited",
    "curious",
    "confused",
    "worried",
    "grateful",
    "annoyed",
    "proud",
]
"""An NPC's emotion (``$defs/Emotion``)."""


class _Result(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="allow",
        frozen=True,
    )


# ---- parts shared by several results -----------------------------------------------------------


class ToolCall(_Result):
    """A call the model made (``$defs/ToolCall``); ``arguments`` follow the tool's schema."""

    id: str
    name: str
    arguments: Any


class ToolCallRecord(_Result):
    """A finished tool call of a turn, with what the model read back (``$defs/ToolCallRecord``)."""

    call: ToolCall
    output: Any
    """The text, or the JSON value the engine returned; the message when ``is_error``."""
    is_error: bool
    duration_seconds: float


class Usage(_Result):
    """Token counts of a turn (``$defs/Usage``); estimated where a backend has no tokenizer."""

    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    total_tokens: int


class Step(_Result):
    """One model step of a turn (``$defs/Step``)."""

    index: int
    completed_tool_rounds: int
    tool_calling_mode: Literal["allowed", "required", "disallowed"]
    enabled_tools: list[str]
    trimmed_entries: int
    kind: str | None = None
    """oamd's text-only loop: ``decide``, ``toolArguments``, ``respond``, ``structured``…"""
    is_repair: bool | None = None


# ---- initialize and the model ------------------------------------------------------------------


class Availability(_Result):
    """Whether the daemon's ``"system"`` model can run (``model/availability``; ``$defs/Availability``)."""

    available: bool
    reason: str | None = None
    """Why not, when ``available`` is false (``not_configured``, ``model_not_ready``…)."""
    context_size: int | None = None
    variant: str | None = None
    supported_languages: list[str] | None = None
    status: str | None = None
    detail: str | None = None
    """How to fix an unavailable model (oamd)."""
    max_output_tokens: int | None = None
    bytes_downloaded: int | None = None
    total_bytes: int | None = None


class Capabilities(_Result):
    """What the daemon offers (``$defs/Capabilities``)."""

    methods: list[str]
    notifications: list[str]
    client_requests: list[str]
    streaming: bool
    client_tools: bool
    structured_output: bool
    models: list[str]
    max_sessions: int
    batch: Literal[False]


class ServerInfo(_Result):
    name: str
    """``oamd`` here, ``open-apple-models`` on Apple."""
    version: str


class InitializeResult(_Result):
    """``initialize``."""

    protocol_version: str
    server: ServerInfo
    capabilities: Capabilities
    model: Availability


# ---- sessions ----------------------------------------------------------------------------------


class SessionCreateResult(_Result):
    """``session/create``."""

    session: str
    warnings: list[str]


class SessionRespondResult(_Result):
    """``session/respond``: one turn's answer, the tool calls it made and what it cost."""

    session: str
    text: str
    """The answer; for a schema turn, the JSON text of ``structured``."""
    structured: Any = None
    """The value of a schema turn (absent otherwise)."""
    tool_calls: list[ToolCallRecord]
    usage: Usage
    steps: list[Step]
    warnings: list[str] = Field(default_factory=list)


# ---- NPCs and decisions ------------------------------------------------------------------------


class NpcCreateResult(_Result):
    """``npc/create`` and ``npc/restore`` (``$defs/NpcSetupResult``)."""

    npc: str
    tools: list[str]
    """Every tool the NPC has: the client's and its memory and world tools."""
    warnings: list[str]


class NpcTalkResult(_Result):
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


class Decision(_Result):
    """``decision/decide`` (``$defs/Decision``): the option chosen and why."""

    option_id: str = Field(alias="optionID")
    reasoning: str
    confidence: int
    """0 … 100."""
    tool_calls: list[ToolCallRecord]
    usage: Usage
    is_fallback: bool
    warnings: list[str] = Field(default_factory=list)


# ---- worlds ------------------------------------------------------------------------------------


class WorldCreateResult(_Result):
    """``world/create``."""

    world: str
    version: int


class WorldGetResult(_Result):
    """``world/get``: the value at ``path`` (``None`` and ``exists`` false when absent)."""

    world: str
    path: str
    value: Any
    exists: bool
    version: int


class WorldSetResult(_Result):
    """``world/set`` and ``world/merge``: the world's version after the write."""

    world: str
    path: str
    version: int


class WorldRemoveResult(_Result):
    """``world/remove``."""

    world: str
    path: str
    removed: bool
    old_value: Any
    version: int


# ---- content -----------------------------------------------------------------------------------


class ContentGenerateResult(_Result):
    """``content/generate``: JSON matching the schema asked for, keys in schema order."""

    content: Any
    warnings: list[str] = Field(default_factory=list)

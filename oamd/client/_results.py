"""The results of the bridge's own methods (``initialize``, the model, validation, ``session/*``,
``content/generate``) and the parts they share, as pydantic models: what the typed API returns.
The game namespaces' results are in ``_game_results``, the notifications' in ``_events``.

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
    "WireModel",
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


class WireModel(BaseModel):
    """A result as the wire has it: read from camelCase (or snake_case) names, members a newer
    daemon adds kept in ``model_extra``, frozen."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="allow",
        frozen=True,
    )


# ---- parts shared by several results -----------------------------------------------------------


class ToolCall(WireModel):
    """A call the model made (``$defs/ToolCall``); ``arguments`` follow the tool's schema."""

    id: str
    name: str
    arguments: Any


class ToolCallRecord(WireModel):
    """A finished tool call of a turn, with what the model read back (``$defs/ToolCallRecord``)."""

    call: ToolCall
    output: Any
    """The text, or the JSON value the engine returned; the message when ``is_error``."""
    is_error: bool
    duration_seconds: float


class Usage(WireModel):
    """Token counts of a turn (``$defs/Usage``); estimated where a backend has no tokenizer."""

    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    total_tokens: int


class Step(WireModel):
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


class Availability(WireModel):
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


class Capabilities(WireModel):
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


class ServerInfo(WireModel):
    name: str
    """``oamd`` here, ``open-apple-models`` on Apple."""
    version: str


class InitializeResult(WireModel):
    """``initialize``."""

    protocol_version: str
    server: ServerInfo
    capabilities: Capabilities
    model: Availability


# ---- validation --------------------------------------------------------------------------------


class SchemaValidateResult(WireModel):
    """``schema/validate``: what the daemon makes of a JSON Schema before a turn uses it."""

    warnings: list[str]
    generation_schema: Any
    """The schema as the model is constrained by it."""
    rendered: str | None = None
    """The text the model is shown (an Android extension)."""


class ValidatedTool(WireModel):
    """One tool of ``tools/validate`` (``$defs/ValidatedTool``)."""

    name: str
    warnings: list[str]
    generation_schema: Any
    rendered: str | None = None


class ToolsValidateResult(WireModel):
    """``tools/validate``: each tool as the daemon reads it, and what it warns about."""

    tools: list[ValidatedTool]
    warnings: list[str]


# ---- sessions ----------------------------------------------------------------------------------


class SessionCreateResult(WireModel):
    """``session/create``."""

    session: str
    warnings: list[str]


class SessionRespondResult(WireModel):
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


class SessionAck(WireModel):
    """``session/setInstructions``, ``session/setContextNote``, ``session/reset``: done, in the
    session's order of operations."""

    session: str


class SessionCompactResult(WireModel):
    """``session/compact``: the summary older turns were folded into (``None``: nothing to fold)."""

    session: str
    summary: str | None


class SessionSummary(WireModel):
    """One session of ``session/list`` (``$defs/SessionSummary``)."""

    session: str
    model: str
    instructions: str | None = None
    tools: list[str]
    busy: bool
    pending_operations: int
    entries: int
    created_at: str
    """ISO 8601."""


class SessionListResult(WireModel):
    """``session/list``: this connection's sessions, in creation order."""

    sessions: list[SessionSummary]


# ---- content -----------------------------------------------------------------------------------


class ContentGenerateResult(WireModel):
    """``content/generate``: JSON matching the schema asked for, keys in schema order."""

    content: Any
    warnings: list[str] = Field(default_factory=list)

"""Tool definitions (§9), tool choices, and tool outputs as the model and the engine see them.

They are typed values: reading them from params (and writing their save form) is the adapters'
(``oamd.bridge.tool_params``).

Client tools run in the engine through ``tool/call``; local tools (the game layer's world and
memory tools) run in-process through ``ToolDefinition.local``. A tool output is text, a JSON value
or an error: the model sees text as is, JSON compact and errors as ``Error: <message>``; the
turn's record keeps the string or the JSON value.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from oamd.agent.schema import CompiledSchema
from oamd.jsonvalue import dumps_text

__all__ = [
    "MAX_TOOL_OUTPUT_CHARS",
    "RESPOND_ACTION",
    "RESPOND_DIRECTLY",
    "ToolChoice",
    "ToolDefinition",
    "ToolOutput",
]

RESPOND_ACTION = "respond"
"""The text-only (envelope) loop's action that means "reply without a tool"; no client tool may be
named so (open-android-models reserves it too)."""

MAX_TOOL_OUTPUT_CHARS = 1500
"""A tool output shown to a text-only model is cut here, followed by ``… (truncated)``."""

RESPOND_DIRECTLY = "respond_directly"
"""The built-in tool ``explicit`` offers on the first step: call it to answer without a lookup."""

RESPOND_DIRECTLY_DESCRIPTION = (
    "Use when you can reply right away from the conversation alone, without looking anything up "
    "or taking an action."
)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returned: ``text`` (a string), ``json`` (any JSON) or ``error`` (a message)."""

    kind: str
    value: Any

    @classmethod
    def text(cls, value: str) -> ToolOutput:
        return cls("text", value)

    @classmethod
    def json(cls, value: Any) -> ToolOutput:
        return cls("json", value)

    @classmethod
    def error(cls, message: str) -> ToolOutput:
        return cls("error", message)

    @property
    def is_error(self) -> bool:
        return self.kind == "error"

    @property
    def model_text(self) -> str:
        """What the model reads: the text, compact JSON, or ``Error: <message>``."""
        if self.kind == "text":
            return self.value
        if self.kind == "error":
            return f"Error: {self.value}"
        return dumps_text(self.value)


LocalRunner = Callable[[dict[str, Any]], Awaitable[ToolOutput]]


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict[str, Any]
    """The caller's JSON Schema of the arguments, as given."""
    schema: CompiledSchema
    timeout: float | None = None
    """Seconds the engine has to answer (``None``: the session's default; ``0``: forever)."""
    local: LocalRunner | None = field(default=None, compare=False)
    """Set for in-process tools (world and memory tools); ``None`` for client tools."""
    definition: dict[str, Any] = field(default_factory=dict, compare=False)
    """A client tool's definition as saved and shown (``session/transcript``), written by the
    adapter that read it; what a session holds for the tool is its size."""

    @property
    def execution(self) -> str:
        return "client" if self.local is None else "local"


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """``auto``, ``none``, ``required``, ``explicit``, or ``tool`` with ``name`` set."""

    mode: str = "auto"
    name: str | None = None

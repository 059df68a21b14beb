"""What a turn reports while it runs, and the records it leaves: steps, tool calls, usage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from oamd.agent.tools import ToolOutput
from oamd.errors import ModelError

__all__ = [
    "PartialValue",
    "Step",
    "StepStarted",
    "TextUpdated",
    "ToolCall",
    "ToolCompleted",
    "ToolRecord",
    "ToolStarted",
    "TurnEvent",
    "TurnUsage",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolRecord:
    call: ToolCall
    output: ToolOutput
    duration: float


@dataclass(frozen=True, slots=True)
class Step:
    index: int
    completed_tool_rounds: int
    tool_calling_mode: str
    """``allowed``, ``required`` or ``disallowed``."""
    enabled_tools: tuple[str, ...]
    trimmed_entries: int = 0
    kind: str | None = None
    """oamd/Android extension: ``decide``, ``toolArguments``, ``respond``, ``structured``…"""
    is_repair: bool | None = None


@dataclass(slots=True)
class TurnUsage:
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0

    def add(self, input_tokens: int, cached: int, output_tokens: int) -> None:
        self.input_tokens += input_tokens
        self.cached_input_tokens += cached
        self.output_tokens += output_tokens


@dataclass(frozen=True, slots=True)
class StepStarted:
    step: Step


@dataclass(frozen=True, slots=True)
class TextUpdated:
    delta: str
    text: str
    is_reset: bool = False


@dataclass(frozen=True, slots=True)
class PartialValue:
    value: Any


@dataclass(frozen=True, slots=True)
class ToolStarted:
    call: ToolCall
    execution: str


@dataclass(frozen=True, slots=True)
class ToolCompleted:
    record: ToolRecord


TurnEvent = StepStarted | TextUpdated | PartialValue | ToolStarted | ToolCompleted


@dataclass
class TurnResult:
    text: str
    structured: Any = None
    has_structured: bool = False
    records: list[ToolRecord] = field(default_factory=list)
    usage: TurnUsage = field(default_factory=TurnUsage)
    steps: list[Step] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    """History entries the turn adds when it commits."""


class TurnFailed(ModelError):
    """A turn that failed: the model error it ended with, as the wire shows it (the same name,
    message and data), and the tool records its failed run gathered (``records``: what a
    caller's retry carries on, the NPC's text retry; what the inspector shows). ``run_turn``
    raises every model failure of a turn as one; the error it wraps is its ``__cause__``."""

    def __init__(self, error: ModelError, records: Sequence[ToolRecord] = ()) -> None:
        super().__init__(error.name, error.message, retry_after=error.retry_after)
        self.data = dict(error.data)
        self.records = tuple(records)


__all__ += ["TurnFailed", "TurnResult"]

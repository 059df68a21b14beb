"""What a turn reports while it runs, and the records it leaves: steps, tool calls, usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oamd.agent.tools import ToolOutput

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


__all__ += ["TurnResult"]

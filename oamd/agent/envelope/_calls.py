"""The tool calls of one envelope-loop turn: run, recorded, and remembered for the model.

It owns the turn's ``toolCalls``/``toolOutput`` entries and ``ToolRecord``s (the native loop's
shapes, one call per entry), the ``toolCallStarted``/``toolCallCompleted`` events, the lines and
texts later steps show the model, and which calls succeeded (for the dedupe rule). A call whose
arguments stayed invalid is recorded as an error without running. Deciding which call to make is
the loop's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from oamd.agent.entries import CallEntry, tool_calls_entry, tool_output_entry
from oamd.agent.envelope._parser import call_key
from oamd.agent.envelope._prompt import tool_line
from oamd.agent.events import ToolCall, ToolCompleted, ToolRecord, ToolStarted, TurnEvent
from oamd.agent.tools import ToolDefinition, ToolOutput
from oamd.agent.turn_spec import Labels, ToolExecutor, new_call_id

__all__ = ["TurnCalls"]


class TurnCalls:
    def __init__(
        self,
        entries: list[dict[str, Any]],
        carried_records: Sequence[ToolRecord],
        labels: Labels,
        emit: Callable[[TurnEvent], None],
        execute: ToolExecutor,
    ) -> None:
        self.entries = entries
        """The turn's entries, shared with the loop; calls and outputs are appended here."""
        self.records = list(carried_records)
        self.lines: list[str] = []
        """``[tool {args} → output]`` per output, as the model reads them."""
        self.outputs: list[str] = []
        self._emit = emit
        self._execute = execute
        self._succeeded = {
            call_key(r.call.name, r.call.arguments) for r in self.records if not r.output.is_error
        }

    def repeats(self, tool: ToolDefinition, arguments: dict[str, Any]) -> bool:
        """Whether this exact call already succeeded this turn (key order ignored)."""
        return call_key(tool.name, arguments) in self._succeeded

    async def run(self, tool: ToolDefinition, arguments: dict[str, Any]) -> None:
        call = self._open(tool, arguments)
        self._emit(ToolStarted(call, tool.execution))  # then the tool/call, before any await
        started = time.monotonic()
        if tool.local is not None:
            output, follow_up = await tool.local(arguments), None
        else:
            output, follow_up = await self._execute(call, tool)
        self._record(call, output, time.monotonic() - started, follow_up)
        if not output.is_error:
            self._succeeded.add(call_key(tool.name, arguments))

    def reject(self, tool: ToolDefinition, arguments: dict[str, Any], problem: str) -> None:
        """Records a call whose arguments stayed invalid as an error the model reads; it never
        runs, so it has no ``toolCallStarted``."""
        call = self._open(tool, arguments)
        self._record(call, ToolOutput.error(f"The call was not made: {problem}."), 0.0, None)

    def _open(self, tool: ToolDefinition, arguments: dict[str, Any]) -> ToolCall:
        call = ToolCall(new_call_id(), tool.name, arguments)
        self.entries.append(tool_calls_entry([CallEntry(call.id, call.name, arguments)]))
        return call

    def _record(
        self,
        call: ToolCall,
        output: ToolOutput,
        duration: float,
        follow_up: Callable[[], None] | None,
    ) -> None:
        record = ToolRecord(call, output, round(duration, 3))
        self.records.append(record)
        self.entries.append(tool_output_entry(call.id, call.name, output.kind, output.value))
        self.lines.append(tool_line(call.name, call.arguments, output))
        self.outputs.append(output.model_text)
        self._emit(ToolCompleted(record))
        if follow_up is not None:
            follow_up()

"""What a model step is shown: the system text, the history as messages, trimmed to fit.

The system text (instructions + context note) stays byte-identical across the steps and turns of
a session, so prefix caches hit. Trimming drops the oldest whole turns when the estimate of the
prompt passes the input budget (context size − reserved response tokens); the dropped entries are
reported as the step's ``trimmedEntries``; the transcript keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oamd.agent.tools import ToolOutput
from oamd.backends.base import ChatMessage, ToolCallRequest, estimate_tokens

__all__ = ["entries_to_messages", "trim_to_budget", "turn_starts"]


def _output_of(entry: dict[str, Any]) -> ToolOutput:
    return ToolOutput(entry["outputKind"], entry["output"])


def entries_to_messages(entries: Sequence[dict[str, Any]]) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for entry in entries:
        kind = entry["kind"]
        if kind == "prompt":
            messages.append(ChatMessage("user", entry["text"]))
        elif kind == "response":
            messages.append(ChatMessage("assistant", entry["text"]))
        elif kind == "toolCalls":
            calls = [ToolCallRequest(c["name"], c["arguments"], c["id"]) for c in entry["calls"]]
            messages.append(ChatMessage("assistant", "", tool_calls=calls))
        elif kind == "toolOutput":
            output = _output_of(entry)
            messages.append(
                ChatMessage(
                    "tool",
                    output.model_text,
                    tool_call_id=entry["callId"],
                    tool_name=entry["name"],
                    output=output.value,
                )
            )
    return messages


def turn_starts(entries: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of the entries that start a turn (each ``prompt``)."""
    return [i for i, e in enumerate(entries) if e["kind"] == "prompt"]


def _estimate(entries: Sequence[dict[str, Any]]) -> int:
    total = 0
    for message in entries_to_messages(entries):
        total += estimate_tokens(message.content) + 4
        for call in message.tool_calls:
            total += estimate_tokens(str(call.arguments)) + 4
    return total


def trim_to_budget(
    history: Sequence[dict[str, Any]], fixed_tokens: int, budget: int
) -> tuple[list[dict[str, Any]], int]:
    """Drops the oldest whole turns of ``history`` until it fits ``budget`` tokens next to
    ``fixed_tokens`` (system text, current turn). Returns the kept entries and how many went."""
    kept = list(history)
    if fixed_tokens + _estimate(kept) <= budget:
        return kept, 0
    starts = turn_starts(kept)
    for start in [*starts[1:], len(kept)]:
        candidate = kept[start:]
        if fixed_tokens + _estimate(candidate) <= budget:
            return candidate, start
    return [], len(kept)

"""History entries: the one module that knows their stored form.

A session's or NPC's history is a list of entries kept in oamd's own transcript form, the form
``session/transcript`` exports and the byte budget counts (``agent.footprint.json_size``), so what
is stored must not change shape or size. Every other agent and game module builds and reads
entries through the constructors and readers here, never through their keys:

- ``{"kind": "prompt", "text": …}``: what the user said;
- ``{"kind": "toolCalls", "calls": [{"id", "name", "arguments"}, …]}``: a step's tool calls;
- ``{"kind": "toolOutput", "callId", "name", "outputKind", "output"}``: one call's output;
- ``{"kind": "response", "text": …[, "structured": …]}``: the turn's answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from oamd.agent.tools import ToolOutput

__all__ = [
    "PROMPT",
    "RESPONSE",
    "TOOL_CALLS",
    "TOOL_OUTPUT",
    "CallEntry",
    "Entry",
    "OutputEntry",
    "call_json",
    "calls_of",
    "has_structured",
    "kind_of",
    "output_of",
    "prompt_entry",
    "response_entry",
    "structured_of",
    "text_of",
    "tool_calls_entry",
    "tool_output_entry",
    "with_text",
]

Entry = dict[str, Any]
"""One stored entry (a JSON object); build it and read it with this module's functions."""

PROMPT, RESPONSE, TOOL_CALLS, TOOL_OUTPUT = "prompt", "response", "toolCalls", "toolOutput"
"""The entry kinds, as stored."""

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class CallEntry:
    """One call of a ``toolCalls`` entry."""

    id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class OutputEntry:
    """A ``toolOutput`` entry, read."""

    call_id: str
    name: str
    output: ToolOutput


def prompt_entry(text: str) -> Entry:
    return {"kind": PROMPT, "text": text}


def response_entry(text: str, structured: Any = _UNSET) -> Entry:
    """A response; ``structured`` (any JSON, ``None`` included) only when the turn had a schema."""
    if structured is _UNSET:
        return {"kind": RESPONSE, "text": text}
    return {"kind": RESPONSE, "text": text, "structured": structured}


def call_json(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    """One call as a ``toolCalls`` entry lists it."""
    return {"id": call_id, "name": name, "arguments": arguments}


def tool_calls_entry(calls: Iterable[CallEntry | dict[str, Any]]) -> Entry:
    """A ``toolCalls`` entry of ``calls`` (``CallEntry`` values or ``call_json`` dicts)."""
    return {
        "kind": TOOL_CALLS,
        "calls": [
            call_json(c.id, c.name, c.arguments) if isinstance(c, CallEntry) else c for c in calls
        ],
    }


def tool_output_entry(call_id: str, name: str, output_kind: str, value: Any) -> Entry:
    """A ``toolOutput`` entry (``output_kind`` is a ``ToolOutput`` kind: text, json, error)."""
    return {
        "kind": TOOL_OUTPUT,
        "callId": call_id,
        "name": name,
        "outputKind": output_kind,
        "output": value,
    }


def kind_of(entry: Entry) -> str | None:
    return entry.get("kind")


def text_of(entry: Entry) -> str:
    """The text of a prompt or a response."""
    return entry["text"]


def with_text(entry: Entry, text: str) -> Entry:
    """``entry`` with its text replaced (a response whose line was cleaned up)."""
    return {**entry, "text": text}


def has_structured(entry: Entry) -> bool:
    return "structured" in entry


def structured_of(entry: Entry) -> Any:
    """A response's structured value (``None`` when it has none)."""
    return entry.get("structured")


def calls_of(entry: Entry) -> Iterator[CallEntry]:
    """The calls of a ``toolCalls`` entry."""
    for call in entry["calls"]:
        yield CallEntry(call["id"], call["name"], call["arguments"])


def output_of(entry: Entry) -> OutputEntry:
    """A ``toolOutput`` entry's call id, tool name and output."""
    return OutputEntry(
        entry["callId"], entry["name"], ToolOutput(entry["outputKind"], entry["output"])
    )

"""Transcripts: a session's conversation as JSON, to save with a game and resume later.

oamd writes ``{"type": "oamd.Transcript", "version": "1.0", "transcript": {"instructions"?,
"contextNote"?, "tools": [...], "entries": [...]}}`` with entries ``prompt``, ``toolCalls``,
``toolOutput`` and ``response`` (the granularity of Apple's transcript, so ``entries`` counts
match ``oam``). It also *reads* Apple's ``FoundationModels.Transcript`` and open-android-models'
``open-android-models.Transcript``, so a save can move between platforms.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oamd.agent.entries import (
    TOOL_OUTPUT,
    CallEntry,
    call_json,
    kind_of,
    output_of,
    prompt_entry,
    response_entry,
    tool_calls_entry,
    tool_output_entry,
)
from oamd.errors import InvalidParams
from oamd.jsonvalue import JsonTextError, dumps_text, loads_embedded

__all__ = ["RestoredTranscript", "export_transcript", "import_transcript"]

TYPE = "oamd.Transcript"
VERSION = "1.0"


def _export_entry(entry: dict[str, Any]) -> dict[str, Any]:
    if kind_of(entry) == TOOL_OUTPUT:
        out = output_of(entry)
        return {
            "kind": TOOL_OUTPUT,
            "callId": out.call_id,
            "name": out.name,
            "output": out.output.value,
            "isError": out.output.is_error,
        }
    return dict(entry)  # prompts, calls and responses are exported as they are stored


def export_transcript(
    instructions: str | None,
    context_note: str | None,
    tools: list[dict[str, Any]],
    entries: list[dict[str, Any]],
) -> dict[str, Any]:
    inner: dict[str, Any] = {}
    if instructions is not None:
        inner["instructions"] = instructions
    if context_note is not None:
        inner["contextNote"] = context_note
    inner["tools"] = tools
    inner["entries"] = [_export_entry(e) for e in entries]
    return {"type": TYPE, "version": VERSION, "transcript": inner}


@dataclass
class RestoredTranscript:
    instructions: str | None = None
    context_note: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    """Saved tool definitions (``name``, ``description``, ``parameters``)."""
    entries: list[dict[str, Any]] = field(default_factory=list)


def _bad(reason: str) -> InvalidParams:
    return InvalidParams(f"'history' is not a valid transcript: {reason}")


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise _bad(f"{what} must be a string")
    return value


def _output_entry(call_id: str, name: str, output: Any, is_error: bool) -> dict[str, Any]:
    if is_error:
        kind, value = "error", output if isinstance(output, str) else dumps_text(output)
    else:
        kind, value = ("text" if isinstance(output, str) else "json"), output
    return tool_output_entry(call_id, name, kind, value)


def _import_oamd(inner: dict[str, Any]) -> RestoredTranscript:
    entries = []
    for i, raw in enumerate(inner.get("entries") or []):
        if not isinstance(raw, dict):
            raise _bad(f"entries[{i}] must be an object")
        kind = raw.get("kind")
        if kind == "prompt":
            entries.append(prompt_entry(_text(raw.get("text"), f"entries[{i}].text")))
        elif kind == "response":
            text = _text(raw.get("text"), f"entries[{i}].text")
            if "structured" in raw:
                entries.append(response_entry(text, raw["structured"]))
            else:
                entries.append(response_entry(text))
        elif kind == "toolCalls":
            calls = raw.get("calls")
            if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                raise _bad(f"entries[{i}].calls must be an array of calls")
            entries.append(
                tool_calls_entry(
                    CallEntry(
                        str(c.get("id", "")), str(c.get("name", "")), c.get("arguments") or {}
                    )
                    for c in calls
                )
            )
        elif kind == "toolOutput":
            entries.append(
                _output_entry(
                    str(raw.get("callId", "")),
                    str(raw.get("name", "")),
                    raw.get("output"),
                    raw.get("isError") is True,
                )
            )
        else:
            raise _bad(f"entries[{i}] has an unknown kind {kind!r}")
    return RestoredTranscript(
        instructions=inner.get("instructions"),
        context_note=inner.get("contextNote"),
        tools=[t for t in inner.get("tools") or [] if isinstance(t, dict)],
        entries=entries,
    )


def _import_android(inner: dict[str, Any]) -> RestoredTranscript:
    entries: list[dict[str, Any]] = []
    pending_calls: list[CallEntry] = []
    pending_outputs: list[dict[str, Any]] = []

    def flush() -> None:
        if pending_calls:
            entries.append(tool_calls_entry(pending_calls))
            entries.extend(pending_outputs)
            pending_calls.clear()
            pending_outputs.clear()

    for i, raw in enumerate(inner.get("entries") or []):
        if not isinstance(raw, dict):
            raise _bad(f"entries[{i}] must be an object")
        kind = raw.get("type")
        if kind == "toolUse":
            call = raw.get("call") or {}
            output = raw.get("output") or {}
            used = CallEntry(
                str(call.get("id", "")), str(call.get("name", "")), call.get("arguments") or {}
            )
            pending_calls.append(used)
            otype = output.get("type")
            if otype == "error":
                pending_outputs.append(
                    _output_entry(used.id, used.name, output.get("message", ""), True)
                )
            elif otype == "json":
                pending_outputs.append(
                    _output_entry(used.id, used.name, output.get("value"), False)
                )
            else:
                pending_outputs.append(
                    _output_entry(used.id, used.name, str(output.get("text", "")), False)
                )
            continue
        flush()
        if kind == "prompt":
            entries.append(prompt_entry(_text(raw.get("text", ""), f"entries[{i}].text")))
        elif kind == "response":
            text = _text(raw.get("text", ""), f"entries[{i}].text")
            if raw.get("structured") is not None:
                entries.append(response_entry(text, raw["structured"]))
            else:
                entries.append(response_entry(text))
        else:
            raise _bad(f"entries[{i}] has an unknown type {kind!r}")
    flush()
    return RestoredTranscript(
        instructions=inner.get("instructions"),
        context_note=inner.get("contextNote"),
        tools=[t for t in inner.get("tools") or [] if isinstance(t, dict)],
        entries=entries,
    )


def _segment_text(contents: Any) -> tuple[str, Any]:
    """Text of Apple's ``contents`` segments, and a structured value when there is one."""
    parts: list[str] = []
    structured: Any = None
    for segment in contents or []:
        if not isinstance(segment, dict):
            continue
        if segment.get("type") == "text" or "text" in segment:
            parts.append(str(segment.get("text", "")))
        elif segment.get("type") == "structure" or "structure" in segment:
            structure = segment.get("structure") or {}
            structured = structure.get("content")
            parts.append(dumps_text(structured))
    return "".join(parts), structured


def _import_apple(inner: dict[str, Any]) -> RestoredTranscript:
    restored = RestoredTranscript()
    for raw in inner.get("entries") or []:
        if not isinstance(raw, dict):
            continue
        role = raw.get("role")
        if role == "instructions":
            text, _ = _segment_text(raw.get("contents"))
            restored.instructions = text or None
            for tool in raw.get("tools") or []:
                fn = tool.get("function", tool) if isinstance(tool, dict) else {}
                if isinstance(fn, dict) and "name" in fn:
                    restored.tools.append(
                        {
                            "name": fn["name"],
                            "description": fn.get("description", ""),
                            "parameters": fn.get("parameters"),
                        }
                    )
        elif role == "user":
            text, _ = _segment_text(raw.get("contents"))
            restored.entries.append(prompt_entry(text))
        elif role == "response" and raw.get("toolCalls"):
            calls = []
            for call in raw["toolCalls"]:
                arguments = call.get("arguments")
                if isinstance(arguments, str):
                    try:
                        arguments = loads_embedded(arguments)
                    except JsonTextError:
                        arguments = {}
                calls.append(
                    call_json(str(call.get("id", "")), str(call.get("name", "")), arguments or {})
                )
            restored.entries.append(tool_calls_entry(calls))
        elif role == "tool":
            text, _ = _segment_text(raw.get("contents"))
            restored.entries.append(
                _output_entry(
                    str(raw.get("toolCallID", "")), str(raw.get("toolName", "")), text, False
                )
            )
        elif role == "response":
            text, structured = _segment_text(raw.get("contents"))
            if structured is not None:
                restored.entries.append(response_entry(text, structured))
            else:
                restored.entries.append(response_entry(text))
    return restored


def import_transcript(value: Any) -> RestoredTranscript:
    """Reads a transcript in any supported form, or a whole ``session/transcript`` result.

    Raises:
        InvalidParams: not an object, or not a transcript of a known form (``'history' …``).
    """
    if not isinstance(value, dict):
        raise InvalidParams("'history' must be a transcript object from session/transcript.")
    if "type" not in value and isinstance(value.get("transcript"), dict):
        value = value["transcript"]  # the whole session/transcript result
    kind = value.get("type")
    inner = value.get("transcript") if kind is not None else value
    if not isinstance(inner, dict):
        raise _bad("'transcript' must be an object")
    entries = inner.get("entries")
    if entries is not None and not isinstance(entries, list):
        raise _bad("'entries' must be an array")
    if kind == TYPE:
        return _import_oamd(inner)
    if kind == "open-android-models.Transcript":
        return _import_android(inner)
    if kind == "FoundationModels.Transcript":
        return _import_apple(inner)
    if kind is None and entries is not None:
        sample = next((e for e in entries if isinstance(e, dict)), {})
        if "kind" in sample:
            return _import_oamd(inner)
        if "role" in sample:
            return _import_apple(inner)
        return _import_android(inner)
    raise _bad(f"unknown transcript type {kind!r}")

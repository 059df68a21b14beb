"""Wire shapes of the agent's objects that several namespaces send: steps, tool calls and
records, usage, ``session/event`` events.

Each function's docstring shows the JSON it yields; keys are in the reference's order.
"""

from __future__ import annotations

from typing import Any

from oamd.agent.events import (
    PartialValue,
    Step,
    StepStarted,
    TextUpdated,
    ToolCall,
    ToolCompleted,
    ToolRecord,
    ToolStarted,
    TurnEvent,
    TurnUsage,
)
from oamd.bridge.wire import shape

__all__ = ["encode_call", "encode_event", "encode_record", "encode_step", "encode_usage"]


@shape("def", "ToolCall")
def encode_call(call: ToolCall) -> dict[str, Any]:
    """``{"id": "call_…", "name": "open_gate", "arguments": {"gate": "north"}}``"""
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


@shape("def", "ToolCallRecord")
def encode_record(record: ToolRecord) -> dict[str, Any]:
    """``{"call": {…}, "output": "…" | <JSON>, "isError": false, "durationSeconds": 0.84}``"""
    output = record.output
    return {
        "call": encode_call(record.call),
        "output": output.value,
        "isError": output.is_error,
        "durationSeconds": record.duration,
    }


@shape("def", "Step")
def encode_step(step: Step) -> dict[str, Any]:
    """``{"index": 0, "completedToolRounds": 0, "toolCallingMode": "required",
    "enabledTools": ["open_gate"], "trimmedEntries": 0}`` (+ ``kind``/``isRepair`` when set)."""
    out: dict[str, Any] = {
        "index": step.index,
        "completedToolRounds": step.completed_tool_rounds,
        "toolCallingMode": step.tool_calling_mode,
        "enabledTools": list(step.enabled_tools),
        "trimmedEntries": step.trimmed_entries,
    }
    if step.kind is not None:
        out["kind"] = step.kind
    if step.is_repair is not None:
        out["isRepair"] = step.is_repair
    return out


@shape("def", "Usage")
def encode_usage(usage: TurnUsage) -> dict[str, Any]:
    """``{"inputTokens": 184, "cachedInputTokens": 183, "outputTokens": 17, "totalTokens": 201}``"""
    return {
        "inputTokens": usage.input_tokens,
        "cachedInputTokens": usage.cached_input_tokens,
        "outputTokens": usage.output_tokens,
        "totalTokens": usage.input_tokens + usage.output_tokens,
    }


@shape("def", "SessionEvent")
def encode_event(event: TurnEvent) -> dict[str, Any]:
    """``session/event``'s ``event``: ``{"type": "modelStep", "step": {…}}``,
    ``{"type": "text", "delta", "text", "isReset"}``, ``{"type": "partial", "value"}``,
    ``{"type": "toolCallStarted", "call", "execution"}``, ``{"type": "toolCallCompleted", "record"}``."""
    if type(event) is TextUpdated:
        return {"type": "text", "delta": event.delta, "text": event.text, "isReset": event.is_reset}
    if type(event) is StepStarted:
        return {"type": "modelStep", "step": encode_step(event.step)}
    if type(event) is ToolStarted:
        return {
            "type": "toolCallStarted",
            "call": encode_call(event.call),
            "execution": event.execution,
        }
    if type(event) is ToolCompleted:
        return {"type": "toolCallCompleted", "record": encode_record(event.record)}
    if type(event) is PartialValue:
        return {"type": "partial", "value": event.value}
    raise TypeError(f"unknown event {event!r}")

"""What a native-loop model step is shown: the system text and the history as chat messages,
trimmed to fit.

The system text (instructions + context note) stays byte-identical across the steps and turns of
a session, so prefix caches hit. The history is sent through its window (``agent.history``): each
turn becomes messages once, and when the estimate of the prompt passes the input budget (context
size − reserved response tokens) whole oldest turns go, down to the low-water mark; they are
reported as the step's ``trimmedEntries`` and the transcript keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oamd.agent.entries import (
    PROMPT,
    RESPONSE,
    TOOL_CALLS,
    TOOL_OUTPUT,
    calls_of,
    kind_of,
    output_of,
    text_of,
)
from oamd.agent.history import History, Window
from oamd.backends.base import ChatMessage, ToolCallRequest, estimate_tokens

__all__ = [
    "MESSAGES",
    "entries_to_messages",
    "history_window",
    "message_tokens",
    "turn_starts",
]

MESSAGES = "messages"
"""The history window key of the native loop's rendering."""

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens a chat template adds around each message (role markers), by estimate."""


def entries_to_messages(entries: Sequence[dict[str, Any]]) -> list[ChatMessage]:
    messages: list[ChatMessage] = []
    for entry in entries:
        kind = kind_of(entry)
        if kind == PROMPT:
            messages.append(ChatMessage("user", text_of(entry)))
        elif kind == RESPONSE:
            messages.append(ChatMessage("assistant", text_of(entry)))
        elif kind == TOOL_CALLS:
            calls = [ToolCallRequest(c.name, c.arguments, c.id) for c in calls_of(entry)]
            messages.append(ChatMessage("assistant", "", tool_calls=calls))
        elif kind == TOOL_OUTPUT:
            out = output_of(entry)
            messages.append(
                ChatMessage(
                    "tool",
                    out.output.model_text,
                    tool_call_id=out.call_id,
                    tool_name=out.name,
                    output=out.output.value,
                )
            )
    return messages


def turn_starts(entries: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of the entries that start a turn (each ``prompt``)."""
    return [i for i, e in enumerate(entries) if kind_of(e) == PROMPT]


def message_tokens(messages: Sequence[ChatMessage]) -> int:
    """The estimated tokens of messages: their text, their calls' arguments, the template."""
    total = 0
    for message in messages:
        total += estimate_tokens(message.content) + MESSAGE_OVERHEAD_TOKENS
        for call in message.tool_calls:
            total += estimate_tokens(str(call.arguments)) + MESSAGE_OVERHEAD_TOKENS
    return total


def _render(entries: Sequence[dict[str, Any]]) -> tuple[list[ChatMessage], int]:
    messages = entries_to_messages(entries)
    return messages, message_tokens(messages)


def history_window(history: History, fixed_tokens: int, budget: int, *, trim: bool) -> Window:
    """The history a native step sends (``window.items``: its messages), fitted to ``budget``
    next to ``fixed_tokens`` unless ``trim`` is off."""
    window = history.window(MESSAGES, _render)
    if trim:
        window.fit(fixed_tokens, budget)
    return window

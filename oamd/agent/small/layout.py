"""The small-model layout of a text-only turn (``capabilities.compact_prompts``).

A model of a few hundred million parameters follows a short prose system text and a plain chat; a
labelled transcript, a tool catalog and a JSON envelope it copies or garbles (measured on
SmolLM2-135M: its lines were ``5``, the user's own words, ``emotion:``). So here the system text is
the instructions alone; each history turn is a user message (the prompt, then one line per fact its
tools gave, in parentheses) and an assistant message (the reply); the current turn is a user
message of the same form, followed by the step's task when the step has one. Each turn is rendered
by the same function when it is sent and when it is history, so the next turn's prompt repeats,
byte for byte, what the last reply step sent and the KV cache holds. The history window holds at
most ``HISTORY_TOKENS`` and, once over, drops to ``HISTORY_LOW_WATER_SHARE`` of it: consecutive
turns share their first tokens, and a small model sees little of its own past wording to copy.
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
from oamd.agent.events import TurnResult
from oamd.agent.history import History, Window
from oamd.agent.small.words import field_words
from oamd.agent.tools import MAX_TOOL_OUTPUT_CHARS, ToolOutput
from oamd.agent.turn_spec import TurnSpec
from oamd.backends.base import ChatMessage, estimate_tokens
from oamd.jsonvalue import dumps_text

__all__ = [
    "HISTORY_LOW_WATER_SHARE",
    "HISTORY_TOKENS",
    "chat_messages",
    "chat_prefix",
    "chat_window",
    "fact_line",
    "reply_messages",
    "turn_facts",
    "user_text",
]

HISTORY_TOKENS = 320
"""Most tokens of history a small-model step shows: a few exchanges. More costs prefill time and
gives a small model more of its own wording to repeat."""

HISTORY_LOW_WATER_SHARE = 0.4
"""Once over ``HISTORY_TOKENS``, whole oldest turns go until the history is at most this share of
it, so the window then stays put for a few turns (and the cache keeps hitting)."""


def _plain(value: Any) -> str:
    """A tool's output or arguments as a small model reads them: ``stew 5, ale 3``,
    ``in stock 14, price silver 4``."""
    if isinstance(value, dict):
        return ", ".join(f"{field_words(str(key))} {_plain(item)}" for key, item in value.items())
    if isinstance(value, list):
        return ", ".join(_plain(item) for item in value)
    if isinstance(value, str):
        return value.strip()
    return dumps_text(value)


def fact_line(name: str, arguments: dict[str, Any], output: ToolOutput) -> str:
    """``You looked it up: stew 5, ale 3.``; a failed call says so. Plain words, no brackets or
    labels: SmolLM2-135M opened its lines with ``(`` and ``Note:`` when the facts came in
    parentheses, and used facts in this form more often than under the tool's name."""
    if output.is_error:
        return f"You could not look it up: {output.model_text.strip()[:MAX_TOOL_OUTPUT_CHARS]}"
    text = _plain(output.value)
    if len(text) > MAX_TOOL_OUTPUT_CHARS:
        text = text[:MAX_TOOL_OUTPUT_CHARS] + "…"
    return f"You looked it up: {text.rstrip('.')}."


def user_text(prompt: str, facts: Sequence[str]) -> str:
    """A turn's user message: the facts its tools gave, then the prompt — what the reply
    answers comes last, and a small model continues whatever comes last (after a fact line it
    wrote "You look it up, Hilde: …")."""
    return "\n".join([*facts, prompt.strip()]).strip()


def turn_facts(entries: Sequence[dict[str, Any]]) -> list[str]:
    """The facts a turn's tools gave, one ``fact_line`` per output, in order."""
    arguments: dict[str, dict[str, Any]] = {}
    facts: list[str] = []
    for entry in entries:
        kind = kind_of(entry)
        if kind == TOOL_CALLS:
            for call in calls_of(entry):
                arguments[call.id] = call.arguments
        elif kind == TOOL_OUTPUT:
            out = output_of(entry)
            facts.append(fact_line(out.name, arguments.get(out.call_id, {}), out.output))
    return facts


def _turn_messages(entries: Sequence[dict[str, Any]]) -> tuple[list[ChatMessage], int]:
    prompt = next((text_of(e) for e in entries if kind_of(e) == PROMPT), "")
    reply = next((text_of(e) for e in reversed(entries) if kind_of(e) == RESPONSE), "")
    messages = []
    text = user_text(prompt, turn_facts(entries))
    if text:
        messages.append(ChatMessage("user", text))
    if reply.strip():
        messages.append(ChatMessage("assistant", reply.strip()))
    return messages, estimate_tokens(text + reply)


def chat_window(history: History, *, trim: bool = True) -> Window:
    """The history turns a small-model step shows, as chat messages, trimmed with hysteresis (unless
    the session turned trimming off)."""
    window = history.window("chat", _turn_messages)
    if trim:
        window.fit(0, HISTORY_TOKENS, low_water_share=HISTORY_LOW_WATER_SHARE)
    return window


def chat_messages(
    system: str, window: Window, prompt: str, facts: Sequence[str], task: str = ""
) -> list[ChatMessage]:
    """A small-model step's messages: the system text, the history, and the current user message
    (with the step's task after it, when it has one)."""
    messages = [ChatMessage("system", system)] if system else []
    messages.extend(_alternating(window.items))
    text = user_text(prompt, facts)
    if task:
        text = f"{text}\n\n{task}" if text else task
    messages.append(ChatMessage("user", text))
    return messages


def _alternating(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """History messages with no two user messages in a row (a turn whose reply failed has none):
    chat templates of small models expect the roles to alternate."""
    out: list[ChatMessage] = []
    for message in messages:
        if out and out[-1].role == "user" == message.role:
            out[-1] = ChatMessage("user", f"{out[-1].content}\n{message.content}")
        else:
            out.append(message)
    return out


def chat_prefix(system: str, window: Window) -> list[ChatMessage]:
    """What every step of a turn begins with: the system text and the history (the next turn's
    prefix, which a prefill evaluates ahead)."""
    return chat_messages(system, window, "", ())[:-1]


def reply_messages(spec: TurnSpec, result: TurnResult) -> list[ChatMessage]:
    """The messages ``result``'s reply step sent (what the KV cache holds), rebuilt: what a
    small model's closed choices and follow-up steps read on from."""
    facts = turn_facts(result.entries)
    window = chat_window(spec.history, trim=spec.settings.trim_history)
    return chat_messages((spec.instructions or "").strip(), window, spec.prompt, facts)

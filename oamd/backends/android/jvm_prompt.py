"""How a chat transcript reads to a Java model without roles or tools (ML Kit's Prompt API takes
one prompt and a system instruction; LiteRT-LM's turns take one user text each): one rendering of
the system instruction and of a tool result for both."""

from __future__ import annotations

from collections.abc import Sequence

from oamd.backends.base import ChatMessage
from oamd.jsonvalue import dumps_text

__all__ = ["render_prompt", "system_instruction", "tool_result_text"]


def system_instruction(messages: Sequence[ChatMessage]) -> str | None:
    """The system messages' text, joined: the model's instruction (None when there is none)."""
    return "\n\n".join(m.content for m in messages if m.role == "system" and m.content) or None


def tool_result_text(message: ChatMessage) -> str:
    """How a ``tool`` message reads to a model without a tool role."""
    output = message.content or dumps_text(message.output)
    return f"Tool result ({message.tool_name or 'tool'}): {output}"


def render_prompt(messages: list[ChatMessage]) -> tuple[str | None, str]:
    """(system instruction, prompt text) for a model without roles: system messages become the
    instruction; the rest is a labelled transcript ending with the reply cue."""
    system = system_instruction(messages)
    lines: list[str] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            lines.append(tool_result_text(message))
        else:
            label = "User" if message.role == "user" else "Assistant"
            lines.append(f"{label}: {message.content}")
    if len(lines) == 1 and messages[-1].role == "user":
        return system, messages[-1].content
    lines.append("Assistant:")
    return system, "\n\n".join(lines)

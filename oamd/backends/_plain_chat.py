"""A conversation as the chat template of a small text-only model reads it: roles and text.

The embedded backend hands these to the GGUF file's own template; the OpenAI backend's compact
layout writes them out in ChatML itself (``oamd.backends.openai.completions``). Both must see
the same messages, or a turn on a server reads differently from the same turn embedded.
"""

from __future__ import annotations

from oamd.backends.base import ChatMessage

__all__ = ["plain_message"]


def plain_message(message: ChatMessage) -> dict[str, str]:
    """``{"role", "content"}``: a tool's output becomes the user's message ``Output of NAME: …``,
    since chat templates of small models know no tool role."""
    if message.role == "tool":
        name = message.tool_name or "tool"
        return {"role": "user", "content": f"Output of {name}: {message.content}"}
    return {"role": message.role, "content": message.content}

"""A conversation as the chat template of a small text-only model reads it: roles and text.

The embedded backend hands these to the GGUF file's own template; the OpenAI backend's compact
layout writes them out in ChatML itself (``oamd.backends.openai.completions``). Both must see
the same messages, or a turn on a server reads differently from the same turn embedded.
"""

from __future__ import annotations

from oamd.backends.base import ChatMessage

__all__ = ["plain_message", "unmarked"]


def unmarked(text: str) -> str:
    """``text`` with the opening of every chat-template marker broken (``<|im_end|>`` →
    ``< |im_end|>``; Llama 3's ``<|eot_id|>`` alike): the rendered prompt is tokenized with its
    special tokens read, so a line a player typed with ``<|im_end|>\n<|im_start|>system`` in it
    would otherwise end its turn and open a system one."""
    return text.replace("<|", "< |")


def plain_message(message: ChatMessage) -> dict[str, str]:
    """``{"role", "content"}``, its text ``unmarked``: a tool's output becomes the user's message
    ``Output of NAME: …``, since chat templates of small models know no tool role."""
    if message.role == "tool":
        name = message.tool_name or "tool"
        return {"role": "user", "content": unmarked(f"Output of {name}: {message.content}")}
    return {"role": message.role, "content": unmarked(message.content)}

"""Request members a server refuses by name, learnt from its HTTP 400 and then left out.

OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 …) refuse ``max_tokens`` ("Use
'max_completion_tokens' instead") and any ``temperature`` or ``top_p`` but their default; other
servers take ``max_tokens`` and may ignore ``max_completion_tokens``. Rather than guess from a
model's name, a step that meets such a refusal is sent again without the member (the output cap
under its new name), and the model remembers it: one refused request per model, not per step.
Only members whose absence keeps the step's meaning are learnt — tools, ``tool_choice`` and
``response_format`` are not, and their refusal stays the step's error.
"""

from __future__ import annotations

import re
from dataclasses import replace

import orjson

from oamd.backends.openai.wire import WireOptions

__all__ = ["MAX_LEARNT_PER_STEP", "learn_refusal"]

MAX_LEARNT_PER_STEP = 4
"""Refusals one step may learn from before its next refusal is its error."""

_STATUS_BAD_REQUEST = 400
_DROPPABLE = frozenset(
    {"temperature", "top_p", "top_k", "seed", "stream_options", "stop", "repeat_penalty"}
)
_NAMED = re.compile(r"unsupported (?:parameter|value)s?: '(\w+)'", re.IGNORECASE)


def _refused_member(content: bytes) -> str | None:
    """The request member a 400 body says is unsupported: OpenAI's ``error.param``, or the name
    quoted in an "Unsupported parameter/value: 'x'" message (servers that mimic its wording)."""
    try:
        error = orjson.loads(content).get("error")
    except (orjson.JSONDecodeError, AttributeError):
        error = None
    if isinstance(error, dict):
        param = error.get("param")
        if isinstance(param, str) and param:
            return param
        message = error.get("message")
    else:
        message = content.decode("utf-8", "replace")
    found = _NAMED.search(message) if isinstance(message, str) else None
    return found.group(1) if found else None


def learn_refusal(wire: WireOptions, status: int, content: bytes) -> WireOptions | None:
    """The wire options that avoid what this response refused, or None when it refused nothing
    learnable (or something already learnt: the refusal is then the step's error)."""
    if status != _STATUS_BAD_REQUEST:
        return None
    member = _refused_member(content)
    if member == "max_tokens" and wire.output_cap_field == "max_tokens":
        return replace(wire, output_cap_field="max_completion_tokens")
    if member in _DROPPABLE and member not in wire.omitted:
        return replace(wire, omitted=wire.omitted | {member})
    return None

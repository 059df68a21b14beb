"""A structured answer written field by field, for a small model that scores texts.

Under a JSON grammar SmolLM2-135M decodes a third slower and writes ``"line": "🍌🍌🍌"``; asked for
the same words as text it writes sentences. So a flat object (each property a string, a number,
an integer, a boolean or an enum) is written by the model one value at a time, the JSON around
the values by the daemon: the answer so far is the start of the model's reply, a string value
is free text up to its closing quote, a number is read off a few tokens, and an enum or a boolean
is the likeliest of its values (never an invalid one). Each value costs its own tokens and the
few the daemon added; the rest is in the KV cache. Anything else — nested objects, arrays, unions
— stays with the grammar (``is_flat``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from oamd.agent.events import TurnUsage
from oamd.agent.step import score_step
from oamd.backends.base import ChatMessage, GenerationRequest, LanguageModel, ScoredText
from oamd.jsonvalue import dumps_text

__all__ = ["FIELD_MAX_TOKENS", "is_flat", "write_fields"]

FIELD_MAX_TOKENS = 48
"""Most tokens one string value takes (a name, a sentence or two)."""

NUMBER_MAX_TOKENS = 8
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SCALARS = ("string", "number", "integer", "boolean")


def _kind(schema: dict[str, Any]) -> str | None:
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "enum"
    kind = schema.get("type")
    return kind if kind in _SCALARS else None


def is_flat(schema: dict[str, Any]) -> bool:
    """An object whose every property is a string, number, integer, boolean or enum, all of
    them required (what this module writes)."""
    properties = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(properties, dict) or not properties:
        return False
    if set(schema.get("required") or ()) != set(properties):
        return False
    return all(isinstance(p, dict) and _kind(p) is not None for p in properties.values())


def _order(schema: dict[str, Any]) -> list[str]:
    order = schema.get("x-order")
    properties = schema["properties"]
    return [k for k in order if k in properties] if isinstance(order, list) else list(properties)


def _number(text: str, schema: dict[str, Any]) -> int | float:
    """The number a few tokens of text hold, within the schema's bounds (its lowest when there
    is none)."""
    found = _NUMBER.search(text)
    low = schema.get("minimum")
    high = schema.get("maximum")
    value: float = float(found.group()) if found else float(low if low is not None else 0)
    if not math.isfinite(value):
        value = 0.0
    if isinstance(low, int | float):
        value = max(value, low)
    if isinstance(high, int | float):
        value = min(value, high)
    if schema.get("type") == "integer":
        return round(value)
    return value


async def write_fields(
    model: LanguageModel,
    messages: Sequence[ChatMessage],
    schema: dict[str, Any],
    base: GenerationRequest,
    usage: TurnUsage,
    generate: Callable[[GenerationRequest], Awaitable[str]],
) -> dict[str, Any]:
    """The object ``schema`` describes, written one value at a time after ``messages``.
    ``generate`` reads one model step (the loop's, so it is timed, retried and counted);
    ``base`` carries the step's sampling and kind.

    Raises:
        ModelError: a model step failed.
    """
    properties = schema["properties"]
    value: dict[str, Any] = {}
    text = "{"
    for index, key in enumerate(_order(schema)):
        field = properties[key]
        text += ("" if index == 0 else ", ") + dumps_text(key) + ": "
        kind = _kind(field)
        if kind in ("enum", "boolean"):
            options = field["enum"] if kind == "enum" else [True, False]
            encoded = [dumps_text(option) for option in options]
            if len(options) == 1:
                best = 0
            else:
                candidates = [
                    ScoredText([*messages, ChatMessage("assistant", text + e)], e) for e in encoded
                ]
                scores = await score_step(model, candidates, usage)
                best = max(range(len(options)), key=scores.logprobs.__getitem__)
            value[key] = options[best]
            text += encoded[best]
            continue
        if kind == "string":
            request = replace(
                base,
                messages=list(messages),
                reply_prefix=text + '"',
                stop=('"', "\n"),
                schema=None,
                sampling=replace(base.sampling, max_tokens=FIELD_MAX_TOKENS),
            )
            written = (await generate(request)).strip()
            value[key] = written
        else:  # number, integer
            request = replace(
                base,
                messages=list(messages),
                reply_prefix=text,
                stop=(",", "}", "\n"),
                schema=None,
                sampling=replace(base.sampling, max_tokens=NUMBER_MAX_TOKENS),
            )
            value[key] = _number(await generate(request), field)
        text += dumps_text(value[key])
    return value

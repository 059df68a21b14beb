"""The scripted model's grammar (``protocol/SCRIPTED.md``): a ``model`` object read into steps.

Owns every member a script may hold and the ``-32602`` message naming a malformed one
(``model.steps[1].delayMs``); ``oamd.backends.scripted.model`` plays what this module reads. Steps:
``text``/``raw`` (+ ``chunks``), ``toolCalls``, ``json``, ``template``, ``error`` (+ ``message``,
``retryAfterSeconds``) and ``scores`` (+ ``tokens``), the answer of a likelihood choice; any step
may add ``delayMs`` and ``usage``. The model object may add ``style``, ``constrained`` and
``capabilities``, so a script can stand for a recorded model, a small one included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from oamd.backends.base import ToolCallRequest, Usage
from oamd.errors import MAX_RETRY_AFTER_SECONDS, MODEL_ERROR_NAMES, InvalidParams
from oamd.jsonvalue import dumps_text
from oamd.limits import MAX_SCRIPT_CHUNKS

__all__ = [
    "DEFAULT_CHUNKS",
    "FALLBACK",
    "MAX_DELAY_MS",
    "Script",
    "ScriptStep",
    "parse_script",
]

_ERROR_CODES = (
    "model_unavailable, guardrail_violation, refusal, context_size_exceeded, rate_limited, "
    "unsupported_language, invalid_schema, tool_failed, cancelled, busy, invalid_request, "
    "generation_failed"
)
DEFAULT_CHUNKS = 3
_STYLES = ("native", "envelope")
_USAGE_KEYS = {
    "inputTokens": "input_tokens",
    "cachedInputTokens": "cached_input_tokens",
    "outputTokens": "output_tokens",
}
_FLAGS = {
    "prefixCache": "prefix_cache",
    "scoresText": "scores_text",
    "compactPrompts": "compact_prompts",
    "appendOnlySteps": "append_only_steps",
}
"""The ``capabilities`` members that are booleans, by their ``ModelCapabilities`` field."""
_SIZES = {"contextSize": "context_size", "maxOutputTokens": "max_output_tokens"}
MAX_DELAY_MS = 86_400_000
"""Longest ``delayMs`` of a step (a day, like the longest timeout): sleeps stay in the loop's range."""
MAX_TOKEN_COUNT = 1 << 40
"""Largest number a ``usage``, ``tokens`` or ``capabilities`` member may hold: far past any model,
small enough that sums of them stay exact."""


@dataclass(frozen=True, slots=True)
class ScriptStep:
    kind: str
    """``text``, ``toolCalls``, ``json``, ``template``, ``error``, ``raw`` or ``scores``."""
    value: Any
    chunks: int = DEFAULT_CHUNKS
    delay_ms: int = 0
    message: str | None = None
    usage: Usage | None = None
    """The usage the step reports instead of the chars/4 estimate (``usage``)."""
    retry_after: float | None = None
    """An ``error`` step's ``retryAfterSeconds``."""
    tokens: tuple[int, ...] | None = None
    """A ``scores`` step's ``tokens``: how many tokens each score sums (default one each)."""


FALLBACK = ScriptStep("text", "(script exhausted)")


class Script(list[ScriptStep]):
    """The steps of a script, carrying the model's ``style``, ``constrained`` and
    ``capabilities`` members, so a ``ScriptedModel(steps, fallback)`` built from
    ``parse_script`` takes them on."""

    style: str = "native"
    constrained: bool = True
    capabilities: dict[str, Any]
    """``ModelCapabilities`` fields the ``capabilities`` member sets, by field name."""

    def __init__(self, steps: Any = ()) -> None:
        super().__init__(steps)
        self.capabilities = {}


def _shown(value: Any) -> str:
    text = dumps_text(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _count(value: Any, path: str, *, minimum: int = 0) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not minimum <= value <= MAX_TOKEN_COUNT
    ):
        raise InvalidParams(
            f"Parameter '{path}' must be a whole number from {minimum} to {MAX_TOKEN_COUNT}; "
            f"got {_shown(value)}."
        )
    return value


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidParams(f"Parameter '{path}' must be an object; got {_shown(value)}.")
    return value


def _known(value: dict[str, Any], known: Any, path: str) -> None:
    unknown = [key for key in value if key not in known]
    if unknown:
        raise InvalidParams(f"'{path}' has no member '{unknown[0]}'; it takes {', '.join(known)}.")


def _usage(raw: Any, path: str) -> Usage | None:
    if raw is None:
        return None
    usage = _object(raw, path)
    _known(usage, _USAGE_KEYS, path)
    counts = {
        field: _count(usage.get(key, 0), f"{path}.{key}") for key, field in _USAGE_KEYS.items()
    }
    return Usage(**counts)


def _calls(raw: Any, path: str) -> tuple[ToolCallRequest, ...]:
    if not isinstance(raw, list):
        raise InvalidParams(f"Parameter '{path}' must be an array; got {_shown(raw)}.")
    if not raw:
        raise InvalidParams(f"'{path}' must not be empty.")
    parsed = []
    for j, call in enumerate(raw):
        cpath = f"{path}[{j}]"
        if not isinstance(call, dict):
            raise InvalidParams(f"'{cpath}' must be an object.")
        name = call.get("name")
        if name is None:
            raise InvalidParams(f"Missing required parameter '{cpath}.name'.")
        if not isinstance(name, str):
            raise InvalidParams(f"Parameter '{cpath}.name' must be a string; got {_shown(name)}.")
        arguments = call.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise InvalidParams(
                f"Parameter '{cpath}.arguments' must be an object; got {_shown(arguments)}."
            )
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise InvalidParams(f"Parameter '{cpath}.id' must be a string; got {_shown(call_id)}.")
        parsed.append(ToolCallRequest(name, arguments, call_id))
    return tuple(parsed)


def _error(raw: dict[str, Any], path: str, delay: int, usage: Usage | None) -> ScriptStep:
    code = raw["error"]
    if not isinstance(code, str) or code not in MODEL_ERROR_NAMES:  # {} is not hashable
        shown = f"'{code}'" if isinstance(code, str) else _shown(code)
        raise InvalidParams(f"'{path}.error' must be one of: {_ERROR_CODES}; got {shown}.")
    message = raw.get("message")
    if message is not None and not isinstance(message, str):
        raise InvalidParams(f"Parameter '{path}.message' must be a string; got {_shown(message)}.")
    retry_after = raw.get("retryAfterSeconds")
    if retry_after is not None and (
        isinstance(retry_after, bool)
        or not isinstance(retry_after, int | float)
        or not 0 <= retry_after <= MAX_RETRY_AFTER_SECONDS  # also refuses nan
    ):
        raise InvalidParams(
            f"Parameter '{path}.retryAfterSeconds' must be a number of seconds from 0 to "
            f"{MAX_RETRY_AFTER_SECONDS:g}; got {_shown(retry_after)}."
        )
    return ScriptStep(
        "error", code, delay_ms=delay, message=message, usage=usage, retry_after=retry_after
    )


def _scores(raw: dict[str, Any], path: str, delay: int, usage: Usage | None) -> ScriptStep:
    scores = raw["scores"]
    if not isinstance(scores, list) or not scores:
        raise InvalidParams(
            f"Parameter '{path}.scores' must be a non-empty array of numbers; got {_shown(scores)}."
        )
    for i, score in enumerate(scores):
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise InvalidParams(
                f"Parameter '{path}.scores[{i}]' must be a finite number; got {_shown(score)}."
            )
    tokens_raw = raw.get("tokens")
    tokens = None
    if tokens_raw is not None:
        if not isinstance(tokens_raw, list) or len(tokens_raw) != len(scores):
            raise InvalidParams(
                f"Parameter '{path}.tokens' must be an array of {len(scores)} whole numbers, one "
                f"per score; got {_shown(tokens_raw)}."
            )
        tokens = tuple(_count(n, f"{path}.tokens[{i}]") for i, n in enumerate(tokens_raw))
    values = tuple(float(score) for score in scores)
    return ScriptStep("scores", values, delay_ms=delay, usage=usage, tokens=tokens)


def _delay(raw: dict[str, Any], path: str) -> int:
    delay = raw.get("delayMs")
    if delay is None:
        return 0
    if (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or not 0 <= delay <= MAX_DELAY_MS  # also refuses nan
    ):
        raise InvalidParams(
            f"Parameter '{path}.delayMs' must be a number of milliseconds from 0 to "
            f"{MAX_DELAY_MS}; got {_shown(delay)}."
        )
    return int(delay)


def _parse_step(raw: Any, path: str) -> ScriptStep:
    if not isinstance(raw, dict):
        raise InvalidParams(f"'{path}' must be an object.")
    delay = _delay(raw, path)
    usage = _usage(raw.get("usage"), f"{path}.usage")
    for kind in ("text", "raw"):
        if kind in raw and raw[kind] is not None:
            text = raw[kind]
            if not isinstance(text, str):
                raise InvalidParams(
                    f"Parameter '{path}.{kind}' must be a string; got {_shown(text)}."
                )
            chunks = raw.get("chunks")
            if chunks is None:
                chunks = DEFAULT_CHUNKS
            elif (
                isinstance(chunks, bool)
                or not isinstance(chunks, int)
                or not 1 <= chunks <= MAX_SCRIPT_CHUNKS
            ):
                raise InvalidParams(
                    f"Parameter '{path}.chunks' must be a whole number from 1 to "
                    f"{MAX_SCRIPT_CHUNKS}; got {_shown(chunks)}."
                )
            return ScriptStep(kind, text, chunks, delay, usage=usage)
    if "toolCalls" in raw and raw["toolCalls"] is not None:
        calls = _calls(raw["toolCalls"], f"{path}.toolCalls")
        return ScriptStep("toolCalls", calls, delay_ms=delay, usage=usage)
    if "json" in raw:
        return ScriptStep("json", raw["json"], delay_ms=delay, usage=usage)
    if "template" in raw and raw["template"] is not None:
        template = raw["template"]
        if not isinstance(template, str):
            raise InvalidParams(
                f"Parameter '{path}.template' must be a string; got {_shown(template)}."
            )
        return ScriptStep("template", template, DEFAULT_CHUNKS, delay, usage=usage)
    if "error" in raw and raw["error"] is not None:
        return _error(raw, path, delay, usage)
    if "scores" in raw and raw["scores"] is not None:
        return _scores(raw, path, delay, usage)
    # the reference's wording, which names neither oamd's 'raw' nor its 'scores'
    raise InvalidParams(
        f"'{path}' must contain one of 'text', 'toolCalls', 'json', 'template' or 'error'."
    )


def _capabilities(raw: Any, path: str) -> dict[str, Any]:
    if raw is None:
        return {}
    given = _object(raw, path)
    _known(given, [*_SIZES, *_FLAGS], path)
    out: dict[str, Any] = {}
    for key, name in _FLAGS.items():
        if key in given:
            if not isinstance(given[key], bool):
                raise InvalidParams(
                    f"Parameter '{path}.{key}' must be a boolean; got {_shown(given[key])}."
                )
            out[name] = given[key]
    if "contextSize" in given:
        out["context_size"] = _count(given["contextSize"], f"{path}.contextSize", minimum=1)
    if given.get("maxOutputTokens") is not None:
        out["max_output_tokens"] = _count(
            given["maxOutputTokens"], f"{path}.maxOutputTokens", minimum=1
        )
    return out


def parse_script(spec: dict[str, Any], path: str = "model") -> tuple[Script, ScriptStep]:
    """``{"type": "scripted", "steps": [...], "fallback"?: step, "style"?: "native" | "envelope",
    "constrained"?: bool, "capabilities"?: {...}}`` → steps (a ``Script``, with style,
    constrained and capabilities) and fallback.

    Raises:
        InvalidParams: a step or member is malformed; the message names ``model.steps[i]``.
    """
    steps_raw = spec.get("steps")
    if steps_raw is None:
        steps_raw = []
    if not isinstance(steps_raw, list):
        raise InvalidParams(f"Parameter '{path}.steps' must be an array; got {_shown(steps_raw)}.")
    steps = Script(_parse_step(raw, f"{path}.steps[{i}]") for i, raw in enumerate(steps_raw))
    style = spec.get("style")
    if style is not None:
        if style not in _STYLES:
            raise InvalidParams(
                f'\'{path}.style\' must be "native" or "envelope"; got {_shown(style)}.'
            )
        steps.style = style
    constrained = spec.get("constrained")
    if constrained is not None and not isinstance(constrained, bool):
        raise InvalidParams(
            f"Parameter '{path}.constrained' must be a boolean; got {_shown(constrained)}."
        )
    steps.constrained = steps.style == "native" if constrained is None else constrained
    steps.capabilities = _capabilities(spec.get("capabilities"), f"{path}.capabilities")
    fallback_raw = spec.get("fallback")
    fallback = FALLBACK if fallback_raw is None else _parse_step(fallback_raw, f"{path}.fallback")
    return steps, fallback

"""One model step of the envelope loop: the stream read, stopped early, counted, and retried.

It owns the retry policy of a single step (``generation_failed`` and ``busy`` always,
``rate_limited`` when it asks for at most ``MAX_RETRY_AFTER_SECONDS``, guardrail violations only
when asked; three attempts, 300 ms then 600 ms, through the caller's ``sleep``), stopping once a
complete JSON value has arrived, the usage (reported, else estimated) and the structured partial
values. A retry repeats the model call only: tools and the rest of the turn are the loop's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from oamd.agent._lenient_json import has_complete_value, streaming_value
from oamd.agent.events import PartialValue, TurnEvent, TurnUsage
from oamd.backends.base import (
    GenerationRequest,
    LanguageModel,
    TextDelta,
    Usage,
    estimate_tokens,
)
from oamd.errors import ModelError

__all__ = [
    "MAX_RETRY_AFTER_SECONDS",
    "RETRY_ATTEMPTS",
    "RETRY_FIRST_WAIT_SECONDS",
    "PartialEmitter",
    "run_model_step",
]

RETRY_ATTEMPTS = 3
"""Attempts of one model step that fails with a transient error."""

RETRY_FIRST_WAIT_SECONDS = 0.3
"""The wait before the first retry; it doubles for each retry after it."""

MAX_RETRY_AFTER_SECONDS = 5.0
"""A ``rate_limited`` error asking for a longer wait than this is not retried."""

PARTIAL_EVERY_CHARS = 32
"""Within a long string value the partial value is re-read at most this often (re-reading on
every token would cost quadratic time); a value boundary always re-reads it."""

_VALUE_BOUNDARIES = frozenset('",}]')


def _retryable(error: ModelError, retry_guardrail: bool) -> bool:
    if error.name in ("generation_failed", "busy"):
        return True
    if error.name == "rate_limited":
        return error.retry_after is None or error.retry_after <= MAX_RETRY_AFTER_SECONDS
    return error.name == "guardrail_violation" and retry_guardrail


async def run_model_step(
    model: LanguageModel,
    request: GenerationRequest,
    usage: TurnUsage,
    sleep: Callable[[float], Awaitable[None]],
    *,
    retry_guardrail: bool = False,
    on_text: Callable[[str], None] | None = None,
    on_retry: Callable[[], None] | None = None,
    stop_early: bool = False,
    arrays: bool = False,
) -> str:
    """The step's text. ``on_text`` sees the text so far after each delta; ``on_retry`` runs
    before a retried attempt; ``stop_early`` ends the read at the first complete JSON object (or
    array, with ``arrays``).

    Raises:
        ModelError: the model failed, and the failure is not retried or the attempts ran out.
    """
    wait = RETRY_FIRST_WAIT_SECONDS
    attempt = 1
    while True:
        try:
            return await _read(model, request, usage, on_text, stop_early, arrays)
        except ModelError as error:
            if attempt >= RETRY_ATTEMPTS or not _retryable(error, retry_guardrail):
                raise
            # retry_after only ever lengthens the wait; the backoff doubles regardless
            await sleep(wait if error.retry_after is None else max(error.retry_after, wait))
            wait *= 2
            attempt += 1
            if on_retry is not None:
                on_retry()


async def _read(
    model: LanguageModel,
    request: GenerationRequest,
    usage: TurnUsage,
    on_text: Callable[[str], None] | None,
    stop_early: bool,
    arrays: bool,
) -> str:
    parts: list[str] = []
    reported = False
    events = model.generate(request)
    try:
        async for event in events:
            if type(event) is TextDelta:
                if not event.text:
                    continue
                parts.append(event.text)
                so_far = "".join(parts)
                if on_text is not None:
                    on_text(so_far)
                closes = "}" in event.text or "]" in event.text  # only a closer completes
                if stop_early and closes and has_complete_value(so_far, arrays=arrays):
                    break  # the answer is complete; the rest would be chatter
            elif type(event) is Usage:
                usage.add(event.input_tokens, event.cached_input_tokens, event.output_tokens)
                reported = True
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    text = "".join(parts)
    if not reported:
        prompt_tokens = sum(estimate_tokens(m.content) for m in request.messages)
        usage.add(prompt_tokens, 0, estimate_tokens(text))
    return text


class PartialEmitter:
    """Sends the structured value parsed so far, each time it changes."""

    def __init__(self, emit: Callable[[TurnEvent], None], arrays: bool) -> None:
        self._emit = emit
        self._arrays = arrays
        self._last: Any = None
        self._read_at = 0

    def __call__(self, so_far: str) -> None:
        fresh = so_far[self._read_at :]
        if len(fresh) < PARTIAL_EVERY_CHARS and _VALUE_BOUNDARIES.isdisjoint(fresh):
            return
        self._read_at = len(so_far)
        value = streaming_value(so_far, arrays=self._arrays)
        if value is not None and value != self._last:
            self._last = value
            self._emit(PartialValue(value))

"""One model step of the envelope loop: the stream read, stopped early, counted, and retried.

It owns reading a single step: retried as the turn's ``RetryPolicy`` says (through the caller's
``sleep``), stopped once a complete JSON value has arrived, its usage (reported, else estimated)
and the structured partial values; the text itself is gathered (bounded, and shown at a pace) by
``oamd.agent.stream``. A retry repeats the model call only: tools and the rest of the turn are
the loop's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from oamd.agent.envelope._json_reader import CompletionWatch, streaming_value
from oamd.agent.events import PartialValue, TurnEvent, TurnUsage
from oamd.agent.step_log import StepTimer
from oamd.agent.stream import Pace, StepStream
from oamd.agent.turn_spec import RetryPolicy
from oamd.backends.base import (
    GenerationRequest,
    LanguageModel,
    TextDelta,
    Usage,
    estimate_tokens,
)
from oamd.errors import ModelError

__all__ = ["PartialEmitter", "run_model_step"]

PARTIAL_EVERY_CHARS = 32
"""Within a long string value the partial value is re-read at most this often (re-reading on
every token would cost quadratic time); a value boundary always re-reads it."""

_VALUE_BOUNDARIES = frozenset('",}]')


async def run_model_step(
    model: LanguageModel,
    request: GenerationRequest,
    usage: TurnUsage,
    retry: RetryPolicy,
    sleep: Callable[[float], Awaitable[None]],
    *,
    on_text: Callable[[str], None] | None = None,
    on_retry: Callable[[], None] | None = None,
    pace: Pace | None = None,
    stop_early: bool = False,
    arrays: bool = False,
    chatter_chars: int = 0,
    stop_when: Callable[[str], int | None] | None = None,
) -> str:
    """The step's text. ``on_text`` sees the text so far as ``StepStream`` paces it (always the
    whole text last); ``pace`` is awaited after each of those; ``on_retry`` runs before a
    retried attempt; ``stop_early`` ends the read at the first complete JSON object (or
    array, with ``arrays``) — or, with ``chatter_chars``, once that many characters followed it
    (a model may end by itself meanwhile, which keeps an append-only conversation going on);
    ``stop_when``, fed each delta, ends the read once it returns a length, which the step's
    text is then cut to (a sentence limit).

    Raises:
        ModelError: the model failed, and ``retry`` does not retry the failure or the attempts
            ran out.
    """
    return await retry.run(
        lambda: _read(
            model, request, usage, on_text, pace, stop_early, arrays, chatter_chars, stop_when
        ),
        sleep,
        on_retry=on_retry,
    )


async def _read(
    model: LanguageModel,
    request: GenerationRequest,
    usage: TurnUsage,
    on_text: Callable[[str], None] | None,
    pace: Pace | None,
    stop_early: bool,
    arrays: bool,
    chatter_chars: int,
    stop_when: Callable[[str], int | None] | None,
) -> str:
    stream = StepStream(on_text, pace)
    timer = StepTimer(model, request)
    outcome = "failed"
    cut: int | None = None
    watch = CompletionWatch(arrays=arrays) if stop_early else None
    reported = False
    complete_at: int | None = None
    events = model.generate(request)
    try:
        async for event in events:
            if type(event) is TextDelta:
                if not event.text:
                    continue
                timer.text()
                if stop_when is not None:
                    cut = stop_when(event.text)
                    if cut is not None:  # shown only up to the cut, never past it
                        kept = event.text[: cut - stream.length]
                        if kept:
                            await stream.add(kept)
                        outcome = "stopped"
                        break
                await stream.add(event.text)
                if (
                    watch is not None
                    and complete_at is None
                    and watch.feed(event.text, lambda: stream.text)
                ):
                    complete_at = stream.length
                if complete_at is not None and stream.length - complete_at >= chatter_chars:
                    outcome = "stopped"
                    break  # the answer is complete; the rest would be chatter
            elif type(event) is Usage:
                usage.add(event.input_tokens, event.cached_input_tokens, event.output_tokens)
                timer.usage(event)
                reported = True
        else:
            outcome = "done"
    except ModelError:
        stream.finish()  # what the model said before it failed is shown, as it came
        raise
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
        timer.log(outcome, stream)
    text = stream.finish()
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

"""One model step, read: the one place that calls a backend's ``generate``, ``score`` or
``prefill``.

``read_step`` reads a generation: retried as the turn's ``RetryPolicy`` says (through the
caller's ``sleep``), stopped once a complete JSON value has arrived or at a cut (a sentence
limit, a marker), its usage (reported, else estimated) and the structured partial values, and
the tool calls a model with a tool-call API asks for (the native loop's steps); the text itself
is gathered (bounded, and shown at a pace) by ``oamd.agent.stream``. ``score_step``
asks a backend how likely it finds each candidate, retried the same way. ``prefill_step`` has
a backend with a prefix cache evaluate the messages a later step will begin with (best effort,
tried once). Each is timed and logged by ``oamd.agent.step_log`` (a ``model_step`` record; a
scoring step is kind ``score``, a prefill kind ``prefill``) and handed to the turn's trace when
one is open. A retry repeats the model call only: tools and the rest of the turn are the
caller's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from oamd.agent.events import PartialValue, TurnEvent, TurnUsage
from oamd.agent.json_reader import CompletionWatch, streaming_value
from oamd.agent.step_log import StepTimer
from oamd.agent.stream import Pace, StepStream
from oamd.agent.turn_spec import RetryPolicy
from oamd.backends.base import (
    ChatMessage,
    GenerationRequest,
    LanguageModel,
    ScoredText,
    Scores,
    TextDelta,
    ToolCallRequest,
    Usage,
    estimate_tokens,
)
from oamd.errors import ModelError

__all__ = [
    "ONE_ATTEMPT",
    "PREFILL",
    "PartialEmitter",
    "StepReading",
    "prefill_step",
    "read_step",
    "score_step",
    "stop_at",
]

ONE_ATTEMPT = RetryPolicy(max_attempts=1)
"""For the small steps a game turn adds after its line (player options, a decision's reason):
a failure there is the caller's to absorb, not to wait out."""

PREFILL = "prefill"
"""The kind of a prefill step (its ``GenerationRequest`` in the step log and a trace)."""


@dataclass(frozen=True, slots=True)
class StepReading:
    """How a generation is read. ``on_text`` sees the text so far as ``StepStream`` paces it
    (always the whole text last); ``on_tool_call`` each tool call the model asks for, as it
    comes; ``pace`` is awaited after each of those; ``on_retry`` runs
    before a retried attempt; ``stop_early`` ends the read at the first complete JSON object (or
    array, with ``arrays``) — or, with ``chatter_chars``, once that many characters followed it
    (a model may end by itself meanwhile, which keeps an append-only conversation going on);
    ``stop_when``, fed each delta, ends the read once it returns a length, which the step's
    text is then cut to (a sentence limit, a marker); ``estimate_usage``: a backend that reports
    no usage is counted by the chars/4 estimate."""

    on_text: Callable[[str], None] | None = None
    on_tool_call: Callable[[ToolCallRequest], None] | None = None
    on_retry: Callable[[], None] | None = None
    pace: Pace | None = None
    stop_early: bool = False
    arrays: bool = False
    chatter_chars: int = 0
    stop_when: Callable[[str], int | None] | None = None
    estimate_usage: bool = True


PLAIN = StepReading()


def stop_at(marker: str) -> Callable[[str], int | None]:
    """A ``StepReading.stop_when`` that cuts the text where ``marker`` first appears."""
    text = ""

    def seen(delta: str) -> int | None:
        nonlocal text
        start = max(0, len(text) - len(marker) + 1)  # only where the delta may complete it
        text += delta
        found = text.find(marker, start)
        return None if found < 0 else found

    return seen


PARTIAL_EVERY_CHARS = 32
"""Within a long string value the partial value is re-read at most this often (re-reading on
every token would cost quadratic time); a value boundary always re-reads it."""

_VALUE_BOUNDARIES = frozenset('",}]')


async def read_step(
    model: LanguageModel,
    request: GenerationRequest,
    usage: TurnUsage,
    reading: StepReading = PLAIN,
    retry: RetryPolicy = ONE_ATTEMPT,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> str:
    """The step's text, read as ``reading`` says; its usage is added to ``usage``.

    Raises:
        ModelError: the model failed, and ``retry`` does not retry the failure or the attempts
            ran out.
    """
    return await retry.run(
        lambda: _read(model, request, usage, reading), sleep, on_retry=reading.on_retry
    )


async def score_step(
    model: LanguageModel,
    candidates: list[ScoredText],
    usage: TurnUsage,
    retry: RetryPolicy = ONE_ATTEMPT,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> Scores:
    """How likely ``model`` finds each candidate; the tokens it evaluated are added to
    ``usage``.

    Raises:
        ModelError: the model failed (``invalid_request`` when it cannot score at all), and
            ``retry`` does not retry the failure or the attempts ran out.
    """
    return await retry.run(lambda: _score(model, candidates, usage), sleep)


async def prefill_step(model: LanguageModel, messages: list[ChatMessage]) -> None:
    """Has ``model`` evaluate the prompt ``messages`` begin into its prefix cache
    (``LanguageModel.prefill``), ahead of the step that will send them; timed, logged and traced
    as a step of kind ``prefill`` that answers nothing. Tried once: a prefill is best effort.

    Raises:
        ModelError: what the backend's prefill raised.
    """
    timer = StepTimer(model, GenerationRequest(messages=messages, kind=PREFILL))
    outcome = "failed"
    try:
        await model.prefill(messages)
        outcome = "done"
    finally:
        timer.log(outcome)


async def _score(model: LanguageModel, candidates: list[ScoredText], usage: TurnUsage) -> Scores:
    timer = StepTimer.scoring(model, candidates)
    outcome = "failed"
    try:
        scores = await model.score(candidates)
        outcome = "done"
    finally:
        timer.log_scores(outcome, None if outcome == "failed" else scores)
    usage.add(scores.usage.input_tokens, scores.usage.cached_input_tokens, 0)
    return scores


async def _read(
    model: LanguageModel, request: GenerationRequest, usage: TurnUsage, reading: StepReading
) -> str:
    stop_when, chatter_chars = reading.stop_when, reading.chatter_chars
    stream = StepStream(reading.on_text, reading.pace)
    timer = StepTimer(model, request)
    outcome = "failed"
    cut: int | None = None
    watch = CompletionWatch(arrays=reading.arrays) if reading.stop_early else None
    reported = False
    complete_at: int | None = None
    tool_calls: list[ToolCallRequest] = []
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
            elif type(event) is ToolCallRequest:
                timer.text()
                tool_calls.append(event)
                if reading.on_tool_call is not None:
                    reading.on_tool_call(event)
                await stream.checkpoint()
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
        timer.log(outcome, stream, tool_calls)
    text = stream.finish()
    if not reported and reading.estimate_usage:
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

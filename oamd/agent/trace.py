"""Turn tracing: an optional observer of every turn and of each of its model steps.

Off unless a ``TurnTracer`` is set in the context (``TURN_TRACER``; ``oamd --inspect`` sets one
for the daemon's whole task tree). Then ``run_turn`` asks it for one ``TurnTrace`` per turn — or
a ``TurnScope`` does, for a turn made of more than one loop's steps (a small model's NPC line and
the closed choices read after it, a decision by likelihood), and every step read inside it, the
loop's included, is that turn's — and each step's timer (``oamd.agent.step_log``) hands the
trace the step's figures: the request as the backend received it, the raw text and tool calls it
answered with, tokens and times. Nothing is gathered, copied or kept here: with no tracer a turn
costs two context lookups and each step one. What a trace keeps, and how much, is the tracer's;
it runs on the protocol's path, so it must not block, and what it raises is contained here
(``begin_trace``, ``report_step``, ``report_finished``: logged with its traceback and dropped), so
a turn's result never depends on whether it is watched.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from oamd.backends.base import GenerationRequest, ScoredText, ToolCallRequest
from oamd.log import get_logger

if TYPE_CHECKING:
    from oamd.agent.events import TurnResult
    from oamd.agent.turn_spec import TurnSpec

__all__ = [
    "CURRENT_TRACE",
    "TURN_TRACER",
    "StepFigures",
    "TurnScope",
    "TurnTrace",
    "TurnTracer",
    "begin_trace",
    "report_finished",
    "report_step",
]

log = get_logger("oamd.agent")


@dataclass(frozen=True, slots=True)
class StepFigures:
    """One model step as it happened: ``request`` exactly as the backend was given it, ``text``
    as it answered (the raw stream, before the loop parsed it), the tool calls it requested
    (native loop), the tokens it reported (else 0) and its times. ``outcome``: ``done``,
    ``stopped`` early by the reader, or ``failed``. A likelihood choice (``score``) has no
    request: its ``candidates`` and their ``scores`` instead; a prefill's request is its
    messages alone (kind ``prefill``), and it answers no text."""

    backend: str
    request: GenerationRequest | None
    text: str
    tool_calls: Sequence[ToolCallRequest]
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    first_token_ms: float
    decode_ms: float
    total_ms: float
    outcome: str
    candidates: tuple[ScoredText, ...] = ()
    """A scoring step's candidates (``request`` is then ``None``): what was asked."""
    scores: tuple[float, ...] = ()
    """And the log-probability the backend gave each (empty when it failed)."""


class TurnTrace(Protocol):
    """One traced turn."""

    def step(self, figures: StepFigures) -> None:
        """A model step of the turn ended (in order; a retried step is reported again)."""

    def finished(self, result: TurnResult | None, error: BaseException | None) -> None:
        """The turn ended: with ``result``, or with ``error`` (a cancellation included)."""


class TurnTracer(Protocol):
    def begin(self, spec: TurnSpec) -> TurnTrace | None:
        """A turn starts; ``None``: it is not traced."""


TURN_TRACER: ContextVar[TurnTracer | None] = ContextVar("oamd_turn_tracer", default=None)
"""The tracer of every turn started in this context (``None``: turns are not traced)."""

CURRENT_TRACE: ContextVar[TurnTrace | None] = ContextVar("oamd_current_trace", default=None)
"""The trace of the turn running in this task, set by ``run_turn`` (or a ``TurnScope``) while
it runs."""


def begin_trace(spec: TurnSpec) -> TurnTrace | None:
    """The trace of a turn starting in this context (``None``: no tracer, it declined, or it
    raised, which is logged: the turn runs untraced)."""
    tracer = TURN_TRACER.get()
    if tracer is None:
        return None
    try:
        return tracer.begin(spec)
    except Exception:
        log.exception("turn_tracer_failed", hook="begin")
        return None


def report_step(trace: TurnTrace, figures: StepFigures) -> None:
    """Hands ``trace`` a step; what it raises is logged and dropped."""
    try:
        trace.step(figures)
    except Exception:
        log.exception("turn_tracer_failed", hook="step")


def report_finished(
    trace: TurnTrace, result: TurnResult | None, error: BaseException | None
) -> None:
    """Tells ``trace`` the turn ended; what it raises is logged and dropped."""
    try:
        trace.finished(result, error)
    except Exception:
        log.exception("turn_tracer_failed", hook="finished")


class TurnScope:
    """One turn's trace around what its ``with`` block runs: begun for ``spec`` (when a tracer
    is set and takes it), current while the block runs — so ``run_turn`` inside it, and every
    step read by ``oamd.agent.step``, belongs to this turn — and told, when the block ends, the
    ``result`` the block set or the error it ended with."""

    __slots__ = ("_token", "_trace", "result")

    def __init__(self, spec: TurnSpec) -> None:
        self._trace = begin_trace(spec)
        self._token: Token[TurnTrace | None] | None = None
        self.result: TurnResult | None = None
        """What the turn ended with (its text, tool records and usage), set by the block."""

    def __enter__(self) -> TurnScope:
        if self._trace is not None:
            self._token = CURRENT_TRACE.set(self._trace)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._trace is None or self._token is None:
            return
        CURRENT_TRACE.reset(self._token)
        error = exc[1] if isinstance(exc[1], BaseException) else None
        report_finished(self._trace, None if error is not None else self.result, error)

"""Each model step's figures, logged: what a slow turn spent where, without a profiler.

Every step ``oamd.agent.step`` reads from any backend is timed — a generation, a likelihood
choice (kind ``score``), a prefill (kind ``prefill``, which answers nothing): its kind, the prompt
tokens and the share the backend served from its KV cache, the output tokens, the time to the
first piece of text (tokenizing, any grammar, the prefill) and the rest (decoding). One
``model_step`` record at debug level per step (``--log-level debug``), nothing on the wire. A
backend may log its own internals beside it (the embedded llama.cpp splits tokenizing, grammar
and prefill). When the turn is traced (``oamd.agent.trace``), the same figures, the request and
the raw answer go to its trace; otherwise nothing of them is kept.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from oamd.agent.trace import CURRENT_TRACE, StepFigures, report_step
from oamd.backends.base import (
    GenerationRequest,
    LanguageModel,
    ScoredText,
    Scores,
    ToolCallRequest,
    Usage,
)
from oamd.log import debug_enabled, get_logger

if TYPE_CHECKING:
    from oamd.agent.stream import StepStream

__all__ = ["StepTimer"]

log = get_logger("oamd.agent")


class StepTimer:
    """Collects one step's figures as its stream is read; ``log`` writes them once."""

    __slots__ = (
        "_candidates",
        "_first",
        "_model",
        "_request",
        "_started",
        "_trace",
        "cached",
        "input",
        "output",
    )

    def __init__(self, model: LanguageModel, request: GenerationRequest | None) -> None:
        self._model = model
        self._request = request
        self._candidates: tuple[ScoredText, ...] = ()
        self._started = time.perf_counter()
        self._first: float | None = None
        self._trace = CURRENT_TRACE.get()
        self.input = self.cached = self.output = 0

    @classmethod
    def scoring(cls, model: LanguageModel, candidates: list[ScoredText]) -> StepTimer:
        """The timer of a likelihood choice (kind ``score``)."""
        timer = cls(model, None)
        timer._candidates = tuple(candidates)
        return timer

    def log_scores(self, outcome: str, scores: Scores | None) -> None:
        """A scoring step's record: its tokens are the ones the backend evaluated."""
        if scores is not None:
            self.usage(scores.usage)
        self.log(outcome, scores=() if scores is None else scores.logprobs)

    def text(self) -> None:
        """A piece of text arrived."""
        if self._first is None:
            self._first = time.perf_counter()

    def usage(self, usage: Usage) -> None:
        self.input += usage.input_tokens
        self.cached += usage.cached_input_tokens
        self.output += usage.output_tokens

    def log(
        self,
        outcome: str,
        stream: StepStream | None = None,
        tool_calls: Sequence[ToolCallRequest] = (),
        *,
        scores: tuple[float, ...] = (),
    ) -> None:
        """Writes the record (``outcome``: ``done``, ``stopped`` early by the reader, ``failed``)
        and hands a traced turn the step, with the text ``stream`` holds and the ``tool_calls``."""
        trace = self._trace
        if trace is None and not debug_enabled():
            return
        now = time.perf_counter()
        first = self._first if self._first is not None else now
        first_ms = round((first - self._started) * 1000, 1)
        decode_ms = round((now - first) * 1000, 1)
        total_ms = round((now - self._started) * 1000, 1)
        if trace is not None:
            report_step(
                trace,
                StepFigures(
                    self._model.name,
                    self._request,
                    stream.text if stream is not None else "",
                    tool_calls,
                    self.input,
                    self.cached,
                    self.output,
                    first_ms,
                    decode_ms,
                    total_ms,
                    outcome,
                    self._candidates,
                    scores,
                ),
            )
        if not debug_enabled():
            return
        request = self._request
        log.debug(
            "model_step",
            backend=self._model.name,
            kind="score" if request is None else request.kind,
            prompt_tokens=self.input,
            cached_tokens=self.cached,
            output_tokens=self.output,
            constrained=request is not None and request.schema is not None,
            candidates=len(self._candidates) or None,
            first_token_ms=first_ms,
            decode_ms=decode_ms,
            total_ms=total_ms,
            outcome=outcome,
        )

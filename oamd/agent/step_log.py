"""Each model step's figures, logged: what a slow turn spent where, without a profiler.

Both tool loops time every step they read from any backend: its kind, the prompt tokens and the
share the backend served from its KV cache, the output tokens, the time to the first piece of text
(tokenizing, any grammar, the prefill) and the rest (decoding). One ``model_step`` record at
debug level per step (``--log-level debug``), nothing on the wire. A backend may log its own
internals beside it (the embedded llama.cpp splits tokenizing, grammar and prefill).
"""

from __future__ import annotations

import time

from oamd.backends.base import GenerationRequest, LanguageModel, Usage
from oamd.log import debug_enabled, get_logger

__all__ = ["StepTimer"]

log = get_logger("oamd.agent")


class StepTimer:
    """Collects one step's figures as its stream is read; ``log`` writes them once."""

    __slots__ = ("_first", "_model", "_request", "_started", "cached", "input", "output")

    def __init__(self, model: LanguageModel, request: GenerationRequest) -> None:
        self._model = model
        self._request = request
        self._started = time.perf_counter()
        self._first: float | None = None
        self.input = self.cached = self.output = 0

    def text(self) -> None:
        """A piece of text arrived."""
        if self._first is None:
            self._first = time.perf_counter()

    def usage(self, usage: Usage) -> None:
        self.input += usage.input_tokens
        self.cached += usage.cached_input_tokens
        self.output += usage.output_tokens

    def log(self, outcome: str) -> None:
        """Writes the record (``outcome``: ``done``, ``stopped`` early by the reader, ``failed``)."""
        if not debug_enabled():
            return
        now = time.perf_counter()
        first = self._first if self._first is not None else now
        log.debug(
            "model_step",
            backend=self._model.name,
            kind=self._request.kind,
            prompt_tokens=self.input,
            cached_tokens=self.cached,
            output_tokens=self.output,
            constrained=self._request.schema is not None,
            first_token_ms=round((first - self._started) * 1000, 1),
            decode_ms=round((now - first) * 1000, 1),
            total_ms=round((now - self._started) * 1000, 1),
            outcome=outcome,
        )

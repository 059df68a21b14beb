"""The system model as a recording sees it: every use (a session, an NPC, a decision or content
call) gets a ``RecordingUse`` that passes each call through and keeps what it returned as a
scripted-model step; the ``RecordingSystem`` under them keeps what availability was reported.

What a step holds is what the caller consumed, in the form ``protocol/SCRIPTED.md`` plays back:
the text (``text`` on a model with a tool-call API, ``raw`` on a text-only one, whose replies the
daemon parses itself) in as many pieces as it came, the tool calls with their ids, the usage, a
likelihood choice's scores, or the model error. A call cancelled before it ended is kept as a step
that waits a day (``delayMs``), so its replay waits for the same cancellation. Only recorded
connections pay for any of this: without ``--record`` no wrapper exists.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from oamd.backends.base import (
    Availability,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    ScoredText,
    Scores,
    TextDelta,
    ToolCallRequest,
    Usage,
)
from oamd.backends.delegating import DelegatingModel
from oamd.backends.scripted.grammar import MAX_DELAY_MS
from oamd.errors import ModelError
from oamd.limits import MAX_SCRIPT_CHUNKS
from oamd.recording._digest import request_digest, scoring_digest, text_digest

__all__ = ["AvailabilityLog", "RecordingSystem", "RecordingUse", "UseLog"]

STEP_OVERHEAD_BYTES = 64
"""What a step costs the recording's budget besides its texts (its keys and numbers)."""


class Budget:
    """The bytes a connection's recording may still take (``MAX_RECORDING_BYTES``)."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.truncated = False

    def spend(self, size: int) -> bool:
        """Takes ``size`` bytes; ``False`` (and truncated from now on) when they do not fit."""
        if self.truncated or size > self.left:
            self.truncated = True
            return False
        self.left -= size
        return True


@dataclass
class UseLog:
    """What one use of the system model returned, call by call."""

    method: str
    request_id: Any
    steps: list[dict[str, Any]] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    token_counts: dict[str, int] = field(default_factory=dict)
    capabilities: ModelCapabilities | None = None
    """As the last call found them (settled): the script's ``style``, ``capabilities``…"""


@dataclass
class AvailabilityLog:
    """Every availability the system model reported, by how it was asked, in order."""

    calls: dict[str, list[Availability | None]] = field(
        default_factory=lambda: {"availability": [], "cached": [], "lastKnown": []}
    )


def _usage(usage: list[int]) -> dict[str, int]:
    return {"inputTokens": usage[0], "cachedInputTokens": usage[1], "outputTokens": usage[2]}


def _error_step(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, ModelError):
        step: dict[str, Any] = {"error": exc.name, "message": exc.message}
        if exc.retry_after is not None:
            step["retryAfterSeconds"] = exc.retry_after
        return step
    # a backend's own bug: the nearest a script can say, with what really happened beside it
    return {
        "error": "generation_failed",
        "message": str(exc) or type(exc).__name__,
        "exception": type(exc).__name__,
    }


class RecordingSystem(DelegatingModel):
    """The connection's system model: availability recorded, everything else passed on (every
    use's generations and scores go through its ``RecordingUse``)."""

    def __init__(self, inner: LanguageModel, log: AvailabilityLog, budget: Budget) -> None:
        super().__init__(inner)
        self._log = log
        self._budget = budget

    def _kept(self, kind: str, availability: Availability | None) -> Availability | None:
        if self._budget.spend(STEP_OVERHEAD_BYTES):
            self._log.calls[kind].append(availability)
        return availability

    async def availability(self) -> Availability:
        availability = await self.inner.availability()
        self._kept("availability", availability)
        return availability

    def cached_availability(self) -> Availability | None:
        return self._kept("cached", self.inner.cached_availability())

    def last_known_availability(self) -> Availability | None:
        return self._kept("lastKnown", self.inner.last_known_availability())


class RecordingUse(DelegatingModel):
    """One use of the system model: each call passed on, its outcome kept as a step; its
    availability asked of the recording system, so that it is recorded too."""

    def __init__(self, system: RecordingSystem, log: UseLog, budget: Budget) -> None:
        super().__init__(system)  # availability through the system, so that it is recorded
        self.log = log
        self._budget = budget

    async def count_tokens(self, text: str) -> int:
        count = await self.inner.count_tokens(text)
        key = text_digest(text)
        if key not in self.log.token_counts and self._budget.spend(len(key) + 8):
            self.log.token_counts[key] = count
        return count

    def _keep(self, step: dict[str, Any], digest: str, size: int) -> None:
        self.log.capabilities = self.inner.capabilities
        if self._budget.spend(size + STEP_OVERHEAD_BYTES):
            self.log.steps.append(step)
            self.log.digests.append(digest)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        digest = request_digest(request)
        pieces: list[str] = []
        calls: list[ToolCallRequest] = []
        usage = [0, 0, 0]
        failure: BaseException | None = None
        cancelled = False
        events = self.inner.generate(request)
        try:
            async for event in events:
                kind = type(event)
                if kind is TextDelta:
                    pieces.append(event.text)  # type: ignore[union-attr]
                elif kind is ToolCallRequest:
                    calls.append(event)  # type: ignore[arg-type]
                elif kind is Usage:
                    usage[0] += event.input_tokens  # type: ignore[union-attr]
                    usage[1] += event.cached_input_tokens  # type: ignore[union-attr]
                    usage[2] += event.output_tokens  # type: ignore[union-attr]
                yield event
        except GeneratorExit:
            raise  # the caller read what it needed: the step is what it read
        except Exception as exc:
            failure = exc
            raise
        except BaseException:
            cancelled = True
            raise
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
            text = "".join(pieces)
            if failure is not None:
                step = _error_step(failure)
            elif calls:
                step = {
                    "toolCalls": [
                        {"name": c.name, "arguments": c.arguments}
                        | ({"id": c.id} if c.id is not None else {})
                        for c in calls
                    ],
                    "usage": _usage(usage),
                }
                if text:
                    step["said"] = text  # shown while it streamed; a script cannot say it too
            else:
                step = {"raw" if not self.inner.capabilities.native_tools else "text": text}
                if pieces:
                    step["chunks"] = min(len(pieces), MAX_SCRIPT_CHUNKS)
                step["usage"] = _usage(usage)
            if cancelled:
                step |= {"delayMs": MAX_DELAY_MS, "cancelled": True}
            self._keep(step, digest, len(text) + sum(len(str(c.arguments)) for c in calls))

    async def score(self, candidates: list[ScoredText]) -> Scores:
        digest = scoring_digest(candidates)
        try:
            scores = await self.inner.score(candidates)
        except Exception as exc:
            self._keep(_error_step(exc), digest, 0)
            raise
        except BaseException:
            waiting = {"scores": [0.0] * len(candidates), "delayMs": MAX_DELAY_MS}
            self._keep({**waiting, "cancelled": True}, digest, 0)
            raise
        used = scores.usage
        step = {
            "scores": list(scores.logprobs),
            "tokens": list(scores.tokens),
            "usage": _usage([used.input_tokens, used.cached_input_tokens, used.output_tokens]),
        }
        self._keep(step, digest, 16 * len(candidates))
        return scores

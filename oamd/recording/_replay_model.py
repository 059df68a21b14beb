"""The system model of a replay: each use gets the scripted model recorded for it.

Uses are matched in the order requests ask for the system model, which is the recording's: the
daemon runs handlers in arrival order and the replay sends the same lines in the same order. Within
a use, a call plays the first step left whose recorded request digest is its own (so decisions of
one ``decision/decideMany`` that interleave differently still get their own answers), else the next
step. Token counts and availability are the recorded ones, so what history fits and what
``initialize`` reports are the recording's too. A call that was cancelled while it ran
(``"cancelled": true``) plays what it had returned by then, then waits its ``delayMs`` (for the
same cancel): a script waits before its step, but the recording saw the text stream first.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import anyio

from oamd.backends.base import (
    Availability,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    ScoredText,
    Scores,
    estimate_tokens,
)
from oamd.backends.scripted.model import ScriptedModel, parse_script
from oamd.errors import InvalidParams, ModelError
from oamd.recording._digest import request_digest, scoring_digest, text_digest
from oamd.recording._format import EXHAUSTED, RecordingError

__all__ = ["ReplayModel", "ReplaySystem", "UseMatcher"]


def _availability(wire: dict[str, Any]) -> Availability:
    return Availability(
        available=bool(wire.get("available")),
        reason=wire.get("reason"),
        status=wire.get("status", "available"),
        detail=wire.get("detail"),
        context_size=wire.get("contextSize"),
        variant=wire.get("variant"),
        supported_languages=tuple(wire.get("supportedLanguages", ())),
        bytes_downloaded=wire.get("bytesDownloaded"),
        total_bytes=wire.get("totalBytes"),
    )


def _capabilities(script: dict[str, Any], path: str) -> ModelCapabilities:
    probe, _ = parse_script({**script, "steps": []}, path)
    return ScriptedModel(probe).capabilities


class ReplaySystem(LanguageModel):
    """The recorded system model's name, capabilities and availability answers, in order (the
    last one of a kind again once they run out); it generates nothing itself."""

    def __init__(self, system: dict[str, Any]) -> None:
        self.name = str(system.get("name", "recorded"))
        members = {k: system[k] for k in ("style", "constrained", "capabilities") if k in system}
        try:
            self.capabilities = _capabilities(members, "system")
        except InvalidParams as exc:
            raise RecordingError(f"system: {exc.message}") from exc
        answers = system.get("availability") or {}
        self._answers: dict[str, list[Any]] = {
            kind: list(answers.get(kind) or []) for kind in ("availability", "cached", "lastKnown")
        }
        self._played = dict.fromkeys(self._answers, 0)

    def _next(self, kind: str) -> Availability | None:
        answers = self._answers[kind]
        if not answers:
            return Availability(available=True, context_size=self.capabilities.context_size)
        index = min(self._played[kind], len(answers) - 1)
        self._played[kind] += 1
        wire = answers[index]
        return None if wire is None else _availability(wire)

    async def availability(self) -> Availability:
        answer = self._next("availability")
        return answer if answer is not None else Availability(available=False)

    def cached_availability(self) -> Availability | None:
        return self._next("cached")

    def last_known_availability(self) -> Availability | None:
        return self._next("lastKnown")

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        for event in ():  # every use has its own ReplayModel: this is never asked
            yield event
        raise ModelError("model_unavailable", "A replay's system model plays only its uses.")


@dataclass
class ReplayModel(ScriptedModel):
    """One use's recorded script, its calls matched to their steps by request digest."""

    digests: list[str | None] = field(default_factory=list)
    token_counts: dict[str, int] = field(default_factory=dict)
    source: ReplaySystem | None = None
    waits_after: list[int] = field(default_factory=list)
    """Per step, the milliseconds it waits once its events are out (a cancelled call's)."""

    unmatched: int = 0
    """Calls that asked something no step left was recorded for (the prompts changed?)."""

    def _align(self, digest: str) -> None:
        """Moves the first step left recorded for ``digest`` to the front of what is left."""
        start = self._next
        for index in range(start, min(len(self.steps), len(self.digests))):
            if self.digests[index] == digest:
                if index != start:
                    self.steps.insert(start, self.steps.pop(index))
                    self.digests.insert(start, self.digests.pop(index))
                    if index < len(self.waits_after):
                        self.waits_after.insert(start, self.waits_after.pop(index))
                return
        self.unmatched += 1

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        self._align(request_digest(request))
        index = self._next
        events = super().generate(request)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()
        if self._next > index and index < len(self.waits_after) and self.waits_after[index]:
            await anyio.sleep(self.waits_after[index] / 1000)  # until the recorded cancel

    async def score(self, candidates: list[ScoredText]) -> Scores:
        self._align(scoring_digest(candidates))
        return await super().score(candidates)

    async def count_tokens(self, text: str) -> int:
        counted = self.token_counts.get(text_digest(text))
        return estimate_tokens(text) if counted is None else counted

    async def availability(self) -> Availability:
        assert self.source is not None
        return await self.source.availability()

    def cached_availability(self) -> Availability | None:
        assert self.source is not None
        return self.source.cached_availability()

    def last_known_availability(self) -> Availability | None:
        assert self.source is not None
        return self.source.last_known_availability()


def _same_use(was: dict[str, Any], asked: list[Any]) -> bool:
    """Whether a recorded use's request is ``asked``; an id recorded as its JSON text
    (``idText``: one no encoder takes) is compared as that text."""
    if "idText" in was:
        return was.get("method") == asked[0] and was["idText"] == json.dumps(asked[1])
    return [was.get("method"), was.get("id")] == asked


def _waits_after(script: dict[str, Any], steps: list[Any]) -> list[int]:
    """Per step, the wait a recorded cancelled call makes after its events, not before; such a
    step of ``steps`` gets no wait before (a likelihood choice returns nothing early: it keeps
    its wait before)."""
    raw = script.get("steps") if isinstance(script.get("steps"), list) else []
    waits = [0] * len(steps)
    for i, recorded in enumerate(raw[: len(steps)]):
        cancelled = isinstance(recorded, dict) and recorded.get("cancelled") is True
        if cancelled and steps[i].kind != "scores" and steps[i].delay_ms:
            waits[i], steps[i] = steps[i].delay_ms, replace(steps[i], delay_ms=0)
    return waits


class UseMatcher:
    """``ModelFactory.bind`` for a replay: the n-th use asked for gets the n-th recorded use's
    script; ``mismatches`` notes a use that another request asked for than in the recording."""

    def __init__(self, uses: list[dict[str, Any]], system: ReplaySystem) -> None:
        self._system = system
        self._scripts = []
        for i, use in enumerate(uses):
            script = use.get("script") if isinstance(use, dict) else None
            if not isinstance(script, dict):
                raise RecordingError(f"uses[{i}] has no 'script' object.")
            try:
                parse_script(script, f"uses[{i}].script")
            except InvalidParams as exc:
                raise RecordingError(exc.message) from exc
            self._scripts.append(use)
        self.mismatches: list[str] = []
        self._asked = 0
        self._models: list[ReplayModel] = []

    def __call__(self, _system: LanguageModel, use: Any) -> LanguageModel:
        index, self._asked = self._asked, self._asked + 1
        asked = list(use) if isinstance(use, tuple) else [use, None]
        if index >= len(self._scripts):
            self.mismatches.append(
                f"use {index + 1} ({asked[0]} of request {asked[1]!r}) is not in the recording"
            )
            script: dict[str, Any] = {"type": "scripted", "fallback": EXHAUSTED}
            recorded: dict[str, Any] = {}
        else:
            recorded = self._scripts[index]
            script = recorded["script"]
            was = recorded.get("use") or {}
            if not _same_use(was, asked):
                self.mismatches.append(
                    f"use {index + 1}: recorded for {was.get('method')} of request "
                    f"{was.get('id')!r}, asked for by {asked[0]} of request {asked[1]!r}"
                )
        steps, fallback = parse_script(script, f"uses[{index}].script")
        waits = _waits_after(script, steps)
        digests = recorded.get("requestDigests")
        counts = recorded.get("tokenCounts")
        model = ReplayModel(
            steps,
            fallback,
            digests=list(digests) if isinstance(digests, list) else [],
            token_counts=dict(counts) if isinstance(counts, dict) else {},
            source=self._system,
            waits_after=waits,
        )
        self._models.append(model)
        return model

    @property
    def unmatched(self) -> int:
        """Model calls that asked something other than any recorded call of their use."""
        return sum(model.unmatched for model in self._models)

    @property
    def unused(self) -> int:
        """Recorded uses no request asked for."""
        return max(0, len(self._scripts) - self._asked)

"""``DelegatingModel``: a backend that passes every call on to another, for the wrappers that
change one or two of them: ``oamd serve``'s fair share of generations (``oamd.serve.fair``) and a
recording's system model and each of its uses (``oamd.recording._model``). A replay wraps no
backend (its models are scripted ones, ``oamd.recording._replay_model``), so it does not use it.

A wrapper lists only what it changes; everything the ``LanguageModel`` contract has — generation,
scoring, prefill, token counts, availability in its three forms, capabilities — reaches the inner
backend unless it is overridden. Three hand-written copies of this delegation each missed a call
once (the fair-share model dropped ``score`` and ``prefill`` under ``oamd serve``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from oamd.backends.base import (
    Availability,
    ChatMessage,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    ScoredText,
    Scores,
)

__all__ = ["DelegatingModel"]


class DelegatingModel(LanguageModel):
    """Every call goes to ``inner``. ``aclose`` does not: the wrapped backend is shared (one
    system model under every client's wrapper) and is closed by whoever made it."""

    def __init__(self, inner: LanguageModel) -> None:
        self.inner = inner

    @property  # type: ignore[override]
    def name(self) -> str:
        return self.inner.name

    @property  # type: ignore[override]
    def capabilities(self) -> ModelCapabilities:
        return self.inner.capabilities

    async def availability(self) -> Availability:
        return await self.inner.availability()

    def cached_availability(self) -> Availability | None:
        return self.inner.cached_availability()

    def last_known_availability(self) -> Availability | None:
        return self.inner.last_known_availability()

    async def settle_capabilities(self) -> None:
        await self.inner.settle_capabilities()

    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        return self.inner.generate(request)

    async def count_tokens(self, text: str) -> int:
        return await self.inner.count_tokens(text)

    async def score(self, candidates: list[ScoredText]) -> Scores:
        return await self.inner.score(candidates)

    async def prefill(self, messages: list[ChatMessage]) -> None:
        await self.inner.prefill(messages)

    def __getattr__(self, name: str) -> Any:
        # what a particular backend adds (a scripted model's recorded ``requests``)
        if name.startswith("_") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

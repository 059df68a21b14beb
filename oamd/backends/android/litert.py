"""LiteRT-LM (``org.oamd.host.LiteRtBackend``) as a text-only model, through the same JVM seam
and error table as ML Kit.

Owns only what differs from ``oamd.backends.android.mlkit``: the name, how messages name the model, the
default watchdog (LiteRT-LM's ``sendMessageAsync`` callback has been seen never to complete, so
the Java side has its own watchdog too) and how a request reaches the engine: as chat turns of
one LiteRT-LM ``Conversation``, which is continued when the request only adds a user turn to what
it has seen (``oamd.backends.android.litert_conversation``), so a step does not prefill the history
again. The Java backend maps LiteRT-LM's exceptions onto the shared codes of
``org.oamd.host.ErrorCodes``. Native tool calling through LiteRT-LM's ``Conversation`` tools is
not wired yet, so the envelope loop drives it (``native_tools=False``), asked to lay each step of
a turn out as the last step's messages plus its raw reply and one new user turn
(``append_only_steps``), so a turn's steps continue one conversation.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from oamd.backends.android.jvm_prompt import render_prompt
from oamd.backends.android.litert_conversation import (
    ConversationPlan,
    ConversationReuse,
    conversation_turns,
)
from oamd.backends.android.mlkit import MlKitModel, Settler, Starter
from oamd.backends.base import GenerationRequest

__all__ = ["LITERT_WATCHDOG_SECONDS", "LiteRtModel"]

LITERT_WATCHDOG_SECONDS = 120.0
"""Longest silence between two callbacks of a LiteRT-LM generation (CPU prefill of a long prompt
on a phone is slow); past it the step fails ``generation_failed``."""


class LiteRtModel(MlKitModel):
    """A LiteRT-LM model file run in-process behind an ``OamdBackend`` Java object."""

    name = "litert"
    label = "LiteRT-LM"

    def __init__(self, backend, runtime, **kwargs) -> None:  # type: ignore[no-untyped-def]
        kwargs.setdefault("watchdog_seconds", LITERT_WATCHDOG_SECONDS)
        super().__init__(backend, runtime, **kwargs)
        self._conversation = ConversationReuse()

    def _set_capabilities(self, context_size: int) -> None:
        super()._set_capabilities(context_size)
        self.capabilities = replace(self.capabilities, append_only_steps=True)

    def _prepare(self, request: GenerationRequest) -> tuple[Starter, Settler]:
        system, turns = conversation_turns(request.messages)
        if not turns or turns[-1][0] != "user":
            # nothing to send as the next message: the whole transcript as one, as ML Kit's
            turns = [("user", render_prompt(request.messages)[1])]
        plan = self._conversation.plan(self._options(request, system), turns)
        return partial(self._converse, plan), partial(self._conversation.settle, plan)

    def _converse(self, plan: ConversationPlan, guarded: Any) -> int:
        """On the JVM thread: ``LiteRtBackend.converse`` with the guarded sink."""
        roles = [role for role, _ in plan.history]
        texts = [text for _, text in plan.history]
        return int(
            self._backend.converse(
                plan.key, plan.continues, roles, texts, plan.prompt, plan.options, guarded
            )
        )

    async def aclose(self) -> None:
        self._conversation.forget()
        await super().aclose()

"""The decision service: ``decide`` makes one decision, ``decide_many`` several at a time.

A decision with one option answers at once; a small model that scores text (``compact_prompts``
and ``scores_text``) scores each option (``decision.small``); any other runs one turn under the
decision schema (``DecisionRequest.spec``). A guardrail block or refusal falls back to the
request's fallback option when it has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from oamd.agent.events import ToolRecord, TurnUsage
from oamd.agent.ports import TurnPeer
from oamd.agent.run_turn import run_turn
from oamd.backends.base import LanguageModel
from oamd.errors import ModelError
from oamd.game.decision.request import Choice, DecisionRequest
from oamd.game.decision.small import decide_by_likelihood

__all__ = ["Decision", "DecisionJob", "decide", "decide_many"]

FALLBACK_ERRORS = ("guardrail_violation", "refusal")
"""Model failures a decision with a fallback option answers with it."""


@dataclass
class Decision:
    choice: Choice
    usage: TurnUsage = field(default_factory=TurnUsage)
    records: list[ToolRecord] = field(default_factory=list)
    is_fallback: bool = False


async def decide(
    request: DecisionRequest,
    model: LanguageModel,
    peer: TurnPeer,
) -> Decision:
    """One decision; its tool calls run through ``peer.execute`` and report through
    ``peer.emit``.

    Raises:
        ModelError: the model failed, and the failure is not one the fallback answers.
    """
    only = request.only_option()
    if only is not None:
        return Decision(only)
    try:
        await model.settle_capabilities()
        capabilities = model.capabilities
        if capabilities.compact_prompts and capabilities.scores_text:
            choice, usage, records = await decide_by_likelihood(request, model, peer)
            return Decision(choice, usage, records)
        turn = await run_turn(request.spec(model), peer)
    except ModelError as exc:
        if request.fallback_option is None or exc.name not in FALLBACK_ERRORS:
            raise
        return Decision(Choice(request.fallback_option, "", 0), is_fallback=True)
    return Decision(request.result(turn), turn.usage, turn.records)


@dataclass(frozen=True)
class DecisionJob:
    """One decision of ``decide_many`` with its own tool-call channel (``peer``)."""

    request: DecisionRequest
    model: LanguageModel
    peer: TurnPeer


async def decide_many(jobs: Sequence[DecisionJob], workers: int) -> list[Decision | Exception]:
    """Each job's decision, or what it failed with, in the jobs' order; ``workers`` run at once.

    A few workers take the decisions in order, so no task waits on a semaphore; one failed
    decision does not affect the others.
    """
    results: list[Decision | Exception | None] = [None] * len(jobs)
    indices = iter(range(len(jobs)))

    async def worker() -> None:
        for i in indices:
            job = jobs[i]
            try:
                results[i] = await decide(job.request, job.model, job.peer)
            except Exception as exc:  # one failed decision must not affect the others
                results[i] = exc

    async with anyio.create_task_group() as tg:
        for _ in range(workers):
            tg.start_soon(worker)
    return [r for r in results if r is not None]  # every worker has filled its slots by now

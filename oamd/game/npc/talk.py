"""An NPC's dialogue turn as a service (``npc/talk``): it owns the whole turn, as
``Session.respond`` owns a session's — run the line, decide what it keeps, ask the connection's
budget, commit, keep it — and names the follow-up the daemon should run after the answer
(compaction when due, else a prefill of the next turn's beginning, else none). The adapter
(``bridge/game/npc/methods.py``) only reads params, encodes, and schedules that follow-up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from oamd.agent.history import entries_size
from oamd.agent.ports import RoomCheck
from oamd.agent.queue import Operation
from oamd.game.npc.grounding import relevant_facts
from oamd.game.npc.npc import Npc
from oamd.game.npc.persona import Memory
from oamd.game.npc.ports import TalkLine, TalkPeer
from oamd.game.npc.prompt import game_state, told_facts
from oamd.game.npc.reply import TalkOutcome, run_talk, talk_prompt
from oamd.game.npc.small_reply import run_small_model_talk, small_model_prompt
from oamd.game.npc.tools import MemoryDraft
from oamd.game.npc.turns import (
    compact,
    compaction_due,
    prefill_next_turn,
    small_model_turns,
    turn_setup,
)

__all__ = ["FollowUp", "TalkLine", "TalkPeer", "Talked", "talk"]

FollowUp = Callable[[], Awaitable[Any]]
"""The daemon's own work after an answer: queued or not, it is run unanswered."""


async def talk_turn(npc: Npc, said: TalkLine, peer: TalkPeer) -> tuple[TalkOutcome, MemoryDraft]:
    """One dialogue turn, not yet kept: its outcome and the memory it staged.

    Raises:
        ModelError: the turn failed and no fallback applies.
    """
    await npc.model.settle_capabilities()
    setup = turn_setup(npc)
    if small_model_turns(npc):
        facts = relevant_facts(told_facts(npc), said.line)
        prompt = small_model_prompt(said.line, said.context, facts)
        return await run_small_model_talk(npc, said, prompt, setup, peer), setup.draft
    prompt = talk_prompt(said.line, said.context, game_state(npc))
    return await run_talk(npc, said, prompt, setup, peer), setup.draft


@dataclass
class KeptTalk:
    """What a talk turn keeps once it commits: its exchange and the memory it staged, and the
    bytes they add to the NPC (checked against the connection's budget before the commit)."""

    entries: list[dict[str, Any]]
    entries_bytes: int
    memory: Memory
    memory_growth: int

    @property
    def bytes(self) -> int:
        return self.entries_bytes + self.memory_growth

    def apply(self, npc: Npc) -> bool:
        """Keeps them (after the commit); returns whether compaction is due now."""
        npc.set_memory(self.memory, self.memory_growth)
        npc.history.extend(self.entries, self.entries_bytes)
        return compaction_due(npc)


def keep_talk(outcome: TalkOutcome, draft: MemoryDraft) -> KeptTalk | None:
    """What a finished turn would keep; ``None`` for a fallback, which keeps nothing."""
    if not outcome.commits_memory:
        return None
    memory = draft.committed()
    return KeptTalk(
        outcome.entries, entries_size(outcome.entries), memory, draft.size_change(memory)
    )


@dataclass(frozen=True, slots=True)
class Talked:
    outcome: TalkOutcome
    follow_up: FollowUp | None
    """Compaction (already in the NPC's queue, ahead of anything sent later) or a prefill."""


async def talk(
    npc: Npc, op: Operation, said: TalkLine, peer: TalkPeer, check_room: RoomCheck
) -> Talked:
    """Runs one dialogue turn and commits it: ``check_room`` is asked with the bytes the turn
    keeps (less than nothing for a fallback, which keeps nothing), then ``op`` commits and the
    NPC keeps its exchange and memory.

    Raises:
        ModelError: the turn failed and no fallback applies. Cancelled: a cancel came first.
        LimitReached: ``check_room`` refused what the turn would keep (then it left no trace).
    """
    outcome, draft = await talk_turn(npc, said, peer)
    kept = keep_talk(outcome, draft)
    check_room(0 if kept is None else kept.bytes)
    op.commit()
    if kept is not None and kept.apply(npc):
        return Talked(outcome, npc.queue.schedule(partial(compact, npc), follow_up=True))
    if npc.model.capabilities.prefix_cache:
        # while the player reads the line, the model evaluates the next turn's beginning
        return Talked(outcome, partial(prefill_next_turn, npc))
    return Talked(outcome, None)

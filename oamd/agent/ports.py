"""The typed seams a turn is run through: ``TurnPeer``, the engine's side of a turn (where its
events go, who runs its client tools, how fast it may stream), and ``RoomCheck``, the
connection's budget asked before a turn commits. ``run_turn``, both loops and the services
(``Session.respond``, the game's) take these rather than loose callables; a turn nobody watches
(a compaction, a bark) takes ``TurnPeer.quiet``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from oamd.agent.events import TurnEvent
from oamd.agent.stream import Pace
from oamd.agent.turn_spec import ToolExecutor

__all__ = ["RoomCheck", "TurnPeer"]

RoomCheck = Callable[[int], None]
"""Asked with the bytes a turn would keep before it commits; raises ``LimitReached`` when they
do not fit (and the turn then leaves no trace)."""


def _discard(event: TurnEvent) -> None:
    """Where the events of a turn nobody watches go."""


@dataclass(frozen=True, slots=True)
class TurnPeer:
    """The engine's side of a turn: ``emit`` receives its events, ``execute`` runs its client
    tools, and ``pace`` (a streaming turn's) is awaited after each text or partial event
    (``oamd.agent.stream``)."""

    emit: Callable[[TurnEvent], None]
    execute: ToolExecutor
    pace: Pace | None = None

    @classmethod
    def quiet(cls, execute: ToolExecutor) -> TurnPeer:
        """A peer for a turn nobody watches: its events go nowhere, it is not paced, and its
        tool calls (if any) go to ``execute`` — usually a ``NoToolExecutor``."""
        return cls(_discard, execute)

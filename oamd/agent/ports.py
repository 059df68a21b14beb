"""The typed seams a turn is run through: ``TurnPeer``, the engine's side of a turn (where its
events go, who runs its client tools, how fast it may stream), and ``RoomCheck``, the
connection's budget asked before a turn commits. The services (``Session.respond``, the game's)
take these rather than loose callables."""

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


@dataclass(frozen=True, slots=True)
class TurnPeer:
    emit: Callable[[TurnEvent], None]
    execute: ToolExecutor
    pace: Pace | None = None

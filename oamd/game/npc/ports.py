"""The typed seams of an NPC's dialogue turn: what the player said (``TalkLine``), what the
turn is set up with (``TalkSetup``) and the engine's side of it (``TalkPeer``), so that the
service and both layouts (``reply``, ``small_reply``) take a few named values, not a dozen
loose ones."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from oamd.agent.events import TurnEvent
from oamd.agent.ports import TurnPeer
from oamd.agent.stream import Pace
from oamd.agent.tools import ToolChoice, ToolDefinition
from oamd.agent.turn_spec import ToolExecutor

if TYPE_CHECKING:
    from oamd.game.npc.tools import MemoryDraft

__all__ = ["LineShown", "TalkLine", "TalkPeer", "TalkSetup"]


class LineShown(Protocol):
    """Where the line the player reads goes as it is written (``reply.LineTracker`` is one)."""

    def finish(self, line: str, emotion: str) -> None:
        """The line as it stands, and its emotion: a reset if it differs from what streamed."""


@dataclass(frozen=True, slots=True)
class TalkLine:
    """What the player said, and how the turn may use tools."""

    line: str
    context: Any = None
    choice: ToolChoice | None = None


@dataclass(frozen=True, slots=True)
class TalkPeer:
    """The engine's side of a turn: where events go, who runs client tools, the tracker that
    streams the line itself, and how fast a streaming line may go."""

    emit: Callable[[TurnEvent], None]
    execute: ToolExecutor
    tracker: LineShown
    pace: Pace | None = None

    @property
    def turn_peer(self) -> TurnPeer:
        """The part of it ``run_turn`` takes: events, client tools, pace (not the tracker)."""
        return TurnPeer(self.emit, self.execute, self.pace)


@dataclass(frozen=True, slots=True)
class TalkSetup:
    """A talk turn as the NPC stands when it starts: its memory draft, tools and instructions."""

    draft: MemoryDraft
    tools: list[ToolDefinition]
    instructions: str

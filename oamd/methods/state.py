"""What the method handlers share: the daemon's configuration and one connection's objects."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oamd.agent.models import ModelFactory
from oamd.limits import MAX_CONNECTION_BYTES, MAX_SESSIONS

if TYPE_CHECKING:
    from oamd.agent.session import SessionStore
    from oamd.game.npc.npc import NpcStore
    from oamd.game.world.store import ChangeSink, WorldStore

__all__ = ["BridgeState", "DaemonConfig"]


@dataclass
class DaemonConfig:
    """Fixed at start: the models the daemon serves and what the host allows."""

    models: ModelFactory
    test_methods: bool = False
    """Registers ``test/*`` methods used by the end-to-end suite (never in production)."""
    max_sessions: int = MAX_SESSIONS
    max_connection_bytes: int = MAX_CONNECTION_BYTES
    """What one connection's histories and worlds may hold (``--max-connection-bytes``)."""
    tool_timeout: float = 120.0
    """The default time the engine has to answer a ``tool/call`` (``--tool-timeout``)."""


@dataclass
class BridgeState:
    """Per connection: every session, NPC and world lives here and dies with the connection.

    Each store is created by the first call that needs it, so its modules load on first use,
    not at start (``tests/test_app.py``).
    """

    config: DaemonConfig
    reserved_bytes: int = field(default=0, init=False)
    """The params of the operations still waiting or running (``methods.budget.held``)."""
    world_watch: ChangeSink | None = field(default=None, init=False, repr=False)
    """Hears every change of every world of the connection (``WorldStore.watch``; set before
    the store is first used: ``oamd --inspect`` sets it when the connection opens)."""
    _sessions: SessionStore | None = field(default=None, init=False, repr=False)
    _npcs: NpcStore | None = field(default=None, init=False, repr=False)
    _worlds: WorldStore | None = field(default=None, init=False, repr=False)

    @property
    def sessions(self) -> SessionStore:
        """The connection's sessions."""
        if self._sessions is None:
            from oamd.agent.session import SessionStore

            self._sessions = SessionStore(self.config.max_sessions)
        return self._sessions

    @property
    def npcs(self) -> NpcStore:
        """The connection's NPCs."""
        if self._npcs is None:
            from oamd.game.npc.npc import NpcStore

            self._npcs = NpcStore()
        return self._npcs

    @property
    def worlds(self) -> WorldStore:
        """The connection's worlds; ``methods.world.world_store`` gives it its change sink."""
        if self._worlds is None:
            from oamd.game.world.store import WorldStore
            from oamd.methods.budget import check_room

            me = weakref.ref(self)  # the store (and every world) holds this: not a cycle

            def room(adding: int) -> None:
                state = me()
                if state is not None:
                    check_room(state, adding)

            self._worlds = WorldStore(room=room, watch=self.world_watch)
        return self._worlds

    def held_bytes(self) -> int:
        """About how much the connection holds, as JSON: its sessions and NPCs (histories and
        everything else they were given), its worlds (those deleted but still used by an NPC
        too) and the params of its pending operations. A sum over its objects (a few hundred at
        most), each of which keeps its own count."""
        held = self.reserved_bytes
        worlds = self._worlds
        if self._sessions is not None:
            held += self._sessions.held_bytes()
        if worlds is not None:
            held += worlds.held_bytes()
        if self._npcs is not None:
            held += self._npcs.held_bytes(listed=worlds.holds if worlds is not None else _none)
        return held

    def cancel_all_work(self) -> None:
        """Cancels every queued and running operation and forgets every object (shutdown)."""
        for store in self._stores():
            store.clear()

    def _stores(self) -> list[SessionStore | NpcStore | WorldStore]:
        """The stores created so far."""
        return [s for s in (self._sessions, self._npcs, self._worlds) if s is not None]


def _none(world: object) -> bool:
    return False

"""One connection's worlds (§6): ids, limit, NPC counts and ``world/subscribe`` registrations.

``WorldStore`` is an ``ObjectStore`` (ids ``w1``…, limit, lookup, not-found/exists errors) of
``WorldState``s; it hands each committed change of a world with subscriptions to its
``on_change`` sink, which the bridge layer turns into ``world/changed`` notifications. Changes
reach the sink however they were made (a ``world/*`` request or an NPC's ``update_world_state``),
synchronously, so they precede the response of the request that caused them. A ``watch`` sink,
when set (``oamd --inspect``), hears every committed change of every world, subscribed or not.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oamd.agent.store import ObjectStore
from oamd.agent.tools import ToolOutput
from oamd.errors import LimitReached, SubscriptionNotFound, WorldExists, WorldNotFound
from oamd.game.world.document import Change, WorldState, write_world_state
from oamd.game.world.paths import Segments, overlaps, parse_path
from oamd.limits import MAX_SUBSCRIPTIONS, MAX_WORLDS
from oamd.log import get_logger

__all__ = ["ChangeSink", "Subscription", "WorldStore", "write_world_tool"]

log = get_logger("oamd.game")


@dataclass(frozen=True, slots=True)
class Subscription:
    """A ``world/subscribe`` registration: changes at, inside or above ``path`` reach it."""

    id: str
    world: str
    path: str
    """As the client gave it."""
    segments: Segments

    def concerns(self, change: Change) -> bool:
        """Whether ``change`` is at, inside or above this subscription's path."""
        return overlaps(change.segments, self.segments)


ChangeSink = Callable[[str, list[Change]], None]
"""``on_change(world_id, changes)``: called after each committed operation on a world that has
subscriptions."""


class WorldStore(ObjectStore[WorldState]):
    """One connection's worlds and subscriptions, in creation order.

    Limits: ``max_worlds`` (``world/create`` past it fails ``limit_reached``) and
    ``max_subscriptions``. ``room``, when given, is asked before a world is created with its
    size, and before each change that grows one of its worlds with the growth (the
    connection's byte budget: it raises ``LimitReached`` to refuse).
    """

    def __init__(
        self,
        on_change: ChangeSink | None = None,
        *,
        max_worlds: int = MAX_WORLDS,
        max_subscriptions: int = MAX_SUBSCRIPTIONS,
        room: Callable[[int], None] | None = None,
        watch: ChangeSink | None = None,
    ) -> None:
        super().__init__(
            "w",
            max_worlds,
            not_found=WorldNotFound,
            exists=WorldExists,
            full=lambda n: LimitReached("worlds", n),
        )
        self.on_change = on_change
        self.watch = watch
        self.room = room
        self.max_subscriptions = max_subscriptions
        self._subscriptions: dict[str, Subscription] = {}
        self._npcs: dict[str, int] = {}
        self._subscription_ids = itertools.count(1)

    # ---- worlds ----------------------------------------------------------------------------

    def create(
        self, world_id: str | None = None, state: dict[str, Any] | None = None
    ) -> WorldState:
        """A new world holding ``state`` (taken over, not copied), at version 0.

        Raises:
            WorldExists: the id is taken. LimitReached: ``max_worlds`` worlds are alive.
        """
        if world_id is not None:
            self.check_new(world_id)  # its form is the adapter's to check
        self.check_room()
        world = WorldState(state, id=world_id or self.new_id())
        if self.room is not None:
            self.room(world.bytes)
        return self.add(world)

    def add(self, world: WorldState) -> WorldState:
        """Makes an existing world reachable under ``world.id`` (a host-shared world).

        Raises:
            WorldExists: the id is taken. LimitReached: ``max_worlds`` worlds are alive.
        """
        super().add(world)
        world.observer = _observer(weakref.ref(self), world.id)
        world.room = self.room  # kept after world/delete: NPCs holding it still count it
        return world

    def delete(self, world_id: str) -> int:
        """Forgets the world and ends its subscriptions; returns how many ended. Holders of the
        ``WorldState`` (NPCs) keep using it; its changes reach no subscriber any more.

        Raises:
            WorldNotFound.
        """
        self._release(self.remove(world_id))
        ended = [s.id for s in self._subscriptions.values() if s.world == world_id]
        for sub_id in ended:
            del self._subscriptions[sub_id]
        return len(ended)

    def held_bytes(self) -> int:
        """The JSON size of every world document in the store."""
        return sum(world.bytes for world in self)

    def holds(self, world: WorldState) -> bool:
        """Whether ``world`` itself is in the store (not deleted, nor replaced under its id)."""
        return self._objects.get(world.id) is world

    def clear(self) -> int:
        """Forgets every world and subscription (the connection closed)."""
        self._subscriptions.clear()
        return super().clear()

    def _release(self, world: WorldState) -> int:
        world.observer = None  # holders keep the world; its changes reach no subscriber
        return 0

    # ---- NPCs ------------------------------------------------------------------------------

    def attach_npc(self, world_id: str) -> WorldState:
        """Counts an NPC created with the world (``world/list``'s ``npcs``) and returns the world.

        Raises:
            WorldNotFound.
        """
        world = self.get(world_id)
        self._npcs[world_id] = self._npcs.get(world_id, 0) + 1
        return world

    def detach_npc(self, world_id: str) -> None:
        """Uncounts an NPC (deleted); never fails."""
        count = self._npcs.get(world_id, 0) - 1
        if count > 0:
            self._npcs[world_id] = count
        else:
            self._npcs.pop(world_id, None)

    def npc_count(self, world_id: str) -> int:
        """NPCs created with ``world_id`` and alive (counted by id, like the reference)."""
        return self._npcs.get(world_id, 0)

    # ---- subscriptions ---------------------------------------------------------------------

    def subscribe(self, world_id: str, path: str = "") -> Subscription:
        """Raises: WorldNotFound; WorldError (malformed path); LimitReached."""
        world = self.get(world_id)
        segments = parse_path(world.check_path(path))
        if len(self._subscriptions) >= self.max_subscriptions:
            raise LimitReached("world subscriptions", self.max_subscriptions)
        sub = Subscription(f"sub{next(self._subscription_ids)}", world_id, path, segments)
        self._subscriptions[sub.id] = sub
        return sub

    def unsubscribe(self, sub_id: str) -> Subscription:
        """Raises: SubscriptionNotFound."""
        sub = self._subscriptions.pop(sub_id, None)
        if sub is None:
            raise SubscriptionNotFound(sub_id)
        return sub

    def subscriptions(self, world_id: str | None = None) -> list[Subscription]:
        """Live subscriptions (of one world, or all) in subscription order."""
        return [s for s in self._subscriptions.values() if world_id in (None, s.world)]

    def deliveries(self, world_id: str, changes: list[Change]) -> list[tuple[Subscription, Change]]:
        """Who hears what: for each change in order, each concerned subscription in order."""
        subs = self.subscriptions(world_id)
        return [(s, c) for c in changes for s in subs if s.concerns(c)]

    def _changed(self, world_id: str, changes: list[Change]) -> None:
        if self.watch is not None:
            try:
                self.watch(world_id, changes)
            except Exception:  # an observer (the inspector): never the write's failure
                log.exception("world_watch_failed", world=world_id)
        if self.on_change is not None and any(
            s.world == world_id for s in self._subscriptions.values()
        ):
            self.on_change(world_id, changes)


def write_world_tool(
    store: WorldStore, world_id: str, path: Any, value: Any, writable: list[str]
) -> ToolOutput:
    """``write_world_state`` on the world ``world_id`` of ``store``; an error output if it is gone."""
    try:
        state = store.get(world_id)
    except WorldNotFound:
        return ToolOutput.error(f"The world '{world_id}' no longer exists.")
    return write_world_state(state, path, value, writable)


def _observer(store: weakref.ref[WorldStore], world_id: str) -> Callable[[list[Change]], None]:
    """A world's change observer that reaches its store without holding it: a world that holds
    its store holding the world is a cycle, which keeps a dropped client's worlds in memory."""

    def observe(changes: list[Change]) -> None:
        owner = store()
        if owner is not None:
            owner._changed(world_id, changes)

    return observe

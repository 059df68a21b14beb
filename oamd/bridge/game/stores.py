"""The game extension's part of a connection: its NPCs and worlds, opened together by the first
game call on the connection, with the world store's change sink bound to that connection."""

from __future__ import annotations

import weakref

from oamd.bridge.game.world.encode import encode_change
from oamd.bridge.state import BridgeState
from oamd.game.npc.npc import NpcStore
from oamd.game.world.document import Change
from oamd.game.world.store import WorldStore
from oamd.rpc import Request
from oamd.rpc.context import ConnectionPort

__all__ = ["GameStores", "game"]

PART = "game"


class GameStores:
    """NPCs and worlds of one connection. An NPC's bytes count once: those of a world it holds
    after the world was deleted are counted with the NPC (``NpcStore.held_bytes``)."""

    def __init__(self, state: BridgeState, port: ConnectionPort) -> None:
        budget = weakref.ref(state.budget)  # the store (and every world) holds this: not a cycle

        def room(adding: int) -> None:
            held = budget()
            if held is not None:
                held.check_room(adding)

        def notify(world_id: str, changes: list[Change]) -> None:
            # the stores through the connection, not captured: a store holding a sink that holds
            # the store is a cycle, which would keep the connection alive after it closed
            stores = port.state.part(PART) if port.state is not None else None
            if stores is None:
                return
            for sub, change in stores.worlds.deliveries(world_id, changes):
                port.send_notification("world/changed", encode_change(sub, change))

        self.npcs = NpcStore()
        self.worlds = WorldStore(room=room, on_change=notify, watch=state.world_watch)

    def held_bytes(self) -> int:
        return self.worlds.held_bytes() + self.npcs.held_bytes(listed=self.worlds.holds)

    def clear(self) -> None:
        self.npcs.clear()
        self.worlds.clear()


def game(req: Request) -> GameStores:
    """The game extension's stores on ``req``'s connection, opened by the first game call."""
    state: BridgeState = req.state
    return state.open(PART, lambda: GameStores(state, req.port))

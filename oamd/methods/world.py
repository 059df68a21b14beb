"""``world/*`` (§6) and ``world/changed`` (§7): thin adapters over the connection's ``WorldStore``.

World operations are immediate and atomic, so every handler answers with a ``Result``. A
request's changes are sent as ``world/changed`` notifications while the handler runs, so they
reach the client before its response; changes made by NPC tools go out the same way, during the
turn. The store is ``BridgeState.worlds``; ``world_store`` gives it the sink that sends them.
"""

from __future__ import annotations

from typing import Any

from oamd.errors import InvalidParams
from oamd.game.world.document import Change, WorldState
from oamd.game.world.store import Subscription, WorldStore
from oamd.methods.parse.params import Params, check_object_id
from oamd.rpc import Registry, Request, Result

__all__ = ["encode_change", "register", "world_store"]


def world_store(req: Request) -> WorldStore:
    """The connection's worlds, with a sink that sends ``world/changed`` on the connection."""
    store: WorldStore = req.state.worlds
    if store.on_change is None:
        port = req.port

        def notify(world_id: str, changes: list[Change]) -> None:
            # the store through the connection, not captured: a store holding a sink that holds
            # the store is a cycle, which would keep the connection alive after it closed
            for sub, change in port.state.worlds.deliveries(world_id, changes):
                port.send_notification("world/changed", encode_change(sub, change))

        store.on_change = notify
    return store


def encode_change(sub: Subscription, change: Change) -> dict[str, Any]:
    """``{"world", "subscription", "path", "oldValue"?, "newValue"?}``: ``oldValue`` is omitted
    when the value was created, ``newValue`` when it was removed; JSON ``null`` is sent as null."""
    out: dict[str, Any] = {"world": sub.world, "subscription": sub.id, "path": change.path}
    if not change.created:
        out["oldValue"] = change.old
    if not change.removed:
        out["newValue"] = change.new
    return out


def encode_subscription(sub: Subscription) -> dict[str, Any]:
    """``{"subscription": "sub1", "world": "village", "path": "player"}``"""
    return {"subscription": sub.id, "world": sub.world, "path": sub.path}


def _world(req: Request) -> tuple[Params, WorldState]:
    p = Params(req.params)
    return p, world_store(req).get(p.string("world"))


def _path(p: Params) -> str:
    return p.opt_string("path", "") or ""


def create(req: Request) -> Result:
    store = world_store(req)
    p = Params(req.params)
    world_id = p.opt_string("world")
    if world_id is not None:
        check_object_id(world_id, "world")
        store.check_new(world_id)
    state = req.params.get("state")
    if state is not None and not isinstance(state, dict):
        raise InvalidParams("'state' must be a JSON object (the world root).")
    world = store.create(world_id, state)
    return Result({"world": world.id, "version": world.version})


def get(req: Request) -> Result:
    p, world = _world(req)
    path = _path(p)
    exists, value = world.lookup(path)
    return Result(
        {
            "world": world.id,
            "path": path,
            "value": value,
            "exists": exists,
            "version": world.version,
        }
    )


def set_value(req: Request) -> Result:
    p, world = _world(req)
    path = _path(p)
    if "value" not in req.params:
        raise InvalidParams("Missing required parameter 'value' (use world/remove to delete).")
    world.set(path, req.params["value"])
    return Result({"world": world.id, "path": path, "version": world.version})


def merge(req: Request) -> Result:
    p, world = _world(req)
    path = _path(p)
    if "patch" not in req.params:
        raise InvalidParams("Missing required parameter 'patch'.")
    world.merge(req.params["patch"], path)
    return Result({"world": world.id, "path": path, "version": world.version})


def remove(req: Request) -> Result:
    p, world = _world(req)
    path = p.string("path")
    before = world.snapshot()
    changes = world.remove(path)
    if world.check_path(path) == "":
        removed, old = True, before  # the root is always there: removing it empties the world
    elif changes:
        removed, old = True, changes[0].old
    else:
        removed, old = False, None
    return Result(
        {
            "world": world.id,
            "path": path,
            "removed": removed,
            "oldValue": old,
            "version": world.version,
        }
    )


def snapshot(req: Request) -> Result:
    _, world = _world(req)
    return Result({"world": world.id, "state": world.snapshot(), "version": world.version})


def delete(req: Request) -> Result:
    world_id = Params(req.params).string("world")
    ended = world_store(req).delete(world_id)
    return Result({"world": world_id, "deleted": True, "endedSubscriptions": ended})


def list_worlds(req: Request) -> Result:
    store = world_store(req)
    return Result(
        {
            "worlds": [
                {
                    "world": w.id,
                    "version": w.version,
                    "npcs": store.npc_count(w.id),
                    "subscriptions": [encode_subscription(s) for s in store.subscriptions(w.id)],
                    "createdAt": w.created_at,
                }
                for w in store
            ]
        }
    )


def subscribe(req: Request) -> Result:
    p = Params(req.params)
    world_id = p.string("world")
    sub = world_store(req).subscribe(world_id, _path(p))
    return Result(encode_subscription(sub))


def unsubscribe(req: Request) -> Result:
    sub = world_store(req).unsubscribe(Params(req.params).string("subscription"))
    return Result({**encode_subscription(sub), "unsubscribed": True})


def register(registry: Registry) -> None:
    registry.declare_notification("world/changed")
    registry.register("world/create", create)
    registry.register("world/get", get)
    registry.register("world/set", set_value)
    registry.register("world/merge", merge)
    registry.register("world/remove", remove)
    registry.register("world/snapshot", snapshot)
    registry.register("world/delete", delete)
    registry.register("world/list", list_worlds)
    registry.register("world/subscribe", subscribe)
    registry.register("world/unsubscribe", unsubscribe)

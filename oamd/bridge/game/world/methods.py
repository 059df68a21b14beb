"""``world/*`` (§6) and ``world/changed`` (§7): thin adapters over the connection's ``WorldStore``.

World operations are immediate and atomic, so every handler answers with a ``Result``. A
request's changes are sent as ``world/changed`` notifications while the handler runs, so they
reach the client before its response; changes made by NPC tools go out the same way, during the
turn. The store is the game extension's (``bridge.game.stores``), whose sink sends them.
"""

from __future__ import annotations

from oamd.bridge.game.stores import game
from oamd.bridge.game.world import encode
from oamd.bridge.params import Params, check_object_id
from oamd.errors import InvalidParams
from oamd.game.world.document import WorldState
from oamd.rpc import Registry, Request, Result

__all__ = ["register"]


def _world(req: Request) -> tuple[Params, WorldState]:
    p = Params(req.params)
    return p, game(req).worlds.get(p.string("world"))


def _path(p: Params) -> str:
    return p.opt_string("path", "") or ""


def create(req: Request) -> Result:
    store = game(req).worlds
    p = Params(req.params)
    world_id = p.opt_string("world")
    if world_id is not None:
        check_object_id(world_id, "world")
        store.check_new(world_id)
    state = req.params.get("state")
    if state is not None and not isinstance(state, dict):
        raise InvalidParams("'state' must be a JSON object (the world root).")
    return Result(encode.encode_created(store.create(world_id, state)))


def get(req: Request) -> Result:
    p, world = _world(req)
    path = _path(p)
    exists, value = world.lookup(path)
    return Result(encode.encode_value(world, path, exists, value))


def set_value(req: Request) -> Result:
    p, world = _world(req)
    path = _path(p)
    if "value" not in req.params:
        raise InvalidParams("Missing required parameter 'value' (use world/remove to delete).")
    world.set(path, req.params["value"])
    return Result(encode.encode_written(world, path))


def merge(req: Request) -> Result:
    p, world = _world(req)
    path = _path(p)
    if "patch" not in req.params:
        raise InvalidParams("Missing required parameter 'patch'.")
    world.merge(req.params["patch"], path)
    return Result(encode.encode_written(world, path))


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
    return Result(encode.encode_removed(world, path, removed, old))


def snapshot(req: Request) -> Result:
    _, world = _world(req)
    return Result(encode.encode_snapshot(world))


def delete(req: Request) -> Result:
    world_id = Params(req.params).string("world")
    ended = game(req).worlds.delete(world_id)
    return Result(encode.encode_deleted(world_id, ended))


def list_worlds(req: Request) -> Result:
    return Result(encode.encode_list(game(req).worlds))


def subscribe(req: Request) -> Result:
    p = Params(req.params)
    world_id = p.string("world")
    sub = game(req).worlds.subscribe(world_id, _path(p))
    return Result(encode.encode_subscription(sub))


def unsubscribe(req: Request) -> Result:
    sub = game(req).worlds.unsubscribe(Params(req.params).string("subscription"))
    return Result(encode.encode_unsubscribed(sub))


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

"""Wire shapes of ``world/*`` results and ``world/changed`` (§6–7), keys in the reference's order."""

from __future__ import annotations

from typing import Any

from oamd.bridge.wire import shape
from oamd.game.world.document import Change, WorldState
from oamd.game.world.store import Subscription, WorldStore

__all__ = [
    "encode_change",
    "encode_created",
    "encode_deleted",
    "encode_list",
    "encode_removed",
    "encode_snapshot",
    "encode_subscription",
    "encode_unsubscribed",
    "encode_value",
    "encode_written",
]


@shape("notification", "world/changed")
def encode_change(sub: Subscription, change: Change) -> dict[str, Any]:
    """``{"world", "subscription", "path", "oldValue"?, "newValue"?}``: ``oldValue`` is omitted
    when the value was created, ``newValue`` when it was removed; JSON ``null`` is sent as null."""
    out: dict[str, Any] = {"world": sub.world, "subscription": sub.id, "path": change.path}
    if not change.created:
        out["oldValue"] = change.old
    if not change.removed:
        out["newValue"] = change.new
    return out


@shape("result", "world/subscribe")
def encode_subscription(sub: Subscription) -> dict[str, Any]:
    """``{"subscription": "sub1", "world": "village", "path": "player"}``"""
    return {"subscription": sub.id, "world": sub.world, "path": sub.path}


@shape("result", "world/unsubscribe")
def encode_unsubscribed(sub: Subscription) -> dict[str, Any]:
    """``world/unsubscribe``: the subscription, ``"unsubscribed": true``."""
    return {**encode_subscription(sub), "unsubscribed": True}


@shape("result", "world/create")
def encode_created(world: WorldState) -> dict[str, Any]:
    """``world/create``: ``{"world": "village", "version": 0}``"""
    return {"world": world.id, "version": world.version}


@shape("result", "world/get")
def encode_value(world: WorldState, path: str, exists: bool, value: Any) -> dict[str, Any]:
    """``world/get``: ``{"world", "path", "value", "exists", "version"}``"""
    return {
        "world": world.id,
        "path": path,
        "value": value,
        "exists": exists,
        "version": world.version,
    }


@shape("result", "world/set")
def encode_written(world: WorldState, path: str) -> dict[str, Any]:
    """``world/set`` and ``world/merge``: ``{"world", "path", "version"}``"""
    return {"world": world.id, "path": path, "version": world.version}


@shape("result", "world/remove")
def encode_removed(world: WorldState, path: str, removed: bool, old: Any) -> dict[str, Any]:
    """``world/remove``: ``{"world", "path", "removed", "oldValue", "version"}``"""
    return {
        "world": world.id,
        "path": path,
        "removed": removed,
        "oldValue": old,
        "version": world.version,
    }


@shape("result", "world/snapshot")
def encode_snapshot(world: WorldState) -> dict[str, Any]:
    """``world/snapshot``: ``{"world", "state", "version"}``"""
    return {"world": world.id, "state": world.snapshot(), "version": world.version}


@shape("result", "world/delete")
def encode_deleted(world_id: str, ended: int) -> dict[str, Any]:
    """``world/delete``: ``{"world", "deleted": true, "endedSubscriptions"}``"""
    return {"world": world_id, "deleted": True, "endedSubscriptions": ended}


@shape("result", "world/list")
def encode_list(store: WorldStore) -> dict[str, Any]:
    """``world/list``: ``{"worlds": [{"world", "version", "npcs", "subscriptions", "createdAt"}]}``"""
    return {
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

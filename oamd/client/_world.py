"""World: a handle on one shared world document (``world/*``), made by ``Bridge.create_world``.

Paths are dot paths (``player.gold``, ``party.0.name``); ``''`` is the root. Each method is one
request; every write returns the world's new version. ``subscribe`` asks for ``world/changed``
notifications of a path and returns a ``WorldSubscription``, whose ``unsubscribe`` ends them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oamd.client._game_results import (
    Subscription,
    WorldGetResult,
    WorldRemoveResult,
    WorldSetResult,
    WorldUnsubscribeResult,
)

if TYPE_CHECKING:
    from oamd.client._bridge import Bridge

__all__ = ["World", "WorldSubscription"]


class World:
    """A JSON document NPCs read and write through their world tools, and the game through this."""

    def __init__(self, bridge: Bridge, world_id: str, version: int) -> None:
        self.bridge = bridge
        self.id = world_id
        self.created_version = version

    def __repr__(self) -> str:
        return f"World({self.id!r})"

    async def get(self, path: str = "", *, timeout: float | None = None) -> WorldGetResult:
        """The value at ``path`` (``exists`` false and ``value`` ``None`` when there is none)."""
        result = await self.bridge.client.request(
            "world/get", {"world": self.id, "path": path}, timeout=timeout
        )
        return WorldGetResult.model_validate(result)

    async def set(self, path: str, value: Any, *, timeout: float | None = None) -> WorldSetResult:
        """Sets the value at ``path`` (``None`` is a value: JSON null)."""
        params = {"world": self.id, "path": path, "value": value}
        return WorldSetResult.model_validate(
            await self.bridge.client.request("world/set", params, timeout=timeout)
        )

    async def merge(
        self, patch: Any, path: str = "", *, timeout: float | None = None
    ) -> WorldSetResult:
        """Applies an RFC 7386 merge patch at ``path``."""
        params = {"world": self.id, "path": path, "patch": patch}
        return WorldSetResult.model_validate(
            await self.bridge.client.request("world/merge", params, timeout=timeout)
        )

    async def remove(self, path: str, *, timeout: float | None = None) -> WorldRemoveResult:
        params = {"world": self.id, "path": path}
        result = await self.bridge.client.request("world/remove", params, timeout=timeout)
        return WorldRemoveResult.model_validate(result)

    async def snapshot(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The whole document."""
        result = await self.bridge.client.request(
            "world/snapshot", {"world": self.id}, timeout=timeout
        )
        return result["state"]

    async def delete(self, *, timeout: float | None = None) -> None:
        await self.bridge.client.request("world/delete", {"world": self.id}, timeout=timeout)

    async def subscribe(self, path: str = "", *, timeout: float | None = None) -> WorldSubscription:
        """Asks for a ``world/changed`` notification for every change at or under ``path``
        (``world/subscribe``).

        Raises:
            RpcError: ``world_not_found``, ``limit_reached`` (256 subscriptions).
        """
        params = {"world": self.id, "path": path}
        result = await self.bridge.client.request("world/subscribe", params, timeout=timeout)
        return WorldSubscription(self.bridge, Subscription.model_validate(result))


class WorldSubscription:
    """A subscription to the changes of one world path, made by ``World.subscribe``."""

    def __init__(self, bridge: Bridge, subscription: Subscription) -> None:
        self.bridge = bridge
        self.id = subscription.subscription
        self.world = subscription.world
        self.path = subscription.path

    def __repr__(self) -> str:
        return f"WorldSubscription({self.id!r}, world={self.world!r}, path={self.path!r})"

    async def unsubscribe(self, *, timeout: float | None = None) -> WorldUnsubscribeResult:
        """Ends the notifications (``world/unsubscribe``).

        Raises:
            RpcError: ``subscription_not_found`` (already ended, or its world deleted).
        """
        params = {"subscription": self.id}
        result = await self.bridge.client.request("world/unsubscribe", params, timeout=timeout)
        return WorldUnsubscribeResult.model_validate(result)

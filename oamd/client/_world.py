"""World: a handle on one shared world document (``world/*``), made by ``Bridge.create_world``.

Paths are dot paths (``player.gold``, ``party.0.name``); ``''`` is the root. Each method is one
request; every write returns the world's new version. ``subscribe`` asks for ``world/changed``
notifications of a path, handed to its handler as ``WorldChange`` models, and returns a
``WorldSubscription``, whose ``unsubscribe`` ends them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oamd.client._events import WorldChange, typed_handler
from oamd.client._game_results import (
    Subscription,
    WorldGetResult,
    WorldRemoveResult,
    WorldSetResult,
    WorldUnsubscribeResult,
)
from oamd.client._link import BridgeLink

__all__ = ["World", "WorldSubscription"]


class World:
    """A JSON document NPCs read and write through their world tools, and the game through this."""

    def __init__(self, bridge: BridgeLink, world_id: str, version: int) -> None:
        self.bridge = bridge
        self.id = world_id
        self.created_version = version
        self._subscriptions: list[WorldSubscription] = []
        """Made through this handle and not yet ended: ``delete`` ends them."""

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
        """Deletes the world; its subscriptions end, and their handlers are removed."""
        await self.bridge.client.request("world/delete", {"world": self.id}, timeout=timeout)
        for subscription in list(self._subscriptions):
            subscription._end()

    async def subscribe(
        self,
        path: str = "",
        handler: Callable[[WorldChange], Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> WorldSubscription:
        """Asks for a ``world/changed`` notification for every change at or under ``path``
        (``world/subscribe``); ``handler`` (plain or ``async def``) receives each as a
        ``WorldChange``, in order, until ``unsubscribe`` or ``delete``. It is registered as the
        answer is read, so no change read after it is missed.

        Raises:
            RpcError: ``world_not_found``, ``limit_reached`` (256 subscriptions).
        """
        removers: list[Callable[[], None]] = []

        def register(response: dict[str, Any]) -> None:
            result = response.get("result")
            if handler is None or not isinstance(result, dict):
                return
            sub_id = result.get("subscription")
            typed = typed_handler(handler, WorldChange, lambda c: c.subscription == sub_id)
            removers.append(self.bridge.client.on_notification("world/changed", typed))

        params = {"world": self.id, "path": path}
        try:
            result = await self.bridge.client.request(
                "world/subscribe", params, on_response=register, timeout=timeout
            )
            created = Subscription.model_validate(result)
        except BaseException:  # answered too late, or not as a subscription: no handle holds it
            for remove in removers:
                remove()
            raise
        subscription = WorldSubscription(self, created, removers[0] if removers else None)
        self._subscriptions.append(subscription)
        return subscription


class WorldSubscription:
    """A subscription to the changes of one world path, made by ``World.subscribe``."""

    def __init__(
        self,
        world: World,
        subscription: Subscription,
        remove_handler: Callable[[], None] | None = None,
    ) -> None:
        self.bridge = world.bridge
        self.id = subscription.subscription
        self.world = subscription.world
        self.path = subscription.path
        self._handle = world
        self._remove_handler = remove_handler

    def __repr__(self) -> str:
        return f"WorldSubscription({self.id!r}, world={self.world!r}, path={self.path!r})"

    async def unsubscribe(self, *, timeout: float | None = None) -> WorldUnsubscribeResult:
        """Ends the notifications (``world/unsubscribe``) and removes the handler (once the
        answer is in: the changes sent before it still reach the handler).

        Raises:
            RpcError: ``subscription_not_found`` (already ended, or its world deleted).
        """
        params = {"subscription": self.id}
        try:
            result = await self.bridge.client.request("world/unsubscribe", params, timeout=timeout)
        finally:
            self._end()
        return WorldUnsubscribeResult.model_validate(result)

    def _end(self) -> None:
        """The daemon sends no more changes for this subscription: its handler is removed."""
        if self._remove_handler is not None:
            self._remove_handler()
            self._remove_handler = None
        if self in self._handle._subscriptions:
            self._handle._subscriptions.remove(self)

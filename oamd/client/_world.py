"""World: a handle on one shared world document (``world/*``), made by ``Bridge.create_world``.

Paths are dot paths (``player.gold``, ``party.0.name``); ``''`` is the root. Each method is one
request; every write returns the world's new version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oamd.client._results import WorldGetResult, WorldRemoveResult, WorldSetResult

if TYPE_CHECKING:
    from oamd.client._bridge import Bridge

__all__ = ["World"]


class World:
    """A JSON document NPCs read and write through their world tools, and the game through this."""

    def __init__(self, bridge: Bridge, world_id: str, version: int) -> None:
        self.bridge = bridge
        self.id = world_id
        self.created_version = version

    def __repr__(self) -> str:
        return f"World({self.id!r})"

    async def get(self, path: str = "") -> WorldGetResult:
        """The value at ``path`` (``exists`` false and ``value`` ``None`` when there is none)."""
        result = await self.bridge.client.request("world/get", {"world": self.id, "path": path})
        return WorldGetResult.model_validate(result)

    async def set(self, path: str, value: Any) -> WorldSetResult:
        """Sets the value at ``path`` (``None`` is a value: JSON null)."""
        params = {"world": self.id, "path": path, "value": value}
        return WorldSetResult.model_validate(await self.bridge.client.request("world/set", params))

    async def merge(self, patch: Any, path: str = "") -> WorldSetResult:
        """Applies an RFC 7386 merge patch at ``path``."""
        params = {"world": self.id, "path": path, "patch": patch}
        return WorldSetResult.model_validate(
            await self.bridge.client.request("world/merge", params)
        )

    async def remove(self, path: str) -> WorldRemoveResult:
        params = {"world": self.id, "path": path}
        result = await self.bridge.client.request("world/remove", params)
        return WorldRemoveResult.model_validate(result)

    async def snapshot(self) -> dict[str, Any]:
        """The whole document."""
        result = await self.bridge.client.request("world/snapshot", {"world": self.id})
        return result["state"]

    async def delete(self) -> None:
        await self.bridge.client.request("world/delete", {"world": self.id})

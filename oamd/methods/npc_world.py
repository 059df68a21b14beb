"""The world as an NPC sees it: its world tools (bound to path rules) and prompt context."""

from __future__ import annotations

from typing import Any

from oamd.agent.tools import ToolDefinition, ToolOutput
from oamd.game.npc import Npc, world_tool_definitions
from oamd.game.world import (
    read_tool_description,
    read_world_tool,
    write_tool_description,
    write_world_state,
)
from oamd.methods.world import world_store

__all__ = ["game_state", "npc_world_tools", "world_store"]


def npc_world_tools(npc: Npc) -> list[ToolDefinition]:
    """``read_world_state`` / ``update_world_state`` of the NPC's world, with its path rules."""
    world = npc.world_state
    if world is None:
        return []
    readable = list(npc.options.worldReadable)
    writable = list(npc.options.worldWritable)

    async def read(args: dict[str, Any]) -> ToolOutput:
        return read_world_tool(world, args.get("path", ""), readable)

    async def write(args: dict[str, Any]) -> ToolOutput:
        return write_world_state(world, args.get("path", ""), args.get("value"), writable)

    return world_tool_definitions(
        read if readable else None,
        read_tool_description(world, readable),
        write if writable else None,
        write_tool_description(writable),
    )


def game_state(npc: Npc) -> str | None:
    """The ``worldContextPaths`` summarized for the prompt (grounding without a tool round)."""
    if npc.world_state is None or not npc.options.worldContextPaths:
        return None
    return npc.world_state.summary(list(npc.options.worldContextPaths)) or None

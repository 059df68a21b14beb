"""The tools an NPC's model sees besides the client's: memory tools and world tools.

Memory tools stage their changes in a ``MemoryDraft`` that only a successful turn commits; world
writes take effect at once (they are the game's shared state) and obey the NPC's path rules.
``npc_tools`` lists them in the order the model sees them: client tools, world tools, memory tools.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from oamd.agent.footprint import json_size
from oamd.agent.schema import compile_schema
from oamd.agent.tools import ToolDefinition, ToolOutput
from oamd.game.npc.npc import Npc
from oamd.game.npc.persona import Memory, NpcOptions, clamp_relationship
from oamd.game.npc.prompt import attitude, render_value
from oamd.game.world.document import (
    read_tool_description,
    read_world_tool,
    write_tool_description,
    write_world_state,
)

__all__ = [
    "MAX_REMEMBERED_CHARS",
    "MemoryDraft",
    "memory_tool_definitions",
    "new_draft",
    "npc_tools",
    "npc_world_tools",
    "world_tool_definitions",
]


MAX_REMEMBERED_CHARS = 300
"""Characters one remembered fact may have: a sentence or two. A small model's ``remember_fact``
stored a paragraph of junk, and each fact is sent in every later prompt."""


@dataclass
class MemoryDraft:
    """Memory changes a turn stages through its memory tools; committed by a successful turn."""

    base: Memory
    max_facts: int
    max_change: int
    facts: list[str] = field(default_factory=list)
    delta: int = 0

    @staticmethod
    def _key(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    def remember(self, fact: Any) -> ToolOutput:
        if not isinstance(fact, str):
            return ToolOutput.error(
                "Argument 'fact' of tool 'remember_fact' must be a string; got nothing."
            )
        fact = fact.strip()
        if not fact:
            return ToolOutput.error("The fact is empty.")
        if len(fact) > MAX_REMEMBERED_CHARS:
            return ToolOutput.error(
                f"The fact is too long ({len(fact)} characters, at most {MAX_REMEMBERED_CHARS}):"
                " remember one short fact."
            )
        known = {self._key(f) for f in [*self.base.facts, *self.facts]}
        if self._key(fact) in known:
            return ToolOutput.text("You already know that.")
        self.facts.append(fact)
        return ToolOutput.text("Remembered.")

    def change_relationship(self, delta: Any) -> ToolOutput:
        if isinstance(delta, bool) or not isinstance(delta, int | float) or delta != int(delta):
            return ToolOutput.error(
                "Argument 'delta' of tool 'change_relationship' must be an integer; "
                f"got {render_value(delta) if delta is not None else 'nothing'}."
            )
        limit = max(1, self.max_change)
        self.delta += max(-limit, min(limit, int(delta)))
        projected = clamp_relationship(self.base.relationship + self.delta)
        return ToolOutput.text(
            f"You now feel {attitude(projected)} toward the player ({projected})."
        )

    def committed(self) -> Memory:
        memory = self.base.copy()
        if self.facts:  # the limit applies when new facts are committed, not to given memory
            memory.facts.extend(self.facts)
            del memory.facts[: max(0, len(memory.facts) - self.max_facts)]
        memory.relationship = clamp_relationship(memory.relationship + self.delta)
        return memory

    def size_change(self, committed: Memory) -> int:
        """By how many bytes the JSON of ``committed`` (what ``committed()`` made) is longer
        than the base's: measures only the facts that came and went, not the whole memory."""
        base = self.base.facts
        dropped = len(base) + len(self.facts) - len(committed.facts)
        gone = [*base[:dropped], *self.facts[: max(0, dropped - len(base))]]
        added = sum(json_size(f) for f in self.facts) - sum(json_size(f) for f in gone)
        commas = max(0, len(committed.facts) - 1) - max(0, len(base) - 1)
        digits = len(str(committed.relationship)) - len(str(self.base.relationship))
        return added + commas + digits


def _local(name: str, description: str, schema: dict[str, Any], run: Any) -> ToolDefinition:
    return ToolDefinition(name, description, schema, compile_schema(schema, name), None, run)


def memory_tool_definitions(options: NpcOptions, draft: MemoryDraft) -> list[ToolDefinition]:
    tools = []
    if "rememberFact" in options.memory_tools:

        async def remember(args: dict[str, Any]) -> ToolOutput:
            return draft.remember(args.get("fact"))

        schema = {
            "type": "object",
            "properties": {
                "fact": {
                    "type": "string",
                    "description": "One short fact, e.g. 'The player's name is Aria.'",
                }
            },
            "required": ["fact"],
            "additionalProperties": False,
        }
        tools.append(
            _local(
                "remember_fact",
                "Remember an important fact about the player or the world for later conversations.",
                schema,
                remember,
            )
        )
    if "changeRelationship" in options.memory_tools:
        limit = max(1, options.max_relationship_change)

        async def change(args: dict[str, Any]) -> ToolOutput:
            return draft.change_relationship(args.get("delta"))

        schema = {
            "type": "object",
            "properties": {
                "reason": {
                    "type": "string",
                    "description": "Why your feelings changed, in a few words.",
                },
                "delta": {
                    "type": "integer",
                    "description": "Negative if the player upset you, positive if they pleased you.",
                    "minimum": -limit,
                    "maximum": limit,
                },
            },
            "required": ["reason", "delta"],
            "additionalProperties": False,
        }
        tools.append(
            _local(
                "change_relationship",
                "Change how much you like the player when they clearly please or offend you.",
                schema,
                change,
            )
        )
    return tools


def world_tool_definitions(
    read: Any | None, read_description: str, write: Any | None, write_description: str
) -> list[ToolDefinition]:
    tools = []
    if read is not None:
        schema = {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Dot path such as 'player.gold'. Empty string for everything you may read.",
                }
            },
            "required": ["path"],
            "additionalProperties": False,
        }
        tools.append(_local("read_world_state", read_description, schema, read))
    if write is not None:
        schema = {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Dot path to change, such as 'quests.lost_ring.status'.",
                },
                "value": {
                    "type": "string",
                    "description": 'The new value, e.g. 42, true, done, or {"a": 1}.',
                },
            },
            "required": ["path", "value"],
            "additionalProperties": False,
        }
        tools.append(_local("update_world_state", write_description, schema, write))
    return tools


def npc_tools(
    npc: Npc, draft: MemoryDraft, world_tools: list[ToolDefinition]
) -> list[ToolDefinition]:
    """Every tool the model sees, in order: client tools, world tools, memory tools."""
    return [*npc.tools, *world_tools, *memory_tool_definitions(npc.options, draft)]


def npc_world_tools(npc: Npc) -> list[ToolDefinition]:
    """``read_world_state`` / ``update_world_state`` of the NPC's world, with its path rules."""
    world = npc.world_state
    if world is None:
        return []
    readable = list(npc.options.world_readable)
    writable = list(npc.options.world_writable)

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


def new_draft(npc: Npc) -> MemoryDraft:
    """An empty draft over the NPC's committed memory, with its limits."""
    return MemoryDraft(
        npc.memory.copy(), npc.options.max_facts, npc.options.max_relationship_change
    )

"""NPCs (§6): the ``Npc`` itself (a persona, a conversation, a memory, client tools and an
optional world), the names of its tools, and the store of one connection's NPCs.

Rendering its prompt is ``npc_prompt``'s, its memory and world tools ``npc_tools``', running its
turns ``npc_turns``' and its save format ``npc_save``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oamd.agent.history import History
from oamd.agent.queue import TurnQueue
from oamd.agent.session import utc_now
from oamd.agent.store import ObjectStore
from oamd.agent.tools import ToolDefinition, parse_tools, tool_count_warning
from oamd.backends.base import LanguageModel
from oamd.errors import InvalidParams, LimitReached, NpcExists, NpcNotFound
from oamd.game.persona import (
    Memory,
    NpcOptions,
    Persona,
    merge_patch,
    parse_memory,
    parse_persona,
    patched_options,
)
from oamd.limits import MAX_NPCS

__all__ = [
    "BUILTIN_TOOLS",
    "MEMORY_TOOLS",
    "WORLD_TOOLS",
    "Npc",
    "NpcStore",
    "NpcUpdate",
    "check_tool_names",
    "prepare_update",
    "tool_names",
]

MEMORY_TOOLS = ("remember_fact", "change_relationship")
WORLD_TOOLS = ("read_world_state", "update_world_state")
BUILTIN_TOOLS = (*WORLD_TOOLS, *MEMORY_TOOLS)


@dataclass(eq=False)
class Npc:
    id: str
    persona: Persona
    options: NpcOptions
    memory: Memory
    tools: list[ToolDefinition]
    """Client tools (``tool/call`` with ``"npc"`` in the params)."""
    tool_definitions: list[Any]
    """The client tool definitions exactly as sent (saved by ``npc/state``)."""
    world: str | None
    model: LanguageModel
    model_name: str
    world_state: Any = None
    """The ``WorldState`` itself: an NPC keeps using its world after ``world/delete``."""
    history: History = field(default_factory=History)
    queue: TurnQueue = field(default_factory=TurnQueue)
    created_at: str = field(default_factory=utc_now)
    fallback_count: int = 0

    @property
    def turn_count(self) -> int:
        return self.history.turn_count

    def next_fallback_line(self) -> str:
        pool = self.options.fallback_pool
        line = pool[self.fallback_count % len(pool)]
        self.fallback_count += 1
        return line

    def secrets_visibility(self) -> str:
        """``hidden``, ``shareable`` or ``guarded`` (threshold ``null``)."""
        threshold = self.options.secretsUnlockAtRelationship
        if threshold is None:
            return "guarded"
        return "shareable" if self.memory.relationship >= threshold else "hidden"


def tool_names(options: NpcOptions, client: list[str], has_world: bool) -> list[str]:
    names = list(client)
    if has_world and options.worldReadable:
        names.append("read_world_state")
    if has_world and options.worldWritable:
        names.append("update_world_state")
    if "rememberFact" in options.memoryTools:
        names.append("remember_fact")
    if "changeRelationship" in options.memoryTools:
        names.append("change_relationship")
    return names


def check_tool_names(names: list[str], options: NpcOptions) -> None:
    """Duplicates, the grounding tool and a ``{"tool"}`` choice must fit the NPC's tools.

    Raises:
        InvalidParams: with the reference's wording.
    """
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidParams(
                f"Duplicate tool name '{name}' (built-in world and memory tools use "
                "read_world_state, update_world_state, remember_fact and change_relationship)."
            )
        seen.add(name)
    grounding = options.groundingTool
    if grounding is not None and grounding not in seen:
        raise InvalidParams(
            f"groundingTool '{grounding}' is not one of the NPC's tools: {', '.join(names)}."
        )
    if options.toolChoice.mode == "tool" and options.toolChoice.name not in seen:
        raise InvalidParams(f"toolChoice names unknown tool '{options.toolChoice.name}'.")


class NpcStore(ObjectStore[Npc]):
    """The NPCs of one connection: ids ``npc1, npc2…``, at most ``limit`` (-32055 past it)."""

    def __init__(self, limit: int = MAX_NPCS) -> None:
        super().__init__(
            "npc",
            limit,
            not_found=NpcNotFound,
            exists=NpcExists,
            full=lambda n: LimitReached(
                "NPCs", n, f"The limit of {n} NPCs is reached; delete some first."
            ),
        )

    def held_bytes(self) -> int:
        """The JSON size of every NPC's history."""
        return sum(npc.history.bytes for npc in self)


@dataclass
class NpcUpdate:
    """What ``npc/update`` changes, validated in full before anything is applied."""

    persona: Persona
    options: NpcOptions
    memory: Memory
    tools: list[ToolDefinition]
    tool_definitions: list[Any]
    warnings: list[str]

    def apply(self, npc: Npc) -> None:
        npc.persona, npc.options, npc.memory = self.persona, self.options, self.memory
        npc.tools, npc.tool_definitions = self.tools, self.tool_definitions


def prepare_update(
    npc: Npc,
    persona_patch: dict[str, Any],
    options_patch: dict[str, Any],
    memory_patch: dict[str, Any],
    tools: list[Any] | None,
    *,
    replace_tools: bool,
    engine_timeout: float,
) -> NpcUpdate:
    """``npc/update``: merge patches over the persona, options and memory (``patched_options``
    has the options' rules); ``tools`` replace the client tools when ``replace_tools``.

    Raises:
        InvalidParams: a merged field or a tool is invalid, or the tool names clash.
    """
    persona, warnings = parse_persona(merge_patch(npc.persona.to_wire(), persona_patch))
    options, option_warnings = patched_options(npc.options, options_patch, engine_timeout)
    memory = parse_memory(merge_patch(npc.memory.to_wire(), memory_patch))
    client, definitions = npc.tools, npc.tool_definitions
    if replace_tools:
        client, tool_warnings = parse_tools(tools)
        definitions = list(tools or [])
        warnings += tool_warnings
    names = tool_names(options, [t.name for t in client], npc.world is not None)
    check_tool_names(names, options)
    warnings += option_warnings + tool_count_warning(len(names))
    return NpcUpdate(persona, options, memory, client, definitions, warnings)

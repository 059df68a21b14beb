"""NPCs (§6): the ``Npc`` itself (a persona, a conversation, a memory, client tools and an
optional world), the names of its tools, and the store of one connection's NPCs.

Rendering its prompt is ``npc.prompt``'s, its memory and world tools ``npc.tools``', running its
turns ``npc.turns``' (its save format is the adapters': ``oamd.bridge.game.npc.state_params``). What an
NPC holds (``held_bytes``) is its history and its ``footprint``: persona, options, memory, client
tool definitions and model spec, measured when they are set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oamd.agent.footprint import Footprint, json_size
from oamd.agent.history import History
from oamd.agent.queue import TurnQueue
from oamd.agent.session import utc_now
from oamd.agent.small import Priors
from oamd.agent.store import ObjectStore
from oamd.agent.tools import ToolDefinition
from oamd.backends.base import LanguageModel
from oamd.errors import InvalidParams, LimitReached, NpcExists, NpcNotFound
from oamd.game.npc.persona import Memory, NpcOptions, Persona, summary_size
from oamd.limits import MAX_NPCS, MAX_TOOLS

__all__ = [
    "BUILTIN_TOOLS",
    "MEMORY_TOOLS",
    "WORLD_TOOLS",
    "Npc",
    "NpcStore",
    "NpcUpdate",
    "check_tool_names",
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
    choice_priors: Priors = field(default_factory=Priors)
    """A small model's likelihoods of closed answers after a neutral exchange, by system text
    and question (``oamd.game.npc.small_reply``); not saved, read again when needed."""
    footprint: Footprint = field(default_factory=Footprint)
    """Everything but the history, measured part by part (``set_memory``, ``NpcUpdate``)."""

    def __post_init__(self) -> None:
        # the persona, options and memory are measured by their save form, which the adapter
        # that made them writes (``oamd.bridge.game.npc.params.measure_npc``)
        self.footprint.set("tools", json_size(self.tool_definitions))

    @property
    def held_bytes(self) -> int:
        """What the NPC holds, as JSON: its footprint and its history (not its world)."""
        return self.footprint.total + self.history.bytes

    def set_memory(self, memory: Memory, growth: int) -> None:
        """Replaces the memory, whose JSON is ``growth`` bytes longer than the old one's."""
        self.memory = memory
        self.footprint.add("memory", growth)

    def set_summary(self, summary: str) -> None:
        """The memory's summary becomes ``summary`` (compaction)."""
        self.footprint.add("memory", summary_size(summary) - summary_size(self.memory.summary))
        self.memory.summary = summary

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
        threshold = self.options.secrets_unlock_at_relationship
        if threshold is None:
            return "guarded"
        return "shareable" if self.memory.relationship >= threshold else "hidden"


def tool_names(options: NpcOptions, client: list[str], has_world: bool) -> list[str]:
    names = list(client)
    if has_world and options.world_readable:
        names.append("read_world_state")
    if has_world and options.world_writable:
        names.append("update_world_state")
    if "rememberFact" in options.memory_tools:
        names.append("remember_fact")
    if "changeRelationship" in options.memory_tools:
        names.append("change_relationship")
    return names


def check_tool_names(names: list[str], options: NpcOptions) -> None:
    """The NPC's tools (``tool_names``: client, world and memory tools) must number at most
    ``MAX_TOOLS`` — each goes into every prompt — and duplicates, the grounding tool and a
    ``{"tool"}`` choice must fit them.

    Raises:
        LimitReached: more than ``MAX_TOOLS`` in all.
        InvalidParams: with the reference's wording.
    """
    if len(names) > MAX_TOOLS:
        raise LimitReached(
            "tools",
            MAX_TOOLS,
            f"The NPC would have {len(names)} tools, its built-in world and memory tools "
            f"included; an NPC takes at most {MAX_TOOLS} (and works best with a few).",
        )
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidParams(
                f"Duplicate tool name '{name}' (built-in world and memory tools use "
                "read_world_state, update_world_state, remember_fact and change_relationship)."
            )
        seen.add(name)
    grounding = options.grounding_tool
    if grounding is not None and grounding not in seen:
        raise InvalidParams(
            f"groundingTool '{grounding}' is not one of the NPC's tools: {', '.join(names)}."
        )
    if options.tool_choice.mode == "tool" and options.tool_choice.name not in seen:
        raise InvalidParams(f"toolChoice names unknown tool '{options.tool_choice.name}'.")


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

    def held_bytes(self, listed: Callable[[Any], bool]) -> int:
        """What every NPC holds, plus, once each, the worlds NPCs still hold that ``listed`` says
        are gone from their store (a deleted world lives on while an NPC uses it)."""
        total, kept = 0, {}
        for npc in self:
            total += npc.held_bytes
            world = npc.world_state
            if world is not None and not listed(world):
                kept[id(world)] = world
        return total + sum(world.bytes for world in kept.values())


@dataclass
class NpcUpdate:
    """What ``npc/update`` changes, validated in full before anything is applied."""

    persona: Persona
    options: NpcOptions
    memory: Memory
    tools: list[ToolDefinition]
    tool_definitions: list[Any]
    warnings: list[str]
    sizes: dict[str, int] = field(default_factory=dict)
    """The new sizes of the parts it changes (``Npc.footprint``)."""

    def growth(self, npc: Npc) -> int:
        """By how many bytes the NPC's footprint grows when this is applied."""
        return sum(npc.footprint.growth(part, size) for part, size in self.sizes.items())

    def apply(self, npc: Npc) -> None:
        npc.persona, npc.options, npc.memory = self.persona, self.options, self.memory
        npc.tools, npc.tool_definitions = self.tools, self.tool_definitions
        for part, size in self.sizes.items():
            npc.footprint.set(part, size)

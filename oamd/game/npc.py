"""NPCs: a persona, a conversation, a memory, client tools and an optional world (§6).

``Npc`` holds the state; ``npc_instructions`` renders the persona and memory into the system text
the reference way (recomputed each turn from the committed memory); ``npc_tools`` lists the tools
the model sees — client tools, then the local world and memory tools. Memory tools stage their
changes in a ``MemoryDraft`` committed only by a successful turn; world writes take effect at
once (they are the game's shared state).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from oamd.agent.history import History
from oamd.agent.policy import ToolPolicy
from oamd.agent.queue import TurnQueue
from oamd.agent.schema import compile_schema
from oamd.agent.session import utc_now
from oamd.agent.store import ObjectStore
from oamd.agent.tools import ToolChoice, ToolDefinition, ToolOutput
from oamd.agent.turn import TurnSettings, TurnSpec
from oamd.backends.base import LanguageModel, Sampling
from oamd.errors import InvalidParams, LimitReached, NpcExists, NpcNotFound
from oamd.game.persona import Memory, NpcOptions, Persona, clamp_relationship
from oamd.limits import MAX_NPCS

__all__ = [
    "BUILTIN_TOOLS",
    "MemoryDraft",
    "Npc",
    "NpcStore",
    "bark_spec",
    "check_tool_names",
    "memory_note",
    "npc_instructions",
    "npc_tools",
    "persona_instructions",
    "persona_lines",
    "render_value",
    "sentence",
    "text_list",
]

MEMORY_TOOLS = ("remember_fact", "change_relationship")
WORLD_TOOLS = ("read_world_state", "update_world_state")
BUILTIN_TOOLS = (*WORLD_TOOLS, *MEMORY_TOOLS)


def render_value(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?\"'" else text + "."


def text_list(items: tuple[str, ...] | list[str]) -> str | None:
    cleaned = [i.strip().removesuffix(".") for i in items if i.strip()]
    return sentence("; ".join(cleaned)) if cleaned else None


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


def persona_lines(persona: Persona) -> list[str]:
    lines = []
    for label, value in (
        ("Personality", persona.personality),
        ("Speaking style", persona.speakingStyle),
        ("Background", persona.backstory),
    ):
        if value.strip():
            lines.append(f"{label}: {sentence(value)}")
    for label, items in (("Goals", persona.goals), ("You know", persona.knowledge)):
        text = text_list(items)
        if text:
            lines.append(f"{label}: {text}")
    return lines


def persona_instructions(
    persona: Persona, *, extra: str | None, uses_tools: bool, secrets: str, max_sentences: int
) -> str:
    who = f"{persona.name}, {persona.role}" if persona.role.strip() else persona.name
    lines = [f"You play {who}, a character in a video game.", *persona_lines(persona)]
    secret_text = text_list(persona.secrets)
    if secret_text and secrets != "hidden":
        lines.append(f"Your secret: {secret_text}")
    n = max(1, max_sentences)
    lines.append("Rules:")
    lines.append(
        f"- Speak only as {persona.name}. Never say you are an AI, a model or an assistant."
    )
    lines.append(f"- Reply in at most {n} short sentence{'s' if n != 1 else ''}.")
    if uses_tools:
        lines.append(
            "- Use your tools to check facts about the world, such as items, prices, people and "
            "places. Never invent them."
        )
        lines.append(
            "- When a tool gives you facts, say the specific ones the player asked about "
            "(names, prices, numbers)."
        )
    else:
        lines.append(
            "- If you do not know a fact about the world, say so in character. Never invent it."
        )
    if secret_text and secrets == "guarded":
        lines.append("- Keep your secret unless the player has truly earned your trust.")
    elif secret_text and secrets == "shareable":
        lines.append("- The player has earned your trust. You may share your secret if asked.")
    if extra and extra.strip():
        lines.append(extra.strip())
    return "\n".join(lines)


def attitude(relationship: int) -> str:
    if relationship < -60:
        return "hostile"
    if relationship < -20:
        return "unfriendly"
    if relationship <= 20:
        return "neutral"
    if relationship <= 60:
        return "friendly"
    return "trusting"


def memory_note(memory: Memory, shows_feelings: bool) -> str | None:
    lines = []
    if shows_feelings or memory.relationship != 0:
        lines.append(
            f"- You feel {attitude(memory.relationship)} toward the player "
            f"({memory.relationship} on a scale from -100 to 100)."
        )
    facts = text_list(memory.facts)
    if facts:
        lines.append(f"- You remember: {facts}")
    if memory.summary and memory.summary.strip():
        lines.append(f"- Earlier conversation: {memory.summary.strip()}")
    return "Memory:\n" + "\n".join(lines) if lines else None


def npc_instructions(npc: Npc, tool_names: list[str]) -> str:
    """The system text of a dialogue turn: persona, rules, tool hints, then the memory note."""
    o = npc.options
    extra = []
    if o.extraInstructions and o.extraInstructions.strip():
        extra.append(o.extraInstructions.strip())
    if "remember_fact" in tool_names:
        extra.append("- When the player tells you something worth remembering, call remember_fact.")
    if "change_relationship" in tool_names:
        extra.append("- When the player clearly pleases or offends you, call change_relationship.")
    if o.replyFormat == "text":
        extra.append(
            "- Begin every reply with your current emotion in square brackets, such as [happy] or "
            "[angry]."
        )
    text = persona_instructions(
        npc.persona,
        extra="\n".join(extra),
        uses_tools=any(name not in MEMORY_TOOLS for name in tool_names),
        secrets=npc.secrets_visibility(),
        max_sentences=npc.persona.maxSentences,
    )
    note = memory_note(npc.memory, "changeRelationship" in o.memoryTools)
    return f"{text}\n\n{note}" if note else text


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


def _local(name: str, description: str, schema: dict[str, Any], run: Any) -> ToolDefinition:
    return ToolDefinition(name, description, schema, compile_schema(schema, name), None, run)


def memory_tool_definitions(options: NpcOptions, draft: MemoryDraft) -> list[ToolDefinition]:
    tools = []
    if "rememberFact" in options.memoryTools:

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
    if "changeRelationship" in options.memoryTools:
        limit = max(1, options.maxRelationshipChange)

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


def bark_spec(npc: Npc, game_state: str | None, situation: Any) -> TurnSpec:
    """A one-off ambient line: no history, memory or tools, at most ``barkMaximumTokens``."""
    instructions = persona_instructions(
        npc.persona,
        extra=npc.options.extraInstructions,
        uses_tools=False,
        secrets="hidden",
        max_sentences=1,
    )
    text = render_value(situation).strip() if situation is not None else ""
    prompt = f"Game state:\n{game_state}\n" if game_state else ""
    prompt += f"Situation: {text or 'An ordinary moment.'}\nPlayer: (The player says nothing.)"
    return TurnSpec(
        model=npc.model,
        instructions=instructions,
        tools=[],
        policy=ToolPolicy(choice=ToolChoice("none"), max_rounds=0),
        prompt=prompt,
        settings=TurnSettings(
            sampling=Sampling(
                temperature=npc.options.temperature, max_tokens=npc.options.barkMaximumTokens
            )
        ),
    )


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


__all__ += ["attitude", "memory_tool_definitions", "tool_names", "world_tool_definitions"]

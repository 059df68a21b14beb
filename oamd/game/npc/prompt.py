"""What an NPC's model reads: the persona, rules and memory rendered into system text.

``npc_instructions`` renders the reference's way, recomputed each turn from the committed memory;
``persona_instructions`` also serves barks and decisions (``actor``); ``game_state`` is the
``world_context_paths`` summary that grounds a line without a tool round.
"""

from __future__ import annotations

import re
from typing import Any

from oamd.game.npc.npc import MEMORY_TOOLS, Npc
from oamd.game.npc.persona import Memory, Persona
from oamd.jsonvalue import dumps_text

__all__ = [
    "attitude",
    "game_state",
    "memory_note",
    "npc_instructions",
    "persona_instructions",
    "persona_lines",
    "render_value",
    "sentence",
    "small_model_instructions",
    "text_list",
    "told_facts",
    "world_sentence",
]


def render_value(value: Any) -> str:
    return value if isinstance(value, str) else dumps_text(value)


def sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?\"'" else text + "."


def text_list(items: tuple[str, ...] | list[str]) -> str | None:
    cleaned = [i.strip().removesuffix(".") for i in items if i.strip()]
    return sentence("; ".join(cleaned)) if cleaned else None


def persona_lines(persona: Persona) -> list[str]:
    lines = []
    for label, value in (
        ("Personality", persona.personality),
        ("Speaking style", persona.speaking_style),
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
    if o.extra_instructions and o.extra_instructions.strip():
        extra.append(o.extra_instructions.strip())
    if "remember_fact" in tool_names:
        extra.append("- When the player tells you something worth remembering, call remember_fact.")
    if "change_relationship" in tool_names:
        extra.append("- When the player clearly pleases or offends you, call change_relationship.")
    if o.reply_format == "text":
        extra.append(
            "- Begin every reply with your current emotion in square brackets, such as [happy] or "
            "[angry]."
        )
    text = persona_instructions(
        npc.persona,
        extra="\n".join(extra),
        uses_tools=any(name not in MEMORY_TOOLS for name in tool_names),
        secrets=npc.secrets_visibility(),
        max_sentences=npc.persona.max_sentences,
    )
    note = memory_note(npc.memory, "changeRelationship" in o.memory_tools)
    return f"{text}\n\n{note}" if note else text


def game_state(npc: Npc) -> str | None:
    """The ``world_context_paths`` summarized for the prompt (grounding without a tool round)."""
    if npc.world_state is None or not npc.options.world_context_paths:
        return None
    return npc.world_state.summary(list(npc.options.world_context_paths)) or None


def small_model_instructions(npc: Npc, *, shares_secrets: bool = True) -> str:
    """The system text of a small model's NPC turns: who the NPC is, as a few plain sentences in
    the second person (a small model copies labels and rule lists into its lines). A bark
    (``shares_secrets=False``) is said to whoever is near: no secret, however earned.

    What the NPC knows is not here: the facts that bear on a line are placed right before it
    (``told_facts``, ``grounding.relevant_facts``), where a small model reads them; a list of
    every fact it was told it mostly ignores, or recites. Nor is a guarded secret: a model of a
    few hundred million parameters does not keep what it reads, so it reads only what it may
    say (a secret once the player earned it).
    """
    p, o, memory = npc.persona, npc.options, npc.memory
    role = p.role.strip()
    parts = [f"You are {p.name}, {role.removesuffix('.')}." if role else f"You are {p.name}."]
    parts += [
        sentence(text) for text in (p.personality, p.speaking_style, p.backstory) if text.strip()
    ]
    goals = text_list(p.goals)
    if goals:
        parts.append(f"You want: {goals}")
    secret = text_list(p.secrets)
    if secret and shares_secrets and npc.secrets_visibility() == "shareable":
        parts.append(f"Your secret: {secret} The player has earned your trust; you may share it.")
    if "changeRelationship" in o.memory_tools or memory.relationship != 0:
        parts.append(f"You feel {attitude(memory.relationship)} toward the player.")
    if memory.summary and memory.summary.strip():
        parts.append(f"Earlier: {sentence(memory.summary)}")
    if o.extra_instructions and o.extra_instructions.strip():
        parts.append(o.extra_instructions.strip())
    # no rule about length or voice: the chat roles make the voice, and a reply stops at its
    # ``max_sentences``-th sentence while it decodes (every step sends this text again)
    return " ".join(parts)


_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def world_sentence(line: str) -> str:
    """A ``path: value`` line of the world summary in plain words: ``river.lastCrossingToday:
    at dusk`` → ``river last crossing today: at dusk``."""
    path, sep, value = line.partition(":")
    if not sep:
        return line.strip()
    words = " ".join(_CAMEL.sub(" ", part).lower() for part in re.split(r"[./\[\]]+", path) if part)
    return f"{words}: {value.strip()}"


def told_facts(npc: Npc) -> list[str]:
    """Everything the NPC was told that a line may draw on, one fact a line: its knowledge, its
    memory facts and the world values it reads (``world_context_paths``)."""
    facts = [*npc.persona.knowledge, *npc.memory.facts]
    state = game_state(npc)
    if state:
        facts += [world_sentence(line) for line in state.splitlines() if line.strip()]
    return [fact.strip() for fact in facts if fact.strip()]

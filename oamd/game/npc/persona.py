"""An NPC's persona, options and memory (§6) as typed values, with their defaults.

Reading them from params, writing their save form and the ``npc/update`` merge rules are the
adapters' (``oamd.bridge.game.npc.params``, which maps each wire key to its field here); the fields
of ``Persona`` and ``NpcOptions`` stand in the order a save lists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from oamd.agent.footprint import json_size
from oamd.agent.tools import ToolChoice
from oamd.limits import DEFAULT_TOOL_TIMEOUT_SECONDS

__all__ = [
    "DEFAULT_FALLBACK_LINES",
    "DEFAULT_SECRETS_THRESHOLD",
    "EMOTIONS",
    "MAX_PLAYER_OPTIONS",
    "Memory",
    "NpcOptions",
    "Persona",
    "clamp_relationship",
    "match_emotion",
    "summary_size",
]

EMOTIONS = (
    "neutral",
    "happy",
    "sad",
    "angry",
    "afraid",
    "surprised",
    "suspicious",
    "amused",
    "disgusted",
    "excited",
    "curious",
    "confused",
    "worried",
    "grateful",
    "annoyed",
    "proud",
)

_SYNONYMS = {
    "neutral": "calm content indifferent bored",
    "happy": "joyful glad cheerful pleased friendly warm",
    "sad": "unhappy sorrowful melancholy grieving",
    "angry": "mad furious enraged hostile",
    "afraid": "scared fearful frightened terrified",
    "worried": "nervous anxious concerned",
    "surprised": "shocked astonished startled",
    "suspicious": "wary distrustful skeptical sceptical",
    "amused": "amusement playful laughing",
    "disgusted": "disgust revolted",
    "excited": "eager thrilled enthusiastic",
    "curious": "interested intrigued",
    "confused": "puzzled uncertain",
    "grateful": "thankful",
    "annoyed": "irritated grumpy impatient gruff",
    "proud": "confident smug",
}
_BY_WORD = {word: emotion for emotion, words in _SYNONYMS.items() for word in words.split()}
_NON_LETTERS = re.compile(r"^[^a-z]+|[^a-z]+$")


def match_emotion(raw: Any) -> str | None:
    """An emotion name, leniently: case and surrounding punctuation ignored, synonyms mapped."""
    if not isinstance(raw, str):
        return None
    word = _NON_LETTERS.sub("", raw.strip().lower())
    if word in EMOTIONS:
        return word
    return _BY_WORD.get(word)


DEFAULT_FALLBACK_LINES = (
    "Let's talk about something else.",
    "I'd rather not speak of that.",
    "Hmm. Ask me something else.",
)
MAX_PLAYER_OPTIONS = 4
MIN_RELATIONSHIP, MAX_RELATIONSHIP = -100, 100
DEFAULT_SECRETS_THRESHOLD = 50
"""The relationship at which an NPC may share its secrets, unless its options say otherwise."""


@dataclass(frozen=True)
class Persona:
    name: str
    role: str = ""
    personality: str = ""
    speaking_style: str = ""
    backstory: str = ""
    goals: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    knowledge: tuple[str, ...] = ()
    default_emotion: str = "neutral"
    max_sentences: int = 2


@dataclass(frozen=True)
class NpcOptions:
    """Every NPC option with its default, in the order saves list them."""

    tool_choice: ToolChoice = ToolChoice("explicit")
    grounding_tool: str | None = None
    max_tool_rounds: int = 2
    max_tool_calls: int = 6
    world_readable: tuple[str, ...] = ("",)
    world_writable: tuple[str, ...] = ()
    world_context_paths: tuple[str, ...] = ()
    memory_tools: tuple[str, ...] = ()
    max_facts: int = 12
    max_relationship_change: int = 10
    secrets_unlock_at_relationship: int | None = DEFAULT_SECRETS_THRESHOLD
    reply_format: str = "automatic"
    emotions: tuple[str, ...] = EMOTIONS
    player_option_count: int = 3
    can_end_conversation: bool = True
    extra_instructions: str | None = None
    compact_after_turns: int = 8
    keep_recent_turns: int = 2
    fallback_on_guardrail: bool = True
    fallback_lines: tuple[str, ...] = ()
    temperature: float | None = None
    maximum_response_tokens: int | None = None
    bark_maximum_tokens: int = 48
    tool_timeout_seconds: float = DEFAULT_TOOL_TIMEOUT_SECONDS

    @property
    def fallback_pool(self) -> tuple[str, ...]:
        lines = tuple(line.strip() for line in self.fallback_lines if line.strip())
        return lines or DEFAULT_FALLBACK_LINES


@dataclass
class Memory:
    facts: list[str] = field(default_factory=list)
    relationship: int = 0
    summary: str | None = None

    def copy(self) -> Memory:
        return Memory(list(self.facts), self.relationship, self.summary)


def summary_size(summary: str | None) -> int:
    """What a memory's ``summary`` adds to its JSON (``,"summary":…``; nothing when unset)."""
    return 0 if summary is None else len(',"summary":') + json_size(summary)


def clamp_relationship(value: float) -> int:
    return int(max(MIN_RELATIONSHIP, min(MAX_RELATIONSHIP, round(value))))

"""An NPC's persona, options and memory: parsing with defaults (§6), encoding for saves, and
the ``npc/update`` rules (RFC 7386 merge patches, through the tree's one merge in ``_paths``).

Parsing is all-or-nothing: each ``parse_*`` returns a new value or raises ``InvalidParams`` naming
the field (``persona.goals``), and reports unknown fields as warnings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Any

from oamd.agent.footprint import json_size
from oamd.agent.params import Params
from oamd.agent.tools import ToolChoice, parse_tool_choice
from oamd.errors import InvalidParams
from oamd.game._paths import merging
from oamd.limits import DEFAULT_TOOL_TIMEOUT_SECONDS

__all__ = [
    "DEFAULT_FALLBACK_LINES",
    "DEFAULT_SECRETS_THRESHOLD",
    "EMOTIONS",
    "Memory",
    "NpcOptions",
    "Persona",
    "match_emotion",
    "merge_patch",
    "parse_memory",
    "parse_npc_options",
    "parse_persona",
    "patched_options",
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
    speakingStyle: str = ""
    backstory: str = ""
    goals: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    knowledge: tuple[str, ...] = ()
    defaultEmotion: str = "neutral"
    maxSentences: int = 2

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


_PERSONA_KEYS = tuple(f.name for f in fields(Persona))


def parse_persona(value: Any, path: str = "persona") -> tuple[Persona, list[str]]:
    if value is None:
        raise InvalidParams(f"Missing required parameter '{path}'.")
    if not isinstance(value, dict):
        raise InvalidParams(f"Parameter '{path}' must be an object.")
    p = Params(value, path)
    warnings = p.unknown(_PERSONA_KEYS)
    name = p.string("name")
    if not name.strip():
        raise InvalidParams(f"'{p.path('name')}' must not be empty.")
    kwargs: dict[str, Any] = {"name": name}
    for key in ("role", "personality", "speakingStyle", "backstory"):
        kwargs[key] = p.opt_string(key, "")
    for key in ("goals", "secrets", "knowledge"):
        if p.has(key) and not isinstance(p.get(key), list):
            raise InvalidParams(f"Parameter '{p.path(key)}' must be an array.")
        kwargs[key] = tuple(p.opt_strings(key) or ())
    kwargs["defaultEmotion"] = match_emotion(p.get("defaultEmotion")) or "neutral"
    kwargs["maxSentences"] = p.opt_int("maxSentences", 2)
    return Persona(**kwargs), warnings


@dataclass(frozen=True)
class NpcOptions:
    """Every NPC option with its default, in the order saves list them."""

    toolChoice: ToolChoice = ToolChoice("explicit")
    groundingTool: str | None = None
    maxToolRounds: int = 2
    maxToolCalls: int = 6
    worldReadable: tuple[str, ...] = ("",)
    worldWritable: tuple[str, ...] = ()
    worldContextPaths: tuple[str, ...] = ()
    memoryTools: tuple[str, ...] = ()
    maxFacts: int = 12
    maxRelationshipChange: int = 10
    secretsUnlockAtRelationship: int | None = DEFAULT_SECRETS_THRESHOLD
    replyFormat: str = "automatic"
    emotions: tuple[str, ...] = EMOTIONS
    playerOptionCount: int = 3
    canEndConversation: bool = True
    extraInstructions: str | None = None
    compactAfterTurns: int = 8
    keepRecentTurns: int = 2
    fallbackOnGuardrail: bool = True
    fallbackLines: tuple[str, ...] = ()
    temperature: float | None = None
    maximumResponseTokens: int | None = None
    barkMaximumTokens: int = 48
    toolTimeoutSeconds: float = DEFAULT_TOOL_TIMEOUT_SECONDS

    @property
    def fallback_pool(self) -> tuple[str, ...]:
        lines = tuple(line.strip() for line in self.fallbackLines if line.strip())
        return lines or DEFAULT_FALLBACK_LINES

    def to_wire(self) -> dict[str, Any]:
        """The save form: ``None`` optionals left out (an unset secrets threshold is ``null``)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, ToolChoice):
                value = value.to_wire()
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, float) and value.is_integer():
                value = int(value)  # 120, not 120.0, as the reference writes seconds
            out[f.name] = value
        if self.secretsUnlockAtRelationship is None:
            timeout = out.pop("toolTimeoutSeconds")
            out["secretsUnlockAtRelationship"] = None
            out["toolTimeoutSeconds"] = timeout
        return out


_OPTION_NAMES = tuple(f.name for f in fields(NpcOptions))
_MEMORY_TOOL_NAMES = {"rememberfact": "rememberFact", "changerelationship": "changeRelationship"}


def _memory_tools(value: Any, path: str) -> tuple[str, ...]:
    if value == "all":
        return ("rememberFact", "changeRelationship")
    if value == "none":
        return ()
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        return tuple(
            n for bit, n in ((1, "rememberFact"), (2, "changeRelationship")) if value & bit
        )
    if not isinstance(value, list):
        raise InvalidParams(
            f'\'{path}\' must be a list of memory tools, "all" or "none"; got {value!r}.'
        )
    out: list[str] = []
    for item in value:
        key = item.lower().replace("_", "") if isinstance(item, str) else None
        name = _MEMORY_TOOL_NAMES.get(key or "")
        if name is None:
            raise InvalidParams(
                f'\'{path}\' contains unknown memory tool "{item}"; known: "rememberFact", '
                '"changeRelationship".'
            )
        if name not in out:
            out.append(name)
    return tuple(n for n in ("rememberFact", "changeRelationship") if n in out)


def _tuple(p: Params, key: str) -> tuple[str, ...] | None:
    items = p.opt_strings(key)
    return None if items is None else tuple(items)


def parse_npc_options(
    value: Any, base: NpcOptions = NpcOptions(), path: str = "options"
) -> tuple[NpcOptions, list[str]]:
    """``options`` of ``npc/create`` over ``base``."""
    if value is None:
        return base, []
    if not isinstance(value, dict):
        raise InvalidParams(f"Parameter '{path}' must be an object.")
    p = Params(value, path)
    warnings = p.unknown(_OPTION_NAMES)
    changes: dict[str, Any] = {}
    fmt = p.opt_string("replyFormat")
    if fmt is not None:
        if fmt not in ("automatic", "structured", "text"):
            raise InvalidParams(
                f'\'{p.path("replyFormat")}\' must be one of "automatic", "structured", '
                f"\"text\"; got '{fmt}'."
            )
        changes["replyFormat"] = fmt
    if p.has("groundingTool"):
        changes["groundingTool"] = p.opt_string("groundingTool")
    choice = parse_tool_choice(p.get("toolChoice"), p.path("toolChoice"))
    if choice is not None:
        changes["toolChoice"] = choice
    for key in (
        "maxToolRounds",
        "maxToolCalls",
        "maxFacts",
        "maxRelationshipChange",
        "compactAfterTurns",
        "keepRecentTurns",
    ):
        number = p.opt_int(key, minimum=0)
        if number is not None:
            changes[key] = number
    for key in ("barkMaximumTokens", "maximumResponseTokens"):
        number = p.opt_int(key, minimum=1)
        if number is not None:
            changes[key] = number
    count = p.opt_int("playerOptionCount")
    if count is not None:
        if not 0 <= count <= MAX_PLAYER_OPTIONS:
            raise InvalidParams(f"'{p.path('playerOptionCount')}' must be between 0 and 4.")
        changes["playerOptionCount"] = count
    timeout = p.opt_seconds("toolTimeoutSeconds")
    if timeout is not None:
        changes["toolTimeoutSeconds"] = timeout
    for key in ("worldReadable", "worldWritable", "worldContextPaths", "fallbackLines"):
        items = _tuple(p, key)
        if items is not None:
            changes[key] = items
    if p.has("memoryTools"):
        changes["memoryTools"] = _memory_tools(p.get("memoryTools"), p.path("memoryTools"))
    if "secretsUnlockAtRelationship" in value:
        changes["secretsUnlockAtRelationship"] = p.opt_int("secretsUnlockAtRelationship")
    emotions = _tuple(p, "emotions")
    if emotions is not None:
        picked = []
        for i, raw in enumerate(emotions):
            emotion = match_emotion(raw)
            if emotion is None:
                raise InvalidParams(
                    f"'{p.path('emotions')}[{i}]' must be one of: {', '.join(EMOTIONS)}; got '{raw}'."
                )
            if emotion not in picked:
                picked.append(emotion)
        changes["emotions"] = tuple(picked) or EMOTIONS
    for key in ("canEndConversation", "fallbackOnGuardrail"):
        flag = p.opt_bool(key)
        if flag is not None:
            changes[key] = flag
    if p.has("extraInstructions"):
        changes["extraInstructions"] = p.opt_string("extraInstructions")
    temperature = p.opt_number("temperature", minimum=0)
    if temperature is not None:
        changes["temperature"] = temperature
    return replace(base, **changes), warnings


@dataclass
class Memory:
    facts: list[str] = field(default_factory=list)
    relationship: int = 0
    summary: str | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"facts": list(self.facts), "relationship": self.relationship}
        if self.summary is not None:
            out["summary"] = self.summary
        return out

    def copy(self) -> Memory:
        return Memory(list(self.facts), self.relationship, self.summary)


def summary_size(summary: str | None) -> int:
    """What a memory's ``summary`` adds to its JSON (``,"summary":…``; nothing when unset)."""
    return 0 if summary is None else len(',"summary":') + json_size(summary)


def clamp_relationship(value: float) -> int:
    return int(max(MIN_RELATIONSHIP, min(MAX_RELATIONSHIP, round(value))))


def parse_memory(value: Any, path: str = "memory") -> Memory:
    if value is None:
        return Memory()
    if not isinstance(value, dict):
        raise InvalidParams(f"Parameter '{path}' must be an object.")
    p = Params(value, path)
    facts = p.opt_strings("facts") or []
    relationship = p.opt_number("relationship", 0.0) or 0.0
    return Memory(list(facts), clamp_relationship(relationship), p.opt_string("summary"))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    return merging(patch, target, (), [])


def patched_options(
    options: NpcOptions, patch: dict[str, Any], engine_timeout: float
) -> tuple[NpcOptions, list[str]]:
    """``npc/update``'s ``options``: ``patch`` merged over the NPC's options; a field the patch
    deletes (``null``) returns to its default, ``toolTimeoutSeconds`` to the engine's.

    Raises:
        InvalidParams: a merged field is invalid, named as ``options.<field>``.
    """
    merged = merge_patch(options.to_wire(), patch)
    if "toolTimeoutSeconds" in patch and patch["toolTimeoutSeconds"] is None:
        merged["toolTimeoutSeconds"] = engine_timeout
    updated, warnings = parse_npc_options(merged)
    if "secretsUnlockAtRelationship" not in merged:
        updated = replace(updated, secretsUnlockAtRelationship=DEFAULT_SECRETS_THRESHOLD)
    return updated, warnings


__all__ += ["clamp_relationship", "summary_size"]

"""``npc/*`` params: persona, options and memory read with their defaults (§6), their save form,
and the ``npc/update`` rules (RFC 7386 merge patches, through the tree's one merge in
``oamd.game.world.paths``).

Parsing is all-or-nothing: each ``parse_*`` returns a new value or raises ``InvalidParams`` naming
the field (``persona.goals``), and reports unknown fields as warnings.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from oamd.agent.footprint import json_size
from oamd.agent.tools import ToolChoice
from oamd.bridge.params import Params
from oamd.bridge.tool_params import (
    choice_to_wire,
    parse_tool_choice,
    parse_tools,
    tool_count_warning,
)
from oamd.errors import InvalidParams
from oamd.game.npc.npc import Npc, NpcUpdate, check_tool_names, tool_names
from oamd.game.npc.persona import (
    DEFAULT_SECRETS_THRESHOLD,
    EMOTIONS,
    MAX_PLAYER_OPTIONS,
    Memory,
    NpcOptions,
    Persona,
    clamp_relationship,
    match_emotion,
)
from oamd.game.world.paths import merging

__all__ = [
    "OPTION_FIELDS",
    "PERSONA_FIELDS",
    "measure_npc",
    "memory_to_wire",
    "merge_patch",
    "options_to_wire",
    "parse_memory",
    "parse_npc_options",
    "parse_persona",
    "patched_options",
    "persona_to_wire",
    "read_update",
]

PERSONA_FIELDS = (
    ("name", "name"),
    ("role", "role"),
    ("personality", "personality"),
    ("speakingStyle", "speaking_style"),
    ("backstory", "backstory"),
    ("goals", "goals"),
    ("secrets", "secrets"),
    ("knowledge", "knowledge"),
    ("defaultEmotion", "default_emotion"),
    ("maxSentences", "max_sentences"),
)
"""Each persona key of the wire and the ``Persona`` field it sets, in the order a save lists them."""
_PERSONA_KEYS = tuple(key for key, _ in PERSONA_FIELDS)
_PERSONA_FIELD = dict(PERSONA_FIELDS)


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
    return Persona(**{_PERSONA_FIELD[key]: value for key, value in kwargs.items()}), warnings


def persona_to_wire(persona: Persona) -> dict[str, Any]:
    """The persona as saved (``npc/state``) and as ``npc/update`` merges over."""
    out: dict[str, Any] = {}
    for key, name in PERSONA_FIELDS:
        value = getattr(persona, name)
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


OPTION_FIELDS = (
    ("toolChoice", "tool_choice"),
    ("groundingTool", "grounding_tool"),
    ("maxToolRounds", "max_tool_rounds"),
    ("maxToolCalls", "max_tool_calls"),
    ("worldReadable", "world_readable"),
    ("worldWritable", "world_writable"),
    ("worldContextPaths", "world_context_paths"),
    ("memoryTools", "memory_tools"),
    ("maxFacts", "max_facts"),
    ("maxRelationshipChange", "max_relationship_change"),
    ("secretsUnlockAtRelationship", "secrets_unlock_at_relationship"),
    ("replyFormat", "reply_format"),
    ("emotions", "emotions"),
    ("playerOptionCount", "player_option_count"),
    ("canEndConversation", "can_end_conversation"),
    ("extraInstructions", "extra_instructions"),
    ("compactAfterTurns", "compact_after_turns"),
    ("keepRecentTurns", "keep_recent_turns"),
    ("fallbackOnGuardrail", "fallback_on_guardrail"),
    ("fallbackLines", "fallback_lines"),
    ("temperature", "temperature"),
    ("maximumResponseTokens", "maximum_response_tokens"),
    ("barkMaximumTokens", "bark_maximum_tokens"),
    ("toolTimeoutSeconds", "tool_timeout_seconds"),
)
"""Each NPC option key of the wire and the ``NpcOptions`` field it sets, in the order a save
lists them (the reference's)."""
_OPTION_NAMES = tuple(key for key, _ in OPTION_FIELDS)
_OPTION_FIELD = dict(OPTION_FIELDS)
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
    return replace(base, **{_OPTION_FIELD[key]: value for key, value in changes.items()}), warnings


def options_to_wire(options: NpcOptions) -> dict[str, Any]:
    """The save form: ``None`` optionals left out (an unset secrets threshold is ``null``)."""
    out: dict[str, Any] = {}
    for key, name in OPTION_FIELDS:
        value = getattr(options, name)
        if value is None:
            continue
        if isinstance(value, ToolChoice):
            value = choice_to_wire(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, float) and value.is_integer():
            value = int(value)  # 120, not 120.0, as the reference writes seconds
        out[key] = value
    if options.secrets_unlock_at_relationship is None:
        timeout = out.pop("toolTimeoutSeconds")
        out["secretsUnlockAtRelationship"] = None
        out["toolTimeoutSeconds"] = timeout
    return out


def parse_memory(value: Any, path: str = "memory") -> Memory:
    if value is None:
        return Memory()
    if not isinstance(value, dict):
        raise InvalidParams(f"Parameter '{path}' must be an object.")
    p = Params(value, path)
    facts = p.opt_strings("facts") or []
    relationship = p.opt_number("relationship", 0.0) or 0.0
    return Memory(list(facts), clamp_relationship(relationship), p.opt_string("summary"))


def memory_to_wire(memory: Memory) -> dict[str, Any]:
    out: dict[str, Any] = {"facts": list(memory.facts), "relationship": memory.relationship}
    if memory.summary is not None:
        out["summary"] = memory.summary
    return out


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
    merged = merge_patch(options_to_wire(options), patch)
    if "toolTimeoutSeconds" in patch and patch["toolTimeoutSeconds"] is None:
        merged["toolTimeoutSeconds"] = engine_timeout
    updated, warnings = parse_npc_options(merged)
    if "secretsUnlockAtRelationship" not in merged:
        updated = replace(updated, secrets_unlock_at_relationship=DEFAULT_SECRETS_THRESHOLD)
    return updated, warnings


def measure_npc(npc: Npc) -> None:
    """Sets the footprint parts of what the NPC was made with: its persona, options and memory
    as their save forms measure (its tools and model are measured as given)."""
    npc.footprint.set("persona", json_size(persona_to_wire(npc.persona)))
    npc.footprint.set("options", json_size(options_to_wire(npc.options)))
    npc.footprint.set("memory", json_size(memory_to_wire(npc.memory)))


def read_update(
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
    persona, warnings = parse_persona(merge_patch(persona_to_wire(npc.persona), persona_patch))
    options, option_warnings = patched_options(npc.options, options_patch, engine_timeout)
    memory = parse_memory(merge_patch(memory_to_wire(npc.memory), memory_patch))
    client, definitions = npc.tools, npc.tool_definitions
    if replace_tools:
        client, tool_warnings = parse_tools(tools)
        definitions = list(tools or [])
        warnings += tool_warnings
    names = tool_names(options, [t.name for t in client], npc.world is not None)
    check_tool_names(names, options)
    warnings += option_warnings + tool_count_warning(len(names))
    sizes: dict[str, int] = {}  # only the parts the update touches are measured again
    if persona_patch:
        sizes["persona"] = json_size(persona_to_wire(persona))
    if options_patch:
        sizes["options"] = json_size(options_to_wire(options))
    if memory_patch:
        sizes["memory"] = json_size(memory_to_wire(memory))
    if replace_tools:
        sizes["tools"] = json_size(definitions)
    return NpcUpdate(persona, options, memory, client, definitions, warnings, sizes)

"""The envelope parser: what a text-only model meant by its answer to a decide or arguments step.

It owns reading an answer as ``Respond``, ``Call(tool, candidates)`` or ``Invalid(problem)``
(wrappers, action and argument key synonyms, tool names matched ignoring case and separators,
respond synonyms, a bare action word), the argument candidates of a toolArguments answer, choosing
the first candidate ``CompiledSchema.accept`` takes, and the canonical encoder.
It never raises on model output; the JSON reading itself is ``oamd.agent.json_reader``'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from oamd.agent.json_reader import first_value, json_candidates
from oamd.agent.schema import CompiledSchema
from oamd.agent.tools import RESPOND_ACTION
from oamd.jsonvalue import dumps_text

__all__ = [
    "NOT_AN_OBJECT",
    "Call",
    "Invalid",
    "Respond",
    "argument_candidates",
    "call_key",
    "choose_arguments",
    "encode_envelope",
    "join_problems",
    "parse_envelope",
]

RESPOND = RESPOND_ACTION
NOT_AN_OBJECT = "the answer was not a JSON object"
_NO_ACTION = 'the JSON object has no "action"'

_MAX_UNWRAPS = 3
_MAX_BARE_WORD_CHARS = 64
_MAX_PROBLEMS_SHOWN = 4

_WRAPPER_KEYS = frozenset(
    [
        "toolcall",
        "functioncall",
        "step",
        "decision",
        "nextstep",
        "envelope",
        "call",
        "action",
        "toolcalls",
    ]
)
_ACTION_KEYS = (
    "action",
    "tool",
    "toolname",
    "name",
    "function",
    "functionname",
    "call",
    "nextaction",
    "next",
    "step",
    "command",
    "use",
    "choice",
    "decision",
    "tooltouse",
    "selectedtool",
)
"""In priority order, compared in key form (``tool_name`` and ``Tool-Name`` are ``toolname``)."""
_ARGUMENT_KEYS = frozenset(
    (
        "arguments",
        "args",
        "parameters",
        "params",
        "input",
        "inputs",
        "toolinput",
        "actioninput",
        "argument",
        "toolarguments",
        "toolargs",
        "functionarguments",
    )
)
_META_KEYS = frozenset(
    [
        "reason",
        "reasoning",
        "thought",
        "thoughts",
        "explanation",
        "why",
        "rationale",
        "comment",
        "note",
        "type",
    ]
)
_RESPOND_WORDS = frozenset(
    (
        "respond",
        "respond_directly",
        "reply",
        "answer",
        "final",
        "final_answer",
        "none",
        "no_tool",
        "talk",
        "say",
        "speak",
        "chat",
        "response",
        "direct_response",
        "respond_to_user",
        "reply_to_user",
        "finish",
        "done",
        "no_action",
        "nothing",
        "direct_reply",
        "reply_directly",
        "answer_directly",
    )
)
_NAME_PREFIXES = ("functions.", "tools.", "tool:")
_SURROUNDING = "`\"'. *"
_BARE_WORD_TRIM = "`\"'. *\n\r\t"
_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SEPARATORS = re.compile(r"[\s_\-]+")
_NOT_KEY_CHARS = re.compile(r"[^a-z0-9]")


@dataclass(frozen=True, slots=True)
class Respond:
    """The model chose to reply without a tool."""


@dataclass(frozen=True, slots=True)
class Invalid:
    problem: str
    """Quoted to the model in the repair note."""


@dataclass(frozen=True, slots=True)
class Call:
    tool: str
    candidates: tuple[dict[str, Any], ...]
    """Argument objects to try in order; the first that validates after coercion wins."""


Decision = Respond | Invalid | Call


def _word_form(name: str) -> str:
    return _WORD_SEPARATORS.sub("_", _HUMP.sub("_", name).lower()).strip("_")


def _key_form(name: str) -> str:
    return _NOT_KEY_CHARS.sub("", name.lower())


_RESPOND_KEYS = frozenset(_key_form(w) for w in _RESPOND_WORDS)


def _clean(name: str) -> str:
    name = name.strip().strip(_SURROUNDING)
    if name.endswith("()"):
        name = name[:-2]
    lowered = name.lower()
    for prefix in _NAME_PREFIXES:
        if lowered.startswith(prefix):
            name = name[len(prefix) :]
            break
    return name.strip()


def _resolve(name: str, tools: Sequence[str]) -> str | None:
    """The tool ``name`` means, ``RESPOND``, or ``None``. A tool always wins over a respond word."""
    stripped = name.strip().strip(_SURROUNDING)
    cleaned = _clean(name)
    for candidate in (name, stripped, cleaned):
        if candidate in tools:
            return candidate
    word = _word_form(cleaned)
    for tool in tools:
        if _word_form(tool) == word:
            return tool
    key = _key_form(cleaned)
    for tool in tools:
        if key and _key_form(tool) == key:
            return tool
    if word in _RESPOND_WORDS or key in _RESPOND_KEYS:
        return RESPOND
    return None


def _respond_or_refusal(allow_respond: bool, tools: Sequence[str]) -> Decision:
    if allow_respond:
        return Respond()
    return Invalid(
        f'"respond" is not allowed now; you must call one of the tools: {", ".join(tools)}'
    )


def _as_object(value: Any) -> dict[str, Any] | None:
    """An argument value as an object: objects as they are, JSON inside strings, null as {}."""
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        found = first_value(value)
        return found if isinstance(found, dict) else None
    return None  # arrays and numbers cannot be arguments


def _first_argument_field(obj: dict[str, Any], skip: str | None = None) -> dict[str, Any] | None:
    for key, value in obj.items():
        if key != skip and _key_form(key) in _ARGUMENT_KEYS:
            return _as_object(value)
    return None


def _dedupe(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    out: list[dict[str, Any]] = []
    for obj in objects:
        if obj not in out:
            out.append(obj)
    return tuple(out)


def _unwrap(obj: dict[str, Any]) -> dict[str, Any]:
    for _ in range(_MAX_UNWRAPS):
        if len(obj) != 1:
            break
        ((key, value),) = obj.items()
        if _key_form(key) not in _WRAPPER_KEYS:
            break
        if isinstance(value, dict):
            obj = value
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            obj = value[0]
        else:
            break
    return obj


def _action_name(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        for key in ("name", "tool"):
            if isinstance(value.get(key), str):
                return value[key]
    return None


def _candidates(envelope: dict[str, Any], action_key: str, action: Any) -> tuple[dict, ...]:
    found: list[dict[str, Any]] = []
    if isinstance(action, dict) and (inner := _first_argument_field(action)) is not None:
        found.append(inner)
    if (outer := _first_argument_field(envelope, skip=action_key)) is not None:
        found.append(outer)
    rest = {
        k: v
        for k, v in envelope.items()
        if k != action_key and _key_form(k) not in _ARGUMENT_KEYS and k.lower() not in _META_KEYS
    }
    if rest:
        found.append(rest)
    return _dedupe(found or [{}])


def _interpret(envelope: dict[str, Any], tools: Sequence[str], allow_respond: bool) -> Decision:
    by_key_form: dict[str, str] = {}
    for key in envelope:
        by_key_form.setdefault(_key_form(key), key)
    first_seen: str | None = None
    for action_key in _ACTION_KEYS:
        key = by_key_form.get(action_key)
        if key is None:
            continue
        value = envelope[key]
        name = _action_name(value)
        if first_seen is None:
            first_seen = name if name is not None else dumps_text(value)
        target = _resolve(name, tools) if name is not None else None
        if target == RESPOND:
            return _respond_or_refusal(allow_respond, tools)
        if target is not None:
            return Call(target, _candidates(envelope, key, value))
    if len(envelope) == 1:  # {"take_order": {...}} or {"respond": "Welcome!"}
        ((key, value),) = envelope.items()
        target = _resolve(key, tools)
        if target == RESPOND:
            return _respond_or_refusal(allow_respond, tools)
        if target is not None:
            return Call(target, (_as_object(value) or {},))
    if first_seen is None:
        return Invalid(_NO_ACTION)
    offered = [*tools, RESPOND] if allow_respond else list(tools)
    return Invalid(f'"{first_seen}" is not an available action; use one of: {", ".join(offered)}')


def _bare_word(raw: str, tools: Sequence[str], allow_respond: bool) -> Decision:
    word = json_candidates(raw)[0].strip(_BARE_WORD_TRIM)
    if word and len(word) <= _MAX_BARE_WORD_CHARS and "\n" not in word:
        target = _resolve(word, tools)
        if target == RESPOND:
            return _respond_or_refusal(allow_respond, tools)
        if target is not None:
            return Call(target, ({},))
    return Invalid(NOT_AN_OBJECT)


def parse_envelope(raw: str, tools: Sequence[str], allow_respond: bool) -> Decision:
    """Reads a decide step's answer against the offered tool names."""
    found = first_value(raw)
    if not isinstance(found, dict):
        return _bare_word(raw, tools, allow_respond)
    return _interpret(_unwrap(found), tools, allow_respond)


def argument_candidates(found: dict[str, Any], tool: str) -> tuple[dict[str, Any], ...]:
    """A toolArguments answer's objects to try: the object itself, then the arguments of it read
    as an envelope for ``tool``, then its first argument-key field."""
    out = [found]
    decision = _interpret(_unwrap(found), [tool], allow_respond=False)
    if isinstance(decision, Call):
        out.extend(decision.candidates)
    if (inner := _first_argument_field(found)) is not None:
        out.append(inner)
    return _dedupe(out)


def join_problems(problems: Sequence[str]) -> str:
    """The first few violations joined with ``; ``, then how many more there are."""
    shown = "; ".join(problems[:_MAX_PROBLEMS_SHOWN])
    hidden = len(problems) - _MAX_PROBLEMS_SHOWN
    return f"{shown}; and {hidden} more" if hidden > 0 else shown


def choose_arguments(
    tool: str, schema: CompiledSchema, candidates: Sequence[dict[str, Any]]
) -> tuple[dict[str, Any], str | None]:
    """The first candidate valid after coercion, keys in schema order, and ``None``; or, when none
    is valid, the first candidate coerced and the problem to quote in the repair."""
    first: tuple[Any, list[str]] | None = None
    for candidate in candidates:
        accepted, problems = schema.accept(candidate)
        if not problems:
            return accepted, None
        if first is None:
            first = (accepted, problems)
    assert first is not None, "there is always at least one candidate"
    coerced, problems = first
    arguments = coerced if isinstance(coerced, dict) else {}
    return arguments, f"the arguments for {tool} are invalid: {join_problems(problems)}"


def call_key(tool: str, arguments: dict[str, Any]) -> bytes:
    """Identity of a call for the dedupe rule: key order ignored, ``2`` and ``2.0`` distinct."""
    return orjson.dumps([tool, arguments], option=orjson.OPT_SORT_KEYS)


def encode_envelope(action: str, arguments: dict[str, Any] | None = None) -> str:
    """The canonical envelope: ``{"action":"take_order","arguments":{"item":"stew"}}``."""
    return dumps_text({"action": action, "arguments": arguments or {}})

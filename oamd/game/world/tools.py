"""What the NPC world tools tell the model: lenient paths, readable and writable prefixes, shortened
values, and values fitted to the type already stored.

Pure functions of a document snapshot; ``oamd.game.world`` applies the writes they plan. Every
mistake becomes an error output that names what would have worked, so the model can retry.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from oamd.agent.tools import ToolOutput
from oamd.game.world.paths import (
    ABSENT,
    PathError,
    Segments,
    compact,
    parse_path,
    render,
    setting,
    type_name,
    value_at,
    within,
)
from oamd.jsonvalue import JsonTextError, loads_embedded

__all__ = [
    "MIN_READ_LIMIT",
    "PlannedWrite",
    "coerce",
    "parse_prefixes",
    "plan_write",
    "read_for_model",
    "read_tool_description",
    "resolve_case",
    "shortened",
    "write_done",
    "write_tool_description",
]

MIN_READ_LIMIT = 100
"""Smallest output limit the read tool accepts; smaller limits are raised to it."""

_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT_LIMIT = 1e15


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    """A write the tool decided on: ``value`` at ``path``; ``old`` is what was there (or ABSENT)."""

    path: Segments
    value: Any
    old: Any


def parse_prefixes(prefixes: list[str]) -> list[Segments]:
    """The valid prefixes, parsed; malformed ones are dropped (they could match nothing)."""
    out = []
    for prefix in prefixes:
        try:
            out.append(parse_path(prefix))
        except PathError:
            continue
    return out


def resolve_case(path: Segments, root: Any) -> Segments:
    """``path`` with each key that has no exact match replaced by the first key of the document
    that matches it case-insensitively (small models capitalise keys)."""
    current = root
    resolved: list[str] = []
    for offset, segment in enumerate(path):
        if isinstance(current, list):
            value = value_at(current, (segment,))
            if value is ABSENT:
                return (*resolved, *path[offset:])
            current = value
            resolved.append(segment)
            continue
        if not isinstance(current, dict):
            return (*resolved, *path[offset:])
        if segment in current:
            current = current[segment]
            resolved.append(segment)
            continue
        folded = segment.casefold()
        key = next((k for k in current if k.casefold() == folded), None)
        if key is None:
            return (*resolved, *path[offset:])
        current = current[key]
        resolved.append(key)
    return tuple(resolved)


def _shown_paths(paths: list[Segments]) -> str:
    return ", ".join(render(p) if p else "(everything)" for p in paths)


def read_tool_description(root: Any, readable: list[Segments]) -> str:
    """The read tool's description: the top-level keys (first 12) or the readable paths."""
    text = "Read the current game state (JSON). Use it to check facts before you answer."
    if any(p == () for p in readable):
        keys = list(root)[:12] if isinstance(root, dict) else []
        if keys:
            text += f" Top-level keys: {', '.join(keys)}."
    else:
        text += f" Readable paths: {', '.join(render(p) for p in readable)}."
    return text


def write_tool_description(writable: list[Segments]) -> str:
    """The write tool's description, listing the writable paths (the root as "(everything)")."""
    return f"Change a value in the game state. Writable paths: {_shown_paths(writable)}."


def read_for_model(root: Any, raw: Any, readable: list[Segments], limit: int) -> ToolOutput:
    """``read_world_state``: the value at ``raw`` within ``readable``, shortened past ``limit``."""
    limit = max(limit, MIN_READ_LIMIT)
    try:
        requested = parse_path(raw if isinstance(raw, str) else "")
    except PathError as exc:
        return ToolOutput.error(exc.message)
    path = resolve_case(requested, root)
    if any(within(path, prefix) for prefix in readable):
        value = value_at(root, path)
        if value is ABSENT:
            return ToolOutput.error(_missing(path, root))
        return ToolOutput.json(shortened(value, limit))
    visible = [prefix for prefix in readable if within(prefix, path)]
    if not visible:
        return ToolOutput.error(
            f"You cannot read '{render(path)}'. Readable paths: "
            f"{', '.join(render(p) for p in readable)}."
        )
    return ToolOutput.json(shortened(_filtered(root, visible, path), limit))


def plan_write(
    root: Any, raw: Any, value: Any, writable: list[Segments]
) -> PlannedWrite | ToolOutput:
    """``update_world_state``: the write to apply, or the error output explaining the refusal."""
    if not isinstance(raw, str):
        return ToolOutput.error("'path' must be a dot path such as 'player.gold'.")
    try:
        requested = parse_path(raw)
    except PathError as exc:
        return ToolOutput.error(exc.message)
    path = resolve_case(requested, root)
    if not any(within(path, prefix) for prefix in writable):
        return ToolOutput.error(
            f"'{render(path)}' is read-only. You may change: {_shown_paths(writable)}."
        )
    current = value_at(root, path)
    ok, fitted = coerce(value, current)
    if not ok:
        return ToolOutput.error(f"Cannot set '{render(path)}': {fitted}")
    return PlannedWrite(path, fitted, current)


def write_done(write: PlannedWrite) -> ToolOutput:
    """``Set player.gold to 45 (was 60).`` (the ``was`` part only when a value existed)."""
    text = f"Set {render(write.path)} to {compact(write.value)}"
    return ToolOutput.text(
        text + (f" (was {compact(write.old)})." if write.old is not ABSENT else ".")
    )


def _parse_json(text: str) -> Any:
    try:
        return loads_embedded(text)
    except JsonTextError:
        return ABSENT


def _number(text: str) -> int | float | None:
    cleaned = text.strip().replace(",", "")
    if not _NUMBER.fullmatch(cleaned):
        return None
    number = float(cleaned)
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and abs(number) < _INT_LIMIT else number


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def coerce(value: Any, current: Any) -> tuple[bool, Any]:
    """``(True, value fitted to the stored type)`` or ``(False, the reason)``. Models send most
    values as strings: ``"42"`` into a number becomes ``42``, ``"yes"`` into a boolean ``true``."""
    if current is ABSENT or current is None:
        if isinstance(value, str):
            parsed = _parse_json(value.strip())
            return True, value if parsed is ABSENT else parsed
        return True, value
    if isinstance(current, str):
        if isinstance(value, str):
            trimmed = value.strip()
            if len(trimmed) >= 2 and trimmed[0] == '"' and trimmed[-1] == '"':
                inner = _parse_json(trimmed)
                if isinstance(inner, str):
                    return True, inner
            return True, value
        if isinstance(value, bool | int | float):
            return True, compact(value)
        return False, "it holds a string; send text."
    if isinstance(current, bool):
        if isinstance(value, bool):
            return True, value
        text = value.strip().lower() if isinstance(value, str) else compact(value)
        if text in ("true", "yes", "1"):
            return True, True
        if text in ("false", "no", "0"):
            return True, False
        shown = f"'{value}'" if isinstance(value, str) else compact(value)
        return False, f"it holds true or false; got {shown}."
    if _is_number(current):
        if _is_number(value):
            return True, value
        number = _number(value) if isinstance(value, str) else None
        if number is None:
            shown = f"'{value}'" if isinstance(value, str) else compact(value)
            return False, f"it holds a number; {shown} is not a number."
        return True, number
    # a list or an object
    parsed = _parse_json(value.strip()) if isinstance(value, str) else value
    if isinstance(parsed, list | dict):
        return True, parsed
    return False, f"it holds {type_name(current)}; send valid JSON."


def _missing(path: Segments, root: Any) -> str:
    shown = render(path)
    for cut in range(len(path) - 1, -1, -1):
        ancestor = path[:cut]
        value = value_at(root, ancestor)
        if value is ABSENT:
            continue
        name = "The state" if not ancestor else f"'{render(ancestor)}'"
        if isinstance(value, dict):
            keys = ", ".join(list(value)[:20])
            return f"No value at '{shown}'. {name} has keys: {keys}."
        if isinstance(value, list):
            return (
                f"No value at '{shown}'. {name} is a list of {len(value)} items "
                f"(indices 0...{max(0, len(value) - 1)})."
            )
        return f"No value at '{shown}'. {name} is {type_name(value)}: {compact(value)}."
    return f"No value at '{shown}'."


def _filtered(root: Any, prefixes: list[Segments], base: Segments) -> Any:
    """Only the subtrees under ``prefixes``, rebuilt relative to ``base``."""
    result: Any = {}
    for prefix in prefixes:
        value = value_at(root, prefix)
        if value is ABSENT:
            continue
        relative = prefix[len(base) :]
        if not relative:
            return value
        try:
            result = setting(value, relative, result, relative)
        except PathError:
            continue
    return result


def shortened(value: Any, limit: int) -> Any:
    """``value``, or a key listing of it when its compact JSON is longer than ``limit``."""
    if len(compact(value)) <= limit:
        return value
    if isinstance(value, dict):
        preview: dict[str, Any] = {}
        for key, child in value.items():
            if isinstance(child, dict):
                preview[key] = f"{{object with {len(child)} keys}}"
            elif isinstance(child, list):
                preview[key] = f"[list of {len(child)} items]"
            elif isinstance(child, str) and len(child) > 80:
                preview[key] = child[:77] + "..."
            else:
                preview[key] = child
        preview["_note"] = "Shortened. Read a narrower path for details."
        return preview
    if isinstance(value, list):
        kept = []
        used = 2
        for item in value:
            size = len(compact(item)) + 1
            if used + size > limit:
                break
            kept.append(item)
            used += size
        return {"items": kept, "_note": f"Showing {len(kept)} of {len(value)} items."}
    if isinstance(value, str):
        return value[:limit] + "..."
    return value

"""Bounded copies of what the inspector shows: texts cut to a length, JSON values cut to a size.

Everything the inspector keeps or sends passes through here, so recording a turn or answering a
page costs at most a fixed amount however large a prompt, a tool output or a world is. A cut
says what it left out (``…`` entries, ``cut`` counts), so the page never passes a part for the
whole.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PREVIEW_NODES", "WORLD_NODES", "clip", "preview"]

PREVIEW_NODES = 400
"""Values (objects, arrays, scalars) copied of a tool's arguments or output, or a world change."""

WORLD_NODES = 4000
"""…of a world's whole tree, for its page."""

PREVIEW_STRING_CHARS = 1000
"""Characters kept of each string inside a previewed value."""

PREVIEW_DEPTH = 16
"""Nesting kept; deeper values show as ``"…"``."""

MORE = "…"
"""The key (in an object) or the item (in an array) that says how many entries were left out."""


def clip(text: str, limit: int) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters, and how many were cut."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def preview(value: Any, nodes: int = PREVIEW_NODES) -> Any:
    """A JSON value like ``value`` with at most ``nodes`` values in it: an object or array past
    the budget ends with a ``…`` entry counting what was left out; long strings are cut."""
    budget = [nodes]
    return _copy(value, budget, 0)


def _copy(value: Any, budget: list[int], depth: int) -> Any:
    budget[0] -= 1
    if isinstance(value, str):
        return value if len(value) <= PREVIEW_STRING_CHARS else value[:PREVIEW_STRING_CHARS] + MORE
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth >= PREVIEW_DEPTH:
        return MORE
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for n, (key, item) in enumerate(value.items()):
            if budget[0] <= 0:
                out[MORE] = f"{len(value) - n} more"
                break
            out[str(key)] = _copy(item, budget, depth + 1)
        return out
    if isinstance(value, list | tuple):
        items: list[Any] = []
        for n, item in enumerate(value):
            if budget[0] <= 0:
                items.append(f"{MORE} {len(value) - n} more")
                break
            items.append(_copy(item, budget, depth + 1))
        return items
    return repr(value)[:PREVIEW_STRING_CHARS]

"""World paths and pure operations on JSON documents: parse, read, write, remove, merge.

Nothing here mutates a container it is given: every write copies the containers along its path
and shares the rest, so a document handed out earlier stays a valid snapshot and a failed write
leaves the original untouched (``WorldState`` builds its atomicity on that). Errors are
``PathError``; ``WorldState`` turns them into ``WorldError`` naming its world. The ``*_growth``
functions say by how many bytes a write changes a document's compact JSON, exactly, serialising
only the values written and replaced (never the document), so a world's size is kept change by
change.
"""

from __future__ import annotations

import re
from typing import Any

from oamd.jsonvalue import dumps, dumps_text

__all__ = [
    "ABSENT",
    "MAX_DEPTH",
    "Leaf",
    "PathError",
    "Segments",
    "compact",
    "depth_of",
    "index_of",
    "merge_growth",
    "merging",
    "overlaps",
    "parse_path",
    "remove_growth",
    "removing",
    "render",
    "same",
    "set_growth",
    "setting",
    "type_name",
    "value_at",
    "within",
]

Segments = tuple[str, ...]

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()
"""No value at a path (distinct from a JSON ``null``, which is ``None``)."""

MAX_DEPTH = 128
"""Deepest nesting a world document may reach (path plus value); deeper writes fail with
``world_error``, so every stored value can still be encoded on the wire."""

_INDEX = re.compile(r"[0-9]+")


class PathError(Exception):
    """A path that cannot be parsed or written; ``path`` is the path the error names."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


def parse_path(text: str) -> Segments:
    """Segments of a dot path. ``party[0].name``, ``player/gold`` and a leading ``$.`` are accepted
    (small models write them); ``""``, ``$``, ``/`` and ``.`` are the root.

    Raises:
        PathError: an empty segment (``player..gold``, ``player.``).
    """
    stripped = text.strip()
    work = "" if stripped in ("$", "/", ".") else stripped
    if work.startswith("$."):
        work = work[2:]
    if work.startswith("/"):
        work = work[1:]
    if not work:
        return ()
    parts = work.replace("[", ".").replace("]", "").replace("/", ".").split(".")
    if parts[0] == "" and stripped.startswith("["):
        parts = parts[1:]  # "[0].x" names index 0 of the root
    if not parts or any(p == "" for p in parts):
        raise PathError(
            f"'{text}' is not a valid path. Use dot-separated keys such as 'player.gold'.", text
        )
    return tuple(parts)


def render(segments: Segments) -> str:
    """The canonical dot form (``""`` for the root)."""
    return ".".join(segments)


def within(path: Segments, prefix: Segments) -> bool:
    """Whether ``path`` equals ``prefix`` or lies inside it."""
    return path[: len(prefix)] == prefix


def overlaps(a: Segments, b: Segments) -> bool:
    """Whether one path contains the other (a change at one concerns a watcher of the other)."""
    return within(a, b) or within(b, a)


def index_of(segment: str) -> int | None:
    return int(segment) if _INDEX.fullmatch(segment) else None


def value_at(root: Any, segments: Segments) -> Any:
    """The value at ``segments``, or ``ABSENT`` (missing key, bad index, or through a scalar)."""
    current = root
    for segment in segments:
        if isinstance(current, dict):
            current = current.get(segment, ABSENT)
            if current is ABSENT:
                return ABSENT
        elif isinstance(current, list):
            index = index_of(segment)
            if index is None or index >= len(current):
                return ABSENT
            current = current[index]
        else:
            return ABSENT
    return current


def setting(value: Any, segments: Segments, container: Any, full: Segments, done: int = 0) -> Any:
    """``container`` with ``value`` written at ``segments``; missing (or ``null``) containers on
    the way become objects, and index ``n`` of an ``n``-element list appends.

    Raises:
        PathError: a bad list index, or a scalar in the way.
    """
    if done == len(segments):
        return value
    key = segments[done]
    if container is ABSENT or container is None:
        return {key: setting(value, segments, ABSENT, full, done + 1)}
    if isinstance(container, dict):
        out = dict(container)
        out[key] = setting(value, segments, container.get(key, ABSENT), full, done + 1)
        return out
    prefix = render(full[: len(full) - len(segments) + done])
    if isinstance(container, list):
        index = index_of(key)
        count = len(container)
        if index is None or index > count:
            raise PathError(
                f"'{prefix}' is a list of {count} items; '{key}' is not a valid index "
                f"(use 0...{count}, where {count} appends).",
                render(full),
            )
        out_list = list(container)
        if index == count:
            out_list.append(setting(value, segments, ABSENT, full, done + 1))
        else:
            out_list[index] = setting(value, segments, container[index], full, done + 1)
        return out_list
    raise PathError(
        f"Cannot write '{render(full)}': '{prefix}' is {type_name(container)}, "
        "not an object or list.",
        render(full),
    )


def removing(segments: Segments, container: Any) -> tuple[Any, Any]:
    """``(container without the value at segments, the removed value or ABSENT)``; removing a
    list element shifts the ones after it. Never fails: a missing path removes nothing."""
    if not segments:
        return container, ABSENT
    key, rest = segments[0], segments[1:]
    if isinstance(container, dict):
        if key not in container:
            return container, ABSENT
        if not rest:
            out = dict(container)
            return out, out.pop(key)
        child, removed = removing(rest, container[key])
        if removed is ABSENT:
            return container, ABSENT
        return {**container, key: child}, removed
    if isinstance(container, list):
        index = index_of(key)
        if index is None or index >= len(container):
            return container, ABSENT
        if not rest:
            return container[:index] + container[index + 1 :], container[index]
        child, removed = removing(rest, container[index])
        if removed is ABSENT:
            return container, ABSENT
        out_list = list(container)
        out_list[index] = child
        return out_list, removed
    return container, ABSENT


Leaf = tuple[Segments, Any, Any]
"""A changed leaf: ``(path, old or ABSENT, new or ABSENT)``."""

_MERGE_DEPTH = 64
"""Below this many levels a patch object replaces its target whole (as the reference does)."""


def merging(patch: Any, target: Any, path: Segments, changes: list[Leaf], depth: int = 0) -> Any:
    """RFC 7386: ``target`` (or ``ABSENT``) merged with ``patch``; appends one change per changed
    leaf to ``changes``, in patch order. A non-object target is replaced, as one change. The
    tree's one merge patch: ``world/merge`` reports the changes, ``npc/update`` ignores them."""
    if not isinstance(patch, dict) or depth >= _MERGE_DEPTH:
        if target is ABSENT or not same(target, patch):
            changes.append((path, target, patch))
        return patch
    if not isinstance(target, dict):
        merged = merging(patch, {}, path, [], depth + 1)
        changes.append((path, target, merged))
        return merged
    out = dict(target)
    for key, value in patch.items():
        child = (*path, key)
        if value is None:
            if key in out:
                changes.append((child, out.pop(key), ABSENT))
        else:
            out[key] = merging(value, out.get(key, ABSENT), child, changes, depth + 1)
    return out


def set_growth(root: dict[str, Any], segments: Segments, value: Any) -> int:
    """By how many bytes ``setting(value, segments, root)`` grows the JSON of ``root`` (negative:
    shrinks), every object it creates on the way included (``a.b.c`` on a world without ``a``
    adds ``"a":{"b":{"c":value}}``). For a write ``setting`` accepted, at a non-root path."""
    container: Any = root
    last = len(segments) - 1
    for done, key in enumerate(segments):
        if isinstance(container, dict):
            if key not in container:
                return _comma(container) + _size(key) + 1 + _nested(segments[done + 1 :], value)
            child = container[key]
        elif isinstance(container, list):
            index = index_of(key)
            if index is None or index >= len(container):  # index n of n elements appends
                return _comma(container) + _nested(segments[done + 1 :], value)
            child = container[index]
        else:  # a null on the way becomes an object
            return _nested(segments[done:], value) - _size(container)
        if done == last:
            return _size(value) - _size(child)
        container = child
    raise ValueError("set_growth needs a path below the root")


def merge_growth(patch: Any, target: Any, merged: Any, depth: int = 0) -> int:
    """By how many bytes ``merged`` (``merging(patch, target, …)`` of an existing ``target``) is
    longer than ``target`` as JSON; walks the patch, not the target."""
    if not isinstance(patch, dict) or depth >= _MERGE_DEPTH or not isinstance(target, dict):
        return 0 if merged is target else _size(merged) - _size(target)
    growth, members = 0, len(target)
    for key, value in patch.items():
        if value is None:
            if key in target:
                members -= 1
                growth -= _size(key) + 1 + _size(target[key]) + (1 if members else 0)
        elif key in target:
            growth += merge_growth(value, target[key], merged[key], depth + 1)
        else:
            growth += (1 if members else 0) + _size(key) + 1 + _size(merged[key])
            members += 1
    return growth


def remove_growth(root: dict[str, Any], segments: Segments, removed: Any) -> int:
    """By how many bytes (a negative number) removing ``removed``, found at ``segments`` (not the
    root), shrinks the JSON of ``root``: the value, its key and a comma when it had neighbours."""
    parent = value_at(root, segments[:-1])
    key = _size(segments[-1]) + 1 if isinstance(parent, dict) else 0
    return -(key + _size(removed) + (1 if len(parent) > 1 else 0))


def _size(value: Any) -> int:
    return len(dumps(value))


def _comma(container: dict[str, Any] | list[Any]) -> int:
    """The comma a new member or element needs when the container already has one."""
    return 1 if container else 0


def _nested(segments: Segments, value: Any) -> int:
    """Size of ``value`` wrapped in one new object per segment: ``{"k":…}`` adds the key and 3."""
    return _size(value) + sum(_size(key) + 3 for key in segments)


def same(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``true != 1``; object key order does not matter."""
    if a is b:
        return True
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def depth_of(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value (a scalar is 0), counted up to ``limit + 1``."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            level += 1
            if level > deepest:
                deepest = level
                if deepest > limit:
                    return deepest
            stack.extend(
                (child, level) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def type_name(value: Any) -> str:
    """``"a number"``, ``"a list"``… as error messages name a value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def compact(value: Any) -> str:
    """Compact JSON text of a value."""
    return dumps_text(value)

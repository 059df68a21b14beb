"""Value side of the schema engine: checks, repairs and orders JSON values against a generation schema.

It owns the three things done to a model's output once the schema is compiled: ``validate_value``
(problems as ``"$.a.b[0]: message"``, short enough for a repair prompt), ``coerce_value`` (near-miss
repairs that never raise) and ``order_value`` (keys in schema order). It works only on generation
schemas built by ``oamd.agent.schema`` (closed objects, ``x-order``, references as ``#`` or
``#/$defs/<name>``); compiling, warnings and errors are left to that module.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from oamd.jsonvalue import JsonTextError, loads_embedded

__all__ = ["coerce_value", "order_value", "validate_value"]

_MAX_VALUE_DEPTH = 64
"""Deepest value level checked, repaired or ordered; deeper levels are left as they are."""

_MAX_REF_HOPS = 16
"""A chain of references longer than this resolves to the last schema reached."""

_PREVIEW_CHARS = 60
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SEPARATORS = re.compile(r"[\s_\-]+")
_INTEGER_TEXT = re.compile(r"[-+]?\d+")
_NUMBER_TEXT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


def _is_integer(v: Any) -> bool:
    if isinstance(v, int):
        return not isinstance(v, bool)
    return isinstance(v, float) and v.is_integer()


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


_TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _types(schema: dict) -> list[str]:
    t = schema.get("type")
    if t is None:
        return []
    return [t] if isinstance(t, str) else t


def _resolve(schema: dict, root: dict) -> dict:
    for _ in range(_MAX_REF_HOPS):
        ref = schema.get("$ref")
        if ref is None:
            return schema
        schema = root if ref == "#" else root.get("$defs", {}).get(ref[len("#/$defs/") :], {})
    return schema


def _type_accepts(value: Any, schema: dict, root: dict) -> bool:
    """Whether the value's JSON type is one the schema allows at its top level."""
    schema = _resolve(schema, root)
    branches = schema.get("anyOf")
    if branches is not None:
        return any(_type_accepts(value, b, root) for b in branches)
    types = _types(schema)
    return not types or any(_TYPE_CHECKS[t](value) for t in types)


def _type_names(schema: dict, root: dict, out: list[str]) -> list[str]:
    schema = _resolve(schema, root)
    for branch in schema.get("anyOf", ()):
        _type_names(branch, root, out)
    for t in _types(schema):
        if _TYPE_NAMES[t] not in out:
            out.append(_TYPE_NAMES[t])
    return out


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _preview(value: Any) -> str:
    text = _json(value)
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 3] + "…"


def _got(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({_json(value)})"
    if isinstance(value, str):
        return f"a string ({_preview(value)})"
    if isinstance(value, int | float):
        return f"a number ({_preview(value)})"
    return "an array" if isinstance(value, list) else "an object"


def _child_path(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f"{path}[{_json(key)}]"


def validate_value(value: Any, schema: dict, root: dict) -> list[str]:
    """Returns the problems of ``value`` against ``schema`` as ``"<path>: <message>"``; [] when valid."""
    check = _Check(root)
    check.value(value, schema, "$", 0)
    return check.problems


class _Check:
    """One validation walk: the schema references resolve against (``root``), and the problems
    found so far, in the order met."""

    __slots__ = ("problems", "root")

    def __init__(self, root: dict) -> None:
        self.root = root
        self.problems: list[str] = []

    def value(self, v: Any, s: dict, path: str, depth: int) -> None:
        if depth > _MAX_VALUE_DEPTH:
            return
        out, root = self.problems, self.root
        if "$ref" in s:
            s = _resolve(s, root)
        if s.get("anyOf") is not None:
            self._branches(v, s, path, depth)
            return
        types = _types(s)
        if types and not any(_TYPE_CHECKS[t](v) for t in types):
            expected = " or ".join(_TYPE_NAMES[t] for t in types)
            out.append(f"{path}: expected {expected}, got {_got(v)}")
            return
        if "enum" in s and v not in s["enum"]:
            out.append(f"{path}: must be one of {_json(s['enum'])}; got {_preview(v)}")
        if "const" in s and v != s["const"]:
            out.append(f"{path}: must be exactly {_json(s['const'])}; got {_preview(v)}")
        if isinstance(v, dict):
            self._object(v, s, path, depth)
        elif isinstance(v, list):
            self._array(v, s, path, depth)
        elif _is_number(v):
            low, high = s.get("minimum"), s.get("maximum")
            if low is not None and v < low:
                out.append(f"{path}: must be at least {_json(low)}; got {_preview(v)}")
            if high is not None and v > high:
                out.append(f"{path}: must be at most {_json(high)}; got {_preview(v)}")

    def _object(self, v: dict, s: dict, path: str, depth: int) -> None:
        out = self.problems
        props = s.get("properties", {})
        for name in s.get("required", ()):
            if name not in v:
                out.append(f"{path}: missing required property {_json(name)}")
        closed = s.get("additionalProperties") is False
        for key, item in v.items():
            sub = props.get(key)
            if sub is not None:
                self.value(item, sub, _child_path(path, key), depth + 1)
            elif closed:
                allowed = ", ".join(_json(p) for p in props)
                note = f"allowed: {allowed}" if allowed else "no properties are allowed"
                out.append(f"{path}: unexpected property {_json(key)} ({note})")

    def _array(self, v: list, s: dict, path: str, depth: int) -> None:
        out = self.problems
        low, high = s.get("minItems"), s.get("maxItems")
        if low is not None and len(v) < low:
            out.append(f"{path}: must have at least {low} item(s); got {len(v)}")
        if high is not None and len(v) > high:
            out.append(f"{path}: must have at most {high} item(s); got {len(v)}")
        items = s.get("items")
        if items is not None:
            for index, item in enumerate(v):
                self.value(item, items, f"{path}[{index}]", depth + 1)

    def _branches(self, v: Any, s: dict, path: str, depth: int) -> None:
        """``anyOf``: valid when one branch is; else the problems of the one branch of the
        value's type, or the closest of several."""
        root, branches = self.root, s["anyOf"]
        candidates: list[list[str]] = []
        for branch in branches:
            trial = _Check(root)
            trial.value(v, branch, path, depth + 1)
            if not trial.problems:
                return
            if _type_accepts(v, branch, root):
                candidates.append(trial.problems)
        if not candidates:
            expected = " or ".join(_type_names(s, root, []))
            self.problems.append(f"{path}: expected {expected}, got {_got(v)}")
        elif len(candidates) == 1:
            self.problems.extend(candidates[0])
        else:
            closest = min(candidates, key=len)
            self.problems.append(
                f"{path}: does not match any of the {len(branches)} allowed alternatives"
                f" (closest: {'; '.join(closest[:2])})"
            )


def _valid(value: Any, schema: dict, root: dict) -> bool:
    check = _Check(root)
    check.value(value, schema, "$", 0)
    return not check.problems


def _loose(text: str) -> str:
    """The form two names share when they differ only in case or separators."""
    return _SEPARATORS.sub("", text.lower())


def coerce_value(value: Any, schema: dict, root: dict) -> Any:
    """Repairs near misses of ``value`` against ``schema``; returns it unchanged where none applies."""
    return _coerce(value, schema, root, 0)


def _coerce(v: Any, s: dict, root: dict, depth: int) -> Any:
    if depth > _MAX_VALUE_DEPTH:
        return v
    if "$ref" in s:
        s = _resolve(s, root)
    branches = s.get("anyOf")
    if branches is not None:
        if any(_valid(v, b, root) for b in branches):
            return v
        for branch in branches:
            repaired = _coerce(v, branch, root, depth + 1)
            if _valid(repaired, branch, root):
                return repaired
        return v
    if v is None:
        return v
    types = _types(s)
    if types and not any(_TYPE_CHECKS[t](v) for t in types):
        v = _convert(v, types)
    if "enum" in s:
        v = _match_choice(v, s["enum"])
    elif "const" in s:
        v = _match_choice(v, [s["const"]])
    if isinstance(v, dict) and "object" in types:
        return _coerce_object(v, s, root, depth)
    if isinstance(v, list) and "array" in types and "items" in s:
        return [_coerce(item, s["items"], root, depth + 1) for item in v]
    return v


def _convert(v: Any, types: list[str]) -> Any:
    for t in types:
        if t in ("integer", "number") and isinstance(v, str):
            number = _parse_number(v, integer=t == "integer")
            if number is not None:
                return number
        elif t == "boolean" and isinstance(v, str):
            word = v.strip().lower()
            if word in ("true", "false"):
                return word == "true"
        elif t == "object" and isinstance(v, str):
            parsed = _parse_json(v)
            if isinstance(parsed, dict):
                return parsed
        elif t == "array":
            parsed = _parse_json(v) if isinstance(v, str) else None
            return parsed if isinstance(parsed, list) else [v]
    return v


def _parse_number(text: str, *, integer: bool) -> int | float | None:
    text = text.strip()
    try:
        if _INTEGER_TEXT.fullmatch(text):
            return int(text)
        if not _NUMBER_TEXT.fullmatch(text):
            return None
        number = float(text)
    except ValueError:  # more digits than int() accepts
        return None
    if not math.isfinite(number):
        return None
    if integer:
        return int(number) if number.is_integer() else None
    return number


def _parse_json(text: str) -> Any:
    try:
        return loads_embedded(text)
    except JsonTextError:
        return None


def _match_choice(v: Any, choices: list) -> Any:
    if isinstance(v, str):
        text = v
    elif isinstance(v, bool | int | float):
        text = _json(v)  # a mixed-type enum is generated as strings: 3 stands for "3"
    else:
        return v
    if any(c == v and type(c) is type(v) for c in choices):
        return v
    key = _loose(text)
    hits = [c for c in choices if isinstance(c, str) and _loose(c) == key]
    return hits[0] if len(hits) == 1 else v


def _coerce_object(v: dict, s: dict, root: dict, depth: int) -> dict:
    props: dict = s.get("properties", {})
    required = s.get("required", ())
    lookup: dict[str, str | None] = {}
    for name in props:
        key = _loose(name)
        lookup[key] = None if key in lookup else name  # ambiguous names match nothing
    out: dict = {}
    for key, item in v.items():
        target = key
        if key not in props:
            candidate = lookup.get(_loose(key))
            if candidate is not None and candidate not in v and candidate not in out:
                target = candidate
        out[target] = item
    for name in [k for k, item in out.items() if item is None and k in props]:
        if name not in required and not _type_accepts(None, props[name], root):
            del out[name]  # an optional property the model filled with null
    if s.get("additionalProperties") is False and all(r in out for r in required):
        out = {k: item for k, item in out.items() if k in props}
    for name, item in out.items():
        if name in props:
            out[name] = _coerce(item, props[name], root, depth + 1)
    return out


def order_value(value: Any, schema: dict, root: dict, depth: int = 0) -> Any:
    """Returns ``value`` with object keys in schema property order, unknown keys last."""
    if depth > _MAX_VALUE_DEPTH or not isinstance(value, dict | list):
        return value
    schema = _resolve(schema, root)
    if isinstance(value, list):
        items = schema.get("items", {})
        return [order_value(item, items, root, depth + 1) for item in value]
    branches = schema.get("anyOf")
    if branches:
        keys = set(value)
        best = max(branches, key=lambda b: _overlap(_resolve(b, root), keys))
        return order_value(value, best, root, depth + 1)
    props: dict = schema.get("properties", {})
    result = {}
    for key in schema.get("x-order", props):
        if key in value:
            result[key] = order_value(value[key], props[key], root, depth + 1)
    for key, item in value.items():
        if key not in result:
            result[key] = order_value(item, props.get(key, {}), root, depth + 1)
    return result


def _overlap(schema: dict, keys: set) -> int:
    names = set(schema.get("properties", ()))
    return len(names & keys) * 2 - len(names - keys)

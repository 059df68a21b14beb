"""Matching observed JSON against expectations written in scenario files.

An expectation is plain JSON compared either ``exact`` (objects have exactly the expected keys) or
``partial`` (objects may have more keys); arrays are compared element by element in both modes.
A one-key object whose key starts with ``$`` is a matcher (see ``conformance/README.md``).
Every mismatch is reported with the JSON path of the field (``result.toolCalls[0].output``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["MISSING", "Mismatch", "fmt_path", "is_matcher", "match", "type_name"]


class _Missing:
    def __repr__(self) -> str:
        return "<absent>"


MISSING: Any = _Missing()

Resolver = Callable[[str], Any]


class Mismatch:
    """One difference: where (a JSON path) and what."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return f"{self.path or '(root)'}: {self.message}"

    def __repr__(self) -> str:
        return f"Mismatch({self!s})"


def fmt_path(parts: tuple[Any, ...] | list[Any]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


def type_name(value: Any) -> str:
    if value is MISSING:
        return "absent"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def short(value: Any, limit: int = 160) -> str:
    import orjson

    if value is MISSING:
        return "<absent>"
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_matcher(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and len(value) >= 1
        and all(isinstance(k, str) and k.startswith("$") for k in value)
    )


def scalar_equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans are not numbers, 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return scalar_equal(a, b)


_TYPES = {"string", "integer", "number", "boolean", "null", "object", "array"}


def match(
    expected: Any,
    actual: Any,
    *,
    mode: str = "partial",
    path: tuple[Any, ...] = (),
    resolve: Resolver | None = None,
) -> list[Mismatch]:
    """All mismatches between ``expected`` and ``actual`` (``MISSING`` when absent)."""
    out: list[Mismatch] = []
    _match(expected, actual, mode, path, resolve, out)
    return out


def _match(
    exp: Any,
    act: Any,
    mode: str,
    path: tuple[Any, ...],
    resolve: Resolver | None,
    out: list[Mismatch],
) -> None:
    where = fmt_path(path)
    if is_matcher(exp):
        _matcher(exp, act, mode, path, resolve, out)
        return
    if act is MISSING:
        out.append(Mismatch(where, f"missing; expected {short(exp)}"))
        return
    if isinstance(exp, dict):
        if not isinstance(act, dict):
            out.append(Mismatch(where, f"expected an object, got {short(act)}"))
            return
        for key, sub in exp.items():
            if is_matcher(sub) and "$absent" in sub:
                if key in act:
                    out.append(
                        Mismatch(fmt_path((*path, key)), f"should be absent, got {short(act[key])}")
                    )
                continue
            _match(sub, act.get(key, MISSING), mode, (*path, key), resolve, out)
        if mode == "exact":
            extra = [k for k in act if k not in exp]
            for key in extra:
                out.append(Mismatch(fmt_path((*path, key)), f"unexpected key: {short(act[key])}"))
        return
    if isinstance(exp, list):
        if not isinstance(act, list):
            out.append(Mismatch(where, f"expected an array, got {short(act)}"))
            return
        if len(exp) != len(act):
            out.append(
                Mismatch(
                    where,
                    f"expected {len(exp)} element(s), got {len(act)}: {short(act)}",
                )
            )
        for i, (e, a) in enumerate(zip(exp, act, strict=False)):
            _match(e, a, mode, (*path, i), resolve, out)
        return
    if not scalar_equal(exp, act):
        out.append(Mismatch(where, f"expected {short(exp)}, got {short(act)}"))


def _matcher(
    exp: dict[str, Any],
    act: Any,
    mode: str,
    path: tuple[Any, ...],
    resolve: Resolver | None,
    out: list[Mismatch],
) -> None:
    where = fmt_path(path)
    for op, arg in exp.items():
        if op == "$absent":
            if act is not MISSING:
                out.append(Mismatch(where, f"should be absent, got {short(act)}"))
        elif op == "$any":
            if act is MISSING:
                out.append(Mismatch(where, "missing"))
        elif op == "$type":
            names = arg if isinstance(arg, list) else [arg]
            for n in names:
                if n not in _TYPES:
                    raise ValueError(f"unknown $type {n!r}")
            actual_type = type_name(act)
            ok = actual_type in names or (actual_type == "integer" and "number" in names)
            if not ok:
                out.append(Mismatch(where, f"expected type {'/'.join(names)}, got {short(act)}"))
        elif op == "$nonneg_int":
            if type_name(act) != "integer" or act < 0:
                out.append(Mismatch(where, f"expected a non-negative integer, got {short(act)}"))
        elif op == "$contains":
            items = arg if isinstance(arg, list) and isinstance(act, list) else [arg]
            if isinstance(act, str):
                for s in items:
                    if not isinstance(s, str) or s not in act:
                        out.append(
                            Mismatch(where, f"expected to contain {short(s)}, got {short(act)}")
                        )
            elif isinstance(act, list):
                for e in items:
                    if not any(not match(e, a, mode=mode, resolve=resolve) for a in act):
                        out.append(
                            Mismatch(
                                where, f"expected an element matching {short(e)}, got {short(act)}"
                            )
                        )
            else:
                out.append(Mismatch(where, f"expected a string or array, got {short(act)}"))
        elif op == "$not_contains":
            items = arg if isinstance(arg, list) else [arg]
            if isinstance(act, str):
                for s in items:
                    if s in act:
                        out.append(Mismatch(where, f"should not contain {short(s)}: {short(act)}"))
            elif isinstance(act, list):
                for e in items:
                    if any(not match(e, a, mode=mode, resolve=resolve) for a in act):
                        out.append(Mismatch(where, f"should not contain {short(e)}: {short(act)}"))
        elif op == "$startswith":
            if not isinstance(act, str) or not act.startswith(arg):
                out.append(
                    Mismatch(
                        where, f"expected a string starting with {short(arg)}, got {short(act)}"
                    )
                )
        elif op == "$regex":
            if not isinstance(act, str) or not re.search(arg, act):
                out.append(Mismatch(where, f"expected a string matching /{arg}/, got {short(act)}"))
        elif op == "$keys":
            if not isinstance(act, dict) or list(act) != list(arg):
                got = list(act) if isinstance(act, dict) else act
                out.append(
                    Mismatch(where, f"expected keys {short(arg)} in this order, got {short(got)}")
                )
        elif op == "$len":
            if not isinstance(act, list | dict | str) or len(act) != arg:
                out.append(Mismatch(where, f"expected length {arg}, got {short(act)}"))
        elif op == "$range":
            lo, hi = arg
            if (
                type_name(act) not in {"integer", "number"}
                or (lo is not None and act < lo)
                or (hi is not None and act > hi)
            ):
                out.append(Mismatch(where, f"expected a number in [{lo}, {hi}], got {short(act)}"))
        elif op == "$one_of":
            if not any(json_equal(v, act) for v in arg):
                out.append(Mismatch(where, f"expected one of {short(arg)}, got {short(act)}"))
        elif op == "$from":
            if resolve is None:
                raise ValueError("$from needs a resolver")
            target = resolve(arg)
            if target is MISSING:
                out.append(Mismatch(where, f"reference {arg!r} does not resolve"))
            elif not json_equal(target, act):
                out.append(Mismatch(where, f"expected {arg} = {short(target)}, got {short(act)}"))
        elif op == "$all":
            for sub in arg:
                _match(sub, act, mode, path, resolve, out)
        elif op == "$not":
            if not match(arg, act, mode=mode, resolve=resolve):
                out.append(Mismatch(where, f"should not match {short(arg)}, got {short(act)}"))
        elif op == "$exact":
            _match(arg, act, "exact", path, resolve, out)
        elif op == "$partial":
            _match(arg, act, "partial", path, resolve, out)
        elif op == "$unordered":
            if not isinstance(act, list) or len(act) != len(arg):
                out.append(
                    Mismatch(
                        where, f"expected {len(arg)} element(s) in any order, got {short(act)}"
                    )
                )
                continue
            left = list(act)
            for e in arg:
                hit = next(
                    (i for i, a in enumerate(left) if not match(e, a, mode=mode, resolve=resolve)),
                    None,
                )
                if hit is None:
                    out.append(Mismatch(where, f"no element matches {short(e)}; got {short(act)}"))
                else:
                    left.pop(hit)
        elif op == "$value":  # a literal that would otherwise look like a matcher
            _match(arg, act, mode, path, resolve, out)
        else:
            raise ValueError(f"unknown matcher {op!r} at {where or '(root)'}")

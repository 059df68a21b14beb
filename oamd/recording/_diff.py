"""What a replay must reproduce, and the readable diff when it does not.

The daemon's lines are compared per exchange: everything one client request caused (its events,
``tool/call``s, ``tool/cancel``s and response, by ``requestId``; a ``decision/decideMany``'s
decisions apart), each world's ``world/changed``, each other notification. Within an exchange the
order must be the recording's; across exchanges it may differ, as concurrent work interleaves by
timing. Free by nature, and so normalized on both sides before comparing (``docs/RECORDING.md``):

- ``durationSeconds`` (a tool call's wall time) and ``createdAt`` (a wall-clock time);
- generated ids: a ``call_`` id the daemon drew at random (a text-only model names no ids) and the
  daemon's own request ids (``t-<n>``), each renamed by order of first appearance, so the same id
  must still appear in the same places;
- streamed text: a run of ``text``/``partial``/``lineDelta``/``lineReset`` events is merged into one,
  since how many snapshots a stream is cut into depends on how fast the model wrote.

Everything else, usage included, must be equal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from oamd.jsonvalue import dumps_text

__all__ = ["Difference", "compare_lines", "exchanges", "is_streamed"]

GENERATED_CALL_ID = re.compile(r"^call_[A-Za-z0-9]{24}$")
"""``agent.turn_spec.new_call_id``'s form."""
DAEMON_REQUEST_ID = re.compile(r"^t-\d+$")
STREAMED = {
    "session/event": ("text", "partial"),
    "npc/event": ("lineDelta", "lineReset"),
}
"""Events whose number depends on timing: runs of them are merged before comparing."""
SHOWN_CHARS = 160
"""How much of a value a difference shows."""
_MISSING = object()


def is_streamed(line: Any) -> bool:
    """A streamed-text event (one whose count depends on how fast the model wrote)."""
    if type(line) is not dict or line.get("method") not in STREAMED:
        return False
    params = line.get("params")  # a recording is hostile input: params may be anything
    event = params.get("event") if type(params) is dict else None
    return type(event) is dict and event.get("type") in STREAMED[line["method"]]


def _channel(line: Any, methods: dict[Any, str]) -> str:
    if type(line) is not dict:
        return "lines that are not JSON objects"
    method = line.get("method")
    params = line.get("params") if type(line.get("params")) is dict else {}
    if method is None:
        ident = line.get("id")
        if ident is None:
            return "responses with id null"
        return _request(ident, methods)
    if "requestId" in params:
        name = _request(params["requestId"], methods)
        return name if "index" not in params else f"{name}, decision {params['index']}"
    if method == "world/changed":
        return f"world/changed of {params.get('world')!r}"
    return f"notifications {method}"


def _request(ident: Any, methods: dict[Any, str]) -> str:
    key = dumps_text(ident)
    method = methods.get(key)
    return f"request {key}" + (f" ({method})" if method else "")


class _Names:
    """Free ids → placeholders by order of first appearance."""

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}
        self.requests: dict[str, str] = {}

    def call(self, value: str) -> str:
        return self.calls.setdefault(value, f"<generated call id {len(self.calls) + 1}>")

    def request(self, value: Any) -> Any:
        if not isinstance(value, str) or not DAEMON_REQUEST_ID.match(value):
            return value
        return self.requests.setdefault(value, f"<tool/call {len(self.requests) + 1}>")


def _normalized(value: Any, names: _Names) -> Any:
    if isinstance(value, str):
        return names.call(value) if GENERATED_CALL_ID.match(value) else value
    if isinstance(value, list):
        return [_normalized(v, names) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, sub in value.items():
        if key == "durationSeconds" and isinstance(sub, int | float):
            out[key] = "<duration>"
        elif key == "createdAt" and isinstance(sub, str):
            out[key] = "<timestamp>"
        else:
            out[key] = _normalized(sub, names)
    return out


def _line(line: Any, names: _Names) -> Any:
    out = _normalized(line, names)
    if type(out) is dict and "method" in out:
        if "id" in out:  # the daemon's own request (tool/call)
            out["id"] = names.request(out["id"])
        params = out.get("params")
        if out["method"] == "tool/cancel" and type(params) is dict and "id" in params:
            params["id"] = names.request(params["id"])
    return out


def _merge(lines: list[Any]) -> list[Any]:
    """Runs of streamed events become one (see the module's docstring)."""
    out: list[Any] = []
    for line in lines:
        previous = out[-1] if out else None
        if is_streamed(line) and is_streamed(previous):
            event, last = line["params"]["event"], previous["params"]["event"]
            kind, last_kind = event["type"], last["type"]
            if kind == "text" and last_kind == "text" and not event.get("isReset"):
                last["delta"] = f"{last.get('delta', '')}{event.get('delta', '')}"
                last["text"] = event.get("text")
                continue
            if kind == last_kind == "partial":
                last["value"] = event.get("value")
                continue
            if kind == "lineDelta" and last_kind in ("lineDelta", "lineReset"):
                field = "delta" if last_kind == "lineDelta" else "line"
                last[field] = f"{last.get(field, '')}{event.get('delta', '')}"
                continue
        out.append(orjson.loads(orjson.dumps(line)) if is_streamed(line) else line)
    return out


def exchanges(lines: list[Any], methods: dict[Any, str], order: list[str] | None = None) -> dict:
    """The daemon's ``lines`` as named exchanges, normalized; ``order``: the channel order to
    name free ids in (the recording's), so both sides name the same id the same way."""
    grouped: dict[str, list[Any]] = {}
    for line in lines:
        grouped.setdefault(_channel(line, methods), []).append(line)
    names = _Names()
    ordered = [c for c in (order or []) if c in grouped] + [
        c for c in grouped if c not in (order or [])
    ]
    return {c: _merge([_line(line, names) for line in grouped[c]]) for c in ordered}


@dataclass(frozen=True)
class Difference:
    exchange: str
    where: str
    recorded: Any
    replayed: Any

    def __str__(self) -> str:
        return (
            f"{self.exchange}: {self.where}\n"
            f"  recorded: {_shown(self.recorded)}\n"
            f"  replayed: {_shown(self.replayed)}"
        )


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "(nothing)"
    text = dumps_text(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def _paths(recorded: Any, replayed: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in [*recorded, *(k for k in replayed if k not in recorded)]:
            sub = f"{path}.{key}" if path else str(key)
            _paths(recorded.get(key, _MISSING), replayed.get(key, _MISSING), sub, out)
    elif (
        isinstance(recorded, list) and isinstance(replayed, list) and len(recorded) == len(replayed)
    ):
        for i, (a, b) in enumerate(zip(recorded, replayed, strict=True)):
            _paths(a, b, f"{path}[{i}]", out)
    elif _MISSING in (recorded, replayed) or _bytes(recorded) != _bytes(replayed):
        out.append((path, recorded, replayed))  # as bytes: 1 and 1.0 differ


def _bytes(value: Any) -> bytes:
    return orjson.dumps(value)


def compare_lines(
    recorded: dict[str, list[Any]], replayed: dict[str, list[Any]]
) -> list[Difference]:
    """Every difference between two exchange views (``exchanges``), exchange by exchange."""
    out: list[Difference] = []
    for name in [*recorded, *(n for n in replayed if n not in recorded)]:
        ours, theirs = recorded.get(name, []), replayed.get(name, [])
        for index in range(max(len(ours), len(theirs))):
            a = ours[index] if index < len(ours) else _MISSING
            b = theirs[index] if index < len(theirs) else _MISSING
            where = f"line {index + 1} of {len(ours)}"
            if _MISSING in (a, b):
                out.append(Difference(name, where, a, b))
                continue
            if _bytes(a) == _bytes(b):
                continue
            paths: list[tuple[str, Any, Any]] = []
            _paths(a, b, "", paths)
            if not paths:  # the same members in another order
                out.append(Difference(name, f"{where}, in the order of its members", a, b))
            out.extend(
                Difference(name, f"{where}, at {p or 'the line'}", r, c) for p, r, c in paths
            )
    return out

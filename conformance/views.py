"""What ``diff`` and ``record`` compare: a trace cut into named exchanges, after normalizing what the
protocol leaves free. Every normalization here is listed and justified in ``conformance/README.md``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from .match import MISSING, short
from .player import Failure, Trace, id_key

__all__ = ["Difference", "channels", "compare", "normalize_trace"]

# Placeholders written instead of free values.
DURATION = "<duration>"
COUNT = "<count>"
TIMESTAMP = "<timestamp>"
MESSAGE = "<message>"
REASON = "<reason>"
TRANSCRIPT = "<transcript>"
AVAILABILITY = "<availability>"
GENERATION_SCHEMA = "<generationSchema>"
EXTRA_STEP_FIELDS = ("kind", "isRepair")


class _Ids:
    """Maps free ids to placeholders by order of first appearance (so equalities survive)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.seen: dict[str, str] = {}

    def __call__(self, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if value not in self.seen:
            self.seen[value] = f"<{self.prefix}{len(self.seen) + 1}>"
        return self.seen[value]


class _Normalizer:
    def __init__(self) -> None:
        self.call_ids = _Ids("call#")
        self.tool_ids = _Ids("tool-call#")

    def value(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if not isinstance(v, dict):
            return v
        out: dict[str, Any] = {}
        for key, sub in v.items():
            if (
                key == "durationSeconds"
                and isinstance(sub, int | float)
                and not isinstance(sub, bool)
            ):
                out[key] = DURATION
            elif key == "usage" and isinstance(sub, dict):
                out[key] = {
                    k: COUNT if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else n
                    for k, n in sub.items()
                }
            elif key == "createdAt" and isinstance(sub, str):
                out[key] = TIMESTAMP
            elif key == "callId":
                out[key] = self.call_ids(sub)
            elif key == "call" and isinstance(sub, dict) and "name" in sub:
                call = self.value(sub)
                if "id" in call:
                    call["id"] = self.call_ids(call["id"])
                out[key] = call
            else:
                out[key] = self.value(sub)
        if "toolCallingMode" in out and "completedToolRounds" in out:
            for extra in EXTRA_STEP_FIELDS:
                out.pop(extra, None)
        if (
            isinstance(out.get("code"), int)
            and isinstance(out.get("message"), str)
            and isinstance(out.get("data"), dict)
        ):
            out["message"] = MESSAGE
        return out


def _result_by_method(method: str | None, result: Any) -> Any:
    if not isinstance(result, dict):
        return result
    r = dict(result)
    if method == "initialize":
        if isinstance(r.get("server"), dict):
            r["server"] = {"name": "<server>", "version": "<version>"}
        if "model" in r:
            r["model"] = AVAILABILITY
    elif method == "model/availability":
        return AVAILABILITY
    elif method == "session/transcript":
        if "transcript" in r:
            r["transcript"] = TRANSCRIPT
    elif method == "npc/state":
        if isinstance(r.get("state"), dict) and "transcript" in r["state"]:
            r["state"] = {**r["state"], "transcript": TRANSCRIPT}
    elif method == "schema/validate":
        if "generationSchema" in r:
            r["generationSchema"] = GENERATION_SCHEMA
    elif method == "tools/validate" and isinstance(r.get("tools"), list):
        r["tools"] = [
            {**t, "generationSchema": GENERATION_SCHEMA}
            if isinstance(t, dict) and "generationSchema" in t
            else t
            for t in r["tools"]
        ]
    return r


def _coalesce(events: list[Any]) -> list[Any]:
    """Runs of streamed text are merged: PROTOCOL.md §2.7 lets deltas be coalesced."""
    out: list[Any] = []
    for params in events:
        ev = params.get("event") if isinstance(params, dict) else None
        prev = out[-1].get("event") if out and isinstance(out[-1], dict) else None
        kind = ev.get("type") if isinstance(ev, dict) else None
        pkind = prev.get("type") if isinstance(prev, dict) else None
        if kind == "text" and pkind == "text" and not ev.get("isReset"):
            prev["delta"] = str(prev.get("delta", "")) + str(ev.get("delta", ""))
            prev["text"] = ev.get("text")
            continue
        if kind == "partial" and pkind == "partial":
            prev["value"] = ev.get("value")
            continue
        if kind == "lineDelta" and pkind == "lineDelta":
            prev["delta"] = str(prev.get("delta", "")) + str(ev.get("delta", ""))
            continue
        if kind == "lineDelta" and pkind == "lineReset":
            prev["line"] = str(prev.get("line", "")) + str(ev.get("delta", ""))
            continue
        out.append(copy.deepcopy(params))
    return out


def normalize_trace(trace: Trace, norm: _Normalizer | None = None) -> list[tuple[Any, Any]]:
    """(original message, normalized message) in arrival order."""
    norm = norm or _Normalizer()
    out = []
    for m in trace.messages:
        if m.problem is not None:
            out.append((m, MISSING))
            continue
        obj = dict(m.obj)
        obj.pop("jsonrpc", None)
        if m.kind == "request":
            obj["id"] = norm.tool_ids(obj.get("id"))
        if m.method == "tool/cancel" and isinstance(obj.get("params"), dict):
            p = dict(obj["params"])
            if "id" in p:
                p["id"] = norm.tool_ids(p["id"])
            if "reason" in p:
                p["reason"] = REASON
            obj["params"] = p
        if m.kind == "response" and "result" in obj:
            method = trace.methods.get(id_key(obj.get("id")))
            obj["result"] = _result_by_method(method, obj["result"])
        out.append((m, norm.value(obj)))
    return out


def channels(trace: Trace, invariants: list[Failure] | None = None) -> dict[str, Any]:
    """The trace as named exchanges: responses per request, events, tool calls, world changes."""
    out: dict[str, Any] = {}
    events: dict[str, list[Any]] = {}
    seen_responses: dict[str, int] = {}
    norm = _Normalizer()
    for m, n in normalize_trace(trace, norm):
        if n is MISSING:
            out.setdefault("invalid lines", []).append(m.raw.decode("utf-8", "replace"))
            continue
        if m.kind == "response":
            key = id_key(m.obj.get("id"))
            if key == "null":
                out.setdefault("responses with id null", []).append(
                    {k: v for k, v in n.items() if k != "id"}
                )
                continue
            seen_responses[key] = seen_responses.get(key, 0) + 1
            ident = m.obj.get("id")
            if isinstance(ident, str) and ident in norm.tool_ids.seen:
                # an answer to the client's reply to a tool/call: the id is the bridge's own
                name = f"response {norm.tool_ids.seen[ident]} (to the reply to a tool/call)"
            else:
                name = f"response {trace.label(key)}"
            if seen_responses[key] > 1:
                name += f" #{seen_responses[key]}"
            out[name] = {k: v for k, v in n.items() if k != "id"}
            continue
        method = m.method or ""
        rid = m.request_id_key
        params = n.get("params", MISSING)
        if m.kind == "request":
            label = f"{method} of {trace.label(rid)}" if rid is not None else method
            out.setdefault(label, []).append({"id": n.get("id"), "params": params})
        elif method.endswith("/event") and rid is not None:
            name = f"{method} of {trace.label(rid)}"
            if name not in out:
                out[name] = []
            events.setdefault(name, []).append(params)
        elif method == "tool/cancel":
            label = f"tool/cancel of {trace.label(rid)}" if rid is not None else "tool/cancel"
            out.setdefault(label, []).append(params)
        elif method == "world/changed":
            out.setdefault("world/changed", []).append(params)
        else:
            out.setdefault("notifications", []).append({"method": method, "params": params})
    for name, evs in events.items():
        out[name] = _coalesce(evs)
    if trace.exit_code is not None:
        out["exit status"] = trace.exit_code
    if invariants:
        out["guarantee violations"] = sorted(
            {f.exchange + ": " + re.sub(r"#\d+", "#", f.message) for f in invariants}
        )
    return out


@dataclass
class Difference:
    exchange: str
    path: str
    reference: Any
    candidate: Any

    def __str__(self) -> str:
        where = f"{self.exchange}: {self.path}" if self.path else self.exchange
        return f"{where}: reference {short(self.reference)}, candidate {short(self.candidate)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "exchange": self.exchange,
            "path": self.path,
            "reference": None if self.reference is MISSING else self.reference,
            "candidate": None if self.candidate is MISSING else self.candidate,
            "referenceMissing": self.reference is MISSING,
            "candidateMissing": self.candidate is MISSING,
        }


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _diff(ref: Any, cand: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    if isinstance(ref, dict) and isinstance(cand, dict):
        for k in list(ref) + [k for k in cand if k not in ref]:
            sub = f"{path}.{k}" if path else str(k)
            _diff(ref.get(k, MISSING), cand.get(k, MISSING), sub, out)
        return
    if isinstance(ref, list) and isinstance(cand, list):
        for i in range(max(len(ref), len(cand))):
            _diff(
                ref[i] if i < len(ref) else MISSING,
                cand[i] if i < len(cand) else MISSING,
                f"{path}[{i}]",
                out,
            )
        return
    if isinstance(ref, dict | list) or isinstance(cand, dict | list):
        if ref != cand:
            out.append((path, ref, cand))
        return
    if ref is MISSING or cand is MISSING:
        if ref is not cand:
            out.append((path, ref, cand))
        return
    if not _same_scalar(ref, cand):
        out.append((path, ref, cand))


def _ignored(diff: Difference, ignore: list[Any]) -> bool:
    for rule in ignore:
        if isinstance(rule, dict):
            ident = str(rule.get("id", ""))
            path = str(rule.get("path", ""))
            exch = str(rule.get("exchange", ""))
        else:
            ident, path, exch = "", str(rule), ""
        if ident and not re.search(rf"(^| ){re.escape(ident)}( |$)", diff.exchange):
            continue
        if exch and exch not in diff.exchange:
            continue
        if path and not (
            diff.path == path
            or diff.path.startswith(path + ".")
            or diff.path.startswith(path + "[")
        ):
            continue
        return True
    return False


def compare(
    reference: dict[str, Any], candidate: dict[str, Any], ignore: list[Any] | None = None
) -> list[Difference]:
    """Differences between two channel views, each naming the exchange and the field path."""
    out: list[Difference] = []
    names = list(reference) + [n for n in candidate if n not in reference]
    for name in names:
        raw: list[tuple[str, Any, Any]] = []
        _diff(reference.get(name, MISSING), candidate.get(name, MISSING), "", raw)
        for path, r, c in raw:
            d = Difference(name, path, r, c)
            if not _ignored(d, ignore or []):
                out.append(d)
    return out

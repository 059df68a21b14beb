"""Fuzz oracle: what the daemon owes for each line sent, checked against every line it writes.

The rules, from ``protocol/PROTOCOL.md`` and ``protocol/errors.json``: a blank line is ignored; a
line that is not JSON (or not UTF-8) gets one -32700, a line nesting deeper than 128 levels one
-32600, both with id ``null``; a JSON value that is not an object (a batch too) gets one -32600 with
id ``null``; an object whose id is not a string or a number within ±(2^53-1) gets one -32600 with
id ``null``; any other object with an id that is not a reply to our ``tool/call`` (``result`` or
``error`` and no ``method``) is answered exactly once under that id (integral numbers come back as
plain digits); notifications and replies get no answer. Every line written must be a JSON-RPC 2.0
object: a response (exactly one of ``result``/``error``), a ``tool/call`` request or a listed
notification; every error a row of the error table and never -32603 ``internal_error``.

After ``shutdown`` (the peer marks such lines ``trailing``) a request is answered at most once,
with -32023. ``contract=True`` also validates each message against ``protocol/bridge.json``.

An ``Expectation`` adds a documented limit to what some answers must be (``expect``): refused
with one of some codes (a ``world/set`` past ``MAX_WORLD_BYTES`` gets -32055), or, for requests
that each add to what a connection holds, accepted no further than ``--max-connection-bytes``
allows (past it they fail -32055). Judged once every request it names is answered.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from contract import ERRORS, NOTIFICATIONS

__all__ = [
    "ANSWER",
    "NONE",
    "NULL",
    "SAFE_ID",
    "Expectation",
    "Oracle",
    "Violation",
    "expectation",
    "stderr_problems",
]

SAFE_ID = 2**53 - 1
MAX_DEPTH = 128
ANSWER, NULL, NONE = "answer", "null", "none"
_ROWS = frozenset((row["code"], row["name"]) for row in ERRORS)
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(rb"[\[\]{}]")
_METHOD = re.compile(rb'"method":\s*"([^"]{1,40})"')
_RESPONSE_KEYS = frozenset(("jsonrpc", "id", "result", "error"))
_EXAMPLES = 3


def _reject(name: str) -> Any:
    raise ValueError(name)


def _too_deep(line: bytes) -> bool:
    if line.count(b"[") + line.count(b"{") <= MAX_DEPTH:
        return False
    depth = 0
    for bracket in _BRACKET.findall(_STRING.sub(b'""', line)):
        depth += 1 if bracket in (b"[", b"{") else -1
        if depth > MAX_DEPTH:
            return True
    return False


def _decode(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line.decode("utf-8"), parse_constant=_reject)


def _valid_id(value: Any) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and abs(value) <= SAFE_ID


def _key(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def expectation(line: bytes) -> tuple[str, Any]:
    """``(ANSWER, id)``, ``(NULL, None)`` (one error with id null) or ``(NONE, None)``."""
    if line.endswith(b"\r"):
        line = line[:-1]
    if _too_deep(line):
        return NULL, None
    try:
        obj = _decode(line)
    except (ValueError, UnicodeDecodeError):
        return (NONE, None) if not line or line.isspace() else (NULL, None)
    if type(obj) is not dict:
        return NULL, None
    has_id = "id" in obj
    answer = (ANSWER, _key(obj["id"])) if has_id and _valid_id(obj["id"]) else (NULL, None)
    if obj.get("jsonrpc") != "2.0" or (has_id and answer[0] == NULL):
        return answer
    if "method" in obj:
        method = obj["method"]
        if isinstance(method, str) and method:
            return answer if has_id else (NONE, None)
        return answer
    if has_id and ("result" in obj or "error" in obj):
        return NONE, None  # a reply to a tool/call (ours or not): dropped
    return answer


@dataclass(frozen=True)
class Expectation:
    """What the answers to ``ids`` (distinct ids, each sent once) must be, besides arriving:
    with ``codes``, each an error with one of them; with ``most``, the requests answered with a
    result carried at most ``most`` bytes in all (``sizes``, one per id). ``detail`` names the
    rule in a violation."""

    detail: str
    ids: tuple[Any, ...]
    codes: frozenset[int] = frozenset()
    sizes: tuple[int, ...] = ()
    most: int = 0


@dataclass
class Violation:
    kind: str
    detail: str
    count: int = 1
    examples: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"[{self.kind}] x{self.count}: {self.detail}"]
        lines += [f"    {example}" for example in self.examples]
        return "\n".join(lines)


def _shown(data: Any, limit: int = 400) -> str:
    text = data.decode("utf-8", "backslashreplace") if isinstance(data, bytes) else str(data)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Oracle:
    """Accounts for one connection: ``sent`` for each line written to the daemon (in order),
    ``received`` for each line read from it; ``finish`` at the end lists what is still owed."""

    def __init__(self, *, contract: bool = False) -> None:
        self.owed: Counter[Any] = Counter()  # answers still owed per id
        self.lines: dict[Any, bytes] = {}  # the line of an id still owed
        self.methods: dict[Any, list[str]] = {}  # of each request an id still owes, in order
        self.trailing: set[Any] = set()
        self.null_owed: deque[bytes] = deque()  # lines owed an id-null error, in order
        self.null_trailing = 0
        self.violations: dict[tuple[str, str], Violation] = {}
        self.sent_lines = 0
        self.received_lines = 0
        self.answered = 0
        self.recent: deque[bytes] = deque(maxlen=8)
        self.expectations: list[Expectation] = []
        self.watched: set[Any] = set()
        self.outcomes: dict[Any, tuple[int | None, bytes, bytes]] = {}  # (code, sent, answer)
        self._validate = _contract_validators() if contract else None

    # ---- bookkeeping ------------------------------------------------------------------------

    def flag(self, kind: str, detail: str, *examples: Any) -> None:
        violation = self.violations.get((kind, detail))
        if violation is None:
            violation = self.violations[kind, detail] = Violation(kind, detail, 0)
        violation.count += 1
        if len(violation.examples) < _EXAMPLES:
            violation.examples.append(" | ".join(_shown(e) for e in examples))

    def expect(self, expectation: Expectation) -> None:
        self.expectations.append(expectation)
        self.watched.update(_key(key) for key in expectation.ids)

    @property
    def outstanding(self) -> int:
        """Requests sent and not answered yet (trailing ones included)."""
        return sum(self.owed.values())

    def sent(self, line: bytes, *, trailing: bool = False) -> None:
        self.sent_lines += 1
        self.recent.append(line)
        kind, key = expectation(line)
        if kind == NULL:
            if trailing:
                self.null_trailing += 1
            else:
                self.null_owed.append(line)
        elif kind == ANSWER:
            self.owed[key] += 1
            self.lines[key] = line
            if trailing:
                self.trailing.add(key)
            else:
                self.trailing.discard(key)
            self.methods.setdefault(key, []).append(_method_of(line))

    # ---- the daemon's lines ---------------------------------------------------------------------

    def received(self, line: bytes) -> dict[str, Any] | None:
        """Checks one line the daemon wrote; returns it when it is a well-formed request to the
        client (``tool/call``) or notification, for the peer to act on."""
        self.received_lines += 1
        try:
            msg = _decode(line)
        except (ValueError, UnicodeDecodeError):
            self.flag("stdout", "a line that is not JSON", line)
            return None
        if type(msg) is not dict or msg.get("jsonrpc") != "2.0":
            self.flag("stdout", "not a JSON-RPC 2.0 object", line)
            return None
        if "method" in msg:
            return self._request_or_notification(msg, line)
        if "id" not in msg or set(msg) - _RESPONSE_KEYS or ("result" in msg) == ("error" in msg):
            self.flag("stdout", "a malformed response", line)
            return None
        if "error" in msg:
            self._check_error(msg, line)
        if msg["id"] is None:
            self._null_answer(msg, line)
        else:
            self._answer(msg, line)
        return None

    def _request_or_notification(self, msg: dict[str, Any], line: bytes) -> dict[str, Any] | None:
        method, params = msg["method"], msg.get("params")
        if "id" in msg:
            if method != "tool/call" or type(msg["id"]) is not str or type(params) is not dict:
                self.flag("stdout", "a request other than tool/call", line)
                return None
            self._check_contract("clientRequest", method, params, line)
            return msg
        if method not in NOTIFICATIONS or type(params) is not dict:
            self.flag("stdout", f"an unknown notification {method!r}", line)
        else:
            self._check_contract("notification", method, params, line)
            return msg
        return None

    def _check_error(self, msg: dict[str, Any], line: bytes) -> None:
        error = msg["error"]
        data = error.get("data") if type(error) is dict else None
        if type(data) is not dict or not isinstance(error.get("message"), str):
            self.flag("error", "an error object without message or data", line)
            return
        pair = (error.get("code"), data.get("code"))
        if pair not in _ROWS:
            self.flag("error", f"{pair} is not a row of errors.json", line)
        if error.get("code") == -32603:
            key = _key(msg["id"]) if msg["id"] is not None else None
            sent = self.lines.get(key) if key is not None else None
            what = self._method(key) if key is not None else "id null"
            self.flag("internal_error", f"-32603 answering {what}", sent or b"?", line)

    def _null_answer(self, msg: dict[str, Any], line: bytes) -> None:
        if "error" not in msg:
            self.flag("answer", "a result with id null", line)
        elif self.null_owed:
            self.null_owed.popleft()
            self.answered += 1
        elif self.null_trailing:
            self.null_trailing -= 1
        else:
            self.flag("answer", "an id-null error no line called for", line, *self.recent)

    def _answer(self, msg: dict[str, Any], line: bytes) -> None:
        key = _key(msg["id"])
        if self.owed.get(key, 0) <= 0:
            self.flag("answer", "an answer to an id not owed one (twice, or never sent)", line)
            return
        self.owed[key] -= 1
        self.answered += 1
        sent = self.lines.get(key, b"")
        if key in self.watched:
            error = msg.get("error")
            self.outcomes[key] = (error.get("code") if type(error) is dict else None, sent, line)
        if key in self.trailing:
            code = msg.get("error", {}).get("code") if type(msg.get("error")) is dict else None
            if code != -32023:
                self.flag("shutdown", "a request after shutdown not answered -32023", sent, line)
        elif "result" in msg and len(set(self.methods.get(key, ()))) == 1:
            self._check_contract("result", self._method(key), msg["result"], line)
        if not self.owed[key]:
            del self.owed[key]
            self.lines.pop(key, None)
            self.methods.pop(key, None)
            self.trailing.discard(key)

    def _method(self, key: Any) -> str:
        """The method of the request ``key`` (all of them when the id is owed more than once,
        since then an answer cannot be told apart)."""
        methods = [m or "?" for m in self.methods.get(key, ())]
        if len(set(methods)) > 1:
            return f"one of {'/'.join(sorted(set(methods)))} (a shared id)"
        return methods[0] if methods else "?"

    def _check_contract(self, section: str, method: str, value: Any, line: bytes) -> None:
        if self._validate is None or method.startswith("test/") or not method:
            return
        try:
            self._validate[section](method, value)
        except AssertionError as exc:
            first = str(exc).splitlines()[0]
            self.flag("contract", f"{section} {method}: {first[:160]}", line)
        except KeyError:
            pass

    # ---- the end ----------------------------------------------------------------------------

    def finish(self, *, connection_closed: bool = False) -> list[Violation]:
        """Everything still owed becomes a violation (trailing requests excepted when the
        connection closed, as the protocol allows); returns every violation."""
        for key in list(self.owed):
            if key in self.trailing and connection_closed:
                continue
            what = self._method(key)
            self.flag("unanswered", f"{what} never answered", self.lines.get(key, b"?"))
        for line in self.null_owed:
            self.flag("unanswered", "a line owed an id-null error got none", line)
        self.null_owed.clear()
        for expectation in self.expectations:
            self._judge(expectation)
        self.expectations.clear()
        return list(self.violations.values())

    def _judge(self, e: Expectation) -> None:
        keys = [_key(key) for key in e.ids]
        if not all(key in self.outcomes for key in keys):
            return  # not all answered: flagged as unanswered, or excused (an abrupt end)
        outcomes = [self.outcomes[key] for key in keys]
        for code, sent, line in outcomes if e.codes else ():
            if code not in e.codes:
                self.flag("expect", e.detail, sent, line)
        if e.most:
            taken = sum(s for (code, *_), s in zip(outcomes, e.sizes, strict=True) if code is None)
            if taken > e.most:
                refused = sorted({code for code, *_ in outcomes if code is not None})
                self.flag("budget", e.detail, f"{taken} bytes accepted; errors: {refused}")


def _method_of(line: bytes) -> str:
    match = _METHOD.search(line)
    return match.group(1).decode("utf-8", "replace") if match else ""


def _contract_validators() -> dict[str, Any]:
    from contract import (
        validate_client_request,
        validate_notification,
        validate_result,
    )

    return {
        "result": validate_result,
        "notification": validate_notification,
        "clientRequest": validate_client_request,
    }


def stderr_problems(text: str) -> list[tuple[str, str]]:
    """What on the daemon's stderr shows a bug: a traceback, or a log record at level error or
    critical (the daemon logs those only for exceptions it did not expect). Each as
    ``(signature, line)``: the signature names the exception and the innermost frame, so one
    cause shows once however often it struck."""
    problems = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback"):  # printed, not logged: the process died of it
            rest = lines[i + 1 : i + 200]
            last = next((r for r in rest if r and not r[0].isspace()), "?")
            frames = _FRAME.findall("\n".join(rest[: rest.index(last)] if last in rest else rest))
            where = f" at {frames[-1][0]}:{frames[-1][1]} in {frames[-1][2]}" if frames else ""
            problems.append((f"uncaught: {last[:160]}{where}", "\n".join(lines[i : i + 40])[:3000]))
        elif "Traceback" in line or '"level":"error"' in line or '"level":"critical"' in line:
            problems.append((_signature(line), line[:3000]))
    return problems


_FRAME = re.compile(r'File "(?:[^"]*/)?(oamd/[^"]+)", line (\d+), in (\S+)')


def _signature(line: str) -> str:
    try:
        record = json.loads(line)
    except ValueError:
        return line[:120]
    if type(record) is not dict:
        return line[:120]
    event = record.get("event", "?")
    trace = str(record.get("exception", ""))
    if not trace:
        return f"{event} (no traceback)"
    frames = _FRAME.findall(trace)
    where = f" at {frames[-1][0]}:{frames[-1][1]} in {frames[-1][2]}" if frames else ""
    last = trace.strip().splitlines()[-1][:160]
    return f"{event}: {last}{where}"

"""Plays one scenario over one connection: sends its messages, answers ``tool/call`` requests,
waits (always bounded) and checks expectations. The full message log is kept as a ``Trace`` for
``diff`` and ``record``."""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson

from .match import MISSING, match, short
from .scenario import Scenario
from .transport import Connection, LinkError

__all__ = ["Failure", "Link", "Message", "Player", "Trace", "id_key", "id_label"]

MAX_SAFE = 9007199254740991


def id_key(value: Any) -> str:
    """A hashable key for a JSON-RPC id (``1`` and ``1.0`` are the same id)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def id_label(key: str) -> str:
    """``"r3"`` → ``r3``; numbers and null stay JSON."""
    if key.startswith('"') and key.endswith('"'):
        return key[1:-1]
    return key


def valid_request(obj: Any) -> bool:
    if not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0":
        return False
    method = obj.get("method")
    if not isinstance(method, str) or not method or "id" not in obj:
        return False
    ident = obj["id"]
    if isinstance(ident, str):
        return True
    if isinstance(ident, bool) or not isinstance(ident, int | float):
        return False
    return math.isfinite(ident) and abs(ident) <= MAX_SAFE


@dataclass
class Message:
    index: int
    t: float
    raw: bytes
    obj: Any
    problem: str | None = None

    @property
    def kind(self) -> str:
        o = self.obj
        if not isinstance(o, dict):
            return "invalid"
        if "method" in o:
            return "request" if "id" in o else "notification"
        return "response"

    @property
    def method(self) -> str | None:
        return self.obj.get("method") if isinstance(self.obj, dict) else None

    @property
    def params(self) -> Any:
        return self.obj.get("params", MISSING) if isinstance(self.obj, dict) else MISSING

    @property
    def request_id_key(self) -> str | None:
        p = self.params
        if isinstance(p, dict) and "requestId" in p:
            return id_key(p["requestId"])
        return None


@dataclass
class Failure:
    step: int | None
    exchange: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "end"
        field_ = f" {self.path}:" if self.path else ""
        return f"{where}: {self.exchange}:{field_} {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "exchange": self.exchange,
            "path": self.path,
            "message": self.message,
        }


@dataclass
class Trace:
    """Everything one implementation did during one scenario."""

    messages: list[Message] = field(default_factory=list)
    sent: list[tuple[float, bytes]] = field(default_factory=list)
    methods: dict[str, str] = field(default_factory=dict)  # request id key -> method
    request_counts: dict[str, int] = field(default_factory=dict)  # tracked requests
    sent_ids: set[str] = field(default_factory=set)
    exit_code: int | None = None
    eof: bool = False
    stderr: str = ""

    def responses(self, key: str) -> list[Message]:
        return [
            m
            for m in self.messages
            if m.kind == "response" and "id" in m.obj and id_key(m.obj["id"]) == key
        ]

    def label(self, key: str) -> str:
        method = self.methods.get(key)
        return f"{id_label(key)} ({method})" if method else id_label(key)


class Link:
    """A connection plus the task that reads it; scenarios attach to it one after another."""

    def __init__(self, conn: Connection, tg: anyio.abc.TaskGroup) -> None:
        self.conn = conn
        self.sink: Player | None = None
        self.eof = False
        self.strays: list[bytes] = []
        self.changed = anyio.Event()
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        tg.start_soon(self._read)

    async def _read(self) -> None:
        try:
            with self._scope:
                while True:
                    line = await self.conn.receive_line()
                    if line is None:
                        break
                    if self.sink is not None:
                        self.sink.on_line(line)
                    else:
                        self.strays.append(line)
                    self._notify()
        except Exception as exc:  # the reader must never take the run down with it
            self.strays.append(f"<read error: {exc!r}>".encode())
        finally:
            self.eof = True
            self._notify()
            self._done.set()

    async def aclose(self) -> None:
        """Stops reading first, then closes: never close a socket under a pending read."""
        with anyio.CancelScope(shield=True):
            self._scope.cancel()
            await self._done.wait()
            await self.conn.aclose()

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_change(self, deadline: float) -> bool:
        """Wait for the next message (or EOF) until ``deadline`` (monotonic)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        event = self.changed
        with anyio.move_on_after(remaining):
            await event.wait()
            return True
        return False


class _Stop(Exception):
    pass


class Player:
    """Plays ``scenario`` on ``link``; ``failures`` and ``trace`` hold the outcome."""

    def __init__(self, scenario: Scenario, link: Link, *, check: bool = True) -> None:
        self.scenario = scenario
        self.link = link
        self.check = check
        self.trace = Trace()
        self.failures: list[Failure] = []
        self.t0 = time.monotonic()
        self.rules: dict[str, Any] = dict(scenario.data.get("responder", {}))
        self.rule_uses: dict[str, int] = {}
        self.replied: set[str] = set()
        self._tg: anyio.abc.TaskGroup | None = None
        self._auto_id = 0
        self.step_index: int | None = None
        self.invariants: list[Failure] = []

    # -- incoming ------------------------------------------------------------------------------
    def on_line(self, raw: bytes) -> None:
        problem = None
        obj: Any = MISSING
        if not raw.strip():
            problem = "blank line on output"
        else:
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                try:  # non-finite numbers etc.: fall back to the standard library
                    obj = json.loads(raw)
                except ValueError as exc:
                    problem = f"not JSON: {exc}"
            if problem is None and (not isinstance(obj, dict) or obj.get("jsonrpc") != "2.0"):
                problem = "not a JSON-RPC 2.0 object"
        msg = Message(len(self.trace.messages), time.monotonic() - self.t0, raw, obj, problem)
        self.trace.messages.append(msg)
        if msg.kind == "request" and msg.method == "tool/call" and self._tg is not None:
            self._auto_answer(msg)

    def _auto_answer(self, msg: Message) -> None:
        params = msg.params
        call = params.get("call") if isinstance(params, dict) else None
        name = call.get("name") if isinstance(call, dict) else None
        rule = self.rules.get(str(name), self.rules.get("*"))
        if rule is None:
            return
        uses = self.rule_uses.get(str(name), 0)
        self.rule_uses[str(name)] = uses + 1
        if isinstance(rule, dict) and "sequence" in rule:
            seq = rule["sequence"]
            rule = seq[min(uses, len(seq) - 1)]
        if not isinstance(rule, dict) or rule.get("hold"):
            return
        assert self._tg is not None
        self._tg.start_soon(self._reply, msg, rule)

    async def _reply(self, msg: Message, rule: dict[str, Any]) -> None:
        delay = float(rule.get("delay_ms", 0)) / 1000
        if delay > 0:
            await anyio.sleep(delay)
        ident = msg.obj.get("id")
        if "message" in rule:
            out = _substitute(rule["message"], ident)
        elif "error" in rule:
            out = {"jsonrpc": "2.0", "id": ident, "error": rule["error"]}
        else:
            out = {"jsonrpc": "2.0", "id": ident, "result": rule.get("result")}
        self.replied.add(id_key(ident))
        with contextlib.suppress(LinkError):
            await self._send_obj(out, track=False)

    # -- outgoing ------------------------------------------------------------------------------
    async def _send_raw(self, line: bytes, obj: Any, *, track: bool) -> None:
        self.trace.sent.append((time.monotonic() - self.t0, line))
        if isinstance(obj, dict) and "id" in obj:
            key = id_key(obj["id"])
            self.trace.sent_ids.add(key)
            if track and valid_request(obj):
                self.trace.request_counts[key] = self.trace.request_counts.get(key, 0) + 1
                self.trace.methods.setdefault(key, obj["method"])
        await self.link.conn.send_line(line)

    async def _send_obj(self, obj: Any, *, track: bool = True) -> None:
        await self._send_raw(orjson.dumps(obj), obj, track=track)

    # -- helpers -------------------------------------------------------------------------------
    def fail(self, exchange: str, message: str, path: str = "") -> None:
        self.failures.append(Failure(self.step_index, exchange, path, message))

    def _timeout(self, step: dict[str, Any]) -> float:
        return float(step.get("timeout_ms", self.scenario.timeout * 1000)) / 1000

    async def wait_for(self, pred: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if pred():
                return True
            if self.link.eof:
                return bool(pred())
            if not await self.link.wait_change(deadline):
                return bool(pred())

    def resolve(self, ref: str) -> Any:
        kind, _, rest = ref.partition(":")
        head, _, path = rest.partition(".")
        target: Any = MISSING
        if kind == "toolcall":
            calls = [
                m for m in self.trace.messages if m.method == "tool/call" and m.kind == "request"
            ]
            n = int(head)
            target = calls[n].obj if n < len(calls) else MISSING
        elif kind == "toolcancel":
            cancels = [m for m in self.trace.messages if m.method == "tool/cancel"]
            n = int(head)
            target = cancels[n].obj if n < len(cancels) else MISSING
        elif kind == "response":
            found = self.trace.responses(_key_from_ref(head))
            target = found[0].obj if found else MISSING
        else:
            raise ValueError(f"unknown $from kind in {ref!r}")
        for part in [p for p in path.split(".") if p] if path else []:
            if isinstance(target, list) and part.lstrip("-").isdigit():
                i = int(part)
                target = target[i] if -len(target) <= i < len(target) else MISSING
            elif isinstance(target, dict):
                target = target.get(part, MISSING)
            else:
                return MISSING
        return target

    def _fill(self, value: Any) -> Any:
        """Replace ``{"$from": "response:tr.result.transcript"}`` in outgoing params by the value."""
        if isinstance(value, dict):
            if len(value) == 1 and "$from" in value:
                found = self.resolve(value["$from"])
                if found is MISSING:
                    self.fail("send", f"reference {value['$from']!r} does not resolve")
                    raise _Stop
                return found
            return {k: self._fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._fill(v) for v in value]
        return value

    def _match(self, exchange: str, expected: Any, actual: Any, mode: str, prefix: str) -> bool:
        mismatches = match(expected, actual, mode=mode, resolve=self.resolve)
        for m in mismatches:
            path = f"{prefix}.{m.path}" if prefix and m.path else (prefix or m.path)
            self.fail(exchange, m.message, path)
        return not mismatches

    # -- selectors (order / wait) --------------------------------------------------------------
    def select(self, sel: dict[str, Any]) -> int | None:
        """Index of the message a selector names, or None if not (yet) there."""
        if "response" in sel:
            found = self.trace.responses(_key(sel["response"]))
            cands = [m.index for m in found]
        else:
            cands = []
            for m in self.trace.messages:
                if m.problem is not None:
                    continue
                if "method" in sel and m.method != sel["method"]:
                    continue
                if "tool_call" in sel:
                    if m.method != "tool/call" or m.kind != "request":
                        continue
                    call = m.params.get("call") if isinstance(m.params, dict) else None
                    if sel["tool_call"] not in (None, "*") and (
                        not isinstance(call, dict) or call.get("name") != sel["tool_call"]
                    ):
                        continue
                if "event" in sel:
                    if not (m.method or "").endswith("/event"):
                        continue
                    ev = m.params.get("event") if isinstance(m.params, dict) else None
                    if sel["event"] != "*" and (
                        not isinstance(ev, dict) or ev.get("type") != sel["event"]
                    ):
                        continue
                if "requestId" in sel and m.request_id_key != _key(sel["requestId"]):
                    continue
                if "params" in sel and match(sel["params"], m.params, resolve=self.resolve):
                    continue
                cands.append(m.index)
        if sel.get("last"):
            return cands[-1] if cands else None
        n = int(sel.get("nth", 0))
        return cands[n] if n < len(cands) else None

    # -- the scenario --------------------------------------------------------------------------
    async def play(self) -> None:
        self.link.sink = self
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                try:
                    for i, step in enumerate(self.scenario.steps):
                        self.step_index = i
                        await self._step(step)
                    self.step_index = None
                    await self._finish()
                except _Stop:
                    pass
                except LinkError as exc:
                    self.fail("connection", str(exc))
                except (ValueError, KeyError, TypeError, IndexError) as exc:  # a malformed scenario
                    self.fail("scenario", f"cannot play step: {type(exc).__name__}: {exc}")
                tg.cancel_scope.cancel()
        finally:
            self._tg = None
            self.trace.eof = self.link.eof

    async def _step(self, step: dict[str, Any]) -> None:
        if "request" in step:
            self._auto_id += 1
            ident = step.get("id", f"r{self._auto_id}")
            msg: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": step["request"]}
            if "params" in step:
                msg["params"] = self._fill(step["params"])
            await self._send_obj(msg)
        elif "notify" in step:
            msg = {"jsonrpc": "2.0", "method": step["notify"]}
            if "params" in step:
                msg["params"] = self._fill(step["params"])
            await self._send_obj(msg)
        elif "send" in step:
            await self._send_obj(self._fill(step["send"]))
        elif "raw" in step:
            text = step["raw"]
            line = text.encode("utf-8")
            if b"\n" in line:
                raise ValueError("a raw line must not contain a newline")
            obj: Any = None
            with contextlib.suppress(ValueError):
                obj = json.loads(text)
            await self._send_raw(line, obj, track=True)
        elif "sleep_ms" in step:
            await anyio.sleep(float(step["sleep_ms"]) / 1000)
        elif "responder" in step:
            self.rules.update(step["responder"])
        elif "close_input" in step:
            await self.link.conn.close_input()
        elif "reply" in step:
            await self._manual_reply(step)
        elif "wait" in step:
            await self._wait(step)
        elif "expect" in step:
            if self.check or step["expect"] in ("exit",):
                await getattr(self, "_expect_" + step["expect"])(step)
            else:
                await self._wait_only(step)

    async def _manual_reply(self, step: dict[str, Any]) -> None:
        sel = dict(step["reply"])
        sel.setdefault("tool_call", sel.pop("name", "*"))
        ok = await self.wait_for(lambda: self.select(sel) is not None, self._timeout(step))
        if not ok:
            self.fail("tool/call", f"no tool/call matching {short(step['reply'])} arrived")
            raise _Stop
        msg = self.trace.messages[self.select(sel)]  # type: ignore[index]
        delay = float(step.get("delay_ms", 0)) / 1000
        if delay:
            await anyio.sleep(delay)
        ident = msg.obj["id"]
        if "message" in step:
            out = _substitute(step["message"], ident)
        elif "error" in step:
            out = {"jsonrpc": "2.0", "id": ident, "error": step["error"]}
        else:
            out = {"jsonrpc": "2.0", "id": ident, "result": step.get("result")}
        self.replied.add(id_key(ident))
        await self._send_obj(out, track=False)

    async def _wait(self, step: dict[str, Any]) -> None:
        sel = step["wait"]
        if isinstance(sel, str):
            sel = {"response": sel}
        ok = await self.wait_for(lambda: self.select(sel) is not None, self._timeout(step))
        if not ok:
            self.fail("wait", f"nothing matching {short(sel)} arrived in time")
            raise _Stop

    async def _wait_only(self, step: dict[str, Any]) -> None:
        """Diff/record mode: honour the expectation's waiting, skip its checks."""
        kind = step["expect"]
        timeout = self._timeout(step)
        if kind in ("response", "events", "tool_calls") and "id" in step:
            key = _key(step["id"])
            n = int(step.get("nth", 0)) + 1 if kind == "response" else 1
            await self.wait_for(lambda: len(self.trace.responses(key)) >= n, timeout)
        elif kind == "order":
            sels = step["sequence"]
            await self.wait_for(lambda: all(self.select(s) is not None for s in sels), timeout)
        elif kind in ("tool_cancels", "world_changed"):
            await self._channel_wait(step, kind)
        elif kind in ("silence", "no_response"):
            await anyio.sleep(float(step.get("ms", 100)) / 1000)
        elif kind == "count":
            await anyio.sleep(float(step.get("quiet_ms", 100)) / 1000)

    # -- expectations --------------------------------------------------------------------------
    async def _expect_response(self, step: dict[str, Any]) -> None:
        key = _key(step["id"])
        nth = int(step.get("nth", 0))
        label = f"response {self.trace.label(key)}"
        ok = await self.wait_for(lambda: len(self.trace.responses(key)) > nth, self._timeout(step))
        if not ok:
            why = (
                "the implementation closed its output"
                if self.link.eof
                else f"within {self._timeout(step):g} s"
            )
            self.fail(label, f"no response ({why})")
            return
        msg = self.trace.responses(key)[nth]
        mode = step.get("match", "partial")
        obj = msg.obj
        if "result" in step:
            if "result" not in obj:
                self.fail(label, f"expected a result, got error {short(obj.get('error'))}", "error")
            else:
                self._match(label, step["result"], obj["result"], mode, "result")
        if "error" in step:
            if "error" not in obj:
                self.fail(
                    label, f"expected an error, got result {short(obj.get('result'))}", "result"
                )
            else:
                self._match(
                    label, step["error"], obj["error"], step.get("match", "partial"), "error"
                )
        if "message" in step:
            self._match(label, step["message"], obj, mode, "")
        raw = msg.raw.decode("utf-8", "replace")
        if "line" in step and raw != step["line"]:
            self.fail(label, f"expected the line {step['line']!r}, got {raw!r}", "(line)")
        if "line_startswith" in step and not raw.startswith(step["line_startswith"]):
            self.fail(
                label,
                f"expected the line to start {step['line_startswith']!r}, got {raw!r}",
                "(line)",
            )

    def _events(self, key: str, method: str | None) -> list[Message]:
        return [
            m
            for m in self.trace.messages
            if m.kind == "notification"
            and (m.method == method if method else (m.method or "").endswith("/event"))
            and m.request_id_key == key
        ]

    async def _expect_events(self, step: dict[str, Any]) -> None:
        key = _key(step["id"])
        method = step.get("method")
        label = f"{method or 'events'} of {self.trace.label(key)}"
        if step.get("wait", True):
            ok = await self.wait_for(lambda: bool(self.trace.responses(key)), self._timeout(step))
            if not ok:
                self.fail(label, "the request was never answered, so its events cannot be checked")
                return
        msgs = self._events(key, method)
        payloads = [m.params.get("event", MISSING) for m in msgs]
        types = [p.get("type") if isinstance(p, dict) else None for p in payloads]
        if step.get("none") and msgs:
            self.fail(label, f"expected no events, got {len(msgs)}: {short(types)}")
        if "count" in step and len(msgs) != step["count"]:
            self.fail(label, f"expected {step['count']} event(s), got {len(msgs)}: {short(types)}")
        if "types" in step and not _types_match(step["types"], types):
            self.fail(
                label, f"event types {short(types, 400)} do not match {short(step['types'], 400)}"
            )
        if "type_counts" in step:
            for name, n in step["type_counts"].items():
                if types.count(name) != n:
                    self.fail(
                        label,
                        f"expected {n} {name} event(s), got {types.count(name)}: {short(types, 400)}",
                    )
        if "events" in step:
            self._match(label, step["events"], payloads, step.get("match", "partial"), "")
        if "contains" in step:
            pos = 0
            for want in step["contains"]:
                while pos < len(payloads) and match(want, payloads[pos], resolve=self.resolve):
                    pos += 1
                if pos >= len(payloads):
                    self.fail(
                        label,
                        f"no event matching {short(want)} (in order) among {short(types, 400)}",
                    )
                    break
                pos += 1
        if "envelope" in step:
            for i, m in enumerate(msgs):
                self._match(label, step["envelope"], m.params, "partial", f"[{i}].params")
        if "joined" in step:
            text = _joined(payloads)
            self._match(label, step["joined"], text, "partial", "(joined text)")

    async def _channel_wait(self, step: dict[str, Any], kind: str) -> list[Message]:
        method = {
            "tool_calls": "tool/call",
            "tool_cancels": "tool/cancel",
            "world_changed": "world/changed",
        }[kind]
        key = _key(step["id"]) if "id" in step else None

        def pick() -> list[Message]:
            return [
                m
                for m in self.trace.messages
                if m.method == method and (key is None or m.request_id_key == key)
            ]

        want = step.get("count")
        if want is None and isinstance(step.get("params"), list):
            want = len(step["params"])
        after = step.get("after", step.get("id") if kind == "tool_calls" else None)
        timeout = self._timeout(step)
        deadline = time.monotonic() + timeout

        def ready() -> bool:
            if after is not None and not self.trace.responses(_key(after)):
                return False
            return want is None or len(pick()) >= want

        await self.wait_for(ready, max(0.0, deadline - time.monotonic()))
        settle = float(step.get("settle_ms", 0)) / 1000
        if settle:
            await anyio.sleep(settle)
        return pick()

    async def _expect_channel(self, step: dict[str, Any], kind: str) -> None:
        msgs = await self._channel_wait(step, kind)
        label = kind.replace("_", "/") if kind != "world_changed" else "world/changed"
        label = {"tool/calls": "tool/call", "tool/cancels": "tool/cancel"}.get(label, label)
        if "id" in step:
            label += f" of {self.trace.label(_key(step['id']))}"
        params = [m.params for m in msgs]
        if "count" in step and len(msgs) != step["count"]:
            self.fail(
                label, f"expected {step['count']} message(s), got {len(msgs)}: {short(params, 400)}"
            )
        if "params" in step:
            self._match(label, step["params"], params, step.get("match", "partial"), "")
        if "each_id" in step:
            for i, m in enumerate(msgs):
                self._match(
                    label, step["each_id"], m.obj.get("id", MISSING), "partial", f"[{i}].id"
                )

    async def _expect_tool_calls(self, step: dict[str, Any]) -> None:
        await self._expect_channel(step, "tool_calls")

    async def _expect_tool_cancels(self, step: dict[str, Any]) -> None:
        await self._expect_channel(step, "tool_cancels")

    async def _expect_world_changed(self, step: dict[str, Any]) -> None:
        await self._expect_channel(step, "world_changed")

    async def _expect_order(self, step: dict[str, Any]) -> None:
        sels = step["sequence"]
        await self.wait_for(
            lambda: all(self.select(s) is not None for s in sels), self._timeout(step)
        )
        prev = -1
        prev_sel: Any = None
        for sel in sels:
            idx = self.select(sel)
            if idx is None:
                self.fail("order", f"no message matching {short(sel)}")
                return
            if idx <= prev:
                self.fail(
                    "order",
                    f"{short(sel)} (message #{idx}) came before {short(prev_sel)} (message #{prev})",
                )
                return
            prev, prev_sel = idx, sel

    def _filtered(self, step: dict[str, Any]) -> list[Message]:
        out = []
        for m in self.trace.messages:
            if "method" in step and m.method != step["method"]:
                continue
            if "kind" in step and m.kind != step["kind"]:
                continue
            out.append(m)
        return out

    async def _expect_count(self, step: dict[str, Any]) -> None:
        if "after" in step:
            key = _key(step["after"])
            await self.wait_for(lambda: bool(self.trace.responses(key)), self._timeout(step))
        await anyio.sleep(float(step.get("quiet_ms", 100)) / 1000)
        got = self._filtered(step)
        if len(got) != step["messages"]:
            lines = [m.raw.decode("utf-8", "replace")[:200] for m in got]
            self.fail("count", f"expected {step['messages']} message(s), got {len(got)}: {lines}")

    async def _expect_silence(self, step: dict[str, Any]) -> None:
        before = len(self.trace.messages)
        await anyio.sleep(float(step.get("ms", 100)) / 1000)
        extra = self.trace.messages[before:]
        if extra:
            lines = [m.raw.decode("utf-8", "replace")[:200] for m in extra]
            self.fail("silence", f"expected no message, got {lines}")

    async def _expect_no_response(self, step: dict[str, Any]) -> None:
        key = _key(step["id"])
        await anyio.sleep(float(step.get("ms", 100)) / 1000)
        if self.trace.responses(key):
            self.fail(
                f"response {self.trace.label(key)}",
                "answered too early (the request should still be pending)",
            )

    async def _expect_exit(self, step: dict[str, Any]) -> None:
        timeout = self._timeout(step)
        conn = self.link.conn
        if conn.process is not None:
            code = await conn.wait_exit(timeout)
            self.trace.exit_code = code
            if code is None:
                self.fail("exit", f"the process did not exit within {timeout:g} s")
            elif self.check and "code" in step and code != step["code"]:
                self.fail("exit", f"exit status {code}, expected {step['code']}")
        else:
            ok = await self.wait_for(lambda: self.link.eof, timeout)
            if not ok:
                self.fail("exit", f"the server did not close the connection within {timeout:g} s")

    # -- the end -------------------------------------------------------------------------------
    async def _finish(self) -> None:
        pending = lambda: [  # noqa: E731
            k for k, n in self.trace.request_counts.items() if len(self.trace.responses(k)) < n
        ]
        await self.wait_for(lambda: not pending(), self.scenario.timeout)
        for key in pending():
            self.fail(
                f"response {self.trace.label(key)}",
                "never answered (every request gets exactly one response)",
            )
        before = len(self.failures)
        self.check_invariants()
        self.invariants = self.failures[before:]

    def check_invariants(self) -> None:
        tr = self.trace
        for m in tr.messages:
            if m.problem:
                self.fail("framing", f"message #{m.index}: {m.problem}: {m.raw[:200]!r}")
        counts: dict[str, int] = {}
        for m in tr.messages:
            if m.kind == "response" and "id" in m.obj:
                key = id_key(m.obj["id"])
                counts[key] = counts.get(key, 0) + 1
                if key != "null" and key not in tr.sent_ids:
                    self.fail("framing", f"a response to id {id_label(key)} that was never sent")
            if m.kind == "response" and "result" in m.obj and "error" in m.obj:
                self.fail("framing", f"message #{m.index} has both result and error")
        for key, n in tr.request_counts.items():
            if counts.get(key, 0) > n:
                self.fail(
                    f"response {tr.label(key)}", f"answered {counts[key]} times, sent {n} time(s)"
                )
        # Everything a request causes is sent before its response (PROTOCOL.md §2.5).
        for m in tr.messages:
            key = m.request_id_key
            if key is None or tr.request_counts.get(key) != 1:
                continue
            if not ((m.method or "").endswith("/event") or m.method == "tool/call"):
                continue
            resp = tr.responses(key)
            if resp and resp[0].index < m.index:
                self.fail(
                    f"{m.method} of {tr.label(key)}",
                    f"message #{m.index} came after the response (#{resp[0].index})",
                )
        ids = [id_key(m.obj["id"]) for m in tr.messages if m.kind == "request"]
        dups = {i for i in ids if ids.count(i) > 1}
        if dups:
            self.fail("tool/call", f"request ids reused by the server: {sorted(dups)}")


def _key(value: Any) -> str:
    return id_key(value)


def _key_from_ref(text: str) -> str:
    if re.fullmatch(r"-?\d+", text):
        return id_key(int(text))
    return id_key(text)


def _substitute(template: Any, ident: Any) -> Any:
    if template == "$id":
        return ident
    if isinstance(template, dict):
        return {k: _substitute(v, ident) for k, v in template.items()}
    if isinstance(template, list):
        return [_substitute(v, ident) for v in template]
    return template


def _types_match(pattern: list[str], types: list[Any]) -> bool:
    """``["modelStep", "text+"]``: names with an optional ``?``, ``*`` or ``+`` suffix."""
    regex = ""
    for item in pattern:
        name, quant = (item[:-1], item[-1]) if item[-1:] in "?*+" else (item, "")
        regex += f"(?:{re.escape(name)};){quant}"
    return re.fullmatch(regex, "".join(f"{t};" for t in types)) is not None


def _joined(payloads: list[Any]) -> str:
    """The text the events add up to (session ``text`` events or NPC line events)."""
    text = ""
    for p in payloads:
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind == "text":
            delta = p.get("delta", "")
            text = delta if p.get("isReset") else text + delta
        elif kind == "lineDelta":
            text += p.get("delta", "")
        elif kind == "lineReset":
            text = p.get("line", "")
    return text

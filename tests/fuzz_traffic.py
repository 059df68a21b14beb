"""Fuzz traffic: a structure-aware generator of protocol lines and of answers to ``tool/call``.

One ``random.Random`` drives everything, so a seed reproduces a plan: ``make fuzz`` seeds a plain
``Random`` (and prints the seed), the CI-sized test passes hypothesis's ``st.randoms()``, whose
draws hypothesis records and shrinks. The whole plan is drawn before a byte is sent (``plan``):
the peer that plays it never draws, so timing cannot change what is drawn.

The lines: requests of every method with params drawn by ``fuzz_values`` from
``protocol/bridge.json``'s shapes, mostly valid and pointing at a small pool of session/NPC/world
ids so that they meet live objects, then mutated now and then (a member dropped, retyped or made nasty: lone surrogates, 400-digit
integers, ``1e400``, nesting near and past the limit); notifications; unknown methods; envelope
defects; ids of every type; stray responses; batches; junk bytes. ``shutdown`` is left to the peer,
which sends it only where an episode ends. The answers to ``tool/call``: a result, an error, a
wrong id, twice, never, late (after more lines), junk, or too deep to be read.

Rarely (``heavy_rate`` per line) a plan splices in one of ``fuzz_heavy``'s large sequences, with
the expectations they carry. A plan also draws how ``oamd stdio`` meets it: stdin and stdout as
non-blocking pipes, the first line sent only once the daemon waits for it, and a last line
without its newline before end of input.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from fuzz_heavy import Heavy
from fuzz_oracle import Expectation
from fuzz_values import (
    METHODS,
    NASTY_NUMBERS,
    NASTY_STRINGS,
    NESTING,
    PARAMS,
    SAFE,
    WEIGHTS,
    Raw,
    Values,
    encode,
    nested,
)

__all__ = ["ENDS", "REPLY_KINDS", "Plan", "ToolReply", "Traffic"]


REPLY_KINDS = ("result", "error", "wrong_id", "twice", "never", "late", "junk", "deep")


@dataclass(frozen=True, slots=True)
class ToolReply:
    """How the peer answers one ``tool/call``: ``kind`` (``REPLY_KINDS``), the ``body`` (the
    reply's ``result`` or ``error`` member, or the junk line), and ``after``: for ``late``, how
    many more lines go out first. ``resolves``: whether the reply can settle the call."""

    kind: str
    body: Any = None
    after: int = 0

    @property
    def resolves(self) -> bool:
        return self.kind in ("result", "error", "twice", "late")

    def lines(self, call_id: Any) -> list[bytes]:
        """The lines answering the call ``call_id`` (none for ``never``)."""
        if self.kind == "never":
            return []
        if self.kind == "junk":
            return [self.body]
        if self.kind == "error":
            return [encode({"jsonrpc": "2.0", "id": call_id, "error": self.body})]
        if self.kind == "wrong_id":  # body: (the wrong id, the result)
            return [encode({"jsonrpc": "2.0", "id": self.body[0], "result": self.body[1]})]
        line = encode({"jsonrpc": "2.0", "id": call_id, "result": self.body})
        return [line, line] if self.kind == "twice" else [line]


ENDS = ("close", "eof", "shutdown", "abrupt", "shutdown_notification")
"""How an episode ends, once its lines are sent and (but for ``abrupt``) a ``ping`` answered:
``close`` waits for every answer, then closes; ``eof`` closes at once (stdio still answers
everything received); ``shutdown`` sends ``shutdown`` and a few more requests (answered -32023 or
not at all); ``abrupt`` closes without waiting for anything; ``shutdown_notification`` is
``shutdown`` sent as a notification."""


HEAVY_RATE = 1 / 600
"""Chance that a line of a plan is a ``fuzz_heavy`` splice instead (``make fuzz``: a few dozen
in a run; the soak and the CI run choose their own)."""


@dataclass
class Plan:
    """What a peer plays: ``lines`` in order, the answer for the n-th ``tool/call`` (cycling),
    how the episode ends, and the requests sent after a ``shutdown``; ``expectations`` for the
    oracle. Over stdio only: ``stdin_nonblocking``/``stdout_nonblocking`` (the pipes the daemon
    is given), ``late_start`` (the first line waits until the daemon waits for it) and
    ``last_line`` (sent without a newline right before end of input; answered like any)."""

    lines: list[bytes] = field(default_factory=list)
    replies: list[ToolReply] = field(default_factory=list)
    end: str = "close"
    trailing: list[bytes] = field(default_factory=list)
    expectations: list[Expectation] = field(default_factory=list)
    stdin_nonblocking: bool = False
    stdout_nonblocking: bool = False
    late_start: bool = False
    last_line: bytes | None = None


class Traffic(Values):
    """Draws lines from ``rng``. ``id_prefix`` keeps string ids apart between plans on one
    connection; integer ids count up from ``first_id``. ``heavy_rate``: the chance of a
    ``fuzz_heavy`` splice per line; ``budget``: the daemon's ``--max-connection-bytes`` (what
    hoarding splices pass; none without it); ``system``: the share of models that are
    ``system``, when a model server stands behind it."""

    def __init__(
        self,
        rng: random.Random,
        *,
        id_prefix: str = "",
        first_id: int = 1,
        heavy_rate: float = HEAVY_RATE,
        budget: int | None = None,
        system: float = 0.0,
    ) -> None:
        super().__init__(rng, system=system)
        self.prefix = id_prefix
        self.n = first_id
        self.recent_ids: list[Any] = []
        self.heavy_rate = heavy_rate
        self.rare = Values(random.Random(rng.getrandbits(64)))
        """Draws what must stay rare (splices, how stdio is met) with a plain random seeded from
        ``rng``: hypothesis's random favours the smallest integers, which would make them common."""
        self.heavy = Heavy(self.rare, self.unique, budget=budget, system=system > 0)

    def unique(self, kind: str) -> str:
        """An id no random line uses (for the requests and objects of a splice)."""
        self.n += 1
        return f"{self.prefix}{kind}-{self.n}"

    # ---- plan -----------------------------------------------------------------------------

    def plan(
        self,
        count: int,
        replies: int = 16,
        ends: tuple[int, ...] = (50, 25, 12, 10, 3),
        *,
        splice: str | None = None,
    ) -> Plan:
        """``count`` lines, ``replies`` tool/call answers, an end drawn with weights ``ends``
        (one per ``ENDS``); with ``splice`` (one of ``fuzz_heavy.HEAVY``), that splice somewhere
        among the first lines."""
        plan = Plan()
        later: list[tuple[int, bytes]] = []
        at = self.rare.r.randrange(max(count // 2, 1)) if splice else -1
        while len(plan.lines) < count:
            if later and later[0][0] <= len(plan.lines):
                plan.lines.append(later.pop(0)[1])
            elif (splice and len(plan.lines) >= at) or self.rare.chance(self.heavy_rate):
                spliced = self.heavy.splice(splice)
                splice = None
                plan.lines += spliced.now
                plan.expectations += spliced.expectations
                later += [(len(plan.lines) + n, line) for n, line in spliced.later]
                later.sort(key=lambda item: item[0])
            else:
                plan.lines.append(self.line())
        plan.lines += [line for _, line in later]
        plan.replies = [self.tool_reply() for _ in range(replies)]
        plan.end = self.weighted(ENDS, ends)
        plan.trailing = [self.request() for _ in range(self.r.randint(0, 3))]
        plan.stdin_nonblocking = self.rare.chance(0.25)
        plan.stdout_nonblocking = self.rare.chance(0.25)
        plan.late_start = self.rare.chance(0.5)
        if self.rare.chance(0.3):
            plan.last_line = self.request()
        return plan

    def line(self) -> bytes:
        r = self.roll()
        if r < 0.72:
            return self.request()
        if r < 0.77:
            return encode({"jsonrpc": "2.0", "method": self.method(), "params": self.params()})
        if r < 0.80:
            return self.unknown_method()
        if r < 0.87:
            return self.junk()
        if r < 0.93:
            return self.envelope_defect()
        if r < 0.97:
            return self.stray_response()
        return self.deep_request()

    # ---- ids --------------------------------------------------------------------------------

    def msg_id(self) -> Any:
        self.n += 1
        n, r = self.n, self.roll()
        if r < 0.4:
            value: Any = n
        elif r < 0.75:
            value = f"{self.prefix}r{n}"
        elif r < 0.8:
            value = f"{self.prefix}é{n}\ud7ff"
        elif r < 0.84:
            value = -n
        elif r < 0.87:
            value = SAFE - n
        elif r < 0.9:
            value = n + 0.5  # not integral: echoed as sent
        elif r < 0.93:
            value = Raw(f"{n}.0")  # integral: echoed as {n}
        elif r < 0.95 and self.recent_ids:
            value = self.r.choice(self.recent_ids)  # a duplicate id, answered twice
        else:
            value = self.r.choice(
                (None, True, False, {}, [], SAFE + 1, -SAFE - 1, 1e20, Raw("1e400"), [n])
            )
        if not isinstance(value, Raw | bool | list | dict) and value is not None:
            self.recent_ids = [*self.recent_ids[-7:], value]
        return value

    # ---- requests --------------------------------------------------------------------------

    def method(self) -> str:
        return self.weighted(METHODS, WEIGHTS)

    def params(self, method: str | None = None) -> Any:
        self.dirty = self.roll() < 0.25
        params = PARAMS[method or self.method()](self)
        if self.dirty and self.roll() < 0.5:
            params = self.mutate(params)
        self.dirty = False
        return params

    def mutate(self, params: dict[str, Any]) -> Any:
        r = self.roll()
        if r < 0.08:
            return self.r.choice(([], "x", 5, [params]))
        keys = list(params)
        if r < 0.3 and keys:
            del params[self.r.choice(keys)]
        elif r < 0.7 and keys:
            params[self.r.choice(keys)] = self.value()
        elif r < 0.85:
            params["zz" + self.text()[:5]] = self.value()
        else:
            params[self.r.choice([*keys, "x"])] = self.r.choice((*NASTY_NUMBERS, *NASTY_STRINGS))
        return params

    def request(self) -> bytes:
        method = self.method()
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.msg_id(), "method": method}
        params = self.params(method)
        if params or self.roll() < 0.5:
            msg["params"] = params
        return encode(msg)

    def deep_request(self) -> bytes:
        params = {"session": "s0", "prompt": "x", "v": nested(self.r.choice(NESTING))}
        return encode({"jsonrpc": "2.0", "id": self.msg_id(), "method": "ping", "params": params})

    def unknown_method(self) -> bytes:
        method = self.r.choice(
            ("nope", "session/", "$/cancelRequest", "tool/call", "tool/cancel", "test/nope", "")
        )
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": {"id": self.n}}
        if self.roll() < 0.7:
            msg["id"] = self.msg_id()
        return encode(msg)

    def envelope_defect(self) -> bytes:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.msg_id(), "method": "ping"}
        r = self.roll()
        if r < 0.2:
            msg["jsonrpc"] = self.r.choice(("1.0", 2.0, None, "2.00"))
        elif r < 0.35:
            del msg["jsonrpc"]
        elif r < 0.5:
            msg["method"] = self.r.choice((5, None, "", ["ping"], {"m": 1}))
        elif r < 0.6:
            del msg["method"]
        elif r < 0.8:
            msg["params"] = self.r.choice(([], "x", 0, True, [1, 2]))
        else:
            msg["extra"] = self.value()
        return encode(msg)

    def stray_response(self) -> bytes:
        msg_id = self.r.choice((f"t-{self.r.randint(0, 50)}", self.n, "x", None))
        if self.roll() < 0.5:
            return encode({"jsonrpc": "2.0", "id": msg_id, "result": {"output": self.value()}})
        return encode({"jsonrpc": "2.0", "id": msg_id, "error": {"code": 1, "message": "no"}})

    def junk(self) -> bytes:
        r = self.roll()
        if r < 0.15:
            return bytes(self.r.randrange(256) for _ in range(self.r.randint(1, 40))).replace(
                b"\n", b"."
            )
        if r < 0.3:
            whole = self.request()
            return whole[: self.r.randint(0, len(whole) - 1)]
        if r < 0.45:  # a batch
            return b"[" + b",".join(self.request() for _ in range(self.r.randint(0, 3))) + b"]"
        if r < 0.55:
            return self.r.choice((b"NaN", b"Infinity", b"-Infinity", b'{"a":NaN}', b"1e400"))
        if r < 0.65:
            return encode(self.value())
        if r < 0.72:
            return b"\xef\xbb\xbf" + self.request()  # a byte order mark
        if r < 0.8:
            return self.request() + b"\r"
        if r < 0.86:
            return self.r.choice((b"", b"   ", b"\t", b"\r"))
        if r < 0.92:
            return self.request().replace(b'"', b"'")
        return b'{"jsonrpc":"2.0","id":"' + b"\xff\xfe" + b'","method":"ping"}'

    # ---- tool/call answers -----------------------------------------------------------------

    def output(self) -> Any:
        self.dirty = self.roll() < 0.3
        try:
            return self._output()
        finally:
            self.dirty = False

    def _output(self) -> Any:
        r = self.roll()
        if r < 0.6:
            return {"output": self.r.choice((self.text(), self.value(), self.text()))}
        if r < 0.7:
            return {"output": self.text(), "isError": self.r.choice((True, False, "yes"))}
        if r < 0.8:
            return {"note": self.value()}  # lenient: the result itself is the output
        return self.r.choice((None, "plain", 5, [], {"output": nested(100)}))

    def tool_reply(self) -> ToolReply:
        kind = self.weighted(REPLY_KINDS, (50, 10, 5, 5, 5, 12, 4, 3))
        if kind in ("result", "twice", "late"):
            after = self.r.randint(1, 30) if kind == "late" else 0
            return ToolReply(kind, self.output(), after)
        if kind == "error":
            body = self.r.choice(
                (
                    {"code": -32000, "message": self.text()},
                    {"code": 5, "message": "no", "data": self.value()},
                    {"message": "no code"},
                    "a string",
                    None,
                )
            )
            return ToolReply(kind, body)
        if kind == "wrong_id":
            return ToolReply(kind, (self.r.choice(("t-0", "t-x", 7, None, "")), self.output()))
        if kind == "junk":
            return ToolReply(kind, self.junk())
        if kind == "deep":
            return ToolReply(kind, {"output": nested(self.r.choice((129, 200, 1100)))})
        return ToolReply(kind)

"""Fuzz traffic: a structure-aware generator of protocol lines and of answers to ``tool/call``.

One ``random.Random`` drives everything, so a seed reproduces a plan: ``make fuzz`` seeds a plain
``Random`` (and prints the seed), the CI-sized test passes hypothesis's ``st.randoms()``, whose
draws hypothesis records and shrinks. The whole plan is drawn before a byte is sent (``plan``):
the peer that plays it never draws, so timing cannot change what is drawn.

The lines: requests of every method with params built from ``protocol/bridge.json``'s shapes,
mostly valid and pointing at a small pool of session/NPC/world ids so that they meet live objects,
then mutated now and then (a member dropped, retyped or made nasty: lone surrogates, 400-digit
integers, ``1e400``, nesting near and past the limit); notifications; unknown methods; envelope
defects; ids of every type; stray responses; batches; junk bytes. ``shutdown`` is left to the peer,
which sends it only where an episode ends. The answers to ``tool/call``: a result, an error, a
wrong id, twice, never, late (after more lines), junk, or too deep to be read.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["ENDS", "REPLY_KINDS", "Plan", "Raw", "ToolReply", "Traffic", "encode", "nested"]

SESSIONS = ("s0", "s1", "s2", "s3", "s4")
NPCS = ("n0", "n1", "n2", "n3")
WORLDS = ("w0", "w1", "w2")
TOOLS = ("look", "take", "roll")
ERROR_CODES = ("guardrail_violation", "refusal", "rate_limited", "cancelled", "busy", "nope")
EMOTIONS = ("neutral", "happy", "angry", "afraid", "bored")
SAFE = 2**53 - 1


class Raw:
    """JSON text put into a line verbatim (numbers and nestings no encoder would write)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:40]!r})"


def nested(depth: int, inner: str = "0") -> Raw:
    """``depth`` levels of arrays and objects around ``inner``."""
    return Raw(
        "".join("[" if i % 2 else '{"a":' for i in range(depth))
        + inner
        + "".join("]" if i % 2 else "}" for i in reversed(range(depth)))
    )


NASTY_STRINGS = ("\ud800", "\udfff x", "a\x00b", "\u2028\u2029", "𝄞é", "{prompt}", "", " ", '"]}')
NASTY_NUMBERS = (
    Raw("1e400"),
    Raw("-1e400"),
    Raw("9" * 400),
    Raw("1e-400"),
    2**64,
    -(2**63) - 1,
    SAFE + 1,
    1e308,
    -0.0,
    0.1,
)
NESTING = (3, 60, 120, 125, 126, 127, 129, 200, 1100)


def _placeholder(obj: Any, raws: list[str]) -> str:
    if isinstance(obj, Raw):
        raws.append(obj.text)
        return f"\x00raw{len(raws) - 1}\x00"
    raise TypeError(type(obj).__name__)


def encode(message: Any) -> bytes:
    """A value as one JSON line (no newline): orjson, or the stdlib for what orjson refuses
    (lone surrogates, integers past 64 bits); ``Raw`` parts are spliced in as written."""
    raws: list[str] = []
    try:
        data = orjson.dumps(message, default=lambda o: _placeholder(o, raws))
    except TypeError:
        raws.clear()
        text = json.dumps(message, ensure_ascii=True, default=lambda o: _placeholder(o, raws))
        data = text.encode()
    for i, raw in enumerate(raws):
        data = data.replace(b'"\\u0000raw%d\\u0000"' % i, raw.encode(), 1)
    return data


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


@dataclass
class Plan:
    """What a peer plays: ``lines`` in order, the answer for the n-th ``tool/call`` (cycling),
    how the episode ends, and the requests sent after a ``shutdown``."""

    lines: list[bytes] = field(default_factory=list)
    replies: list[ToolReply] = field(default_factory=list)
    end: str = "close"
    trailing: list[bytes] = field(default_factory=list)


class Traffic:
    """Draws lines from ``rng``. ``id_prefix`` keeps string ids apart between plans on one
    connection; integer ids count up from ``first_id``."""

    def __init__(self, rng: random.Random, *, id_prefix: str = "", first_id: int = 1) -> None:
        self.r = rng
        self.prefix = id_prefix
        self.n = first_id
        self.recent_ids: list[Any] = []
        self.dirty = False
        """Whether the request being drawn may carry nasty values and mutations (a quarter do);
        the rest are valid as far as their shapes go, so that objects exist and turns run."""

    # ---- plan -----------------------------------------------------------------------------

    def plan(
        self, count: int, replies: int = 16, ends: tuple[int, ...] = (50, 25, 12, 10, 3)
    ) -> Plan:
        """``count`` lines, ``replies`` tool/call answers, an end drawn with weights ``ends``
        (one per ``ENDS``)."""
        lines = [self.line() for _ in range(count)]
        answers = [self.tool_reply() for _ in range(replies)]
        end = self.weighted(ENDS, ends)
        trailing = [self.request() for _ in range(self.r.randint(0, 3))]
        return Plan(lines, answers, end, trailing)

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

    def roll(self) -> float:
        """A number in [0, 1) in steps of 1/1000: one small integer draw (cheap for hypothesis)."""
        return self.r.randint(0, 999) / 1000

    def weighted(self, population: tuple[Any, ...], weights: tuple[int, ...]) -> Any:
        """A weighted choice by one ``randint`` (hypothesis's random ignores ``weights``)."""
        x = self.r.randint(0, sum(weights) - 1)
        for item, weight in zip(population, weights, strict=True):
            if x < weight:
                return item
            x -= weight
        raise AssertionError("unreachable")

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

    # ---- values -------------------------------------------------------------------------------

    def text(self) -> str:
        r = self.roll() if self.dirty else 1.0
        if r < 0.15:
            return self.r.choice(NASTY_STRINGS)
        if r < 0.17:
            return "x" * self.r.choice((1000, 70_000))
        return self.r.choice(("Hello", "Look around.", "Open the gate", "?", "gold", "{prompt}!"))

    def number(self) -> Any:
        r = self.roll()
        if self.dirty and r < 0.15:
            return self.r.choice(NASTY_NUMBERS)
        if r < 0.6:
            return self.r.randint(-5, 100)
        return round(self.r.uniform(-10, 10), 3)

    def value(self, depth: int = 0) -> Any:
        r = self.roll()
        if self.dirty and r < 0.05:
            return nested(self.r.choice(NESTING))
        if depth > 2 or r < 0.5:
            return self.r.choice((None, True, False, self.number(), self.text(), self.number()))
        if r < 0.75:
            return [self.value(depth + 1) for _ in range(self.r.randint(0, 3))]
        return {self.text()[:12]: self.value(depth + 1) for _ in range(self.r.randint(0, 3))}

    def pick(self, pool: tuple[str, ...]) -> str:
        return self.r.choice(pool) if self.roll() < 0.95 else self.text()

    def timeout(self) -> Any:
        if self.dirty:
            return self.r.choice((0.05, 86401, -1, "1", Raw("1e400"), 1e300))
        return self.r.choice((0.05, 0.3, 1, 2, 0, 86400))

    def schema(self, depth: int = 0) -> Any:
        r = self.roll()
        if self.dirty and r < 0.2:
            return self.r.choice(({"type": "nope"}, {"$ref": "#/nope"}, {"$ref": "#"}, [], "x"))
        kind = self.r.choice(("string", "integer", "number", "boolean", "object", "array"))
        if kind == "object" and depth < 3:
            props = {name: self.schema(depth + 1) for name in self.r.sample(("a", "b", "c"), 2)}
            return {"type": "object", "properties": props, "required": list(props)[:1]}
        if kind == "array" and depth < 3:
            return {"type": "array", "items": self.schema(depth + 1), "maxItems": 3}
        if kind == "string" and self.roll() < 0.3:
            return {"type": "string", "enum": ["a", "b", self.text()]}
        return {"type": kind if depth < 3 else "string"}

    def tool(self) -> dict[str, Any]:
        tool: dict[str, Any] = {"name": self.pick(TOOLS), "description": self.text()}
        if self.roll() < 0.7:
            tool["parameters"] = self.schema()
        if self.roll() < 0.3:
            tool["timeoutSeconds"] = self.timeout()
        return tool

    def tools(self) -> list[Any]:
        if self.dirty:
            return [self.tool() for _ in range(self.r.randint(0, 3))]
        tools = [self.tool() for _ in range(self.r.randint(1, 3))]
        for tool, name in zip(tools, self.r.sample(TOOLS, len(tools)), strict=False):
            tool["name"] = name
        return tools

    def step(self) -> dict[str, Any]:
        r = self.roll()
        if r < 0.45:
            names = [self.pick(TOOLS) for _ in range(self.r.randint(1, 2))]
            step: dict[str, Any] = {
                "toolCalls": [{"name": n, "arguments": {"a": self.value()}} for n in names]
            }
        elif r < 0.65:
            step = {"text": self.text(), "chunks": self.r.randint(1, 4)}
        elif r < 0.78:
            step = {"json": self.r.choice((self.value(), self.reply_json()))}
        elif r < 0.87:
            step = {"template": "{prompt} / {toolOutputs}"}
        elif r < 0.94:
            step = {"error": self.r.choice(ERROR_CODES)}
        else:
            step = {"raw": self.r.choice(('{"action":"respond"}', "not json", self.text()))}
        if self.roll() < 0.15:
            step["delayMs"] = self.r.choice((1, 5, 30, 0.5))
        if self.dirty and self.roll() < 0.2:
            step["delayMs"] = self.r.choice((-1, "x", Raw("1e400"), None, True))
        return step

    def reply_json(self) -> dict[str, Any]:
        return {
            "line": self.text(),
            "emotion": self.r.choice(EMOTIONS),
            "choice": self.r.choice(("a", "b", "c")),
            "reasoning": "r",
            "confidence": self.number(),
        }

    def model(self) -> Any:
        r = self.roll()
        if self.dirty and r < 0.15:
            return self.r.choice(("scripted", "system", "nope", "", 5))
        spec: dict[str, Any] = {
            "type": "scripted",
            "steps": [self.step() for _ in range(self.r.randint(0, 4))],
        }
        if self.roll() < 0.3:
            spec["fallback"] = self.step()
        if self.roll() < 0.2:
            spec["style"] = self.r.choice(("envelope", "native", "odd"))
        return spec

    def tool_choice(self) -> Any:
        return self.r.choice(("auto", "none", "required", "explicit", {"tool": self.pick(TOOLS)}))

    def persona(self) -> dict[str, Any]:
        persona: dict[str, Any] = {"name": self.r.choice(("Gorm", "Mira", self.text()))}
        if self.roll() < 0.5:
            persona["role"] = self.text()
            persona["goals"] = [self.text()]
            persona["defaultEmotion"] = self.r.choice(EMOTIONS)
        return persona

    def npc_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.roll() < 0.5:
            options["replyFormat"] = self.r.choice(("automatic", "structured", "text", "odd"))
        if self.roll() < 0.3:
            options["worldReadable"] = [self.r.choice(("", "player", "quests", "a.b"))]
            options["worldWritable"] = [self.r.choice(("", "player", "quests"))]
        if self.roll() < 0.3:
            options["toolTimeoutSeconds"] = self.timeout()
        if self.roll() < 0.2:
            options["memoryTools"] = self.r.choice(("all", "none", ["rememberFact"]))
        return options

    def decision(self) -> dict[str, Any]:
        request: dict[str, Any] = {
            "situation": self.r.choice((self.text(), self.value())),
            "options": self.r.choice((["a", "b"], [{"id": "a", "description": "A"}, "c"], [])),
        }
        if self.roll() < 0.3:
            request["tools"] = self.tools()
        if self.roll() < 0.2:
            request["actor"] = self.r.choice((self.persona(), self.pick(NPCS)))
        if self.roll() < 0.2:
            request["context"] = self.value()
        return request

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


def _pool_members(t: Traffic, key: str, pool: tuple[str, ...]) -> dict[str, Any]:
    return {key: t.pick(pool)}


PARAMS: dict[str, Any] = {
    "initialize": lambda t: {"protocolVersion": t.r.choice(("1.0", "1", "2.0", "")), "client": {}},
    "ping": lambda t: {},
    "model/availability": lambda t: {},
    "schema/validate": lambda t: {"schema": t.schema(), "name": t.text()},
    "tools/validate": lambda t: {"tools": t.tools()},
    "session/create": lambda t: {
        "session": t.pick(SESSIONS),
        "instructions": t.text(),
        "tools": t.tools(),
        "options": {"toolTimeoutSeconds": t.timeout(), "maxToolRounds": t.r.randint(0, 4)},
        "model": t.model(),
    },
    "session/respond": lambda t: {
        "session": t.pick(SESSIONS),
        "prompt": t.text(),
        "stream": t.roll() < 0.5,
        **({"toolChoice": t.tool_choice()} if t.roll() < 0.2 else {}),
        **({"schema": t.schema()} if t.roll() < 0.15 else {}),
    },
    "session/cancel": lambda t: _pool_members(t, "session", SESSIONS),
    "session/reset": lambda t: _pool_members(t, "session", SESSIONS),
    "session/delete": lambda t: _pool_members(t, "session", SESSIONS),
    "session/list": lambda t: {},
    "session/transcript": lambda t: _pool_members(t, "session", SESSIONS),
    "session/setInstructions": lambda t: {"session": t.pick(SESSIONS), "instructions": t.text()},
    "session/setContextNote": lambda t: {"session": t.pick(SESSIONS), "note": t.text()},
    "session/setTools": lambda t: {"session": t.pick(SESSIONS), "tools": t.tools()},
    "session/compact": lambda t: {"session": t.pick(SESSIONS), "keepRecentTurns": t.number()},
    "npc/create": lambda t: {
        "npc": t.pick(NPCS),
        "persona": t.persona(),
        "tools": t.tools(),
        "options": t.npc_options(),
        "model": t.model(),
        **({"world": t.pick(WORLDS)} if t.roll() < 0.4 else {}),
    },
    "npc/talk": lambda t: {
        "npc": t.pick(NPCS),
        "line": t.text(),
        "stream": t.roll() < 0.5,
        **({"context": t.value()} if t.roll() < 0.3 else {}),
        **({"toolChoice": t.tool_choice()} if t.roll() < 0.2 else {}),
    },
    "npc/bark": lambda t: {"npc": t.pick(NPCS), "situation": t.value()},
    "npc/state": lambda t: {"npc": t.pick(NPCS), "settle": t.roll() < 0.5},
    "npc/restore": lambda t: {"state": {"persona": t.persona(), "x": t.value()}, "npc": "r0"},
    "npc/update": lambda t: {"npc": t.pick(NPCS), "persona": {"role": t.text()}},
    "npc/reset": lambda t: {"npc": t.pick(NPCS), "clearMemory": t.roll() < 0.5},
    "npc/cancel": lambda t: _pool_members(t, "npc", NPCS),
    "npc/delete": lambda t: _pool_members(t, "npc", NPCS),
    "npc/list": lambda t: {},
    "decision/decide": lambda t: {
        **t.decision(),
        "model": t.model(),
        **({"toolTimeoutSeconds": t.timeout()} if t.roll() < 0.3 else {}),
    },
    "decision/decideMany": lambda t: {
        "requests": [t.decision() for _ in range(t.r.randint(0, 3))],
        "maxConcurrency": t.r.randint(0, 3),
        "model": t.model(),
    },
    "world/create": lambda t: {"world": t.pick(WORLDS), "state": {"player": {"gold": 5}}},
    "world/get": lambda t: {"world": t.pick(WORLDS), "path": t.r.choice(("", "player", "a.0"))},
    "world/set": lambda t: {
        "world": t.pick(WORLDS),
        "path": t.r.choice(("player.gold", "quests", "a.b.c", "", "player..x")),
        "value": t.value(),
    },
    "world/merge": lambda t: {"world": t.pick(WORLDS), "patch": t.value(), "path": "player"},
    "world/remove": lambda t: {"world": t.pick(WORLDS), "path": t.r.choice(("player", "quests"))},
    "world/snapshot": lambda t: _pool_members(t, "world", WORLDS),
    "world/delete": lambda t: _pool_members(t, "world", WORLDS),
    "world/list": lambda t: {},
    "world/subscribe": lambda t: {"world": t.pick(WORLDS), "path": t.r.choice(("", "player"))},
    "world/unsubscribe": lambda t: {"subscription": f"sub{t.r.randint(0, 9)}"},
    "content/generate": lambda t: {
        "prompt": t.text(),
        "schema": t.schema(),
        "model": t.model(),
        **({"tools": t.tools()} if t.roll() < 0.2 else {}),
        **({"context": t.value()} if t.roll() < 0.2 else {}),
    },
    "test/sleep": lambda t: {"ms": t.r.choice((0, 1, 10, 50, -1, "x", 60_001))},
}
METHODS: tuple[str, ...] = tuple(PARAMS)
_OFTEN = {"session/create": 4, "session/respond": 6, "npc/create": 3, "npc/talk": 5, "npc/bark": 2}
_OFTEN |= {"session/delete": 2, "npc/delete": 2}
_OFTEN |= {"decision/decide": 2, "content/generate": 2, "world/create": 2, "world/set": 2}
WEIGHTS: tuple[int, ...] = tuple(_OFTEN.get(method, 1) for method in METHODS)

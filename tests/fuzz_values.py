"""Fuzz values: the drawing of every value a request carries, from ``protocol/bridge.json``'s
shapes — texts, numbers, JSON, schemas, tools, scripted steps and models, personas, NPC options,
decisions — and each method's params (``PARAMS``), for ``fuzz_traffic``.

Ids point at a small pool of sessions, NPCs and worlds, so that requests meet live objects. A
value is valid as far as its shape goes unless the request being drawn is ``dirty`` (a quarter
are): then it may be nasty — lone surrogates, 400-digit integers, ``1e400``, nesting near and
past the limit, out-of-range timeouts, broken schemas and steps. ``Raw`` JSON text is spliced
into a line as written, so numbers and nestings no encoder writes still go out.
"""

from __future__ import annotations

import json
import random
from typing import Any

import orjson

__all__ = ["METHODS", "PARAMS", "WEIGHTS", "Raw", "Values", "encode", "nested"]

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


class Values:
    """Draws values from ``rng`` (a plain ``random.Random`` or hypothesis's)."""

    def __init__(self, rng: random.Random, *, system: float = 0.0) -> None:
        self.r = rng
        self.dirty = False
        """Whether the request being drawn may carry nasty values and mutations (a quarter do);
        the rest are valid as far as their shapes go, so that objects exist and turns run."""
        self.system = system
        """The share of models drawn that are ``system``, when that reaches a model server (a
        misbehaving one: ``fuzz_peer.fault_model``)."""

    def roll(self) -> float:
        """A number in [0, 1) in steps of 1/1000: one small integer draw (cheap for hypothesis)."""
        return self.r.randint(0, 999) / 1000

    def chance(self, p: float) -> bool:
        """True with probability ``p`` (down to one in a million): one integer draw."""
        return self.r.randint(0, 999_999) < p * 1_000_000

    def weighted(self, population: tuple[Any, ...], weights: tuple[int, ...]) -> Any:
        """A weighted choice by one ``randint`` (hypothesis's random ignores ``weights``)."""
        x = self.r.randint(0, sum(weights) - 1)
        for item, weight in zip(population, weights, strict=True):
            if x < weight:
                return item
            x -= weight
        raise AssertionError("unreachable")

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
        if self.system and self.roll() < self.system:
            return "system"
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


def _pool_members(t: Values, key: str, pool: tuple[str, ...]) -> dict[str, Any]:
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
        "maxConcurrency": t.r.choice((0, 1, 2, 3, 10**6, SAFE)),
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

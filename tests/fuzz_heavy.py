"""Fuzz heavy: the rare, large sequences of requests a plan splices in between its random lines —
what no single random line builds, each after a defect found by hand (issue 25):

- ``flood``: a scripted step of up to 250,000 characters in up to 125,000 chunks, streamed: one
  turn that must neither stall the event loop for every other client nor bury the connection's
  outbox under ``text`` events (each of which repeats the text so far);
- ``delayed``: a turn waiting up to a day (``delayMs``), cancelled some lines later;
- ``fan_out``: ``decision/decideMany`` of up to 20,000 decisions with a huge ``maxConcurrency``;
- ``hoard``: big instructions, tools, scripted steps, personas or world keys, object after object,
  against the daemon's small ``--max-connection-bytes`` (``budget``): accepted only as far as the
  budget allows (an ``Expectation`` with ``most``);
- ``long_keys``: one ``world/set`` whose missing intermediate keys alone pass ``MAX_WORLD_BYTES``:
  refused -32055.

Each draws a ``Splice``: lines to send now, lines to send some lines later (a cancel, the deletes
that give the budget back), and the ``Expectation``s for the oracle. (Lines go out in bursts, so
"later" may still come before the daemon ran a turn: a flood's session is never deleted.) The biggest sizes are the
defects' own and the rarest; ``Traffic.plan`` decides how often a splice comes at all.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fuzz_oracle import Expectation
from fuzz_values import SAFE, Values, encode

from oamd.limits import MAX_TOOLS, MAX_WORLD_BYTES

__all__ = ["FAN_OUTS", "FLOODS", "HEAVY", "HOARDS", "HOARD_ITEMS", "Heavy", "Splice"]

HEAVY = ("flood", "delayed", "fan_out", "hoard", "long_keys")
FLOODS = ((20_000, 2_000), (20_000, 10_000), (250_000, 125_000))
"""(characters, chunks) of a flood's step, the last the rarest. Each ``text`` event repeats the
text so far, so a flood played in full writes about chunks × characters / 2 bytes: 20 MB, 100 MB
(past a socket's default ``--max-outbox-bytes``; a daemon that queues it all at once over stdio
peaks near 400 MiB), and, for the last (the defect as found), 16 GB — drawn only over a socket
(``over_socket``), where a daemon that writes that much meets its outbox limit, not the RAM."""
DELAYS_MS = (600_000, 3_600_000, 86_400_000)
FAN_OUTS = (200, 2_000, 20_000)
"""Decisions in one ``decideMany``, the last the rarest."""
HOARDS = ("instructions", "tools", "steps", "persona", "world_keys")
HOARD_ITEMS = 12
"""Objects a hoard makes, each a quarter of the budget: three budgets in all."""
WORLD_SEGMENTS = 32
REFUSED = -32055
WORLD_NOT_FOUND = -32052


@dataclass
class Splice:
    now: list[bytes] = field(default_factory=list)
    later: list[tuple[int, bytes]] = field(default_factory=list)
    """``(n, line)``: sent once ``n`` more lines have gone out."""
    expectations: list[Expectation] = field(default_factory=list)


def _request(msg_id: str, method: str, params: dict[str, Any]) -> bytes:
    return encode({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})


class Heavy:
    """Draws splices with ``values``' random; ``unique(kind)`` names each request and object
    (ids no random line uses); ``budget``: the daemon's ``--max-connection-bytes`` (no hoard
    without it); ``system``: ``model: "system"`` reaches a model server worth fanning out to."""

    def __init__(
        self,
        values: Values,
        unique: Callable[[str], str],
        *,
        budget: int | None = None,
        system: bool = False,
    ) -> None:
        self.v = values
        self.unique = unique
        self.budget = budget
        self.system = system
        self.defect_sized = False
        """Draw no sizes: take the largest each kind has room for (``FLOODS[1]``, streamed;
        ``FAN_OUTS[-1]``; the longest delay), for the CI run, which meets each kind once."""
        self.over_socket = False
        """Whether the plans go to ``oamd serve`` (the largest flood then may be drawn)."""

    def splice(self, kind: str | None = None) -> Splice:
        """A splice of ``kind`` (one of ``HEAVY``), else of a kind drawn."""
        kinds = HEAVY if self.budget else tuple(k for k in HEAVY if k != "hoard")
        return getattr(self, kind or self.v.r.choice(kinds))()

    def _later(self) -> int:
        return self.v.r.randint(1, 30)

    # ---- one turn -----------------------------------------------------------------------------

    def flood(self) -> Splice:
        floods = FLOODS if self.over_socket else FLOODS[:-1]
        weights = (5, 4, 1)[: len(floods)]
        chars, chunks = FLOODS[1] if self.defect_sized else self.v.weighted(floods, weights)
        session = self.unique("flood")
        step: dict[str, Any] = {"text": "x" * chars, "chunks": chunks}
        if self.v.roll() < 0.2:
            step["delayMs"] = self.v.r.choice((1, 50))
        model = {"type": "scripted", "steps": [step], "fallback": {"text": "y", "chunks": 1}}
        if self.v.roll() < 0.3:  # the flood as a fallback, played by every turn
            model = {"type": "scripted", "steps": [], "fallback": step}
        stream = self.defect_sized or self.v.roll() < 0.8
        params = {"session": session, "prompt": "go", "stream": stream}
        return Splice(  # no delete: sent in the same burst, it would cancel the flood unplayed
            now=[
                _request(self.unique("c"), "session/create", {"session": session, "model": model}),
                _request(self.unique("r"), "session/respond", params),
            ]
        )

    def delayed(self) -> Splice:
        session = self.unique("delay")
        delay = DELAYS_MS[-1] if self.defect_sized else self.v.r.choice(DELAYS_MS)
        step = {"text": "late", "delayMs": delay}
        model = {"type": "scripted", "steps": [step], "fallback": step}
        respond = {"session": session, "prompt": "wait", "stream": self.v.roll() < 0.5}
        at = self._later()
        return Splice(
            now=[
                _request(self.unique("c"), "session/create", {"session": session, "model": model}),
                _request(self.unique("r"), "session/respond", respond),
            ],
            later=[
                (at, _request(self.unique("x"), "session/cancel", {"session": session})),
                (at + 1, _request(self.unique("d"), "session/delete", {"session": session})),
            ],
        )

    def fan_out(self) -> Splice:
        count = FAN_OUTS[-1] if self.defect_sized else self.v.weighted(FAN_OUTS, (6, 3, 1))
        decision: dict[str, Any] = {"situation": "A gate.", "options": ["open", "wait"]}
        if self.v.roll() < 0.3:
            decision["tools"] = [{"name": "look", "description": "Look."}]
        reply = {"reasoning": "r", "choice": "open", "confidence": 50}
        model: Any = {"type": "scripted", "steps": [], "fallback": {"json": reply}}
        if self.system and count <= FAN_OUTS[0] and self.v.roll() < 0.5:
            model = "system"
        params = {
            "requests": [decision] * count,
            "maxConcurrency": self.v.r.choice((count, 10**6, SAFE)),
            "model": model,
        }
        return Splice(now=[_request(self.unique("m"), "decision/decideMany", params)])

    # ---- budgets ------------------------------------------------------------------------------

    def hoard(self) -> Splice:
        assert self.budget is not None
        kind = self.v.r.choice(HOARDS)
        size = max(self.budget // 4, 4096)
        splice = Splice()
        ids: list[str] = []
        owner = self.unique("hoard")
        if kind == "world_keys":
            splice.now.append(
                _request(self.unique("c"), "world/create", {"world": owner, "state": {}})
            )
            splice.later.append((self._later(), self._delete("world", owner)))
        for i in range(HOARD_ITEMS):
            msg_id = self.unique("h")
            ids.append(msg_id)
            method, params, what = self._hoarded(kind, f"{owner}-{i}", owner, size, i)
            splice.now.append(_request(msg_id, method, params))
            if what != "world":
                splice.later.append((self._later(), self._delete(what, f"{owner}-{i}")))
        detail = (
            f"{kind}: {HOARD_ITEMS} objects of {size} bytes each accepted past twice the "
            f"{self.budget}-byte --max-connection-bytes, without -32055"
        )
        splice.expectations.append(
            Expectation(detail, tuple(ids), sizes=(size,) * len(ids), most=2 * self.budget)
        )
        return splice

    def _hoarded(
        self, kind: str, name: str, world: str, size: int, i: int
    ) -> tuple[str, dict[str, Any], str]:
        """``(method, params, what it made)`` of the ``i``-th object of a hoard."""
        if kind == "instructions":
            return "session/create", {"session": name, "instructions": "i" * size}, "session"
        if kind == "tools":
            each = size // MAX_TOOLS
            tools = [{"name": f"t{n}", "description": "d" * each} for n in range(MAX_TOOLS)]
            return "session/create", {"session": name, "tools": tools}, "session"
        if kind == "steps":
            steps = [{"text": "s" * (size // 8)} for _ in range(8)]
            model = {"type": "scripted", "steps": steps}
            return "session/create", {"session": name, "model": model}, "session"
        if kind == "persona":
            persona = {"name": "Hoarder", "role": "r" * (size // 2), "goals": ["g" * (size // 2)]}
            return "npc/create", {"npc": name, "persona": persona}, "npc"
        length = size // WORLD_SEGMENTS  # world_keys: every key missing, each one new
        path = ".".join(f"{i}{n}".ljust(length, "k") for n in range(WORLD_SEGMENTS))
        return "world/set", {"world": world, "path": path, "value": i}, "world"

    def _delete(self, what: str, name: str) -> bytes:
        return _request(self.unique("d"), f"{what}/delete", {what: name})

    def long_keys(self) -> Splice:
        world = self.unique("keys")
        length = math.ceil(MAX_WORLD_BYTES * 1.25 / WORLD_SEGMENTS)
        path = ".".join(f"{n}".ljust(length, "k") for n in range(WORLD_SEGMENTS))
        msg_id = self.unique("w")
        detail = (
            f"a world/set whose missing keys alone pass MAX_WORLD_BYTES ({MAX_WORLD_BYTES}) "
            "is refused -32055 (or -32052 when its world was not made)"
        )
        return Splice(
            now=[
                _request(self.unique("c"), "world/create", {"world": world, "state": {}}),
                _request(msg_id, "world/set", {"world": world, "path": path, "value": 1}),
            ],
            later=[(self._later(), self._delete("world", world))],
            expectations=[
                Expectation(detail, (msg_id,), codes=frozenset((REFUSED, WORLD_NOT_FOUND)))
            ],
        )

"""Inspector soak (``make soak-inspector``): scripted turns with hostile request ids stream through
one ``oamd stdio --inspect`` while API pollers, an event-stream reader and hostile HTTP peers
(oversized heads, slow-loris heads, foreign ``Host`` headers, garbage) hammer its page server.

    python tests/inspector_soak.py [--turns 4000] [--pollers 4] [--hostile 3] [--seed N]

The same seeded sequence of requests is first played against ``oamd stdio`` without the
inspector (the baseline). Oracle: every request is answered exactly once, with the baseline's
result (durations left out); the inspector never answers 500, a hostile head gets its status
(431, 403, 400) and a poller at most 503 past ``INSPECT_MAX_PAGE_CONNECTIONS``; the daemon's RSS
over the last window is within ``--rss-growth-mib`` of the first. ``tests/test_inspector_soak.py``
runs a few seconds of it in the normal suite. Prints the figures and every violation; exits 1
when there is one. Loopback (127.0.0.1) only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import ByteStream, Process

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import OAMD

from oamd.limits import INSPECT_MAX_HEAD_BYTES

NASTY_IDS = ("\ud800", "\udfff x", "a\x00b", "\u2028\u2029", "𝄞é", "{prompt}", "", " ", '"]}')
"""Beginnings of request ids (each made unique by a counter): lone surrogates, controls, line
separators, astral characters, template and JSON look-alikes."""

SESSIONS = 4
TOOL = {"name": "look", "description": "Looks at something.", "parameters": {"type": "object"}}
ANSWER = "The jar holds pickled turnips, and the shelf behind it is dusty. " * 4
RESET_EVERY = 16
"""Turns of one session between two ``session/reset``s."""
REQUEST_SECONDS = 30.0
"""Longest one protocol request may take before the run counts it unanswered."""


def script(session: int, turns: int) -> dict[str, Any]:
    """A session's model: each turn calls ``look`` once (a scripted call id), then streams its
    answer in many pieces."""
    steps: list[dict[str, Any]] = []
    for turn in range(turns):
        call = {"id": f"c{session}-{turn}", "name": "look", "arguments": {"turn": turn}}
        steps.append({"toolCalls": [call]})
        steps.append({"text": f"{turn}: {ANSWER}", "chunks": 24})
    return {"type": "scripted", "steps": steps}


def request_ids(rng: random.Random, count: int) -> list[Any]:
    ids: list[Any] = []
    for n in range(count):
        kind = rng.random()
        if kind < 0.7:
            ids.append(f"{rng.choice(NASTY_IDS)}{n}")
        elif kind < 0.85:
            ids.append(n * 7919)
        else:
            ids.append(f"{'x' * rng.randint(100, 4000)}{n}")
    return ids


def normalized(message: dict[str, Any]) -> Any:
    """A response as the oracle compares it: durations left out."""
    out = json.loads(json.dumps(message))
    for call in (out.get("result") or {}).get("toolCalls", []):
        call.pop("durationSeconds", None)
    return out


class Engine:
    """The engine's side of ``oamd stdio``: raw lines out, every response counted by id, each
    ``tool/call`` answered at once."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.stdin: ByteStream = process.stdin  # type: ignore[assignment]
        self.stdout: ByteStream = process.stdout  # type: ignore[assignment]
        self.answers: dict[Any, list[dict[str, Any]]] = {}
        self.waiters: dict[Any, anyio.Event] = {}
        self.events = 0
        self._lock = anyio.Lock()

    @staticmethod
    def _key(request_id: Any) -> Any:
        return ("s", request_id) if isinstance(request_id, str) else ("n", request_id)

    async def write(self, message: dict[str, Any]) -> None:
        async with self._lock:  # lines whole, never interleaved
            await self.stdin.send(json.dumps(message).encode() + b"\n")

    async def read(self) -> None:
        buffer = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
            while True:
                while b"\n" not in buffer:
                    buffer += await self.stdout.receive()
                line, buffer = buffer.split(b"\n", 1)
                await self._handle(json.loads(line))

    async def _handle(self, message: dict[str, Any]) -> None:
        if message.get("method") == "tool/call":
            output = {"output": {"seen": message["params"]["call"]["arguments"]}}
            await self.write({"jsonrpc": "2.0", "id": message["id"], "result": output})
            return
        if "method" in message:
            self.events += 1
            return
        key = self._key(message.get("id"))
        self.answers.setdefault(key, []).append(message)
        waiter = self.waiters.get(key)
        if waiter is not None:
            waiter.set()

    async def request(self, request_id: Any, method: str, params: dict[str, Any]) -> None:
        key = self._key(request_id)
        self.waiters[key] = anyio.Event()
        await self.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        with anyio.move_on_after(REQUEST_SECONDS):
            await self.waiters[key].wait()


async def drive(engine: Engine, rng: random.Random, turns: int) -> list[tuple[Any, str]]:
    """Creates the sessions, then runs ``turns`` streamed turns, a few pipelined at once (each
    session's own turns in order); returns every request's id and method."""
    sent: list[tuple[Any, str]] = []
    await engine.request("init", "initialize", {"protocolVersion": "1.0"})
    sent.append(("init", "initialize"))
    per_session = -(-turns // SESSIONS)
    for s in range(SESSIONS):
        params = {"session": f"s{s}", "model": script(s, per_session), "tools": [TOOL]}
        await engine.request(f"create{s}", "session/create", params)
        sent.append((f"create{s}", "session/create"))
    ids = request_ids(rng, turns)
    queues: list[list[Any]] = [ids[s::SESSIONS] for s in range(SESSIONS)]

    async def session_turns(s: int) -> None:
        for i, request_id in enumerate(queues[s]):
            params = {"session": f"s{s}", "prompt": f"Look at {request_id!r}.", "stream": True}
            sent.append((request_id, "session/respond"))
            await engine.request(request_id, "session/respond", params)
            if i % RESET_EVERY == RESET_EVERY - 1:  # a history that grows without end costs n²
                sent.append((f"reset{s}-{i}", "session/reset"))
                await engine.request(f"reset{s}-{i}", "session/reset", {"session": f"s{s}"})

    async with anyio.create_task_group() as tg:
        for s in range(SESSIONS):
            tg.start_soon(session_turns, s)
    await engine.request("end", "ping", {})
    sent.append(("end", "ping"))
    return sent


@dataclass
class Figures:
    statuses: Counter[str] = field(default_factory=Counter)
    api_reads: int = 0
    page_events: int = 0
    page_streams: int = 0
    rss_mib: list[float] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for text in status:
                if text.startswith("VmRSS:"):
                    return int(text.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def poll(url: str, token: str, figures: Figures, stop: anyio.Event) -> None:
    """An API poller at ten times a page's rate: the daemon, each connection, each session, and
    the newest turn of each in full."""
    async with httpx.AsyncClient(base_url=url, params={"token": token}, timeout=10) as http:
        while not stop.is_set():
            try:
                daemon = await _get(http, "/api/daemon", figures)
                for conn in (daemon or {}).get("connections", []):
                    listing = await _get(http, f"/api/connections/{conn['id']}", figures)
                    for session in (listing or {}).get("sessions", []):
                        path = f"/api/connections/{conn['id']}/sessions/{session['id']}"
                        view = await _get(http, path, figures)
                        turns = (view or {}).get("turns") or []
                        if turns:
                            turn = f"/api/connections/{conn['id']}/turns/{turns[-1]['id']}"
                            await _get(http, turn, figures)
            except httpx.HTTPError as exc:
                figures.statuses[f"poller {type(exc).__name__}"] += 1
            await anyio.sleep(0.1)


async def _get(http: httpx.AsyncClient, path: str, figures: Figures) -> Any:
    reply = await http.get(path)
    figures.api_reads += 1
    figures.statuses[f"api {reply.status_code}"] += 1
    if reply.status_code == 500:
        figures.violations.append(f"GET {path} answered 500: {reply.text[:200]}")
    return reply.json() if reply.status_code == 200 else None


async def read_page(url: str, token: str, figures: Figures, stop: anyio.Event) -> None:
    """An event-stream reader that reconnects whenever its stream ends."""
    async with httpx.AsyncClient(base_url=url, params={"token": token}, timeout=30) as http:
        while not stop.is_set():
            try:
                async with http.stream("GET", "/api/events") as events:
                    figures.statuses[f"events {events.status_code}"] += 1
                    figures.page_streams += 1
                    async for line in events.aiter_lines():
                        if line.startswith("event: "):
                            figures.page_events += 1
                        if stop.is_set():
                            return
            except httpx.HTTPError as exc:
                figures.statuses[f"events {type(exc).__name__}"] += 1
            await anyio.sleep(0.05)


HOSTILE_HEADS = {
    "oversized": (
        b"GET /api/daemon HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
        + b"p" * INSPECT_MAX_HEAD_BYTES
        + b"\r\n\r\n",
        431,
    ),
    "foreign host": (b"GET /api/daemon HTTP/1.1\r\nHost: evil.example\r\n\r\n", 403),
    "rebinding host": (b"GET / HTTP/1.1\r\nHost: 127.0.0.1.evil.example:80\r\n\r\n", 403),
    "garbage": (b"\x16\x03\x01\x02\x00 not http at all\r\n\r\n", 400),
}


async def hostile(host: str, port: int, rng: random.Random, figures: Figures, stop: anyio.Event):
    """Hostile HTTP peers, one at a time: heads that must be refused with their status, and
    slow-loris heads (a byte every 50 ms, then left hanging) that hold a connection slot."""
    while not stop.is_set():
        name = rng.choice([*HOSTILE_HEADS, "slow-loris"])
        try:
            async with await anyio.connect_tcp(host, port) as stream:
                if name == "slow-loris":
                    with anyio.move_on_after(rng.uniform(0.2, 1.5)):
                        for byte in b"GET /api/daemon HTTP/1.1\r\nHost: 127.0.0.1\r\nX-":
                            await stream.send(bytes([byte]))
                            await anyio.sleep(0.05)
                        await anyio.sleep(60)
                    figures.statuses["slow-loris held"] += 1
                    continue
                data, expected = HOSTILE_HEADS[name]
                with contextlib.suppress(anyio.BrokenResourceError, OSError):
                    await stream.send(data)
                answer = b""
                with anyio.fail_after(10):
                    while b"\r\n" not in answer:
                        answer += await stream.receive()
                status = int(answer.split(b" ", 2)[1])
                figures.statuses[f"{name} {status}"] += 1
                if status != expected and status != 503:
                    figures.violations.append(f"{name} head answered {status}, not {expected}")
        except (OSError, anyio.EndOfStream, anyio.BrokenResourceError, TimeoutError) as exc:
            figures.statuses[f"{name} {type(exc).__name__}"] += 1


async def announced(process: Process) -> str:
    """The page's address, from the ``inspector`` line on stderr (the rest is drained)."""
    assert process.stderr is not None
    buffer = b""
    with anyio.fail_after(30):
        while True:
            buffer += await process.stderr.receive()
            for line in buffer.split(b"\n")[:-1]:
                with contextlib.suppress(ValueError):
                    record = json.loads(line)
                    if record.get("event") == "inspector":
                        return str(record["url"])


async def drain(process: Process, errors: list[str]) -> None:
    assert process.stderr is not None
    with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
        while True:
            for line in (await process.stderr.receive()).split(b"\n"):
                if b'"level": "error"' in line or b"Traceback" in line:
                    errors.append(line.decode("utf-8", "replace")[:300])


async def play(turns: int, seed: int, *, inspect: dict[str, Any] | None) -> dict[str, Any]:
    """Plays the seeded sequence against one ``oamd stdio`` (``inspect``: with the inspector
    and its hostile peers); returns the answers and, when inspected, the figures."""
    argv = [*OAMD, "stdio"]
    if inspect is not None:
        argv += ["--inspect", "127.0.0.1:0", "--inspect-token-file", inspect["token_file"]]
    figures = Figures()
    errors: list[str] = []
    started = time.monotonic()
    async with await anyio.open_process(argv) as process:
        engine = Engine(process)
        stop = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(engine.read)
            if inspect is not None:
                url = await announced(process)
                token = Path(inspect["token_file"]).read_text().strip()
                host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
                rng = random.Random(seed + 1)
                for _ in range(inspect["pollers"]):
                    tg.start_soon(poll, url, token, figures, stop)
                tg.start_soon(read_page, url, token, figures, stop)
                for _ in range(inspect["hostile"]):
                    tg.start_soon(hostile, host, int(port), rng, figures, stop)
                tg.start_soon(_sample_rss, process.pid, figures, stop)
            tg.start_soon(drain, process, errors)
            sent = await drive(engine, random.Random(seed), turns)
            stop.set()
            await engine.stdin.aclose()  # end of input: the daemon answers what it has, exits
            with anyio.fail_after(30):
                code = await process.wait()
            tg.cancel_scope.cancel()
    return {
        "sent": sent,
        "answers": engine.answers,
        "events": engine.events,
        "figures": figures,
        "errors": errors,
        "exit": code,
        "seconds": time.monotonic() - started,
    }


async def _sample_rss(pid: int, figures: Figures, stop: anyio.Event) -> None:
    while not stop.is_set():
        figures.rss_mib.append(rss_mib(pid))
        await anyio.sleep(0.25)


def check(baseline: dict[str, Any], watched: dict[str, Any], rss_growth_mib: float) -> list[str]:
    """The oracle's violations."""
    figures: Figures = watched["figures"]
    violations = list(figures.violations)
    for run, name in ((baseline, "baseline"), (watched, "inspected")):
        if run["exit"] != 0:
            violations.append(f"{name}: the daemon exited {run['exit']}")
        violations += [f"{name}: stderr {line}" for line in run["errors"]]
        for request_id, method in run["sent"]:
            got = run["answers"].get(Engine._key(request_id), [])
            if len(got) != 1:
                violations.append(f"{name}: {method} {request_id!r} answered {len(got)} times")
    for request_id, method in watched["sent"]:
        key = Engine._key(request_id)
        mine, theirs = watched["answers"].get(key, []), baseline["answers"].get(key, [])
        if mine and theirs and normalized(mine[0]) != normalized(theirs[0]):
            violations.append(f"{method} {request_id!r}: {mine[0]!r:.300} != {theirs[0]!r:.300}")
    samples = figures.rss_mib
    if len(samples) >= 8:
        window = max(2, len(samples) // 5)
        first = sorted(samples[:window])[window // 2]
        last = sorted(samples[-window:])[window // 2]
        if last - first > rss_growth_mib:
            violations.append(
                f"RSS grew {last - first:.1f} MiB (first {first:.1f}, last {last:.1f})"
            )
    return violations


def report(baseline: dict[str, Any], watched: dict[str, Any], violations: list[str]) -> str:
    figures: Figures = watched["figures"]
    samples = figures.rss_mib or [0.0]
    turns = sum(1 for _, method in watched["sent"] if method == "session/respond")
    lines = [
        f"turns {turns} (events to the engine {watched['events']}), baseline "
        f"{baseline['seconds']:.1f} s, inspected {watched['seconds']:.1f} s",
        f"inspector: {figures.api_reads} API reads, {figures.page_events} page events over "
        f"{figures.page_streams} streams",
        "statuses: " + ", ".join(f"{k} ×{v}" for k, v in sorted(figures.statuses.items())),
        f"daemon RSS: first {samples[0]:.1f} MiB, max {max(samples):.1f}, last {samples[-1]:.1f}",
        f"violations: {len(violations)}",
        *(f"  {v}" for v in violations[:20]),
    ]
    return "\n".join(lines)


async def soak(
    turns: int,
    seed: int,
    token_file: str,
    *,
    pollers: int = 3,
    hostile: int = 2,
    rss_growth_mib: float = 40.0,
) -> tuple[str, list[str]]:
    """Runs the baseline and the inspected run; returns the report and the violations."""
    baseline = await play(turns, seed, inspect=None)
    inspect = {"token_file": token_file, "pollers": pollers, "hostile": hostile}
    watched = await play(turns, seed, inspect=inspect)
    violations = check(baseline, watched, rss_growth_mib)
    return report(baseline, watched, violations), violations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=4000, help="streamed tool turns per run")
    parser.add_argument("--pollers", type=int, default=4)
    parser.add_argument("--hostile", type=int, default=3, help="hostile HTTP peers at once")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--rss-growth-mib", type=float, default=40.0)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"seed {seed}; {args.turns} turns, {args.pollers} pollers, {args.hostile} hostile peers")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        text, violations = anyio.run(
            lambda: soak(
                args.turns,
                seed,
                os.path.join(tmp, "token"),
                pollers=args.pollers,
                hostile=args.hostile,
                rss_growth_mib=args.rss_growth_mib,
            )
        )
    print(text)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())

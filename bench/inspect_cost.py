"""What the inspector costs the protocol: ``oamd stdio`` without ``--inspect`` against
``oamd stdio --inspect`` with a page open on it, on the same machine, rounds interleaved.

The page is simulated harder than the real one: an event-stream reader that takes every event,
and a poller fetching the daemon, the connection and the busiest session (its last turns, every
step with its prompt) every ``--poll`` seconds (the page polls once a second). Per variant:

* turn cost: ``--turns`` scripted turns with one client tool each (``session/respond``, the
  client answering each ``tool/call`` at once): the daemon's CPU ms per turn (from ``/proc``:
  what other processes on the machine do does not count), and median and p99 wall ms per turn;
* ping latency under load: ``bench/ping_throughput.py``'s probe (one ping every ~1 ms while
  ``--load-window`` bulk pings stay in flight), p50 and p99.

Three variants: ``off``, ``inspect`` (``--inspect``, no page: the recording alone) and ``page``.
Prints each figure's median over ``--rounds`` per variant, and its ratio to ``off``.

    .venv/bin/python bench/inspect_cost.py [--rounds 3] [--turns 1000] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from time import perf_counter
from typing import Any
from urllib.parse import urlsplit

import orjson
from _harness import BenchError, latency_on, percentile, spawn, write_json
from _turns import TurnClient, oamd_spec, tool_turn_steps

HTTP_TIMEOUT_S = 5.0
SSE_READ_BYTES = 65536


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds, variants interleaved")
    parser.add_argument("--turns", type=int, default=1000, help="turns timed per round")
    parser.add_argument("--poll", type=float, default=0.25, help="seconds between page polls")
    parser.add_argument("--load-seconds", type=float, default=2.0)
    parser.add_argument("--load-window", type=int, default=128)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--as-page", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--token-file", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


class Page:
    """A page on the inspector: one thread reads its event stream, one polls its API."""

    def __init__(self, url: str, token: str, poll: float) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.token = token
        self.poll = poll
        self.stop = threading.Event()
        self.events = 0
        self.polls = 0
        self.error: str | None = None
        self._conn: http.client.HTTPConnection | None = None
        self._threads = [
            threading.Thread(target=self._read_events, daemon=True),
            threading.Thread(target=self._poll, daemon=True),
        ]

    def __enter__(self) -> Page:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(HTTP_TIMEOUT_S)
        if self.error is not None:
            raise BenchError(f"page: {self.error}")

    def get(self, path: str) -> Any:
        """One API read on the page's kept-alive connection, as a browser's fetches reuse one."""
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=HTTP_TIMEOUT_S)
        self._conn.request("GET", f"/api/{path}?token={self.token}")
        reply = self._conn.getresponse()
        body = reply.read()
        if reply.status != 200:
            raise BenchError(f"GET {path}: {reply.status} {body[:200]!r}")
        return orjson.loads(body)

    def _read_events(self) -> None:
        try:
            with socket.create_connection((self.host, self.port), HTTP_TIMEOUT_S) as sock:
                sock.sendall(
                    f"GET /api/events?token={self.token} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
                )
                sock.settimeout(0.2)
                while not self.stop.is_set():
                    try:
                        data = sock.recv(SSE_READ_BYTES)
                    except TimeoutError:
                        continue
                    if not data:
                        self.error = "the event stream ended"
                        return
                    self.events += data.count(b"\nevent: ") + data.startswith(b"event: ")
        except OSError as exc:
            self.error = f"event stream: {exc}"

    def _poll(self) -> None:
        try:
            while not self.stop.wait(self.poll):
                daemon = self.get("daemon")
                for conn in daemon["connections"]:
                    listing = self.get(f"connections/{conn['id']}")
                    for session in listing["sessions"]:
                        self.get(f"connections/{conn['id']}/sessions/{session['id']}")
                self.polls += 1
        except (OSError, BenchError) as exc:
            self.error = f"poll: {exc}"


def cpu_ms(pid: int) -> float:
    """The CPU time (user and system) process ``pid`` has used, from ``/proc``."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as file:
        fields = file.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def run_turns(client: TurnClient, turns: int) -> tuple[list[float], float]:
    """Each turn's wall-clock ms, and the daemon's CPU ms per turn (steadier on a shared
    machine: another process's work does not count)."""
    session = client.create_session(tool_turn_steps(turns))
    pid = client.server.proc.pid
    times = []
    cpu_before = cpu_ms(pid)
    for i in range(turns):
        started = perf_counter()
        result = client.call("session/respond", {"session": session, "prompt": f"Turn {i}?"})
        times.append((perf_counter() - started) * 1000)
        if not result["toolCalls"]:
            raise BenchError(f"turn {i} made no tool call")
    return times, (cpu_ms(pid) - cpu_before) / turns


KEYS = ("turn_cpu_ms", "turn_median_ms", "turn_p99_ms", "ping_p50_ms", "ping_p99_ms")
VARIANTS = ("off", "inspect", "page")
"""Without ``--inspect``; with it and no page open (the recording alone); with a page open."""


def measure_variant(args: argparse.Namespace, variant: str) -> dict[str, Any]:
    inspected = variant != "off"
    with tempfile.TemporaryDirectory() as directory:
        token_file = os.path.join(directory, "token")
        extra = (
            ("--inspect", "127.0.0.1:0", "--inspect-token-file", token_file) if inspected else ()
        )
        with spawn(oamd_spec(*extra)) as server:
            server.ready()
            client = TurnClient(server)
            if variant != "page":
                return figures(run_turns(client, args.turns), server, args)
            announced = next(
                orjson.loads(line)
                for line in server.stderr_from(0)[0].splitlines()
                if line.startswith(b'{"event":"inspector"')
            )
            page = subprocess.Popen(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--as-page",
                    announced["url"],
                    "--token-file",
                    token_file,
                    "--poll",
                    str(args.poll),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            try:
                times = run_turns(client, args.turns)
                out = figures(times, server, args)
            finally:
                seen, _ = page.communicate(timeout=HTTP_TIMEOUT_S * 2)  # EOF ends the page
            report = orjson.loads(seen)
            if report["error"]:
                raise BenchError(f"page: {report['error']}")
            return {**out, "page_events": report["events"], "page_polls": report["polls"]}


def run_as_page(args: argparse.Namespace) -> int:
    """The page, in a process of its own (its threads must not take the timed client's GIL):
    until stdin ends; then its counts as JSON on stdout."""
    with open(args.token_file, encoding="utf-8") as file:
        token = file.read().strip()
    page = Page(args.as_page, token, args.poll)
    with contextlib.suppress(BenchError):
        with page:
            sys.stdin.buffer.read()
    report = {"events": page.events, "polls": page.polls, "error": page.error}
    sys.stdout.write(orjson.dumps(report).decode())
    return 0


def figures(
    turns: tuple[list[float], float], server: Any, args: argparse.Namespace
) -> dict[str, Any]:
    latency = latency_on(server, args.load_seconds, 0.001, args.load_window).summary()
    times, cpu_per_turn = turns
    ordered = sorted(times)
    out = {
        "turn_cpu_ms": cpu_per_turn,
        "turn_median_ms": statistics.median(times),
        "turn_p99_ms": percentile(ordered, 0.99),
        "ping_p50_ms": latency["p50_ms"],
        "ping_p99_ms": latency["p99_ms"],
    }
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, Any]]] = {variant: [] for variant in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:
            rounds[variant].append(measure_variant(args, variant))
    keys = KEYS
    medians = {
        variant: {k: statistics.median(r[k] for r in runs) for k in keys}
        for variant, runs in rounds.items()
    }
    return {
        "rounds": rounds,
        "median": medians,
        "ratio_to_off": {
            variant: {k: medians[variant][k] / medians["off"][k] for k in keys}
            for variant in VARIANTS[1:]
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.as_page:
        return run_as_page(args)
    report = measure(args)
    if args.json:
        write_json(report)
        return 0
    page_runs = report["rounds"]["page"]
    lines = [
        f"inspector cost: oamd stdio without --inspect (off), with it (inspect), with a page open"
        f" (page); {args.rounds} rounds, {args.turns} tool turns each, the page polling every"
        f" {args.poll:g} s; medians",
        f"  {'':16}{'off':>10}{'inspect':>10}{'page':>10}{'inspect/off':>13}{'page/off':>10}",
    ]
    for key in KEYS:
        m, r = report["median"], report["ratio_to_off"]
        lines.append(
            f"  {key:16}{m['off'][key]:>10.3f}{m['inspect'][key]:>10.3f}{m['page'][key]:>10.3f}"
            f"{r['inspect'][key]:>13.2f}{r['page'][key]:>10.2f}"
        )
    lines.append(
        f"  the page read {min(r['page_events'] for r in page_runs)}+ events and polled"
        f" {min(r['page_polls'] for r in page_runs)}+ times per round"
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Socket soak (``make soak``): one ``oamd serve`` (Unix socket and token-auth TCP), 32 clients of
random traffic for ``--duration`` seconds, and pre-auth hogs beside them.

    python tests/soak_run.py [--duration 600] [--clients 32] [--hogs 16] [--seed N]

The clients, each a thread that reconnects when its connection ends, alternate Unix and TCP:
half play fuzz episodes (``fuzz_run.run_socket_episode``, checked by the same oracle), the rest
are slow readers (a few KiB at a time, some so slow the daemon must cut them off at
``--max-outbox-bytes``), slow-loris writers (requests a byte at a time, now and then a 1 MiB
line in 1 KiB pieces), droppers (disconnect mid-turn, with ``tool/call``s waiting) and probes
(a ``ping`` every 250 ms, timed). The hogs connect over TCP and never authenticate: silent,
dribbling an ``initialize`` a byte at a time, or streaming a line without end.

Checks: every authenticated client is admitted and its pings answer within ``PING_SECONDS``;
the episodes' oracle; once every client has left, the daemon's connections, open fds and asyncio
tasks (``test/serverStats``) are back to their baseline; RSS flat (first and last window
compared); no traceback or error record on stderr. Prints the figures and every violation;
exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from fuzz_oracle import Oracle, Violation
from fuzz_peer import Daemon, Peer, connect, rss_kib, serve_daemon
from fuzz_run import merge, run_socket_episode, server_stats, stderr_violations
from fuzz_traffic import ToolReply, Traffic
from fuzz_values import encode

PING_SECONDS = 10.0
"""An authenticated client's ping unanswered this long means the daemon stopped serving it."""
MAX_CONNECTIONS = 40
"""``--max-connections`` of the daemon: room for the clients, not for the hogs as well."""
MAX_OUTBOX_BYTES = 8 << 20
SETTLE_SECONDS = 15.0
"""After the clients leave: how long the daemon has to release their connections."""
ROLES = (
    ("traffic",) * 16
    + ("probe",) * 2
    + ("slow_reader",) * 4
    + ("slow_loris",) * 4
    + ("dropper",) * 6
)
"""The role of client ``i`` is ``ROLES[i % 32]``; even indexes use the Unix socket, odd ones TCP,
so every role runs on both."""


def role(index: int) -> str:
    return ROLES[index % len(ROLES)]


class Soak:
    """The shared state of a run: the daemon, the stop flag, the figures and the violations."""

    def __init__(self, daemon: Daemon, args: argparse.Namespace, seed: int) -> None:
        self.daemon = daemon
        self.args = args
        self.seed = seed
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.violations: list[Violation] = []
        self.counts: dict[str, int] = {}
        self.pings: list[float] = []
        self.hog_held: list[float] = []
        self.errors: list[str] = []
        self.local = threading.local()
        """``refused``: whether this thread's last connection was turned away."""

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    def found(self, violations: list[Violation]) -> None:
        if violations:
            with self.lock:
                self.violations = merge(self.violations, violations)

    def flag(self, kind: str, detail: str, *examples: Any) -> None:
        oracle = Oracle()
        oracle.flag(kind, detail, *examples)
        self.found(list(oracle.violations.values()))

    def run_client(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        transport = "tcp" if index % 2 else "unix"
        play: Callable[[random.Random, str], None] = getattr(self, f"_{role(index)}")
        while not self.stop.is_set():
            self.local.refused = False
            try:
                play(rng, transport)
                if self.local.refused:
                    self.stop.wait(0.25)  # as a client would back off; keeps the counts honest
            except OSError as exc:  # refused or reset: the daemon's doing, judged by the checks
                self.count(f"{role(index)} connection errors")
                with self.lock:
                    self.errors.append(f"{role(index)}/{transport}: {exc!r}")
                self.stop.wait(0.5)
            except Exception as exc:  # a bug of the soak itself: stop loudly
                self.flag("soak", f"{role(index)} client crashed: {exc!r}")
                raise

    # ---- roles ----------------------------------------------------------------------------

    def _traffic(self, rng: random.Random, transport: str) -> None:
        traffic = Traffic(rng, id_prefix=f"{rng.randrange(1 << 30)}-")
        plan = traffic.plan(150, replies=32, ends=(50, 20, 15, 15, 0))
        violations = run_socket_episode(self.daemon, plan, transport=transport, window=16)
        if any(v.kind == "handshake" for v in violations):
            self.count("refused")
            self.local.refused = True
        self.found(violations)
        self.count("episodes")
        self.count("episode lines", len(plan.lines))

    def _handshake(self, transport: str) -> tuple[socket.socket, Peer] | None:
        sock = connect(self.daemon, transport)
        peer = Peer(Oracle(), write_fd=sock.fileno(), read_fd=sock.fileno(), pid=self.daemon.pid)
        params: dict[str, Any] = {"protocolVersion": "1.0", "client": {"name": "soak"}}
        if transport == "tcp":
            params["auth"] = self.daemon.token
        peer.request("initialize", "init", params)
        if not peer.wait(lambda: "init" not in peer.oracle.owed, PING_SECONDS, rescue=False):
            refusal = peer.oracle.violations.get(("answer", "an id-null error no line called for"))
            why = refusal.examples[0][:200] if refusal else "no answer"
            self.flag("handshake", f"a {transport} client's initialize was not answered", why)
            self.count("refused")
            self.local.refused = True
            sock.close()
            return None
        return sock, peer

    def _probe(self, rng: random.Random, transport: str) -> None:
        opened = self._handshake(transport)
        if opened is None:
            return
        sock, peer = opened
        with sock:
            until = time.monotonic() + rng.uniform(10, 30)
            n = 0
            while time.monotonic() < until and not self.stop.is_set():
                n += 1
                sent = time.monotonic()
                if not peer.ping(f"p{n}", PING_SECONDS):
                    self.flag("served", f"a {transport} probe's ping went unanswered")
                    return
                with self.lock:
                    self.pings.append(time.monotonic() - sent)
                self.stop.wait(0.25)
        self.found(peer.oracle.finish(connection_closed=True))

    def _slow_loris(self, rng: random.Random, transport: str) -> None:
        opened = self._handshake(transport)
        if opened is None:
            return
        sock, peer = opened
        with sock:
            for n in range(rng.randint(3, 10)):
                if self.stop.is_set():
                    break
                big = rng.random() < 0.1
                pad = "x" * (1 << 20) if big else ""
                msg = {"jsonrpc": "2.0", "id": f"l{n}", "method": "ping"}
                if big:
                    msg["params"] = {"pad": pad}  # refused -32602 (ping takes none): answered
                line = encode(msg) + b"\n"
                piece, pause = (1024, 0.0005) if big else (1, rng.uniform(0.01, 0.1))
                peer.oracle.sent(line[:-1])
                for start in range(0, len(line), piece):
                    _write_all(sock, line[start : start + piece])
                    peer.pump(0)
                    time.sleep(pause)
                if not peer.wait(lambda n=n: f"l{n}" not in peer.oracle.owed, PING_SECONDS):
                    self.flag("served", f"a {transport} slow-loris request went unanswered")
                    return
                self.count("slow-loris requests")
        self.found(peer.oracle.finish(connection_closed=True))

    def _slow_reader(self, rng: random.Random, transport: str) -> None:
        opened = self._handshake(transport)
        if opened is None:
            return
        sock, peer = opened
        crawl = rng.random() < 0.5  # too slow to keep up: the daemon must cut it off
        text = "y" * 50_000
        script = {"type": "scripted", "steps": [], "fallback": {"text": text, "chunks": 1}}
        with sock:
            peer.read_size = 1024 if crawl else 16384
            peer.request("session/create", "c", {"session": "big", "model": script})
            for n in range(200 if crawl else 40):
                peer.request("session/respond", f"r{n}", {"session": "big", "prompt": "go"})
            peer.flush(30)
            until = time.monotonic() + (60 if crawl else 120)
            while peer.oracle.outstanding and not peer.eof and time.monotonic() < until:
                if self.stop.is_set():
                    return
                peer.pump(0)
                time.sleep(0.1 if crawl else 0.02)
        if crawl:
            self.count("slow readers cut off" if peer.eof else "slow readers not cut off")
            return  # answers lost to the cut are the protocol's rule, not a violation
        if peer.oracle.outstanding and not self.stop.is_set():
            self.flag("served", "a slow reader that kept reading was not answered in 120 s")
        self.count("slow readers served")
        self.found(peer.oracle.finish(connection_closed=True))

    def _dropper(self, rng: random.Random, transport: str) -> None:
        opened = self._handshake(transport)
        if opened is None:
            return
        sock, peer = opened
        tools = [{"name": "look", "description": "Look."}]
        step = {"toolCalls": [{"name": "look", "arguments": {}}], "delayMs": 50}
        script = {"type": "scripted", "steps": [step], "fallback": step}
        peer.replies = [ToolReply("never")]
        peer.request("session/create", "c", {"session": "d", "tools": tools, "model": script})
        for n in range(rng.randint(1, 6)):
            params = {"session": "d", "prompt": "x", "stream": rng.random() < 0.5}
            peer.request("session/respond", f"r{n}", params)
        peer.request("test/sleep", "s", {"ms": 5000})
        peer.wait(lambda: peer.calls > 0, 5, rescue=False)  # mid-turn: a tool/call waits
        if rng.random() < 0.5:  # a reset rather than an orderly close
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
        sock.close()
        self.count("dropped mid-turn")
        self.stop.wait(rng.uniform(0, 0.5))

    # ---- hogs -----------------------------------------------------------------------------

    def run_hog(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + 500 + index)
        while not self.stop.is_set():
            try:
                self._hog(rng)
            except OSError:
                self.count("hog connection errors")
                self.stop.wait(0.2)

    def _hog(self, rng: random.Random) -> None:
        mode = rng.choice(("silent", "dribble", "endless"))
        sock = connect(self.daemon, "tcp")
        sock.settimeout(0.01 if mode == "endless" else 0.5)
        opened = time.monotonic()
        prefix = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"auth":"'
        sent = 0
        with sock:
            while not self.stop.is_set():
                try:
                    if not sock.recv(65536):
                        break  # the daemon let go of us
                except TimeoutError:
                    pass
                if mode == "dribble":
                    sock.send(prefix[sent % len(prefix) : sent % len(prefix) + 1])
                    sent += 1
                elif mode == "endless":
                    sock.send(b"z" * 4096)
        with self.lock:
            self.hog_held.append(time.monotonic() - opened)
        self.count(f"hogs {mode}")


def _write_all(sock: socket.socket, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(sock.fileno(), view) :]
        except BlockingIOError:
            time.sleep(0.001)


def _window(samples: list[tuple[float, int]], start: float, end: float) -> tuple[float, int]:
    chosen = [kib for t, kib in samples if start <= t <= end] or [0]
    return statistics.fmean(chosen) / 1024, max(chosen) // 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--hogs", type=int, default=16, help="pre-auth TCP hogs beside them")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--stderr", help="copy the daemon's stderr to this file")
    parser.add_argument("--executable", help="soak this oamd (e.g. dist/oamd/oamd) instead")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}; {args.clients} clients and {args.hogs} hogs for {args.duration:.0f} s")
    flags = ["--max-connections", str(MAX_CONNECTIONS), "--max-outbox-bytes"]
    with serve_daemon(
        *flags, str(MAX_OUTBOX_BYTES), tcp=True, executable=args.executable
    ) as daemon:
        baseline = server_stats(daemon)
        soak = Soak(daemon, args, seed)
        threads = [
            threading.Thread(target=soak.run_client, args=(i,), daemon=True)
            for i in range(args.clients)
        ] + [
            threading.Thread(target=soak.run_hog, args=(i,), daemon=True) for i in range(args.hogs)
        ]
        rss: list[tuple[float, int]] = []
        stats: list[dict[str, Any]] = []
        started = time.monotonic()
        for thread in threads:
            thread.start()
        while time.monotonic() - started < args.duration:
            time.sleep(1)
            rss.append((time.monotonic() - started, rss_kib(daemon.pid)))
            if len(rss) % 10 == 0:
                with contextlib.suppress(OSError, ValueError):
                    stats.append(server_stats(daemon))
        soak.stop.set()
        for thread in threads:
            thread.join(120)
        stuck = [t.name for t in threads if t.is_alive()]
        if stuck:
            soak.flag("soak", f"{len(stuck)} client threads did not finish")
        deadline = time.monotonic() + SETTLE_SECONDS
        final: dict[str, Any] = {}
        while time.monotonic() < deadline:
            final = server_stats(daemon)
            if all(final.get(k, 1 << 30) <= baseline[k] for k in ("connections", "fds", "tasks")):
                break
            time.sleep(0.2)
        for what in ("connections", "fds", "tasks"):
            if final.get(what, -1) > baseline[what]:
                soak.flag("leak", f"{what}: {baseline[what]} before, {final.get(what)} after")
        soak.found(stderr_violations(daemon))
        if args.stderr:
            with open(args.stderr, "w", encoding="utf-8") as file:
                file.write(daemon.stderr())
        after_rss = rss_kib(daemon.pid)
    elapsed = time.monotonic() - started
    window = min(60.0, args.duration / 5)
    first = _window(rss, 5, 5 + window)  # past the first seconds' imports and warm-up
    last = _window(rss, args.duration - window, args.duration)
    if last[0] > first[0] * 1.25 + 8:
        soak.flag("rss", f"RSS grew: {first[0]:.1f} MiB mean early, {last[0]:.1f} MiB late")
    buckets = [rss[i * len(rss) // 10 : (i + 1) * len(rss) // 10] for i in range(10)]
    curve = [f"{max(k for _, k in b) / 1024:.0f}" for b in buckets if b]
    pings = sorted(soak.pings) or [0.0]
    print(f"ran {elapsed:.0f} s; counts: {dict(sorted(soak.counts.items()))}")
    print(
        f"probe pings: {len(soak.pings)}, p50 {pings[len(pings) // 2] * 1000:.1f} ms, "
        f"p99 {pings[int(len(pings) * 0.99)] * 1000:.1f} ms, max {pings[-1] * 1000:.1f} ms"
    )
    held = sorted(soak.hog_held) or [0.0]
    print(f"hogs held a connection: median {held[len(held) // 2]:.1f} s, max {held[-1]:.1f} s")
    print(
        f"RSS: first {window:.0f} s mean {first[0]:.1f} MiB (peak {first[1]}), "
        f"last {window:.0f} s mean {last[0]:.1f} MiB (peak {last[1]}), "
        f"overall peak {max(k for _, k in rss) // 1024 if rss else 0} MiB, "
        f"{after_rss // 1024} MiB once the clients left"
    )
    print(f"RSS curve (MiB, {len(curve)} buckets): {' '.join(curve)}")
    print(f"daemon before: {baseline}; after the clients left: {final}")
    if stats:
        print(
            f"busiest: {max(s.get('connections', 0) for s in stats)} connections, "
            f"{max(s.get('tasks', 0) for s in stats)} tasks, {max(s.get('fds', 0) for s in stats)} fds"
        )
    if soak.errors:
        print(f"client-side connection errors ({len(soak.errors)}), first: {soak.errors[:3]}")
    for violation in soak.violations:
        print(f"\n{violation}")
    print(f"\nseed {seed}: {'VIOLATIONS' if soak.violations else 'no violations'}")
    return 1 if soak.violations else 0


if __name__ == "__main__":
    sys.exit(main())

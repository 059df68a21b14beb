"""Socket soak (``make soak``): one ``oamd serve`` (Unix socket and token-auth TCP), 32 clients of
random traffic for ``--duration`` seconds, and pre-auth hogs beside them.

    python tests/soak_run.py [--duration 600] [--clients 32] [--hogs 16] [--seed N]

The clients, each a thread that reconnects when its connection ends, alternate Unix and TCP:
almost half play fuzz episodes (``fuzz_run.run_socket_episode``, checked by the same oracle, now
and then with a ``fuzz_heavy`` splice), the rest are slow readers (a few KiB at a time, some so
slow the daemon must cut them off at ``--max-outbox-bytes``), flooders (ask for far more than
the outbox holds and do not read: cut off, again and again), hoarders (big instructions, tools,
steps, personas, world keys, against the small ``--max-connection-bytes``), slow-loris writers
(requests a byte at a time, now and then a 1 MiB line in 1 KiB pieces), droppers (disconnect
mid-turn, with ``tool/call``s waiting) and probes (a ``ping`` every 250 ms, timed). The hogs
connect over TCP and never authenticate: silent, dribbling an ``initialize`` a byte at a time,
or streaming a line without end. With ``--fault-server`` the daemon's ``system`` model is a
misbehaving OpenAI-compatible server (``fuzz_peer.fault_model``) that a quarter of the episodes'
models use.

Checks: every authenticated client is admitted and its pings answer within ``--max-ping-seconds``;
the episodes' oracle (with the hoarders' budgets); once every client has left, the daemon's
connections, open fds and asyncio tasks (``test/serverStats``) are back to their baseline and its
RSS is within ``--rss-return-mib`` of what it was before the clients came (after a warm-up);
RSS flat (first and last window compared) and never past ``--max-rss-mib`` (the run stops
there); no traceback or error record on stderr. Prints the figures and every violation; exits 1
when there is one.
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
from fuzz_peer import KILL_RSS_MIB, Daemon, Peer, connect, fault_model, rss_kib, serve_daemon
from fuzz_run import (
    SYSTEM_SHARE,
    merge,
    run_socket_episode,
    server_stats,
    socket_check,
    stderr_violations,
)
from fuzz_traffic import ToolReply, Traffic
from fuzz_values import encode

PING_SECONDS = 10.0
"""An authenticated client's ping unanswered this long means the daemon stopped serving it."""
MAX_PING_SECONDS = 2.0
"""A probe's ping answered later than this is a stall (``--max-ping-seconds``): twice the
fuzzer's ``fuzz_probe.MAX_PING_SECONDS``, 32 clients sharing two cores here (their probes waited
0.25 s at worst before heavy traffic joined them)."""
MAX_CONNECTIONS = 40
"""``--max-connections`` of the daemon: room for the clients, not for the hogs as well."""
MAX_OUTBOX_BYTES = 8 << 20
MAX_CONNECTION_BYTES = 4 << 20
"""``--max-connection-bytes`` of the daemon: small, so that the hoarders pass it within seconds."""
HEAVY_RATE = 1 / 10_000
"""Lines of the episodes that are ``fuzz_heavy`` splices: a few a minute among 32 clients."""
WARM_UP_LINES = 300
"""A first episode, alone, before the clients: it loads what the daemon imports lazily, so
that the RSS after it is the start the end is compared with."""
RSS_RETURN_MIB = 48.0
"""Once every client has left, how far the daemon's RSS may stay above its start (after the
warm-up, before the clients; ``--rss-return-mib``): room for what the allocator keeps of its
busiest moments, not for what cut-off flooders leave if their connections are never freed
(about 1.2 MiB each, measured: two flooders pass it within a minute)."""
MAX_RSS_MIB = KILL_RSS_MIB
"""The daemon's RSS past which the soak kills it and stops (``--max-rss-mib``; the episodes'
peers kill it there too): a runaway, and a shared machine to spare."""
SETTLE_SECONDS = 15.0
"""After the clients leave: how long the daemon has to release their connections."""
FLOOD_BYTES = 300_000
FLOOD_REQUESTS = 64
"""A flooder asks for ``FLOOD_REQUESTS`` answers of ``FLOOD_BYTES`` each: past the outbox."""
ROLES = (
    ("traffic",) * 14
    + ("probe",) * 2
    + ("slow_reader",) * 4
    + ("flooder",) * 2
    + ("hoarder",) * 2
    + ("slow_loris",) * 3
    + ("dropper",) * 5
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

    def traffic(self, rng: random.Random) -> Traffic:
        traffic = Traffic(
            rng,
            id_prefix=f"{rng.randrange(1 << 30)}-",
            heavy_rate=self.args.heavy_rate,
            budget=self.args.max_connection_bytes,
            system=SYSTEM_SHARE if self.args.fault_server else 0.0,
        )
        traffic.heavy.over_socket = True
        return traffic

    def _traffic(self, rng: random.Random, transport: str) -> None:
        plan = self.traffic(rng).plan(150, replies=32, ends=(50, 20, 15, 15, 0))
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
                seconds = time.monotonic() - sent
                with self.lock:
                    self.pings.append(seconds)
                if seconds > self.args.max_ping_seconds:
                    self.flag(
                        "stall",
                        f"a {transport} probe's ping waited more than "
                        f"{self.args.max_ping_seconds:.1f} s (the daemon stopped serving)",
                        f"{seconds:.2f} s",
                    )
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

    def _flooder(self, rng: random.Random, transport: str) -> None:
        """Asks for far more than ``--max-outbox-bytes`` and reads nothing for a second: the
        daemon must cut it off, and (checked once all have left) free what it queued."""
        opened = self._handshake(transport)
        if opened is None:
            return
        sock, peer = opened
        step = {"text": "f" * FLOOD_BYTES, "chunks": 1}
        script = {"type": "scripted", "steps": [], "fallback": step}
        with sock:
            peer.request("session/create", "c", {"session": "flood", "model": script})
            peer.flush(PING_SECONDS)
            for n in range(FLOOD_REQUESTS):  # small requests, big answers; the budget unspent
                peer.request("session/respond", f"r{n}", {"session": "flood", "prompt": "go"})
                peer.request("session/reset", f"x{n}", {"session": "flood"})
            peer.flush(PING_SECONDS)
            self.stop.wait(1.0)  # not reading: the outbox fills
            peer.wait(lambda: peer.eof or not peer.oracle.outstanding, 120, rescue=False)
        if peer.eof and peer.oracle.outstanding:
            self.count("flooders cut off")
        elif not self.stop.is_set():
            self.count("flooders served")
            self.found(peer.oracle.finish(connection_closed=True))
        self.stop.wait(rng.uniform(0, 0.5))

    def _hoarder(self, rng: random.Random, transport: str) -> None:
        """Makes object after object of a quarter of the budget (``fuzz_heavy``'s hoard, or a
        world/set past ``MAX_WORLD_BYTES``), then deletes them: refused -32055 in time."""
        kind = "hoard" if rng.random() < 0.8 else "long_keys"
        plan = self.traffic(rng).plan(1, ends=(1, 0, 0, 0, 0), splice=kind)
        violations = run_socket_episode(self.daemon, plan, transport=transport)
        if any(v.kind == "handshake" for v in violations):
            self.count("refused")
            self.local.refused = True
        self.found(violations)
        self.count(f"hoards ({kind})")
        self.stop.wait(rng.uniform(0.5, 2))

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
    parser.add_argument(
        "--fault-server",
        action="store_true",
        help='"system" is a misbehaving OpenAI-compatible server, and a quarter of the models',
    )
    parser.add_argument("--max-connection-bytes", type=int, default=MAX_CONNECTION_BYTES)
    parser.add_argument("--heavy-rate", type=float, default=HEAVY_RATE, help="splices per line")
    parser.add_argument("--max-ping-seconds", type=float, default=MAX_PING_SECONDS)
    parser.add_argument("--rss-return-mib", type=float, default=RSS_RETURN_MIB)
    parser.add_argument("--max-rss-mib", type=float, default=MAX_RSS_MIB)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}; {args.clients} clients and {args.hogs} hogs for {args.duration:.0f} s")
    flags = ["--max-connections", str(MAX_CONNECTIONS), "--max-outbox-bytes"]
    flags += [str(MAX_OUTBOX_BYTES), "--max-connection-bytes", str(args.max_connection_bytes)]
    with contextlib.ExitStack() as stack:
        if args.fault_server:
            flags += stack.enter_context(fault_model(seed, slow=True))
        daemon = stack.enter_context(serve_daemon(*flags, tcp=True, executable=args.executable))
        return _soak(args, seed, daemon)


def _soak(args: argparse.Namespace, seed: int, daemon: Daemon) -> int:
    soak = Soak(daemon, args, seed)
    warm_up = soak.traffic(random.Random(seed)).plan(WARM_UP_LINES, ends=(1, 0, 0, 0, 0))
    soak.found(run_socket_episode(daemon, warm_up, window=16))
    soak.found(socket_check(daemon))  # released, and nothing on stderr yet
    baseline = server_stats(daemon)
    while baseline.get("connections", 1) > 1:  # socket_check's own, still closing
        time.sleep(0.02)
        baseline = server_stats(daemon)
    start_rss = rss_kib(daemon.pid) / 1024
    threads = [
        threading.Thread(target=soak.run_client, args=(i,), daemon=True)
        for i in range(args.clients)
    ] + [threading.Thread(target=soak.run_hog, args=(i,), daemon=True) for i in range(args.hogs)]
    rss: list[tuple[float, int]] = []
    stats: list[dict[str, Any]] = []
    started = time.monotonic()
    for thread in threads:
        thread.start()
    while time.monotonic() - started < args.duration:
        time.sleep(1)
        rss.append((time.monotonic() - started, rss_kib(daemon.pid)))
        if rss[-1][1] > args.max_rss_mib * 1024:
            daemon.process.kill()  # a runaway: spare the machine
            soak.flag("rss", f"RSS passed {args.max_rss_mib:.0f} MiB: the daemon was killed")
            break
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
    if daemon.process.poll() is not None:
        soak.flag("exit", f"oamd serve died ({daemon.process.returncode})")
        deadline = 0.0  # nothing left to settle
        final = dict.fromkeys(("connections", "fds", "tasks"), 0)
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
    after_rss = rss_kib(daemon.pid) / 1024
    elapsed = time.monotonic() - started
    sampled = rss[-1][0] if rss else 0.0  # the clients' time (they may take long to leave)
    window = min(60.0, sampled / 5)
    first = _window(rss, 5, 5 + window)  # past the first seconds' imports and warm-up
    last = _window(rss, sampled - window, sampled)
    if last[0] > first[0] * 1.25 + 8:
        soak.flag("rss", f"RSS grew: {first[0]:.1f} MiB mean early, {last[0]:.1f} MiB late")
    if after_rss > start_rss + args.rss_return_mib:
        soak.flag(
            "rss",
            f"RSS did not come back once every client had left: {after_rss:.1f} MiB, "
            f"{start_rss:.1f} MiB at the start (at most {args.rss_return_mib:.0f} MiB more)",
        )
    print(f"ran {elapsed:.0f} s; counts: {dict(sorted(soak.counts.items()))}")
    pings = sorted(soak.pings) or [0.0]
    print(
        f"probe pings: {len(soak.pings)}, p50 {pings[len(pings) // 2] * 1000:.1f} ms, "
        f"p99 {pings[int(len(pings) * 0.99)] * 1000:.1f} ms, max {pings[-1] * 1000:.1f} ms"
    )
    held = sorted(soak.hog_held) or [0.0]
    print(f"hogs held a connection: median {held[len(held) // 2]:.1f} s, max {held[-1]:.1f} s")
    buckets = [rss[i * len(rss) // 10 : (i + 1) * len(rss) // 10] for i in range(10)]
    curve = [f"{max(k for _, k in b) / 1024:.0f}" for b in buckets if b]
    print(
        f"RSS: first {window:.0f} s mean {first[0]:.1f} MiB (peak {first[1]}), "
        f"last {window:.0f} s mean {last[0]:.1f} MiB (peak {last[1]}), "
        f"overall peak {max(k for _, k in rss) // 1024 if rss else 0} MiB; "
        f"{start_rss:.1f} MiB at the start, {after_rss:.1f} MiB once the clients left"
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

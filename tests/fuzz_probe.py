"""Fuzz probe: a second client of an ``oamd serve`` that pings while the fuzz traffic runs, so a
stalled event loop shows: a ``ping`` is answered as it is read, whatever the other clients do,
so one answered later than ``MAX_PING_SECONDS`` means the daemon stopped serving everyone for
that long (a turn streaming half a million chunks, a fan-out of thousands of decisions…).

The probe is a thread with a connection and an ``Oracle`` of its own; ``take()`` hands over what
it found since the last call (and its connection is ``others=1`` for ``fuzz_run.socket_check``).
"""

from __future__ import annotations

import threading
import time

from fuzz_oracle import Oracle, Violation
from fuzz_peer import Daemon, Peer, connect

__all__ = ["MAX_PING_SECONDS", "Probe"]

MAX_PING_SECONDS = 1.0
"""The longest a probe's ``ping`` may wait for its answer. Generous: the fuzz traffic's probes
waited 0.2 s at worst, a soak of 32 clients on two shared cores 0.25 s (p99 0.17 s); while a
``decideMany`` of 20,000 decisions was read, every client waited 1.8 to 2.6 s, and a turn of
125,000 chunks held them 0.7 s (idle) to 4 s (busy)."""

EVERY_SECONDS = 0.1


class Probe:
    """Pings ``daemon`` every ``EVERY_SECONDS`` from a thread, between ``start()`` and
    ``stop()``, timing each answer."""

    def __init__(self, daemon: Daemon, *, max_seconds: float = MAX_PING_SECONDS) -> None:
        self.daemon = daemon
        self.max_seconds = max_seconds
        self.latencies: list[float] = []
        self._found: list[Violation] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fuzz-probe", daemon=True)

    def start(self) -> Probe:
        self._thread.start()
        return self

    def stop(self) -> list[Violation]:
        self._stop.set()
        self._thread.join(self.max_seconds * 5 + 10)
        return self.take()

    def take(self) -> list[Violation]:
        """The violations found since the last call."""
        with self._lock:
            found, self._found = self._found, []
        return found

    def _flag(self, kind: str, detail: str, *examples: object) -> None:
        oracle = Oracle()
        oracle.flag(kind, detail, *examples)
        with self._lock:
            self._found += oracle.violations.values()

    def _run(self) -> None:
        with connect(self.daemon) as sock:
            fd = sock.fileno()
            peer = Peer(Oracle(), write_fd=fd, read_fd=fd, pid=self.daemon.pid)
            peer.request("initialize", "init", {"protocolVersion": "1.0", "client": {}})
            n = 0
            while not self._stop.wait(EVERY_SECONDS):
                n += 1
                sent = time.monotonic()
                peer.request("ping", n)
                answered = peer.wait(lambda n=n: n not in peer.oracle.owed, 120, rescue=False)
                seconds = time.monotonic() - sent
                self.latencies.append(seconds)
                if not answered or peer.eof:
                    self._flag("stall", "the probe's ping went unanswered for 120 s")
                    return
                if seconds > self.max_seconds:
                    self._flag(
                        "stall",
                        f"a ping waited more than {self.max_seconds:.1f} s for its answer "
                        "(the daemon stopped serving every client)",
                        f"{seconds:.2f} s",
                    )
            for violation in peer.oracle.finish(connection_closed=True):
                self._flag(violation.kind, f"probe: {violation.detail}", *violation.examples)

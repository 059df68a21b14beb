"""Shared helpers for the oamd benchmarks: the servers under test, spawning them as real
subprocesses on pipes, their handshakes, newline-delimited JSON framing, and the three
measurements (pipelined throughput, cold start, ping latency under load).

Every wait here is bounded by a deadline, every loop by a count or a deadline, and every
spawned process is killed and reaped when its ``spawn()`` block exits.
"""

from __future__ import annotations

import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from time import perf_counter, sleep
from typing import IO, Any

import orjson

PYTHON = sys.executable
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)

READ_SIZE = 1 << 20
WRITE_CHUNK = 1 << 16
STDERR_TAIL = 1500
EXIT_GRACE_S = 2.0
WARMUP_COUNT = 1000

Message = dict[str, Any]

OAMD_INITIALIZE: Message = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "1.0", "client": {"name": "bench"}},
}

# MCP lifecycle: the client sends `initialize`, waits for its result, then sends the
# `notifications/initialized` notification; only then is the session in normal operation.
MCP_INITIALIZE: Message = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0.1.0"},
    },
}
MCP_INITIALIZED: Message = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MCP_HANDSHAKE: tuple[Message, ...] = (MCP_INITIALIZE, MCP_INITIALIZED)


class BenchError(RuntimeError):
    """A server misbehaved: it exited, timed out, or answered wrongly."""


@dataclass(frozen=True)
class ServerSpec:
    """How to start one server under test, what to send before timing it, and how many
    pings per throughput round it gets relative to ``--count`` (``scale``)."""

    name: str
    argv: tuple[str, ...]
    handshake: tuple[Message, ...]
    scale: float = 1.0

    def opening(self) -> Message:
        """The first request: its reply ends the cold-start clock."""
        return self.handshake[0] if self.handshake else ping(0)

    def round_count(self, count: int) -> int:
        """Pings per round: ``count * scale``; a scaled-down count stays >= 1000 (or count)."""
        scaled = max(1, round(count * self.scale))
        return min(count, max(1000, scaled)) if self.scale < 1 else scaled


# echo is so fast that `count` pings take ~20 ms: scale it up for a stable figure.
# The MCP SDK server is ~500x slower than echo: scale it down to keep the run short.
ECHO = ServerSpec("echo", (PYTHON, os.path.join(BENCH_DIR, "echo_server.py")), (), scale=5.0)
OAMD = ServerSpec("oamd", (PYTHON, "-m", "oamd", "stdio"), (OAMD_INITIALIZE,))
MCP = ServerSpec("mcp", (PYTHON, os.path.join(BENCH_DIR, "mcp_server.py")), MCP_HANDSHAKE, 0.1)
SERVERS: dict[str, ServerSpec] = {spec.name: spec for spec in (ECHO, OAMD, MCP)}


def write_json(report: Any) -> None:
    """A report as indented JSON on stdout (every bench's ``--json``)."""
    sys.stdout.write(
        orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n"
    )


def ping(msg_id: int) -> Message:
    """A JSON-RPC ping request."""
    return {"jsonrpc": "2.0", "id": msg_id, "method": "ping"}


def encode(msg: Message) -> bytes:
    """One message as a newline-terminated JSON line."""
    return orjson.dumps(msg) + b"\n"


def ping_lines(first_id: int, count: int) -> bytes:
    """``count`` ping request lines with consecutive ids starting at ``first_id``."""
    return b"".join(encode(ping(i)) for i in range(first_id, first_id + count))


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to a blocking fd, in chunks (a pipe may take less per call)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view[:WRITE_CHUNK])
        view = view[written:]


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty list."""
    rank = max(1, round(fraction * len(sorted_values) + 0.5))
    return sorted_values[min(rank, len(sorted_values)) - 1]


class LineReader:
    """Reads newline-delimited messages from a pipe fd, never blocking past a deadline."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending = b""

    def read_lines(self, deadline: float) -> list[bytes]:
        """Return every complete line available, waiting until at least one arrives.

        Raises TimeoutError at ``deadline`` and EOFError when the pipe closes.
        """
        while (remaining := deadline - perf_counter()) > 0:
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._fd, READ_SIZE)
            if not chunk:
                raise EOFError("server closed its stdout")
            *lines, self._pending = (self._pending + chunk).split(b"\n")
            if lines:
                return lines
        raise TimeoutError("no reply before the deadline")


class PipeWriter(threading.Thread):
    """Writes one payload to the server's stdin from its own thread, so that reading the
    replies in the calling thread can never deadlock against a full pipe."""

    def __init__(self, fd: int, payload: bytes) -> None:
        super().__init__(name="bench-writer", daemon=True)
        self._fd = fd
        self._payload = payload
        self.started_at = 0.0
        self.error: OSError | None = None

    def run(self) -> None:
        self.started_at = perf_counter()
        try:
            write_all(self._fd, self._payload)
        except OSError as exc:
            self.error = exc


class Server:
    """A running server subprocess: raw-fd pipes, a line reader, stderr into a temp file."""

    def __init__(self, spec: ServerSpec, stderr: IO[bytes]) -> None:
        self.spec = spec
        self._stderr = stderr
        self.proc = subprocess.Popen(
            spec.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=REPO_ROOT,
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self.in_fd = self._stdin.fileno()
        self.reader = LineReader(self._stdout.fileno())
        self.threads: list[threading.Thread] = []
        self.next_id = 1

    def take_ids(self, count: int) -> int:
        """Reserve ``count`` fresh request ids; return the first."""
        first = self.next_id
        self.next_id += count
        return first

    def send(self, msg: Message) -> None:
        """Write one message."""
        write_all(self.in_fd, encode(msg))

    def call(self, msg: Message, timeout: float = 10.0) -> Message:
        """Send a request and wait for its successful reply, skipping notifications."""
        self.send(msg)
        deadline = perf_counter() + timeout
        while True:
            for line in self.lines(deadline):
                reply = orjson.loads(line)
                if "id" not in reply:
                    continue
                if reply["id"] != msg["id"] or "result" not in reply:
                    raise self.error(f"unexpected reply to {msg['method']}: {line[:300]!r}")
                return reply

    def handshake(self) -> None:
        """Send the handshake: wait for each request's reply; notifications are fire-and-forget."""
        for msg in self.spec.handshake:
            if "id" in msg:
                self.call(msg)
            else:
                self.send(msg)

    def ready(self) -> None:
        """Handshake, then one ping round trip: the server is up and past its first request."""
        self.handshake()
        self.call(ping(self.take_ids(1)))

    def lines(self, deadline: float) -> list[bytes]:
        """Next complete reply lines, turning EOF/timeout into a BenchError with stderr."""
        try:
            return self.reader.read_lines(deadline)
        except (EOFError, TimeoutError) as exc:
            raise self.error(str(exc)) from None

    def poll(self, timeout: float) -> list[bytes]:
        """Complete reply lines arriving within ``timeout`` (maybe none); EOF is a BenchError."""
        try:
            return self.reader.read_lines(perf_counter() + timeout)
        except TimeoutError:
            return []
        except EOFError as exc:
            raise self.error(str(exc)) from None

    def error(self, what: str) -> BenchError:
        """A BenchError naming this server, with its exit status and stderr tail."""
        status = self.proc.poll()
        state = "running" if status is None else f"exited with {status}"
        return BenchError(f"{self.spec.name}: {what} ({state}){self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        with suppress(OSError, ValueError):
            self._stderr.flush()
            size = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, size - STDERR_TAIL))
            tail = self._stderr.read().decode("utf-8", "replace").strip()
            if tail:
                return f"\n--- {self.spec.name} stderr (tail) ---\n{tail}"
        return ""

    def stderr_from(self, offset: int) -> tuple[bytes, int]:
        """What the server wrote on stderr from byte ``offset`` on, and the offset after it."""
        self._stderr.flush()
        self._stderr.seek(offset)
        data = self._stderr.read()
        return data, offset + len(data)

    def close(self) -> None:
        """Stop the process (EOF, then kill after a grace period), join threads, close fds."""
        if any(t.is_alive() for t in self.threads):
            self.proc.kill()  # unblocks writers stuck on a full pipe (EPIPE)
        for thread in self.threads:
            thread.join(EXIT_GRACE_S)
        with suppress(OSError):
            self._stdin.close()
        try:
            self.proc.wait(EXIT_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stdout.close()


def log_records(stderr: bytes, event: str) -> Iterator[dict[str, Any]]:
    """The daemon's JSON log records named ``event`` in ``stderr``, in order (other lines and
    lines cut short are skipped)."""
    needle = orjson.dumps(event)
    for raw in stderr.splitlines():
        if needle not in raw:
            continue
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("event") == event:
            yield record


@contextmanager
def spawn(spec: ServerSpec) -> Iterator[Server]:
    """Start a server; it is always stopped and reaped when the block exits."""
    with tempfile.TemporaryFile() as stderr:
        server = Server(spec, stderr)
        try:
            yield server
        finally:
            server.close()


# --- throughput -------------------------------------------------------------------------


class IdTracker:
    """Checks that every id of a contiguous range comes back exactly once, as a result."""

    def __init__(self, first_id: int, count: int) -> None:
        self.first_id = first_id
        self.seen = bytearray(count)
        self.received = 0

    def record(self, reply: Message) -> str | None:
        """Count a reply; return a problem description, or None if it is fine."""
        if "id" not in reply:
            return None  # a notification: not a reply
        index = reply["id"] - self.first_id if type(reply["id"]) is int else -1
        if not 0 <= index < len(self.seen):
            return f"unexpected id {reply['id']!r}"
        if self.seen[index]:
            return f"duplicate id {reply['id']}"
        if "result" not in reply:
            return f"error reply for id {reply['id']}: {reply.get('error')!r}"
        self.seen[index] = 1
        self.received += 1
        return None


def pipelined_round(server: Server, count: int, timeout: float) -> float:
    """Pipeline ``count`` pings and read all replies; seconds from first byte written to
    last reply read."""
    first_id = server.take_ids(count)
    tracker = IdTracker(first_id, count)
    writer = PipeWriter(server.in_fd, ping_lines(first_id, count))
    server.threads.append(writer)
    deadline = perf_counter() + timeout
    writer.start()
    while tracker.received < count:
        try:
            lines = server.reader.read_lines(deadline)
        except (EOFError, TimeoutError) as exc:
            raise server.error(f"{exc}, after {tracker.received}/{count} replies") from None
        for line in lines:
            if problem := tracker.record(orjson.loads(line)):
                raise server.error(problem)
    finished = perf_counter()
    writer.join(EXIT_GRACE_S)
    if writer.error is not None:
        raise server.error(f"write failed: {writer.error}")
    return finished - writer.started_at


@dataclass
class Throughput:
    """Best-of-rounds pipelined ping throughput of one server."""

    count: int
    round_seconds: list[float]

    @property
    def msgs_per_s(self) -> float:
        return self.count / min(self.round_seconds)


def throughput(spec: ServerSpec, count: int, rounds: int, timeout: float) -> Throughput:
    """Spawn a server, handshake, warm up, and time ``rounds`` pipelined rounds of ``count``
    pings."""
    with spawn(spec) as server:
        server.ready()
        pipelined_round(server, min(count, WARMUP_COUNT), timeout)
        seconds = [pipelined_round(server, count, timeout) for _ in range(rounds)]
    return Throughput(count, seconds)


# --- cold start -------------------------------------------------------------------------


def first_reply_ms(spec: ServerSpec, *then: Message, timeout: float = 20.0) -> float:
    """Milliseconds from spawn to the reply to the server's opening request (and to each of
    ``then`` after it)."""
    started = perf_counter()
    with spawn(spec) as server:
        server.call(spec.opening(), timeout=timeout)
        for message in then:
            server.call(message, timeout=timeout)
        return (perf_counter() - started) * 1000


def cold_start_ms(spec: ServerSpec, runs: int) -> list[float]:
    """Milliseconds from spawn to the reply to the server's opening request, per run."""
    return [first_reply_ms(spec, timeout=10.0) for _ in range(runs)]


def interleaved_medians(variants: dict[str, Callable[[], float]], runs: int) -> dict[str, float]:
    """Each variant's median over ``runs`` rounds, every round running each variant once (a slow
    moment of the machine hits all of them alike)."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(runs):
        for name, run in variants.items():
            samples[name].append(run())
    return {name: statistics.median(values) for name, values in samples.items()}


# --- latency under load -----------------------------------------------------------------


class Credits:
    """A counting window of in-flight bulk requests, shared by the bulk writer and reader."""

    def __init__(self, window: int) -> None:
        self._available = window
        self._cond = threading.Condition()

    def take(self, most: int, timeout: float) -> int:
        """Take up to ``most`` credits, waiting at most ``timeout`` for at least one."""
        with self._cond:
            self._cond.wait_for(lambda: self._available > 0, timeout)
            taken = min(most, self._available)
            self._available -= taken
            return taken

    def give(self, count: int) -> None:
        """Return credits as replies arrive."""
        with self._cond:
            self._available += count
            self._cond.notify_all()


@dataclass
class LoadState:
    """What the load threads and the reader share during one latency run."""

    server: Server
    stop_at: float
    credits: Credits
    bulk_first_id: int
    bulk_sent: int = 0
    bulk_received: int = 0
    probe_id: int = -1
    probe_replied_at: float = 0.0
    probe_replied: threading.Event | None = None
    error: str | None = None

    def abort(self) -> None:
        """Make both writers stop at their next check, without writing again."""
        self.stop_at = 0.0
        if self.probe_replied is not None:
            self.probe_replied.set()


# One write of a batch must not exceed PIPE_BUF, so that it is atomic on the pipe and
# never interleaves with a probe line written from the other thread.
BULK_BATCH = 32
BULK_ID_BASE = 1_000_000_000


def bulk_writer(state: LoadState) -> None:
    """Keep the window full of bulk pings until ``stop_at``."""
    try:
        while perf_counter() < state.stop_at:
            batch = state.credits.take(BULK_BATCH, timeout=0.05)
            if not batch:
                continue
            data = ping_lines(state.bulk_first_id + state.bulk_sent, batch)
            assert len(data) <= select.PIPE_BUF
            os.write(state.server.in_fd, data)
            state.bulk_sent += batch
    except OSError as exc:
        state.error = f"bulk write failed: {exc}"


def probe_writer(state: LoadState, interval: float, samples: list[float]) -> None:
    """One ping at a time, every ``interval`` seconds, recording round-trip latency."""
    try:
        while perf_counter() < state.stop_at and state.error is None:
            replied = threading.Event()
            state.probe_replied = replied
            state.probe_id = state.server.take_ids(1)
            sent = perf_counter()
            os.write(state.server.in_fd, encode(ping(state.probe_id)))
            if not replied.wait(5.0):
                state.error = f"probe {state.probe_id} got no reply within 5 s"
                return
            if state.probe_replied_at >= sent:
                samples.append(state.probe_replied_at - sent)
            sleep(max(0.0, sent + interval - perf_counter()))
    except OSError as exc:
        state.error = f"probe write failed: {exc}"


def read_load_replies(state: LoadState, writers: list[threading.Thread]) -> None:
    """Read replies until both writers are done and every bulk ping is answered."""
    deadline = state.stop_at + 10.0
    while state.error is None and (
        any(w.is_alive() for w in writers) or state.bulk_received < state.bulk_sent
    ):
        if perf_counter() > deadline:
            raise state.server.error(
                f"{state.bulk_sent - state.bulk_received} bulk replies missing at the deadline"
            )
        lines = state.server.poll(0.05)
        handle_load_replies(state, lines, perf_counter())


def handle_load_replies(state: LoadState, lines: list[bytes], now: float) -> None:
    """Account bulk replies (returning their credits) and time the probe's reply."""
    bulk = 0
    for line in lines:
        reply = orjson.loads(line)
        msg_id = reply.get("id")
        if "result" not in reply and msg_id is not None:
            state.error = f"error reply: {line[:300]!r}"
        elif isinstance(msg_id, int) and msg_id >= state.bulk_first_id:
            bulk += 1
        elif msg_id == state.probe_id and state.probe_replied is not None:
            state.probe_replied_at = now
            state.probe_replied.set()
    if bulk:
        state.bulk_received += bulk
        state.credits.give(bulk)


@dataclass
class Latency:
    """Round-trip latency of paced single pings while bulk pings keep the server busy."""

    window: int
    seconds: float
    samples_ms: list[float]
    bulk_msgs_per_s: float

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.samples_ms)
        return {
            "probes": len(ordered),
            "p50_ms": percentile(ordered, 0.50),
            "p99_ms": percentile(ordered, 0.99),
            "max_ms": ordered[-1],
            "mean_ms": statistics.fmean(ordered),
            "bulk_msgs_per_s": self.bulk_msgs_per_s,
            "window": self.window,
            "seconds": self.seconds,
        }


def latency_under_load(spec: ServerSpec, seconds: float, interval: float, window: int) -> Latency:
    """Probe ping latency every ``interval`` s for ``seconds`` while ``window`` bulk pings
    stay in flight on the same server process."""
    with spawn(spec) as server:
        server.ready()
        return latency_on(server, seconds, interval, window)


def latency_on(server: Server, seconds: float, interval: float, window: int) -> Latency:
    """``latency_under_load`` on a server already running (and past its handshake)."""
    previous_switch = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)  # let the prober get the GIL back promptly
    try:
        pipelined_round(server, WARMUP_COUNT, timeout=10.0)
        return _run_load(server, seconds, interval, window)
    finally:
        sys.setswitchinterval(previous_switch)


def _run_load(server: Server, seconds: float, interval: float, window: int) -> Latency:
    started = perf_counter()
    state = LoadState(server, started + seconds, Credits(window), BULK_ID_BASE)
    samples: list[float] = []
    bulk = threading.Thread(target=bulk_writer, args=(state,), daemon=True)
    probe = threading.Thread(target=probe_writer, args=(state, interval, samples), daemon=True)
    server.threads += [bulk, probe]
    bulk.start()
    probe.start()
    try:
        read_load_replies(state, [bulk, probe])
    finally:
        state.abort()
    elapsed = perf_counter() - started
    if state.error is not None:
        raise server.error(state.error)
    if not samples:
        raise server.error("no probe completed")
    return Latency(window, seconds, [s * 1000 for s in samples], state.bulk_received / elapsed)

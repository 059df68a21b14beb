"""Fuzz peer: plays a ``Plan`` to a real daemon over one connection and feeds the ``Oracle``.

One thread, one ``select`` loop over non-blocking fds, so it serves a pipe pair (``oamd
stdio``) and a socket (``oamd serve``) alike: it writes the plan's lines while no more than
``window`` requests wait for their answer, reads every line the daemon writes, answers each
``tool/call`` as the plan says (now, twice, late, never, wrongly), and samples the daemon's RSS.
A call left waiting (``never``, or a reply too deep to read) is answered late ("rescued") once the
connection stalls, so a turn waiting without a timeout cannot hold an episode forever.

Also here: the daemons under test (``stdio_daemon``, ``serve_daemon``), started with the scripted
backend and ``--test-methods``, their stderr in a file for ``stderr_problems``; and
``fault_model``, a misbehaving OpenAI-compatible server to start them with as ``--model``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from fuzz_oracle import NONE, Oracle, expectation
from fuzz_traffic import Plan, ToolReply
from fuzz_values import encode

__all__ = [
    "KILL_RSS_MIB",
    "Daemon",
    "Peer",
    "connect",
    "fault_model",
    "rss_kib",
    "serve_daemon",
    "stdio_daemon",
    "wait_until_reading",
]

OAMD = [sys.executable, "-m", "oamd"]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL_TIMEOUT = "1"
"""The daemons' ``--tool-timeout``: a call never answered times out within the episode."""
READ_SIZE = 1 << 16
MAX_BUFFERED = 1 << 18
"""Bytes written ahead of the daemon's reading at most (on top of the request window)."""
RSS_EVERY = 0.25
KILL_RSS_MIB = 1024.0
"""The daemon's RSS at which a peer kills it (SIGKILL) and flags it: a runaway must cost the
run, not the machine (a flood's events once took a daemon to 23 GB in seconds)."""
STALL_SECONDS = 0.5
"""With the window full, or draining, this long without a line from the daemon rescues calls."""


def rss_kib(pid: int) -> int:
    """The resident set of ``pid`` in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for row in status:
                if row.startswith("VmRSS:"):
                    return int(row.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    stderr_path: str
    directory: str
    socket_path: str = ""
    ready: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr(self) -> str:
        with open(self.stderr_path, encoding="utf-8", errors="replace") as file:
            return file.read()

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    @property
    def token(self) -> str:
        with open(self.ready["tokenFile"], encoding="utf-8") as file:
            return file.read().strip()


@contextlib.contextmanager
def _private_dir() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="oamd-f-", dir="/tmp") as directory:
        yield directory


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH", "")) if p)
    return env


def _stop(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _pipe(nonblocking_end: int | None) -> tuple[int, int]:
    """A pipe ``(read, write)``; the end at index ``nonblocking_end`` is non-blocking (an open
    file description of its own, so the other end keeps its mode)."""
    ends = os.pipe()
    if nonblocking_end is not None:
        os.set_blocking(ends[nonblocking_end], False)
    return ends


@contextlib.contextmanager
def stdio_daemon(
    *args: str, stdin_nonblocking: bool = False, stdout_nonblocking: bool = False
) -> Iterator[Daemon]:
    """``oamd stdio --test-methods`` on pipes; stdin/stdout are the peer's to use. With
    ``stdin_nonblocking``/``stdout_nonblocking`` the daemon's end of that pipe is non-blocking
    (as some engines hand them over)."""
    with _private_dir() as directory:
        stderr_path = os.path.join(directory, "stderr")
        in_read, in_write = _pipe(0 if stdin_nonblocking else None)
        out_read, out_write = _pipe(1 if stdout_nonblocking else None)
        with open(stderr_path, "wb") as stderr:
            try:
                process = subprocess.Popen(
                    [*OAMD, "stdio", "--test-methods", "--tool-timeout", TOOL_TIMEOUT, *args],
                    stdin=in_read,
                    stdout=out_write,
                    stderr=stderr,
                    cwd=REPO,
                    env=_environment(),
                )
            finally:
                os.close(in_read)
                os.close(out_write)
        process.stdin = open(in_write, "wb", buffering=0)  # noqa: SIM115 (closed below)
        process.stdout = open(out_read, "rb", buffering=0)  # noqa: SIM115
        try:
            yield Daemon(process, stderr_path, directory)
        finally:
            for pipe in (process.stdin, process.stdout):
                with contextlib.suppress(OSError):
                    pipe.close()  # type: ignore[union-attr]
            _stop(process, 10)


@contextlib.contextmanager
def serve_daemon(
    *args: str, tcp: bool = False, start_timeout: float = 15, executable: str | None = None
) -> Iterator[Daemon]:
    """``oamd serve --test-methods`` on a Unix socket (and loopback TCP with ``tcp``), ready
    when its ready file appears; stopped with SIGTERM. ``executable``: another oamd to run (the
    shipped ``dist/oamd/oamd``) instead of this checkout's."""
    with _private_dir() as directory:
        stderr_path = os.path.join(directory, "stderr")
        ready_path = os.path.join(directory, "ready.json")
        socket_path = os.path.join(directory, "s")
        command = [executable] if executable else OAMD
        argv = [*command, "serve", "--test-methods", "--tool-timeout", TOOL_TIMEOUT]
        argv += ["--unix", socket_path, "--ready-file", ready_path, *args]
        if tcp:
            argv += ["--tcp", "127.0.0.1:0"]
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                cwd=REPO, env=_environment(),
            )  # fmt: skip
        try:
            deadline = time.monotonic() + start_timeout
            while not os.path.exists(ready_path):
                if process.poll() is not None or time.monotonic() > deadline:
                    with open(stderr_path, encoding="utf-8", errors="replace") as file:
                        raise RuntimeError(f"oamd serve did not start: {file.read()[-2000:]}")
                time.sleep(0.02)
            time.sleep(0.02)  # the ready file is written in one step; let the rename land
            with open(ready_path, encoding="utf-8") as file:
                ready = json.loads(file.read())
            yield Daemon(process, stderr_path, directory, socket_path, ready)
        finally:
            _stop(process, 10)


_WAITING = ("pipe_read", "poll", "select", "epoll")
"""What a process's ``wchan`` shows while it waits for input (``anon_pipe_read``,
``do_epoll_wait``, ``do_select``…)."""


def wait_until_reading(pid: int, timeout: float = 10) -> None:
    """Returns once ``pid`` waits for input (or is gone, or ``timeout`` passed): an engine's
    first line that comes only after the daemon started to wait for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/wchan", encoding="ascii") as file:
                wchan = file.read()
            with open(f"/proc/{pid}/stat", encoding="ascii") as file:
                state = file.read().rpartition(")")[2].split()[0]
        except OSError:
            return
        if state in "ZX" or (state == "S" and any(w in wchan for w in _WAITING)):
            return
        time.sleep(0.01)


@contextlib.contextmanager
def fault_model(seed: int, *, slow: bool = False) -> Iterator[list[str]]:
    """A ``MixedFaultServer`` (``tests/backends/fault_server.py``) serving from a thread: yields
    the daemon flags that put it behind ``model: "system"``, with a short read ``timeout`` and
    step ``deadline`` so its stalls (``slow``) fail a turn in seconds."""
    from backends.fault_server import MixedFaultServer, serving_in_thread

    with serving_in_thread(MixedFaultServer(seed, slow=slow)) as url:
        yield ["--model", f"openai:{url}#smol?timeout=1&deadline=4"]


def connect(daemon: Daemon, transport: str = "unix") -> socket.socket:
    """A socket to the daemon's Unix endpoint, or to its TCP one (``transport="tcp"``)."""
    if transport == "tcp":
        endpoint = next(e for e in daemon.ready["endpoints"] if e["transport"] == "tcp")
        return socket.create_connection((endpoint["host"], endpoint["port"]), timeout=10)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(daemon.socket_path)
    return sock


class Peer:
    """The client side of one connection. ``write_fd``/``read_fd`` may be the same socket."""

    def __init__(
        self,
        oracle: Oracle,
        *,
        write_fd: int,
        read_fd: int,
        pid: int,
        window: int = 64,
        on_rss: Callable[[float, int], None] | None = None,
        trace: BinaryIO | None = None,
        kill_rss_mib: float = KILL_RSS_MIB,
    ) -> None:
        self.oracle = oracle
        self.kill_rss_kib = kill_rss_mib * 1024
        self.write_fd = write_fd
        self.read_fd = read_fd
        self.pid = pid
        self.window = window
        self.on_rss = on_rss
        self.trace = trace
        self.out = bytearray()
        self.pending = b""
        self.eof = False
        self.broken = False
        self.input_ended = False
        """An unterminated last line was queued: later lines (tool replies) are dropped, as
        after end of input, instead of running into it."""
        self.replies: list[ToolReply] = [ToolReply("result", {"output": "ok"})]
        self.calls = 0
        self.rescued = 0
        self.waiting: dict[str, bool] = {}  # tool/call ids still owed a usable reply
        self.late: list[tuple[int, list[bytes]]] = []
        self.peak_rss = 0
        self.read_size = READ_SIZE
        self._last_rss = 0.0
        self._last_read = time.monotonic()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)

    # ---- sending --------------------------------------------------------------------------------

    def send(self, line: bytes, *, trailing: bool = False, newline: bool = True) -> None:
        """Queues ``line`` (and any late reply now due); dropped once our side is closed.
        ``newline=False``: the last line before end of input, left unterminated."""
        if self.broken or self.input_ended:
            return
        self.oracle.sent(line, trailing=trailing)
        if self.trace is not None:
            self.trace.write(b"> " + line + b"\n")
        self.out += line
        if newline:
            self.out += b"\n"
        else:
            self.input_ended = True  # nothing may follow an unterminated last line
        if self.late:
            due = [lines for after, lines in self.late if after <= self.oracle.sent_lines]
            if due:
                self.late = [(a, ls) for a, ls in self.late if a > self.oracle.sent_lines]
                for lines in due:
                    for reply in lines:
                        self.send(reply)

    def request(self, method: str, msg_id: Any, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(encode(msg))

    def _on_message(self, msg: dict[str, Any]) -> None:
        if msg["method"] == "tool/cancel":
            self.waiting.pop(msg["params"].get("id"), None)
            return
        if msg["method"] != "tool/call":
            return
        reply = self.replies[self.calls % len(self.replies)]
        self.calls += 1
        lines = reply.lines(msg["id"])
        settles = reply.resolves and expectation(lines[0])[0] == NONE  # not refused as too deep
        if not settles or reply.kind == "late":
            self.waiting[msg["id"]] = True
        if reply.kind == "late":
            self.late.append((self.oracle.sent_lines + reply.after, lines))
            return
        for line in lines:
            self.send(line)

    def rescue(self) -> None:
        """Answers every call still waiting (late replies first, as planned)."""
        late, self.late = self.late, []
        for _, lines in late:
            for line in lines:
                self.send(line)
        for call_id in list(self.waiting):
            self.rescued += 1
            self.send(encode({"jsonrpc": "2.0", "id": call_id, "result": {"output": "late"}}))
        self.waiting.clear()

    # ---- the loop -------------------------------------------------------------------------------

    def pump(self, timeout: float = 0.05) -> None:
        """One round: write what the daemon takes, read what it wrote, sample its RSS."""
        readable = [] if self.eof else [self.read_fd]
        writable = [self.write_fd] if self.out and not self.broken else []
        if readable or writable:
            ready_r, ready_w, _ = select.select(readable, writable, [], timeout)
            if ready_r:
                self._read()
            if ready_w and self.out:
                self._write()
        else:
            time.sleep(timeout)
        now = time.monotonic()
        if now - self._last_rss >= RSS_EVERY:
            self._last_rss = now
            rss = rss_kib(self.pid)
            self.peak_rss = max(self.peak_rss, rss)
            if self.on_rss is not None:
                self.on_rss(now, rss)
            if rss > self.kill_rss_kib:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)
                limit = self.kill_rss_kib / 1024
                self.oracle.flag("rss", f"the daemon passed {limit:.0f} MiB: killed", f"{rss} KiB")

    def _read(self) -> None:
        try:
            chunk = os.read(self.read_fd, self.read_size)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.eof = True
            return
        self._last_read = time.monotonic()
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        for line in lines:
            if self.trace is not None:
                self.trace.write(b"< " + line + b"\n")
            msg = self.oracle.received(line)
            if msg is not None:
                self._on_message(msg)

    def _write(self) -> None:
        try:
            written = os.write(self.write_fd, self.out[:READ_SIZE])
        except BlockingIOError:
            return
        except OSError:
            self.broken = True
            self.out.clear()
            return
        del self.out[:written]

    @property
    def stalled(self) -> bool:
        return time.monotonic() - self._last_read > STALL_SECONDS

    def wait(self, done: Callable[[], bool], timeout: float, *, rescue: bool = True) -> bool:
        """Pumps until ``done()`` (True) or ``timeout`` (False); rescues calls on a stall."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline or (self.eof and not self.out):
                return done()
            if rescue and self.stalled and (self.waiting or self.late):
                self.rescue()
                self._last_read = time.monotonic()
            self.pump()
        return True

    # ---- episodes ---------------------------------------------------------------------------

    def play(self, plan: Plan, *, deadline: float) -> None:
        """Sends every line of ``plan`` (the window permitting) and answers what comes back."""
        self.replies = plan.replies or self.replies
        lines = plan.lines
        i = 0
        while i < len(lines) and not self.eof and not self.broken:
            while (
                i < len(lines)
                and self.oracle.outstanding < self.window
                and len(self.out) < MAX_BUFFERED
            ):
                self.send(lines[i])
                i += 1
            if time.monotonic() > deadline:
                self.oracle.flag("stall", f"plan not sent by its deadline ({i}/{len(lines)})")
                return
            if self.stalled and (self.waiting or self.late):
                self.rescue()
                self._last_read = time.monotonic()
            self.pump(0.01)

    def ping(self, msg_id: Any, timeout: float = 10) -> bool:
        """A ``ping`` answered within ``timeout`` (the daemon still serves)."""
        self.request("ping", msg_id)
        answered = self.wait(lambda: msg_id not in self.oracle.owed, timeout, rescue=False)
        if not answered:
            self.oracle.flag("ping", "the final ping was not answered in time")
        return answered

    def drain(self, timeout: float = 30) -> bool:
        """Waits until every request sent is answered (rescuing waiting calls on a stall)."""
        return self.wait(lambda: self.oracle.outstanding == 0, timeout)

    def read_to_eof(self, timeout: float) -> bool:
        return self.wait(lambda: self.eof, timeout)

    def flush(self, timeout: float = 10) -> None:
        self.wait(lambda: not self.out, timeout, rescue=False)

"""The ``oamd stdio`` process behind ``connect_stdio``: the command that starts it, and what it left
on its stderr.

It keeps two guarantees. The daemon it starts is the oamd package this client was imported from:
no folder named ``oamd`` in the working directory can stand in for it. And when the daemon exits
before answering, the ``ConnectionClosed`` errors say so, with its exit status and the last lines
it wrote on its stderr (at most ``STDERR_TAIL_LINES`` lines, ``STDERR_TAIL_BYTES`` bytes): the
pipe is read for as long as the connection is open, so it never fills and never blocks the daemon.
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

__all__ = ["DaemonProcess", "StderrTail", "daemon_command", "daemon_env"]

STDERR_TAIL_LINES = 20
"""Most lines of the daemon's stderr a ``ConnectionClosed`` message quotes (the last ones)."""

STDERR_TAIL_BYTES = 8 * 1024
"""Most bytes of the daemon's stderr kept; older output is dropped as newer arrives."""

_READ_BYTES = 4096


def daemon_command(args: list[str]) -> list[str]:
    # -P: no directory goes in front of sys.path, so a folder ./oamd (a clone, an old copy) in the
    # working directory cannot shadow the package (with -m, Python would otherwise put the working
    # directory first). Not -I: it also drops PYTHONPATH, the other PYTHON* variables and the user
    # site-packages, which a host may rely on to find oamd or its dependencies.
    return [sys.executable, "-P", "-m", "oamd", "stdio", *args]


def daemon_env() -> dict[str, str] | None:
    """The daemon's environment: this process's, with the folder this client's oamd package was
    imported from first on ``PYTHONPATH`` when that folder is not an installation's site-packages
    (a checkout run without installing it, a work tree): ``-P`` would leave it out, and the
    daemon would be another oamd than this client, or none. ``None`` (inherit) otherwise."""
    # this module's own place, not ``oamd.__file__``: a host script run beside its clone (a folder
    # ``oamd`` without ``__init__.py`` first on its sys.path) imports oamd as a namespace package,
    # whose ``__file__`` is None; this file is always the package's
    root = Path(__file__).resolve().parents[2]
    installed = {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
    if root in installed:
        return None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env


class StderrTail:
    """The last bytes written on a stream, read as its last lines."""

    def __init__(self) -> None:
        self._kept = bytearray()
        self._cut = False
        """Whether older bytes were dropped (the first kept line may be a line's end only)."""

    def feed(self, chunk: bytes) -> None:
        self._kept += chunk
        if len(self._kept) > STDERR_TAIL_BYTES:
            del self._kept[: len(self._kept) - STDERR_TAIL_BYTES]
            self._cut = True

    def lines(self) -> list[str]:
        lines = bytes(self._kept).decode("utf-8", errors="replace").splitlines()
        if self._cut and lines:
            lines[0] = "…" + lines[0]
        return [line.rstrip() for line in lines if line.strip()][-STDERR_TAIL_LINES:]


class DaemonProcess:
    """Watches a spawned daemon for its client (a ``ConnectionMonitor``): reads its stderr into a
    ``StderrTail`` unless the caller sent it elsewhere, and explains its exit."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.tail = StderrTail() if process.stderr is not None else None
        self._exited = anyio.Event()

    async def watch(self) -> None:
        """Reads stderr to its end, then waits for the exit. Runs in the client's task group."""
        if self.process.stderr is not None and self.tail is not None:
            await _drain(self.process.stderr, self.tail)
        await self.process.wait()
        self._exited.set()

    async def settle(self) -> None:
        await self._exited.wait()

    def reason(self) -> str | None:
        code = self.process.returncode
        if code is None:
            return None  # still running: the connection ended on this side
        status = (
            f"The daemon was killed by signal {-code}"
            if code < 0
            else f"The daemon exited with status {code}"
        )
        if self.tail is None:
            return f"{status} (its stderr went where stderr= sent it)."
        lines = self.tail.lines()
        if not lines:
            return f"{status} and wrote nothing on stderr."
        quoted = "\n".join(f"  {line}" for line in lines)
        return f"{status}; the last lines of its stderr:\n{quoted}"

    async def finish(self, grace: float) -> None:
        """Gives the daemon ``grace`` seconds to exit (its stderr still read), then kills it."""
        with anyio.move_on_after(grace):
            await self.watch()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        if self.process.stderr is not None:
            await self.process.stderr.aclose()


async def _drain(stream: ByteReceiveStream, tail: StderrTail) -> None:
    while True:
        try:
            chunk = await stream.receive(_READ_BYTES)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        tail.feed(chunk)

"""A real ``oamd serve`` subprocess for the ``test_serve_*`` suites: started on a Unix socket and/or
TCP port 0, ready when its ready line arrives on stderr (a handshake, not a sleep), stopped with
SIGTERM. Its stderr is kept in ``Daemon.log`` for assertions on what it logged."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from anyio.abc import ByteStream, Process
from conftest import OAMD, recording

from oamd.client import Client, connect_tcp, connect_unix

START_SECONDS = 10
"""A cold interpreter importing oamd can take a while on a busy CI machine."""


@dataclass
class Daemon:
    process: Process
    ready: dict[str, Any]
    directory: str
    log: list[str] = field(default_factory=list)
    log_grew: list[anyio.Event] = field(default_factory=lambda: [anyio.Event()])
    """Set when a line is added to ``log`` (then replaced by a fresh event)."""

    async def wait_for_log(self, prefix: str) -> str:
        """The first stderr line starting with ``prefix``, once it has been written."""
        while True:
            for text in self.log:
                if text.startswith(prefix):
                    return text
            await self.log_grew[0].wait()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def token(self) -> str:
        with open(self.ready["tokenFile"], encoding="utf-8") as file:
            return file.read().strip()

    def endpoint(self, transport: str) -> dict[str, Any]:
        return next(e for e in self.ready["endpoints"] if e["transport"] == transport)

    @property
    def unix_path(self) -> str:
        return self.endpoint("unix")["path"]

    @property
    def tcp(self) -> tuple[str, int]:
        e = self.endpoint("tcp")
        return e["host"], e["port"]

    def connect(self, transport: str = "unix", *, token: Any = "default", **kwargs: Any) -> Any:
        """A recording protocol client (``initialize`` sent first, with the token unless
        ``token=None``)."""
        kwargs = {**recording(), **kwargs}
        secret = self.token if token == "default" else token

        @asynccontextmanager
        async def session() -> AsyncIterator[Client]:
            if transport == "tcp":
                opened = connect_tcp(*self.tcp, token=secret, **kwargs)
            elif transport == "abstract":
                opened = connect_unix(
                    "@" + self.endpoint("abstract")["name"], token=secret, **kwargs
                )
            else:
                opened = connect_unix(self.unix_path, token=secret, **kwargs)
            async with opened as client:
                yield client

        return session()

    async def raw(self, transport: str = "unix") -> ByteStream:
        """A bare socket to the daemon (nothing sent yet)."""
        if transport == "tcp":
            return await anyio.connect_tcp(*self.tcp)
        return await anyio.connect_unix(self.unix_path)

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    async def stop(self, signum: int = signal.SIGTERM) -> int:
        self.process.send_signal(signum)
        return await self.process.wait()


async def read_line(stream: ByteStream, pending: bytearray | None = None) -> dict[str, Any] | None:
    """One JSON line from a raw socket; ``None`` at end of stream."""
    buffer = pending if pending is not None else bytearray()
    while b"\n" not in buffer:
        try:
            buffer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return None
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return orjson.loads(line)


async def read_to_end(stream: ByteStream) -> bytes:
    data = bytearray()
    while True:
        try:
            data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return bytes(data)


def line(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message) + b"\n"


@contextlib.contextmanager
def short_dir() -> Any:
    """A private directory with a short path (a Unix socket path must fit in 108 bytes)."""
    directory = tempfile.mkdtemp(prefix="oamd-t-", dir="/tmp")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@asynccontextmanager
async def serve(
    *args: str,
    unix: bool = True,
    tcp: bool = True,
    test_methods: bool = True,
    directory: str | None = None,
    command: Sequence[str] = OAMD,
) -> AsyncIterator[Daemon]:
    """Starts ``oamd serve`` (Unix socket ``s`` in a short private dir, TCP ``127.0.0.1:0``);
    ``command`` runs another oamd, e.g. the shipped executable."""
    with contextlib.ExitStack() as stack:
        where = directory or stack.enter_context(short_dir())
        argv = [
            *command,
            "serve",
            "--ready-file",
            os.path.join(where, "ready.json"),
            "--log-level",
            "info",
        ]
        if unix:
            argv += ["--unix", os.path.join(where, "s")]
        if tcp:
            argv += ["--tcp", "127.0.0.1:0"]
        if test_methods:
            argv.append("--test-methods")
        argv += list(args)
        process = await anyio.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        log: list[str] = []
        log_grew = [anyio.Event()]
        ready_seen = anyio.Event()
        ready: dict[str, Any] = {}

        async def pump() -> None:
            assert process.stderr is not None
            pending = b""
            async for chunk in process.stderr:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for text in lines:
                    log.append(text.decode(errors="replace"))
                    grew, log_grew[0] = log_grew[0], anyio.Event()
                    grew.set()
                    if not ready_seen.is_set() and text.startswith(b'{"event":"ready"'):
                        ready.update(json.loads(text))
                        ready_seen.set()
            ready_seen.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                with anyio.fail_after(START_SECONDS):
                    await ready_seen.wait()
                assert ready, f"oamd serve did not start: {log}"
                yield Daemon(process, ready, where, log, log_grew)
            finally:
                with anyio.CancelScope(shield=True):
                    if process.returncode is None:
                        process.send_signal(signal.SIGTERM)
                        with anyio.move_on_after(START_SECONDS):
                            await process.wait()
                        if process.returncode is None:
                            process.kill()
                            await process.wait()
                tg.cancel_scope.cancel()


def logged_events(daemon: Daemon) -> list[str]:
    events = []
    for text in daemon.log:
        with contextlib.suppress(ValueError):
            events.append(json.loads(text).get("event", ""))
    return events

"""Connections to an implementation under test: a spawned stdio process, or a Unix/TCP socket of an
already running server (first message: ``initialize`` with ``auth``).

Every connection reads newline-delimited lines; nothing here knows JSON-RPC except the socket
authentication preamble.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import orjson
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from anyio.streams.buffered import BufferedByteReceiveStream

__all__ = [
    "AUTH_ID",
    "MAX_LINE_BYTES",
    "Connection",
    "LinkError",
    "Target",
    "default_command",
    "open_connection",
]

MAX_LINE_BYTES = 64 * 1024 * 1024
AUTH_ID = "conformance-auth"


def default_command() -> str:
    """``oamd stdio`` from the running installation: in the self-contained executable
    (PyInstaller sets ``sys.frozen``) ``sys.executable`` is ``oamd`` itself, not an interpreter."""
    if getattr(sys, "frozen", False):
        return f"{shlex.quote(sys.executable)} stdio"
    return f"{shlex.quote(sys.executable)} -m oamd stdio"


class LinkError(Exception):
    """The implementation could not be reached or was lost."""


@dataclass(frozen=True)
class Target:
    """How to reach one implementation."""

    label: str  # "candidate" / "reference"
    transport: str = "stdio"  # stdio | unix | tcp
    command: str = field(default_factory=default_command)
    address: str | None = None  # unix: a path; tcp: host:port
    token: str | None = None

    def describe(self) -> str:
        if self.transport == "stdio":
            return self.command
        return f"{self.transport}:{self.address}"


class Connection:
    """One line-oriented link to an implementation."""

    def __init__(
        self,
        *,
        send: ByteSendStream,
        receive: ByteReceiveStream,
        process: Process | None = None,
        closer: ByteSendStream | None = None,
        transport: str = "stdio",
    ) -> None:
        self._send = send
        self._reader = BufferedByteReceiveStream(receive)
        self.process = process
        self.transport = transport
        self._closer = closer
        self._stderr: deque[bytes] = deque(maxlen=200)
        self._send_lock = anyio.Lock()
        self.input_closed = False

    # -- lines ---------------------------------------------------------------------------------
    async def send_line(self, line: bytes) -> None:
        async with self._send_lock:
            if self.input_closed:
                raise LinkError("input already closed")
            try:
                await self._send.send(line + b"\n")
            except (
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                OSError,
                ValueError,
            ) as exc:
                raise LinkError(f"cannot write: {exc!r}") from exc

    async def receive_line(self) -> bytes | None:
        """The next line without its newline, or None at end of output."""
        try:
            line = await self._reader.receive_until(b"\n", MAX_LINE_BYTES)
        except anyio.IncompleteRead:
            rest = self._reader.buffer
            return bytes(rest) if rest.strip() else None
        except (
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
            ValueError,  # asyncio: the socket was closed under a pending read ("fd -1")
        ):
            return None
        except anyio.DelimiterNotFound as exc:
            raise LinkError(f"a line longer than {MAX_LINE_BYTES} bytes") from exc
        return line[:-1] if line.endswith(b"\r") else line

    async def close_input(self) -> None:
        """End of input: stdin closed (stdio) or the write half shut down (sockets)."""
        async with self._send_lock:
            if self.input_closed:
                return
            self.input_closed = True
            with contextlib.suppress(Exception):
                if self.transport == "stdio":
                    await self._send.aclose()
                else:
                    await self._send.send_eof()  # type: ignore[attr-defined]

    # -- process -------------------------------------------------------------------------------
    async def wait_exit(self, timeout: float) -> int | None:
        if self.process is None:
            return None
        with anyio.move_on_after(timeout):
            return await self.process.wait()
        return None

    def stderr_tail(self, limit: int = 4000) -> str:
        text = b"".join(self._stderr).decode("utf-8", "replace")
        return text[-limit:]

    async def drain_stderr(self) -> None:
        if self.process is None or self.process.stderr is None:
            return
        with contextlib.suppress(Exception):
            async for chunk in self.process.stderr:
                self._stderr.append(chunk)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.close_input()
            if self.process is not None:
                if self.process.returncode is None:
                    code = await self.wait_exit(1.0)
                    if code is None:
                        _kill_group(self.process)
                        with anyio.move_on_after(3):
                            await self.process.wait()
                else:
                    _kill_group(self.process)  # stray children of a finished shell
                with contextlib.suppress(Exception):
                    await self.process.aclose()
            elif self._closer is not None:
                with contextlib.suppress(Exception):
                    await self._closer.aclose()


def _kill_group(process: Process) -> None:
    """Kill the process group this runner created for ``process`` (and only that)."""
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:  # pragma: no cover
            process.kill()


async def open_connection(
    target: Target, extra_args: list[str] | None = None, *, task_group: anyio.abc.TaskGroup
) -> Connection:
    if target.transport == "stdio":
        argv = shlex.split(target.command) + list(extra_args or [])
        try:
            process = await anyio.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=os.name == "posix",
            )
        except OSError as exc:
            raise LinkError(f"cannot start {target.command!r}: {exc}") from exc
        assert process.stdin is not None and process.stdout is not None
        conn = Connection(send=process.stdin, receive=process.stdout, process=process)
        task_group.start_soon(conn.drain_stderr)
        return conn
    if extra_args:
        raise LinkError("server arguments need the stdio transport")
    if not target.address:
        raise LinkError(f"--address is required for --transport {target.transport}")
    try:
        with anyio.fail_after(10):
            if target.transport == "unix":
                stream = await anyio.connect_unix(target.address)
            elif target.transport == "tcp":
                host, _, port = target.address.rpartition(":")
                stream = await anyio.connect_tcp(host.strip("[]") or "127.0.0.1", int(port))
            else:
                raise LinkError(f"unknown transport {target.transport!r}")
    except TimeoutError as exc:
        raise LinkError(f"cannot connect to {target.describe()} within 10 s") from exc
    except OSError as exc:
        cause = exc.__cause__ or exc.__context__
        detail = f"{exc} ({cause!r})" if cause else str(exc)
        raise LinkError(f"cannot connect to {target.describe()}: {detail}") from exc
    conn = Connection(send=stream, receive=stream, closer=stream, transport=target.transport)
    await _authenticate(conn, target.token)
    return conn


async def _authenticate(conn: Connection, token: str | None) -> None:
    params: dict[str, object] = {
        "client": {"name": "oamd-conformance"},
        "protocolVersion": "1.0",
    }
    if token is not None:
        params["auth"] = token
    message = {"jsonrpc": "2.0", "id": AUTH_ID, "method": "initialize", "params": params}
    await conn.send_line(orjson.dumps(message))
    with anyio.move_on_after(10):
        while True:
            line = await conn.receive_line()
            if line is None:
                raise LinkError("the server closed the connection during authentication")
            try:
                reply = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(reply, dict) and reply.get("id") == AUTH_ID:
                if "error" in reply:
                    await conn.aclose()
                    raise LinkError(f"authentication rejected: {reply['error']}")
                return
    await conn.aclose()
    raise LinkError("no answer to the authenticating initialize within 10 s")


def read_token(path: str | None) -> str | None:
    if not path:
        return None
    return Path(path).read_text(encoding="utf-8").strip()

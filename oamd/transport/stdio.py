"""The stdio transport: the protocol on fds 0 and 1, read and written by the event loop.

While serving, the protocol owns fd 1: it is duplicated for the protocol and fd 1 itself is pointed
at stderr, so a stray ``print`` or a chatty native library cannot corrupt the wire. Pipes and ttys
are read through asyncio's pipe transports (no thread per read); regular files, which asyncio cannot
watch, fall back to reads and writes in a worker thread.

Output loss is reported, never swallowed: asyncio's write pipe closes itself when a write fails
(``EPIPE``) or when the pipe's reader goes away (it watches the write end for ``POLLERR``/``POLLHUP``),
without raising. The stream turns both into ``BrokenResourceError`` on the next send, and
``wait_output_lost`` returns on them at once, so the connection stops without having to write.
The pipe transports make the descriptors non-blocking; the open file descriptions are shared with
the parent, so their blocking mode is put back as it was when serving ends, after the output was
written (within ``WRITE_GRACE_SECONDS``).
"""

from __future__ import annotations

import asyncio
import os
import selectors
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import ByteStream

from oamd.limits import WRITE_GRACE_SECONDS

__all__ = ["stdio_stream"]

_CHUNK = 65536


def _is_pollable(fd: int, events: int) -> bool:
    """Pipes, sockets, and the character devices the selector accepts (ttys, not /dev/null)."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return True
    if not stat.S_ISCHR(mode):
        return False
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, events)
    except (OSError, ValueError):  # epoll refuses /dev/null (EPERM)
        return False
    return True


class _Output(asyncio.streams.FlowControlMixin):
    """The write pipe's protocol: flow control, and ``gone`` once the pipe is closed (a write
    failed, its reader went away, or it was closed and everything buffered is written)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop=loop)
        self.gone = anyio.Event()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.gone.set()


class _StdioStream(ByteStream):
    def __init__(
        self,
        reader: asyncio.StreamReader | None,
        output: tuple[asyncio.StreamWriter, _Output] | None,
        in_fd: int,
        out_fd: int,
        initial: bytes = b"",
    ) -> None:
        self._initial = initial
        self._reader = reader
        self._writer, self._output = output or (None, None)
        self._in_fd = in_fd
        self._out_fd = out_fd

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        if self._initial:
            data, self._initial = self._initial, b""
            return data
        if self._reader is not None:
            data = await self._reader.read(max_bytes)
        else:
            data = await anyio.to_thread.run_sync(os.read, self._in_fd, max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    def send_nowait(self, item: bytes) -> bool:
        """Hands ``item`` to the pipe at once when it takes it without waiting (not paused by
        flow control); ``False`` leaves it to ``send``."""
        writer = self._writer
        if writer is None:
            return False
        _check_open(writer)
        # asyncio's FlowControlMixin is paused while the pipe is full; unknown internals: wait
        if getattr(self._output, "_paused", True):
            return False
        try:
            writer.write(item)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise anyio.BrokenResourceError from exc
        _check_open(writer)  # a failed write closed the pipe instead of raising
        return True

    async def send(self, item: bytes) -> None:
        try:
            if self._writer is not None:
                _check_open(self._writer)
                self._writer.write(item)
                await self._writer.drain()  # raises once the pipe closed
            else:
                await anyio.to_thread.run_sync(_write_all, self._out_fd, item)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise anyio.BrokenResourceError from exc

    async def wait_output_lost(self) -> None:
        """Returns once the output can take nothing more: a write failed, or the pipe's reader went
        away (seen even while nothing is being written). A tty's loss shows at a write only; a
        regular file or ``/dev/null``, written by a worker thread, is never reported here."""
        if self._output is None:
            await anyio.sleep_forever()
        else:
            await self._output.gone.wait()

    async def send_eof(self) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the output once what asyncio still buffers is written (the last answers at end
        of input would be lost with the event loop otherwise), within ``WRITE_GRACE_SECONDS``."""
        writer, self._writer = self._writer, None
        if writer is None or self._output is None:
            return
        writer.close()
        with anyio.move_on_after(WRITE_GRACE_SECONDS, shield=True):
            await self._output.gone.wait()
        if not self._output.gone.is_set():
            writer.transport.abort()  # the reader holds the pipe open and reads nothing


def _check_open(writer: asyncio.StreamWriter) -> None:
    """Raises ``BrokenResourceError`` once the pipe closed itself (asyncio does that on a failed
    write, ``EPIPE``, or when the reader goes away, instead of raising)."""
    if writer.transport.is_closing():
        raise anyio.BrokenResourceError


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@asynccontextmanager
async def stdio_stream(
    guard_stdout: bool = True, initial: bytes = b""
) -> AsyncIterator[ByteStream]:
    """Yields a byte stream over stdin/stdout; with ``guard_stdout``, fd 1 points at stderr
    meanwhile. ``initial``: bytes already read from stdin, received first."""
    loop = asyncio.get_running_loop()
    in_fd = sys.stdin.fileno()
    out_fd = os.dup(1)  # the protocol's private copy of stdout; not inherited by children
    # the pipe transports make these non-blocking; the parent shares their open file descriptions
    in_blocking, out_blocking = os.get_blocking(in_fd), os.get_blocking(out_fd)
    saved_stdout = sys.stdout
    if guard_stdout:
        sys.stdout.flush()
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    reader: asyncio.StreamReader | None = None
    output: tuple[asyncio.StreamWriter, _Output] | None = None
    read_transport: asyncio.BaseTransport | None = None
    stream: _StdioStream | None = None
    try:
        if _is_pollable(in_fd, selectors.EVENT_READ):
            reader = asyncio.StreamReader(limit=_CHUNK, loop=loop)
            read_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
                os.fdopen(os.dup(in_fd), "rb", buffering=0),
            )
        if _is_pollable(out_fd, selectors.EVENT_WRITE):
            w_transport, w_protocol = await loop.connect_write_pipe(
                lambda: _Output(loop), os.fdopen(os.dup(out_fd), "wb", buffering=0)
            )
            output = asyncio.StreamWriter(w_transport, w_protocol, None, loop), w_protocol
        stream = _StdioStream(reader, output, in_fd, out_fd, initial)
        yield stream
    finally:
        if stream is not None:
            await stream.aclose()
        elif output is not None:
            output[0].transport.abort()
        if read_transport is not None:
            read_transport.close()
        # nothing reads or writes them any more (a closed transport has left the selector)
        os.set_blocking(in_fd, in_blocking)
        os.set_blocking(out_fd, out_blocking)
        os.close(out_fd)
        if guard_stdout:
            sys.stdout = saved_stdout

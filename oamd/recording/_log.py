"""A recorded connection's lines: the bytes each way, cut into lines, with when they passed.

``TappedStream`` wraps the connection's byte stream and hands every chunk to a ``LineLog``, which
only cuts and keeps bytes: decoding, redacting and encoding wait for the file, which is written in a
worker thread once the connection has closed, so the event loop does no JSON work for a recording.
A client line longer than the daemon's line limit keeps only its size and first bytes (the daemon
refuses it unread anyway); a daemon line is kept whole (the replay compares it), one longer than
the whole ``Budget`` marking the recording truncated; everything stays within the ``Budget``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import ByteStream

from oamd.recording._model import Budget

__all__ = ["CLIENT", "DAEMON", "LineLog", "TappedStream"]

CLIENT = "client"
DAEMON = "daemon"
HEAD_BYTES = 256
"""What an oversized line keeps of its beginning, for a reader of the file."""


class LineLog:
    """Every line of a connection in the order it passed: ``(side, seconds, bytes, size)``;
    ``size`` is the length of a line kept only in part (too long), else ``None``."""

    def __init__(self, budget: Budget, max_line_bytes: int) -> None:
        self.lines: list[tuple[str, float, bytes, int | None]] = []
        self.client_closed: float | None = None
        """When the client ended its input, if it did."""
        self._budget = budget
        self._max_line_bytes = max_line_bytes
        self._started = time.monotonic()
        self._partial = {CLIENT: bytearray(), DAEMON: bytearray()}
        self._oversized = {CLIENT: 0, DAEMON: 0}

    def feed(self, side: str, data: bytes) -> None:
        """Takes a chunk from ``side``; complete lines are kept, the rest waits for its end."""
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                self._hold(side, data[start:])
                return
            self._hold(side, data[start:end])
            self._end_line(side)
            start = end + 1

    def finish(self) -> None:
        """The connection closed: a last line without its newline is a line too."""
        for side in (CLIENT, DAEMON):
            if self._partial[side] or self._oversized[side]:
                self._end_line(side)

    def close_input(self) -> None:
        if self.client_closed is None:
            self.client_closed = time.monotonic() - self._started

    def _hold(self, side: str, piece: bytes) -> None:
        if self._oversized[side]:
            self._oversized[side] += len(piece)
            return
        partial = self._partial[side]
        limit = self._max_line_bytes if side == CLIENT else self._budget.left
        if len(partial) + len(piece) > limit:
            self._oversized[side] = len(partial) + len(piece)
            del partial[HEAD_BYTES:]
            partial += piece[: max(0, HEAD_BYTES - len(partial))]
            return
        partial += piece

    def _end_line(self, side: str) -> None:
        partial = self._partial[side]
        line, size = bytes(partial), self._oversized[side] or None
        partial.clear()
        self._oversized[side] = 0
        if side == DAEMON and size is not None:
            self._budget.spend(size + 32)  # cannot fit: the recording is truncated
            return
        if self._budget.spend(len(line) + 32):
            self.lines.append((side, time.monotonic() - self._started, line, size))


class TappedStream(ByteStream):
    """``inner`` with every chunk each way shown to ``log``; what else ``inner`` offers
    (``send_nowait``, ``wait_output_lost``: stdio's pipe) is offered through it too."""

    def __init__(self, inner: ByteStream, log: LineLog) -> None:
        self._inner = inner
        self._log = log
        send_nowait: Callable[[bytes], bool] | None = getattr(inner, "send_nowait", None)
        if send_nowait is not None:

            def tapped_send_nowait(item: bytes) -> bool:
                sent = send_nowait(item)
                if sent:
                    log.feed(DAEMON, item)
                return sent

            self.send_nowait = tapped_send_nowait
        wait_output_lost = getattr(inner, "wait_output_lost", None)
        if wait_output_lost is not None:
            self.wait_output_lost = wait_output_lost

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            data = await self._inner.receive(max_bytes)
        except anyio.EndOfStream:
            self._log.close_input()
            raise
        self._log.feed(CLIENT, data)
        return data

    async def send(self, item: bytes) -> None:
        await self._inner.send(item)
        self._log.feed(DAEMON, item)

    async def send_eof(self) -> None:
        await self._inner.send_eof()

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def extra_attributes(self) -> dict[Any, Callable[[], Any]]:
        return self._inner.extra_attributes

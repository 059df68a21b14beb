"""Outbox: the only writer of a client's connection.

Any number of tasks may send at once: ``send`` queues a line and returns, and one task (``run``)
writes the lines one at a time, whole and in the order they were queued. So a byte stream that
admits one writer at a time (anyio's sockets raise ``BusyResourceError`` on a second) never sees
two, and no line is cut short because its sender was cancelled halfway through a large write: once
queued, a line is written whole. While more than ``high_water`` bytes wait, senders wait for room
(a sender cancelled then queues nothing), so a peer that reads slowly slows its senders instead of
filling memory. A write that fails closes the outbox: the lines still queued are dropped, every
later send fails, and ``failure`` keeps the reason.
"""

from __future__ import annotations

from collections import deque

import anyio
from anyio.abc import ByteStream

__all__ = ["Outbox"]


class Outbox:
    """Queues the lines of many senders for one writer task over ``stream``."""

    def __init__(self, stream: ByteStream, high_water: int) -> None:
        self._stream = stream
        self._high_water = high_water
        self._queue: deque[bytes] = deque()
        self._queued = 0
        """Bytes in ``_queue``."""
        self._wakeup = anyio.Event()
        """Set when a line is queued (or the outbox closes): the writer has work."""
        self._progress = anyio.Event()
        """Set when a line is written (or the outbox closes, or the writer stops): room or drained."""
        self._stopped = False
        """Set when ``run`` returns: nothing writes the queue any more."""
        self._open = True
        self.failure: Exception | None = None
        """The error of the write that failed and closed the outbox, if one did."""

    async def send(self, data: bytes) -> None:
        """Queues ``data`` to be written after every line queued before it; waits first while
        the queue is over its high-water mark.

        Raises:
            anyio.ClosedResourceError: the outbox is closed.
        """
        while self._open and self._queued >= self._high_water:
            await self._next_progress()
        if not self._open:
            raise anyio.ClosedResourceError
        self._queue.append(data)
        self._queued += len(data)
        self._wakeup.set()

    async def flush(self) -> None:
        """Returns once every queued line is written, or once nothing will write them (the outbox
        is closed or its writer has stopped). A writer started but not yet running counts as
        running: anyio runs a task up to its first checkpoint even when cancelled before it."""
        while self._queue and self._open and not self._stopped:
            await self._next_progress()

    async def run(self) -> None:
        """Writes queued lines in order until the outbox is closed; a failed write closes it."""
        try:
            while self._open:
                if not self._queue:
                    self._wakeup = anyio.Event()
                    await self._wakeup.wait()
                    continue
                data = self._queue[0]
                try:
                    await self._stream.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    self.failure = exc
                    self.close()
                    return
                if not self._open:
                    return  # closed while writing: the queue is already dropped
                self._queue.popleft()
                self._queued -= len(data)
                self._progress.set()
        finally:
            self._stopped = True
            self._progress.set()

    def close(self) -> None:
        """Drops the lines still queued; later sends fail at once."""
        self._open = False
        self._queue.clear()
        self._queued = 0
        self._wakeup.set()
        self._progress.set()

    async def _next_progress(self) -> None:
        if self._progress.is_set():
            self._progress = anyio.Event()
        await self._progress.wait()

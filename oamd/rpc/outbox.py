"""Outbox: the only writer of a connection. Keeps production order; never blocks the caller.

``send`` encodes and queues a message and returns at once; one writer task writes everything
queued since its last wake-up in a single transport write, so a burst of replies to a pipelined
chunk costs one system call. A transport that breaks makes the outbox drop further messages and
report it once through ``broken``. So does a peer that stops reading: when more than ``max_bytes``
wait behind a write in progress (the hard limit; the reader already pauses past ``high_water``),
the queue is dropped and the outbox reports itself broken, so memory stays bounded. One message
handed to an idle writer never counts as a peer that stops reading, however large.

Producers that can wait (a streaming turn) await ``wait_writable`` after sending: past
``high_water`` they wait until the writer has taken the queue, so a slow peer slows them instead
of the queue growing. A peer that takes nothing for ``PEER_STALL_SECONDS`` is not waited for
until it takes something again: a peer that stopped reading must not hold a turn (and its model
slot) forever; what it is sent then piles up to ``max_bytes``.
"""

from __future__ import annotations

from typing import Any

import anyio
from anyio.abc import ByteSendStream

from oamd.limits import OUTBOX_HIGH_WATER_BYTES, PEER_STALL_SECONDS
from oamd.log import get_logger
from oamd.rpc.message import encode

__all__ = ["EAGER_WRITE_MAX_MESSAGES", "Outbox"]

EAGER_WRITE_MAX_MESSAGES = 16
"""``write_now`` leaves a larger queue to the writer task: writing pipelined bursts of answers
early halved ``ping`` throughput (the reader of the other end woke per chunk), while a chunk of a
busy connection carries a few requests and their answers should not wait behind turns."""

log = get_logger("oamd.rpc")


class Outbox:
    def __init__(
        self,
        stream: ByteSendStream,
        high_water: int = OUTBOX_HIGH_WATER_BYTES,
        max_bytes: float = float("inf"),
    ) -> None:
        self._stream = stream
        self._queue: list[bytes] = []
        self._queued_bytes = 0
        self._wakeup = anyio.Event()
        self._woken = False  # mirrors _wakeup.is_set() without the call, on the hot path
        self._idle = anyio.Event()
        self._idle.set()
        self._high_water = high_water
        self._max_bytes = max_bytes
        self.broken = anyio.Event()
        """Set when the transport failed; nothing more is written."""
        self._broken = False  # mirrors broken.is_set() for the hot path
        self._send_nowait = getattr(stream, "send_nowait", None)
        """A transport's synchronous write, when it has one (stdio pipes)."""
        self._writing = False
        """The writer task is inside a transport write (the peer has yet to take it)."""
        self._room: anyio.Event | None = None
        """Set when the queue is taken (or dropped): producers waiting in ``wait_writable``."""
        self._stalled = False
        """The peer took nothing for ``PEER_STALL_SECONDS``: ``wait_writable`` does not wait."""

    def send(self, message: dict[str, Any]) -> None:
        """Queues one message; it goes out after everything queued before it."""
        if self._broken:
            return
        line = encode(message)
        self._queue.append(line)
        self._queued_bytes += len(line)
        if self._queued_bytes > self._max_bytes and self._writing:
            self._overflow()
            return
        if not self._woken:
            self._woken = True
            self._wakeup.set()
            if self._idle.is_set():
                self._idle = anyio.Event()

    def write_now(self) -> None:
        """Writes what is queued at once, in one write, when it is a few messages and the
        transport takes them without waiting: the reader calls it after each chunk, so the
        answers to a chunk's cheap requests leave before the work other tasks queued runs (the
        writer task would wait behind it). A larger burst is left to the writer task, which
        coalesces it further. Order is kept: the writer task writes each batch it takes before
        it awaits anything."""
        if (
            not self._queue
            or len(self._queue) > EAGER_WRITE_MAX_MESSAGES
            or self._broken
            or self._send_nowait is None
        ):
            return
        data = self._queue[0] if len(self._queue) == 1 else b"".join(self._queue)
        try:
            written = self._send_nowait(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            log.info("transport_closed", error=repr(exc), dropped_bytes=len(data))
            self.discard()
            return
        if written:
            self._queue = []
            self._queued_bytes = 0
            self._made_room()

    def discard(self) -> None:
        """Drops what is queued and everything sent later (the peer is gone); reports ``broken``."""
        self._queue.clear()
        self._queued_bytes = 0
        self._broken = True
        self.broken.set()
        self._idle.set()
        self._made_room()

    def _made_room(self) -> None:
        self._stalled = False
        room, self._room = self._room, None
        if room is not None:
            room.set()

    def _overflow(self) -> None:
        log.warning("peer_not_reading", queued_bytes=self._queued_bytes, limit=self._max_bytes)
        self.discard()

    @property
    def over_high_water(self) -> bool:
        """True while more than the high-water mark waits to be written (the reader pauses)."""
        return self._queued_bytes > self._high_water

    async def wait_writable(self) -> None:
        """Returns once at most the high-water mark waits to be written (at once when it is so),
        or when the peer has taken nothing for ``PEER_STALL_SECONDS``: from then on it does not
        wait until the peer takes something again."""
        if self._queued_bytes <= self._high_water or self._broken or self._stalled:
            return
        with anyio.move_on_after(PEER_STALL_SECONDS):
            while self._queued_bytes > self._high_water and not self._broken:
                if self._room is None:
                    self._room = anyio.Event()
                await self._room.wait()
            return
        if not self._stalled:
            self._stalled = True
            log.info("peer_stalled", queued_bytes=self._queued_bytes, seconds=PEER_STALL_SECONDS)

    async def flush(self) -> None:
        """Returns once everything queued so far is written (or the transport broke)."""
        while not self._idle.is_set() and not self.broken.is_set():
            await self._idle.wait()

    async def run(self) -> None:
        """The writer task: one per connection, for the connection's lifetime."""
        while True:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
            self._woken = False
            batch, self._queue = self._queue, []
            size, self._queued_bytes = self._queued_bytes, 0
            self._made_room()
            if batch and not self.broken.is_set():
                self._writing = True
                try:
                    await self._stream.send(batch[0] if len(batch) == 1 else b"".join(batch))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                    log.info("transport_closed", error=repr(exc), dropped_bytes=size)
                    self._broken = True
                    self.broken.set()
                    self._made_room()
                finally:
                    self._writing = False
            if not self._woken:
                self._idle.set()

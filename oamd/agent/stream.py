"""One model step's text as the agent reads it from any backend: gathered, bounded and shown at a
pace the loop, the wire and the peer can bear.

Both tool loops feed each ``TextDelta`` to a ``StepStream``. It keeps the pieces (the text costs
O(total), never O(n) per delta), fails the step past ``MAX_STEP_TEXT_CHARS``, and hands the text
so far to the loop's ``on_text`` — which turns it into ``text`` or ``partial`` events — only as
often as the wire can carry it: every such event holds the whole text so far, so one per token
would cost quadratic bytes. Snapshots draw on a budget of ``TEXT_EVENT_BURST_CHARS`` that refills
at ``TEXT_EVENT_CHARS_PER_SECOND``: short texts see every delta (as before), a long fast one sees
a few dozen snapshots a second. A held snapshot goes out with a later delta or at ``finish()``,
which the loop calls when the stream ends, before any other event of the step: the last snapshot
is always the whole text. After a snapshot the stream awaits ``pace`` (the peer, when the turn
streams); and at least every ``YIELD_EVERY_SECONDS`` it yields to the event loop, so a backend
that never awaits cannot starve the other requests.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from anyio.lowlevel import checkpoint

from oamd.errors import ModelError
from oamd.limits import MAX_STEP_TEXT_CHARS

__all__ = [
    "TEXT_EVENT_BURST_CHARS",
    "TEXT_EVENT_CHARS_PER_SECOND",
    "YIELD_EVERY_SECONDS",
    "Pace",
    "StepStream",
]

TEXT_EVENT_BURST_CHARS = 64 * 1024
"""Characters of snapshots (the text so far, plus the new part) sent at once before the rate
applies: a reply of a few thousand characters streams delta by delta."""

TEXT_EVENT_CHARS_PER_SECOND = 2 * 1024 * 1024
"""The rate the snapshot budget refills: a 100,000-character reply streaming fast gets about ten
events a second, each with the whole text so far."""

_SNAPSHOT_OVERHEAD_CHARS = 128
"""What one event costs besides its text (the notification around it): tiny deltas are not free."""

YIELD_EVERY_SECONDS = 0.002
"""Longest the loop reads a stream without letting other tasks run (a backend yielding from a
buffer would otherwise hold the event loop for the whole step)."""

Pace = Callable[[], Awaitable[None]]
"""Awaited after each snapshot: returns once the peer has room for more (``TurnDriver.pace``)."""


class StepStream:
    """The text of one model step, delta by delta. ``on_text`` receives the text so far when a
    snapshot is due and at ``finish``; ``pace`` is awaited after each snapshot."""

    __slots__ = (
        "_allowance",
        "_at",
        "_length",
        "_on_text",
        "_pace",
        "_parts",
        "_pending",
        "_yield_at",
    )

    def __init__(self, on_text: Callable[[str], None] | None = None, pace: Pace | None = None):
        self._on_text = on_text
        self._pace = pace
        self._parts: list[str] = []
        self._length = 0
        self._pending = 0
        """Characters added since the last snapshot."""
        self._allowance = float(TEXT_EVENT_BURST_CHARS)
        self._at = self._yield_at = time.monotonic()

    @property
    def length(self) -> int:
        """Characters so far."""
        return self._length

    @property
    def text(self) -> str:
        """The text so far (joined once, then kept as one piece)."""
        parts = self._parts
        if len(parts) > 1:
            self._parts = parts = ["".join(parts)]
        return parts[0] if parts else ""

    async def add(self, piece: str) -> None:
        """Appends a delta; shows a snapshot when one is due; yields to the loop now and then.

        Raises:
            ModelError: ``generation_failed``, the step's text passed ``MAX_STEP_TEXT_CHARS``.
        """
        self._parts.append(piece)
        self._length += len(piece)
        if self._length > MAX_STEP_TEXT_CHARS:
            raise ModelError(
                "generation_failed",
                f"The model's output passed {MAX_STEP_TEXT_CHARS} characters in one step.",
            )
        now = time.monotonic()
        if self._on_text is not None:
            self._pending += len(piece)
            allowance = self._allowance + (now - self._at) * TEXT_EVENT_CHARS_PER_SECOND
            self._allowance = min(allowance, TEXT_EVENT_BURST_CHARS)
            self._at = now
            if self._allowance >= 0:  # a snapshot may overdraw: the next ones wait for it
                self._allowance -= self._length + self._pending + _SNAPSHOT_OVERHEAD_CHARS
                self._show()
                if self._pace is not None:
                    await self._pace()
                    # waiting for the peer earns no budget: a turn it slows down sends fewer,
                    # larger updates, not one per delta at the peer's pace
                    self._at = time.monotonic()
        if now >= self._yield_at:
            await self.checkpoint()

    async def checkpoint(self) -> None:
        """Lets other tasks run when the stream has held the loop for long enough (call it for
        events that are not text too)."""
        now = time.monotonic()
        if now >= self._yield_at:
            await checkpoint()
            self._yield_at = time.monotonic() + YIELD_EVERY_SECONDS

    def finish(self) -> str:
        """Shows the last snapshot unless the last one shown was the whole text; returns it."""
        if self._pending and self._on_text is not None:
            self._show()
        return self.text

    def _show(self) -> None:
        self._pending = 0
        assert self._on_text is not None
        self._on_text(self.text)

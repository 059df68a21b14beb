"""Line framing: chunks of bytes in, complete lines out, with a hard cap on a line's length.

A line longer than the cap is never held in memory: once the pending bytes pass the cap the framer
drops them and keeps dropping until the next newline, then reports one ``OversizedLine`` in the
line's place, so the connection can answer it and keep going.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LineFramer", "OversizedLine"]


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """Stands for a line that was longer than the framer's limit and was discarded unread."""

    size: int
    """How many bytes the line had (counted while discarding)."""


class LineFramer:
    """Splits a byte stream into lines. Not thread-safe; one per connection."""

    __slots__ = ("_discarding", "_limit", "_pending")

    def __init__(self, max_line_bytes: int) -> None:
        self._limit = max_line_bytes
        self._pending = bytearray()
        self._discarding = 0  # bytes dropped so far of an oversized line; 0 = not discarding

    def feed(self, chunk: bytes) -> list[bytes | OversizedLine]:
        """Returns the complete lines ``chunk`` finishes, without their ``\\n`` (or ``\\r\\n``)."""
        out: list[bytes | OversizedLine] = []
        start = 0
        end = len(chunk)
        while start < end:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._keep(chunk, start, end)
                break
            if self._discarding:
                out.append(OversizedLine(self._discarding + nl - start))
                self._discarding = 0
            elif self._pending:
                self._pending += chunk[start:nl]
                line = bytes(self._pending)
                self._pending.clear()
                out.append(self._check(line))
            else:
                out.append(self._check(chunk[start:nl]))
            start = nl + 1
        return out

    def _keep(self, chunk: bytes, start: int, end: int) -> None:
        if self._discarding:
            self._discarding += end - start
            return
        if len(self._pending) + end - start > self._limit:
            self._discarding = len(self._pending) + end - start
            self._pending.clear()
            return
        self._pending += chunk[start:end]

    def _check(self, line: bytes) -> bytes | OversizedLine:
        if len(line) > self._limit:
            return OversizedLine(len(line))
        if line.endswith(b"\r"):
            return line[:-1]
        return line

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held (an oversized one being skipped counts as 0)."""
        return len(self._pending)

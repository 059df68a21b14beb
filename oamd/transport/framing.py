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
        if self._discarding:
            nl = chunk.find(b"\n")
            if nl < 0:
                self._discarding += len(chunk)
                return out
            out.append(OversizedLine(self._discarding + nl))
            self._discarding = 0
            chunk = chunk[nl + 1 :]
        if self._pending:
            self._pending += chunk
            chunk = bytes(self._pending)
            self._pending.clear()
        lines = chunk.split(b"\n")  # in C: the per-line work left in Python is the dispatch
        rest = lines.pop()
        if len(rest) > self._limit:
            self._discarding = len(rest)
        elif rest:
            self._pending += rest
        if lines and max(map(len, lines)) > self._limit:
            lines = [OversizedLine(len(x)) if len(x) > self._limit else x for x in lines]  # type: ignore[misc]
        if b"\r" in chunk:
            lines = [x[:-1] if type(x) is bytes and x.endswith(b"\r") else x for x in lines]
        if out:
            out.extend(lines)
            return out
        return lines  # type: ignore[return-value]

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held (an oversized one being skipped counts as 0)."""
        return len(self._pending)

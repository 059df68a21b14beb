"""Line framing: chunks of bytes in, complete lines out, with a hard cap on a line's length.

A line longer than the cap is never held in memory: once the pending bytes pass the cap the framer
drops them and keeps dropping until the next newline, then reports one ``OversizedLine`` in the
line's place, so the connection can answer it and keep going. At end of input, ``finish`` ends an
unfinished last line as a newline would: the input's last message is one even without its ``\n``.
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
    """Splits a byte stream into lines. Not thread-safe; one per connection.

    Linear in the bytes received: each byte is scanned for ``\\n`` once, when its chunk arrives;
    an unfinished line is only appended to, never re-scanned. ``limit`` may change between feeds
    (``oamd serve`` keeps it small until a client has authenticated)."""

    __slots__ = ("_discarding", "_pending", "limit")

    def __init__(self, max_line_bytes: int) -> None:
        self.limit = max_line_bytes
        self._pending = bytearray()
        self._discarding = 0  # bytes dropped so far of an oversized line; 0 = not discarding

    def feed(self, chunk: bytes) -> list[bytes | OversizedLine]:
        """Returns the complete lines ``chunk`` finishes, without their ``\\n`` (or ``\\r\\n``)."""
        out: list[bytes | OversizedLine] = []
        limit = self.limit
        if self._discarding or self._pending:
            nl = chunk.find(b"\n")
            if nl < 0:  # the unfinished line goes on: keep (or count) the bytes, scan nothing again
                if self._discarding:
                    self._discarding += len(chunk)
                elif len(self._pending) + len(chunk) > limit:
                    self._discarding = len(self._pending) + len(chunk)
                    self._pending.clear()
                else:
                    self._pending += chunk
                return out
            if self._discarding:
                out.append(OversizedLine(self._discarding + nl))
                self._discarding = 0
            else:
                self._pending += chunk[:nl]
                head = bytes(self._pending)
                self._pending.clear()
                if len(head) > limit:
                    out.append(OversizedLine(len(head)))
                else:
                    out.append(head[:-1] if head.endswith(b"\r") else head)
            chunk = chunk[nl + 1 :]
        lines = chunk.split(b"\n")  # in C: the per-line work left in Python is the dispatch
        rest = lines.pop()
        if len(rest) > limit:
            self._discarding = len(rest)
        elif rest:
            self._pending += rest
        if lines and max(map(len, lines)) > limit:
            lines = [OversizedLine(len(x)) if len(x) > limit else x for x in lines]  # type: ignore[misc]
        if b"\r" in chunk:
            lines = [x[:-1] if type(x) is bytes and x.endswith(b"\r") else x for x in lines]
        if out:
            out.extend(lines)
            return out
        return lines  # type: ignore[return-value]

    def finish(self) -> list[bytes | OversizedLine]:
        """At end of input: the unfinished last line (or its ``OversizedLine``), as if a ``\\n``
        had ended it; nothing when the input ended with one."""
        if self._pending or self._discarding:
            return self.feed(b"\n")
        return []

    @property
    def discarding(self) -> bool:
        """An unfinished line has passed the limit and is being skipped."""
        return self._discarding > 0

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line held (an oversized one being skipped counts as 0)."""
        return len(self._pending)

"""Lines from the daemon into messages: framing, decoding, and skipping what is not a message.

What it guarantees: one bad line costs nothing but itself. A line longer than the limit is
skipped unread, one that is not JSON (or nests past Python's stack) or not a JSON object is
skipped; each is logged, and the lines around it are read as usual.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson

from oamd.transport.framing import LineFramer, OversizedLine

__all__ = ["MessageReader"]

log = logging.getLogger("oamd.client")


class MessageReader:
    """Turns the chunks read from the daemon into the messages they complete."""

    def __init__(self, max_line_bytes: int) -> None:
        self._framer = LineFramer(max_line_bytes)

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The messages whose lines ``chunk`` completes, in order."""
        messages = []
        for line in self._framer.feed(chunk):
            if isinstance(line, OversizedLine):
                log.warning(
                    "skipped a line of %d bytes from the daemon (the limit is %d)",
                    line.size,
                    self._framer.limit,
                )
            elif line.strip():
                msg = _decode(line)
                if msg is not None:
                    messages.append(msg)
        return messages


def _decode(line: bytes) -> dict[str, Any] | None:
    """The message a line holds; ``None`` (logged) for a line that is not a JSON object."""
    try:
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            msg = json.loads(line)  # what orjson refuses: escaped lone surrogates
    except (ValueError, RecursionError) as exc:  # not JSON (or nested past Python's stack)
        log.warning("skipped a line from the daemon that is not JSON (%s): %.80r", exc, line)
        return None
    if not isinstance(msg, dict):
        log.warning("skipped a line from the daemon that is not a JSON object: %.80r", line)
        return None
    return msg

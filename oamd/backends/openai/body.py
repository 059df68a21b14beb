"""Reading an OpenAI-compatible server's response body, bounded: a whole JSON body, the start of
an error body, and the payloads of a server-sent event stream.

``oamd.backends.openai.model`` owns the exchange and calls these; what the payloads mean is
``oamd.backends.openai.wire``'s. Guarantees: nothing here holds more than its limit of a
response (a misbehaving server cannot fill memory), nor reads past the step's ``Deadline`` (a
server that keeps sending — keep-alive comments, tokens past ``max_tokens`` — cannot hold a turn
for ever; a silent one is the read timeout's), lines end only where the SSE format says (CR, LF,
CRLF) and a leading byte order mark is skipped as it says, JSON is read under the daemon's one
JSON rule (``oamd.jsonvalue``: an integer past 64 bits, a number past the double range or a lone
surrogate escape is a value, not an error), and every malformed body is a ``ModelError``
(``generation_failed``).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from oamd.errors import ModelError
from oamd.jsonvalue import JsonTextError, loads

__all__ = [
    "AFTER_DONE_SECONDS",
    "MAX_AFTER_DONE_CHARS",
    "MAX_ERROR_BODY_BYTES",
    "MAX_EVENT_DATA_CHARS",
    "MAX_EVENT_LINE_CHARS",
    "MAX_RESPONSE_BYTES",
    "Deadline",
    "decode_json",
    "read_capped",
    "read_whole",
    "sse_payloads",
]

MAX_ERROR_BODY_BYTES = 16 * 1024
"""At most this much of an error response is read."""

MAX_EVENT_LINE_CHARS = 1024 * 1024
"""Longest line of an event stream read. A chat-completion chunk is a few hundred characters; a
longer line is junk and fails the step ``generation_failed`` before it fills memory."""

MAX_EVENT_DATA_CHARS = 1024 * 1024
"""Most characters of one event's ``data:`` lines together (an event ends at a blank line); past
it the step fails ``generation_failed``, as for a line too long."""

MAX_AFTER_DONE_CHARS = 4096
"""Most characters read after a stream's ``[DONE]`` while waiting for the end of its body
(there is nothing, as a rule); a server that sends more is not read further."""

AFTER_DONE_SECONDS = 1.0
"""Longest wait after a stream's ``[DONE]`` for the end of its body; a server that keeps it open
is not waited for (its connection is closed rather than reused)."""

MAX_RESPONSE_BYTES = 16 * 1024 * 1024
"""Largest whole (not streamed) response read; past it the step fails ``generation_failed``."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """When a step's reading must be over, checked at every read from the server."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(anyio.current_time() + seconds, seconds)

    def check(self) -> None:
        if anyio.current_time() > self.at:
            raise ModelError(
                "generation_failed",
                f"The model server did not finish the step within {self.seconds:g} s.",
            )


def decode_json(content: bytes | str) -> dict[str, Any]:
    """A body or event payload that must be a JSON object (read under ``oamd.jsonvalue``'s
    rule); anything else fails the step."""
    try:
        value = loads(content)
    except JsonTextError as exc:
        raise ModelError("generation_failed", f"The model server sent invalid JSON. {exc}") from exc
    if not isinstance(value, dict):
        raise ModelError("generation_failed", "The model server sent JSON that is not an object.")
    return value


async def read_capped(response: httpx.Response, deadline: Deadline) -> bytes:
    """The first ``MAX_ERROR_BODY_BYTES`` of an error response (enough to quote it)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        deadline.check()
        chunks.append(chunk)
        size += len(chunk)
        if size >= MAX_ERROR_BODY_BYTES:
            break
    return b"".join(chunks)[:MAX_ERROR_BODY_BYTES]


async def read_whole(
    response: httpx.Response, deadline: Deadline, limit: int = MAX_RESPONSE_BYTES
) -> bytes:
    """A whole response body, at most ``limit`` bytes.

    Raises:
        ModelError: the body is larger, or the deadline passed (``generation_failed``).
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        deadline.check()
        size += len(chunk)
        if size > limit:
            raise ModelError(
                "generation_failed", f"The model server's response is larger than {limit} bytes."
            )
        chunks.append(chunk)
    return b"".join(chunks)


_LINE_END = re.compile(r"\r\n|\r|\n")
_BOM = "\ufeff"


async def _lines(response: httpx.Response, deadline: Deadline) -> AsyncIterator[str]:
    """An event stream's lines, ended by CR, LF or CRLF only, as the SSE format says (a JSON
    string may hold U+2028 or U+0085 unescaped, where ``str.splitlines`` would cut the line);
    a byte order mark before the first line is dropped, as the format says too.

    Raises:
        ModelError: a line is longer than ``MAX_EVENT_LINE_CHARS`` (``generation_failed``).
    """
    parts: list[str] = []
    size = 0
    after_cr = False
    at_start = True
    async for text in response.aiter_text():
        deadline.check()
        if at_start and text:
            text = text.removeprefix(_BOM)
            at_start = False
        if after_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF that two reads split
        after_cr = text.endswith("\r")
        start = 0
        for end in _LINE_END.finditer(text):
            parts.append(text[start : end.start()])
            yield "".join(parts)
            parts, size = [], 0
            start = end.end()
        if start < len(text):
            size += len(text) - start
            if size > MAX_EVENT_LINE_CHARS:
                raise ModelError(
                    "generation_failed",
                    f"The model server sent a line longer than {MAX_EVENT_LINE_CHARS} characters.",
                )
            parts.append(text[start:])
    if parts:
        yield "".join(parts)


async def _read_to_the_end(lines: AsyncIterator[str]) -> None:
    """Reads what follows ``[DONE]``: the end of the body, as a rule at once. Only a response
    read to its end leaves its connection for the next request (keep-alive); one left unread
    is closed, and every step would pay for a new connection. The answer is whole already: a
    server that sends more than ``MAX_AFTER_DONE_CHARS``, keeps the body open past
    ``AFTER_DONE_SECONDS`` or fails meanwhile is left, its connection closed, and nothing
    fails."""
    size = 0
    with anyio.move_on_after(AFTER_DONE_SECONDS):
        try:
            async for line in lines:
                size += len(line) + 1
                if size > MAX_AFTER_DONE_CHARS:
                    return
        except (httpx.TransportError, ModelError):
            return


async def sse_payloads(
    response: httpx.Response, deadline: Deadline
) -> AsyncIterator[dict[str, Any]]:
    """The JSON payloads of a server-sent event stream, until ``[DONE]`` or its end (neither
    says the answer is whole: a ``finish_reason`` does).

    Raises:
        ModelError: a line or an event is too long, or a payload is not a JSON object
            (``generation_failed``).
    """
    data: list[str] = []
    size = 0
    event = ""
    async with aclosing(_lines(response, deadline)) as lines:
        async for line in lines:
            if line.startswith(":"):
                continue  # a comment (keep-alive)
            if line:
                field_name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field_name == "data":
                    size += len(value) + 1
                    if size > MAX_EVENT_DATA_CHARS:
                        raise ModelError(
                            "generation_failed",
                            "The model server sent an event longer than "
                            f"{MAX_EVENT_DATA_CHARS} characters.",
                        )
                    data.append(value)
                elif field_name == "event":
                    event = value
                continue
            if not data:
                continue
            payload = "\n".join(data)
            data, size = [], 0
            if payload.strip() == "[DONE]":
                await _read_to_the_end(lines)
                return
            chunk = decode_json(payload)
            if event == "error" and "error" not in chunk:
                chunk = {"error": chunk}
            event = ""
            yield chunk
    if data and "\n".join(data).strip() != "[DONE]":  # the last event, without its blank line
        yield decode_json("\n".join(data))

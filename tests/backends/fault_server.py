"""An OpenAI-compatible server on 127.0.0.1 that plays one fault on every chat completion until
the test clears it, then answers normally: HTTP errors, a stall, a stream cut mid-token, ended
early or interrupted, kept alive or trickled past every deadline, junk JSON and junk server-sent events, a connection closed before or
during the answer.

Built on ``fake_http`` (anyio sockets, one request per connection, ``Connection: close``, so
nothing depends on connection reuse). ``GET /models`` always answers, with ``owner`` as
``owned_by``: ``me`` (llama-cpp-python) puts the daemon on the envelope loop, anything else on
the native one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import orjson
from anyio.abc import SocketStream

from backends import fake_http

__all__ = ["FAULTS", "ODD_ANSWERS", "REPLY", "Fault", "FaultServer", "running"]

Fault = Callable[[SocketStream], Awaitable[None]]
"""Plays one misbehaving answer to a chat completion on the connection."""

REPLY = "Welcome, traveller."
"""What the server says once it behaves."""

_HEAD_END = b"\r\n\r\n"
_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
    b"connection: close\r\n\r\n"
)
_LAST_CHUNK = b"0\r\n\r\n"


def _whole(status: int, body: bytes, content_type: str, *headers: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"content-type: {content_type}", "connection: close"]
    head += [*headers, f"content-length: {len(body)}"]
    return "\r\n".join(head).encode() + _HEAD_END + body


def _event(payload: object) -> bytes:
    data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return fake_http.chunk(b"data: " + data + b"\n\n")


def _delta(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


async def _answer(stream: SocketStream) -> None:
    half = len(REPLY) // 2
    await stream.send(_STREAM_HEAD)
    for text in (REPLY[:half], REPLY[half:]):
        await stream.send(_event(_delta(text)))
    await stream.send(_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    await stream.send(
        _event({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 5}})
    )
    await stream.send(_event(b"[DONE]"))
    await stream.send(_LAST_CHUNK)


def _status(status: int, body: bytes, *headers: str) -> Fault:
    async def fault(stream: SocketStream) -> None:
        await stream.send(_whole(status, body, "application/json", *headers))

    return fault


async def _stall(stream: SocketStream) -> None:
    await anyio.sleep_forever()  # the request was read; not a byte comes back


async def _stall_mid_stream(stream: SocketStream) -> None:
    await stream.send(_STREAM_HEAD + _event(_delta("Welc")))
    await anyio.sleep_forever()


async def _keep_alive_for_ever(stream: SocketStream) -> None:
    # inside every read timeout, never an answer: only the step's deadline ends it
    await stream.send(_STREAM_HEAD)
    while True:
        await stream.send(fake_http.chunk(b": keep-alive\n\n"))
        await anyio.sleep(0.05)


async def _trickle_for_ever(stream: SocketStream) -> None:
    # a server that ignores max_tokens and never finishes
    await stream.send(_STREAM_HEAD)
    while True:
        await stream.send(_event(_delta("la ")))
        await anyio.sleep(0.05)


async def _cut_mid_token(stream: SocketStream) -> None:
    await stream.send(_STREAM_HEAD + _event(_delta("Welc")))
    await stream.send(fake_http.chunk(b'data: {"choices":[{"index":0,"delta":{"content":"om'))
    await stream.send(_LAST_CHUNK)  # a clean end of the body, inside an event


async def _ended_early(stream: SocketStream) -> None:
    await stream.send(_STREAM_HEAD + _event(_delta("Welc")) + _LAST_CHUNK)  # no finish, no [DONE]


async def _interrupted(stream: SocketStream) -> None:
    # llama-cpp-python's way to cut a stream short when another request arrives
    await stream.send(_STREAM_HEAD + _event(_delta("Welc")) + _event(b"[DONE]") + _LAST_CHUNK)


async def _junk_json(stream: SocketStream) -> None:
    await stream.send(_whole(200, b'{"choices": [{"message": {"content": "We', "application/json"))


async def _json_of_another_shape(stream: SocketStream) -> None:
    body = orjson.dumps({"choices": [{"message": "Welcome"}], "usage": {"prompt_tokens": "x"}})
    await stream.send(_whole(200, body, "application/json"))


async def _junk_events(stream: SocketStream) -> None:
    await stream.send(_STREAM_HEAD + _event(_delta("Welc")) + _event(b"<html>Bad Gateway</html>"))
    await stream.send(_LAST_CHUNK)


async def _events_of_another_shape(stream: SocketStream) -> None:
    await stream.send(_STREAM_HEAD + _event(_delta("Welc")))
    await stream.send(_event({"choices": [{"index": 0, "delta": "ome", "finish_reason": None}]}))
    await stream.send(_event({"choices": {"tool_calls": 7}}))
    await stream.send(_event(b"[DONE]") + _LAST_CHUNK)


async def _close_before_answer(stream: SocketStream) -> None:
    return  # the request was read; the connection closes without a byte


async def _close_mid_answer(stream: SocketStream) -> None:
    await stream.send(_STREAM_HEAD + _event(_delta("Welc")))  # then closes inside the body


async def _content_not_a_string(stream: SocketStream) -> None:
    await stream.send(_STREAM_HEAD + _event(_delta("Welc")))
    await stream.send(_event({"choices": [{"index": 0, "delta": {"content": 7}}]}))
    await stream.send(_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    await stream.send(_event(b"[DONE]") + _LAST_CHUNK)


FAULTS: dict[str, Fault] = {
    "http_500": _status(500, b'{"error": {"message": "boom", "type": "server_error"}}'),
    "http_502_text": _status(502, b"<html>Bad Gateway</html>"),
    "http_503": _status(503, b'{"error": {"message": "loading model"}}'),
    "http_503_retry_after_an_hour": _status(
        503, b'{"error": {"message": "loading model"}}', "retry-after: 3600"
    ),
    "http_429": _status(429, b'{"error": {"message": "slow down"}}', "retry-after: 60"),
    "http_429_retry_after_inf": _status(
        429, b'{"error": {"message": "slow down"}}', "retry-after: inf"
    ),
    "http_503_retry_after_1e400": _status(
        503, b'{"error": {"message": "loading model"}}', "retry-after: 1e400"
    ),
    "stall": _stall,
    "stall_mid_stream": _stall_mid_stream,
    "keep_alive_for_ever": _keep_alive_for_ever,
    "trickle_for_ever": _trickle_for_ever,
    "stream_cut_mid_token": _cut_mid_token,
    "stream_ended_early": _ended_early,
    "stream_interrupted": _interrupted,
    "junk_json": _junk_json,
    "json_of_another_shape": _json_of_another_shape,
    "junk_events": _junk_events,
    "events_of_another_shape": _events_of_another_shape,
    "close_before_answer": _close_before_answer,
    "close_mid_answer": _close_mid_answer,
    "content_not_a_string": _content_not_a_string,
}

_HUGE_INTEGER = b"9" * 400
"""Past every 64-bit integer and the double range: JSON allows it, orjson refuses it."""


def _streamed(*events: bytes, before: bytes = b"") -> Fault:
    """A whole streamed answer: ``events`` (raw ``data:`` payloads) after ``before``, the
    finish, the usage and ``[DONE]``."""

    async def answer(stream: SocketStream) -> None:
        await stream.send(_STREAM_HEAD)
        first, *rest = events
        await stream.send(fake_http.chunk(before + b"data: " + first + b"\n\n"))
        for payload in rest:
            await stream.send(_event(payload))
        await stream.send(_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        await stream.send(_event(b'{"choices": [], "usage": {"prompt_tokens": 9}}'))
        await stream.send(_event(b"[DONE]") + _LAST_CHUNK)

    return answer


def _raw_delta(content: bytes) -> bytes:
    return b'{"choices": [{"index": 0, "delta": {"content": ' + content + b"}}]}"


_HALF = len(REPLY) // 2
_FIRST, _SECOND = (orjson.dumps(part) for part in (REPLY[:_HALF], REPLY[_HALF:]))


def _answer_then(after: Callable[[SocketStream], Awaitable[None]]) -> Fault:
    """The whole answer up to its ``[DONE]``, then ``after`` instead of the end of the body."""

    async def answer(stream: SocketStream) -> None:
        await stream.send(_STREAM_HEAD)
        for text in (REPLY[:_HALF], REPLY[_HALF:]):
            await stream.send(_event(_delta(text)))
        await stream.send(_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        await stream.send(_event(b"[DONE]"))
        await after(stream)

    return answer


ODD_ANSWERS: dict[str, tuple[Fault, str]] = {
    "byte_order_mark_before_the_first_line": (
        _streamed(_raw_delta(_FIRST), _raw_delta(_SECOND), before=b"\xef\xbb\xbf"),
        REPLY,
    ),
    "huge_integer_in_usage": (
        _streamed(
            _raw_delta(_FIRST),
            _raw_delta(_SECOND),
            b'{"choices": [], "usage": {"prompt_tokens": ' + _HUGE_INTEGER + b"}}",
        ),
        REPLY,
    ),
    "lone_surrogate_in_a_delta": (
        _streamed(_raw_delta(_FIRST), _raw_delta(b'"\\ud800"'), _raw_delta(_SECOND)),
        REPLY[:_HALF] + "\ufffd" + REPLY[_HALF:],
    ),
    "role_only_delta_with_null_content": (
        _streamed(
            b'{"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}',
            _raw_delta(_FIRST),
            _raw_delta(_SECOND),
        ),
        REPLY,
    ),
    "stall_after_done": (_answer_then(_stall), REPLY),
    "close_after_done": (_answer_then(_close_before_answer), REPLY),
    "whole_body_with_huge_integer_and_lone_surrogate": (
        _status(
            200,
            b'{"choices": [{"message": {"content": "Welcome,\\ud800 traveller."}, '
            b'"finish_reason": "stop"}], "usage": {"prompt_tokens": ' + _HUGE_INTEGER + b"}}",
        ),
        "Welcome,\ufffd traveller.",
    ),
}
"""Whole answers in shapes JSON and the SSE format allow (a byte order mark, numbers and
escapes no encoder takes, a ``null`` content), or whose body does not end after ``[DONE]``
→ the text the turn must answer with."""


class FaultServer:
    """Plays ``fault`` on chat completions while it is set (``times`` more of them, when that
    is set); answers ``REPLY`` otherwise."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.fault: Fault | None = None
        self.times: int | None = None
        self.completions = 0
        """Chat completions asked for (faulty or not)."""

    async def handle(self, request: bytes, stream: SocketStream) -> None:
        if request.startswith(b"GET ") and b"/models " in request.split(b"\r\n", 1)[0]:
            body = orjson.dumps({"data": [{"id": "smol", "owned_by": self.owner}]})
            await stream.send(_whole(200, body, "application/json"))
            return
        self.completions += 1
        fault = self.fault
        if self.times is not None:
            self.times -= 1
            if self.times <= 0:
                self.fault = None
        await (fault or _answer)(stream)


@asynccontextmanager
async def running(owner: str) -> AsyncIterator[tuple[FaultServer, str]]:
    """A ``FaultServer`` and its base URL, served until the block ends."""
    server = FaultServer(owner)
    async with fake_http.serve(server.handle) as url:
        yield server, url

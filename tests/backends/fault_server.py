"""An OpenAI-compatible server on 127.0.0.1 that plays one fault on every chat completion until
the test clears it, then answers normally: HTTP errors, a stall, a stream cut mid-token, ended
early or interrupted, kept alive or trickled past every deadline, junk JSON and junk server-sent events, a connection closed before or
during the answer.

Built on ``fake_http`` (anyio sockets, one request per connection, ``Connection: close``, so
nothing depends on connection reuse). ``GET /models`` always answers, with ``owner`` as
``owned_by``: ``me`` (llama-cpp-python) puts the daemon on the envelope loop, anything else on
the native one.

For the fuzzer and the soak (``fuzz_peer.fault_model``): ``HOSTILE_FAULTS``, answers no server
should give, and ``MixedFaultServer``, which plays a fault drawn from both tables on about half of
the completions, served from a thread by ``serving_in_thread``."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import anyio.from_thread
import orjson
from anyio.abc import SocketStream

from backends import fake_http

__all__ = [
    "FAULTS",
    "HOSTILE_FAULTS",
    "ODD_ANSWERS",
    "REPLY",
    "Fault",
    "FaultServer",
    "MixedFaultServer",
    "running",
    "serving_in_thread",
]

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


# ---- hostile servers, mixed: for the fuzzer and the soak (fuzz_peer.fault_model) ---------------

_FINISH = _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
_DONE = _FINISH + _event(b"[DONE]")

RETRY_AFTERS = (
    "99999999999999999999999",
    "inf",
    "1e400",
    "-1",
    "nan",
    "Fri, 31 Dec 9999 23:59:59 GMT",
    "0x10",
    "9" * 400,
)
"""``Retry-After`` values no server should send: huge, infinite, past a float, negative, NaN, a
date thousands of years away, hexadecimal, 400 digits."""


def _retry_after(status: int, value: str) -> Fault:
    return _status(status, b'{"error": {"message": "come back later"}}', f"retry-after: {value}")


async def _bom_events(stream: SocketStream) -> None:
    # a byte order mark before the first event and inside the next one's data
    first = fake_http.chunk(b"\xef\xbb\xbfdata: " + orjson.dumps(_delta("Welc")) + b"\n\n")
    await stream.send(_STREAM_HEAD + first)
    await stream.send(_event(b"\xef\xbb\xbf" + orjson.dumps(_delta("ome."))))
    await stream.send(_DONE + _LAST_CHUNK)


async def _bom_json(stream: SocketStream) -> None:
    body = orjson.dumps({"choices": [{"message": {"role": "assistant", "content": REPLY}}]})
    await stream.send(_whole(200, b"\xef\xbb\xbf" + body, "application/json"))


async def _lone_surrogates(stream: SocketStream) -> None:
    # JSON escapes of half a surrogate pair: valid JSON text, not valid Unicode
    await stream.send(_STREAM_HEAD + _event(_delta("Welc")))
    await stream.send(
        _event(
            b'{"choices":[{"index":0,"delta":{"content":"\\ud800 \\udfff"},"finish_reason":null}]}'
        )
    )
    await stream.send(
        _event(b'{"choices":[{"index":0,"delta":{},"finish_reason":"\\udc00"}]}')
        + _event(b"[DONE]")
        + _LAST_CHUNK
    )


async def _huge_usage(stream: SocketStream) -> None:
    digits = b"9" * 400
    await stream.send(_STREAM_HEAD + _event(_delta(REPLY)) + _FINISH)
    usage = b'{"choices":[],"usage":{"prompt_tokens":%s,"completion_tokens":1e400,' % digits
    usage += b'"total_tokens":-%s,"prompt_tokens_details":{"cached_tokens":%s}}}' % (digits, digits)
    await stream.send(_event(usage) + _event(b"[DONE]") + _LAST_CHUNK)


HUGE_DELTAS = 4_000
"""Deltas of a few characters that ``huge_fast_deltas`` sends in one go (streamed to a client,
each becomes a ``text`` event repeating the text so far: 24 MB in all)."""


async def _huge_fast_deltas(stream: SocketStream) -> None:
    # a server that ignores max_tokens and answers faster than anyone reads
    burst = _event(_delta("la ")) * 500
    await stream.send(_STREAM_HEAD)
    for _ in range(HUGE_DELTAS // 500):
        await stream.send(burst)
    await stream.send(_DONE + _LAST_CHUNK)


async def _huge_delta(stream: SocketStream) -> None:
    await stream.send(_STREAM_HEAD + _event(_delta("la " * 700_000)) + _DONE + _LAST_CHUNK)


HOSTILE_FAULTS: dict[str, Fault] = {
    **{f"http_503_retry_after_{v[:12]}": _retry_after(503, v) for v in RETRY_AFTERS},
    **{f"http_429_retry_after_{v[:12]}": _retry_after(429, v) for v in RETRY_AFTERS},
    "bom_events": _bom_events,
    "bom_json": _bom_json,
    "lone_surrogates": _lone_surrogates,
    "huge_usage": _huge_usage,
    "huge_fast_deltas": _huge_fast_deltas,
    "huge_delta": _huge_delta,
}
"""Answers of a server that is not merely failing but hostile (see ``RETRY_AFTERS``; a BOM
before or inside the answer; lone surrogates; 400-digit and infinite usage counts; tens of
thousands of deltas, or one of 2 MB, in a burst). Kept apart from ``FAULTS``, whose every entry
has an expected error in ``test_backend_openai_faults``; these have no single right answer, only
wrong ones (an internal error, a stalled daemon, an invalid message), which the fuzzer's oracle
judges."""

SLOW_FAULTS = ("stall", "stall_mid_stream", "keep_alive_for_ever", "trickle_for_ever")
"""Faults that end only when the daemon gives up (its ``timeout``/``deadline``)."""

SLOW_FAULT_SECONDS = 30.0
"""The longest a mixed server plays a slow fault to a daemon that never gives up."""


class MixedFaultServer:
    """Plays, on each chat completion, the good answer or a fault drawn (seeded) from ``FAULTS``
    and ``HOSTILE_FAULTS`` (``SLOW_FAULTS`` only with ``slow``): about half of them are faults.
    ``GET /models`` answers ``owned_by`` ``me`` and another owner in turn, so daemons started
    one after another meet both tool loops (envelope and native)."""

    def __init__(self, seed: int, *, slow: bool = False) -> None:
        self.rng = random.Random(seed)
        names = [n for n in FAULTS if slow or n not in SLOW_FAULTS]
        self.faults: dict[str, Fault] = {n: FAULTS[n] for n in names} | HOSTILE_FAULTS
        self.names = sorted(self.faults)
        self.played: dict[str, int] = {}
        """How often each fault (and ``answer``) was played."""
        self._models = 0

    def draw(self) -> str:
        return self.rng.choice(self.names) if self.rng.random() < 0.5 else "answer"

    async def handle(self, request: bytes, stream: SocketStream) -> None:
        if request.startswith(b"GET ") and b"/models " in request.split(b"\r\n", 1)[0]:
            self._models += 1
            owner = "me" if self._models % 2 else "vllm"
            body = orjson.dumps({"data": [{"id": "smol", "owned_by": owner}]})
            await stream.send(_whole(200, body, "application/json"))
            return
        name = self.draw()
        self.played[name] = self.played.get(name, 0) + 1
        with anyio.move_on_after(SLOW_FAULT_SECONDS):  # a stall's task must end some time
            await (self.faults.get(name) or _answer)(stream)


@contextmanager
def serving_in_thread(server: MixedFaultServer) -> Iterator[str]:
    """``server`` on 127.0.0.1, its event loop in a thread of its own (for the fuzzer's and the
    soak's blocking code); yields the base URL."""
    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(fake_http.serve(server.handle)) as url:
            yield url

"""The inspector's HTTP/1.1: h11's parser and serializer driven by anyio streams, connections
kept alive between requests (a page polls).

It owns reading a request head (at most ``INSPECT_MAX_HEAD_BYTES``, else 431; bounded in time), writing a whole response, and
writing an event stream (Server-Sent Events) from a queue until the queue ends or the page stops
reading: every write is bounded by ``WRITE_SECONDS``, so a page that does not read holds only its
own task, never the daemon (its queue, filled without waiting, drops it). At most
``INSPECT_MAX_PAGE_CONNECTIONS`` connections are served at once; one more is answered 503. What
a request means is the caller's ``Handler``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
import h11
from anyio.abc import ByteStream, SocketListener, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from oamd.limits import INSPECT_MAX_HEAD_BYTES, INSPECT_MAX_PAGE_CONNECTIONS
from oamd.log import get_logger

__all__ = ["EventStream", "HttpRequest", "HttpResponse", "serve_http"]

log = get_logger("oamd.inspector")

HEAD_SECONDS = 10.0
"""Time a client has to send its next request head (on a kept-alive connection: to start it)
before the connection is closed."""

WRITE_SECONDS = 5.0
"""Time one write to a page may take; a page that reads slower than this is disconnected."""

HEARTBEAT_SECONDS = 15.0
"""An idle event stream sends a comment this often, so a page that went away is noticed."""

RECEIVE_BYTES = 65536

LINGER_SECONDS = 1.0
"""After refusing a request (431, 400): how long the rest of what the peer sends is read and
dropped before the connection closes…"""

LINGER_BYTES = 4 * INSPECT_MAX_HEAD_BYTES
"""…and how many bytes at most."""

EVENT_BATCH_BYTES = 256 * 1024
"""Queued events written to a page in one write at most."""

EVENT_BATCH_SECONDS = 0.02
"""After an event, how long the stream waits for more to write them together: a turn makes four
or more events within a millisecond or two, and one write (one wake-up of this task, one system
call) for all of them, at most fifty times a second, keeps a page off the daemon's back. The
page's queue (``INSPECT_PAGE_QUEUE_EVENTS``) holds what arrives meanwhile many times over."""

SECURITY_HEADERS = [
    ("cache-control", "no-store"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
]


@dataclass
class HttpRequest:
    method: str
    path: list[str]
    """The path's segments, each percent-decoded (``/api/a%2Fb`` → ``["api", "a/b"]``)."""
    query: dict[str, list[str]]
    headers: dict[str, str]
    """Lower-case names; a repeated header keeps its last value."""


@dataclass
class HttpResponse:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class EventStream:
    """A response that streams ``events`` (whole SSE frames) until the queue ends."""

    events: MemoryObjectReceiveStream[bytes]
    first: bytes = b""
    """Written before any event (``retry:`` and a hello)."""
    on_close: Callable[[], None] = lambda: None
    """Called once the response has ended, however it ended."""


Handler = Callable[[HttpRequest], Awaitable[HttpResponse | EventStream]]


async def serve_http(listener: SocketListener, handle: Handler, tg: TaskGroup) -> None:
    """Accepts on ``listener`` until cancelled, each connection in ``tg``."""
    active = [0]
    while True:
        try:
            stream = await listener.accept()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        except OSError as exc:  # out of descriptors: let connections end, then accept again
            log.warning("inspector_accept_failed", error=repr(exc))
            await anyio.sleep(HEAD_SECONDS / 100)
            continue
        tg.start_soon(_serve_one, stream, handle, active)


async def _serve_one(stream: ByteStream, handle: Handler, active: list[int]) -> None:
    active[0] += 1
    try:
        async with stream:
            conn = h11.Connection(h11.SERVER, max_incomplete_event_size=INSPECT_MAX_HEAD_BYTES)
            while await _serve_request(stream, conn, handle, active[0]):
                conn.start_next_cycle()  # keep-alive: a page's fetches reuse their connection
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError, TimeoutError):
        pass  # the page went away, or stopped reading: its connection ends, nothing else
    finally:
        active[0] -= 1


async def _serve_request(
    stream: ByteStream, conn: h11.Connection, handle: Handler, active: int
) -> bool:
    """Reads one request and answers it; returns whether the connection may carry another."""
    try:
        with anyio.move_on_after(HEAD_SECONDS):
            request = await _read_request(stream, conn)
    except h11.RemoteProtocolError as exc:
        status = exc.error_status_hint
        await _respond(stream, conn, HttpResponse(status, b'{"error":"bad request"}'), close=True)
        await _linger(stream)
        return False
    if request is None:
        return False
    if active > INSPECT_MAX_PAGE_CONNECTIONS:
        busy = HttpResponse(503, b'{"error":"too many inspector connections"}')
        await _respond(stream, conn, busy, close=True)
        return False
    try:
        reply = await handle(request)
    except Exception:
        log.exception("inspector_request_failed", path="/".join(request.path))
        reply = HttpResponse(500, b'{"error":"internal error"}')
    if isinstance(reply, EventStream):
        await _stream_events(stream, conn, reply)
        return False
    await _respond(stream, conn, reply)
    return conn.our_state is h11.DONE and conn.their_state is h11.DONE


async def _linger(stream: ByteStream) -> None:
    """After refusing a request: half-closes, then reads and drops what the peer still sends
    (within ``LINGER_SECONDS`` and ``LINGER_BYTES``), so the refusal reaches it instead of a
    reset for the bytes it sent that were never read."""
    with (
        anyio.move_on_after(LINGER_SECONDS),
        contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError),
    ):
        await stream.send_eof()
        dropped = 0
        while dropped < LINGER_BYTES:
            dropped += len(await stream.receive(RECEIVE_BYTES))


async def _next_event(stream: ByteStream, conn: h11.Connection) -> tuple[Any, int]:
    """The next event, and how many bytes were received for it."""
    received = 0
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event, received
        try:
            data = await stream.receive(RECEIVE_BYTES)
        except anyio.EndOfStream:
            data = b""
        received += len(data)
        conn.receive_data(data)


async def _read_head(stream: ByteStream, conn: h11.Connection) -> Any:
    """The next request head's event.

    Raises:
        h11.RemoteProtocolError: the head is longer than ``INSPECT_MAX_HEAD_BYTES`` (431). h11
            refuses only a buffer that long still incomplete, and one receive holds more: a
            whole head that arrived in one piece is measured here.
    """
    waiting = len(conn.trailing_data[0])  # a pipelined head already here is part of this one
    event, received = await _next_event(stream, conn)
    head = waiting + received - len(conn.trailing_data[0])
    if isinstance(event, h11.Request) and head > INSPECT_MAX_HEAD_BYTES:
        raise h11.RemoteProtocolError("request head too long", error_status_hint=431)
    return event


async def _read_request(stream: ByteStream, conn: h11.Connection) -> HttpRequest | None:
    """The next request, its body read and dropped (at most ``INSPECT_MAX_HEAD_BYTES`` of it:
    only GET is served); ``None`` when the peer closed instead."""
    event = await _read_head(stream, conn)
    if not isinstance(event, h11.Request):
        return None
    body = 0
    while not isinstance(end := (await _next_event(stream, conn))[0], h11.EndOfMessage):
        if not isinstance(end, h11.Data) or body + len(end.data) > INSPECT_MAX_HEAD_BYTES:
            return None
        body += len(end.data)
    target = urlsplit(event.target.decode("ascii", "replace"))
    return HttpRequest(
        method=event.method.decode("ascii", "replace"),
        path=[unquote(part) for part in target.path.split("/") if part],
        query=parse_qs(target.query),
        headers={
            name.decode("latin-1").lower(): value.decode("latin-1") for name, value in event.headers
        },
    )


async def _respond(
    stream: ByteStream, conn: h11.Connection, reply: HttpResponse, *, close: bool = False
) -> None:
    headers = [
        ("content-type", reply.content_type),
        ("content-length", str(len(reply.body))),
        *SECURITY_HEADERS,
        *reply.headers,
        *([("connection", "close")] if close else []),
    ]
    with anyio.fail_after(WRITE_SECONDS):
        await stream.send(conn.send(h11.Response(status_code=reply.status, headers=headers)))
        if reply.body:
            await stream.send(conn.send(h11.Data(data=reply.body)))
        await stream.send(conn.send(h11.EndOfMessage()))


async def _stream_events(stream: ByteStream, conn: h11.Connection, reply: EventStream) -> None:
    try:
        await _write_events(stream, conn, reply)
    finally:
        reply.on_close()


async def _write_events(stream: ByteStream, conn: h11.Connection, reply: EventStream) -> None:
    headers = [("content-type", "text/event-stream"), *SECURITY_HEADERS, ("connection", "close")]
    events = reply.events
    with events:
        with anyio.fail_after(WRITE_SECONDS):
            await stream.send(conn.send(h11.Response(status_code=200, headers=headers)))
            await stream.send(conn.send(h11.Data(data=reply.first)))
        while True:
            frame = b": idle\n\n"
            with anyio.move_on_after(HEARTBEAT_SECONDS):
                try:
                    frame = await events.receive()
                except anyio.EndOfStream:
                    return  # dropped for falling behind, or the inspector is closing
            frames = [frame]
            size = len(frame)
            await anyio.sleep(EVENT_BATCH_SECONDS)
            with contextlib.suppress(anyio.WouldBlock, anyio.EndOfStream):
                while size < EVENT_BATCH_BYTES:
                    frames.append(events.receive_nowait())
                    size += len(frames[-1])
            with anyio.fail_after(WRITE_SECONDS):
                await stream.send(conn.send(h11.Data(data=b"".join(frames))))

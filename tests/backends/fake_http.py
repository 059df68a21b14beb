"""A tiny HTTP/1.1 server on 127.0.0.1 built on anyio sockets, for faults a mock transport
cannot play: a stream the client abandons (did the connection close?), a server that never
answers (read timeouts), a connection dropped mid-response."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from anyio.abc import SocketAttribute, SocketStream

__all__ = ["Handler", "chunk", "read_request", "serve", "sse_headers"]

Handler = Callable[[bytes, SocketStream], Awaitable[None]]
"""Called with the request (head and body) and the connection; writes what it likes."""

MAX_REQUEST_BYTES = 1024 * 1024


async def read_request(stream: SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < min(length, MAX_REQUEST_BYTES):
        body += await stream.receive()
    return head + b"\r\n\r\n" + body


def sse_headers() -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    """Serves ``handler`` until the block ends; yields the base URL (``http://127.0.0.1:N/v1``)."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)

    async def handle(stream: SocketStream) -> None:
        async with stream:
            try:
                request = await read_request(stream)
                await handler(request, stream)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        port = listener.extra(SocketAttribute.local_port)
        yield f"http://127.0.0.1:{port}/v1"
        tg.cancel_scope.cancel()
    await listener.aclose()

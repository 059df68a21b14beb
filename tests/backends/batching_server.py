"""A batching OpenAI-compatible server on 127.0.0.1, as vLLM or a llama.cpp server farm looks to
the daemon: it takes any number of chat completions at once, keeps connections alive (HTTP/1.1),
and counts what a scale test asserts on: connections opened, completions in flight and their
peak, and the order the prompts arrived in.

While ``hold`` is set, every completion waits for ``release``; ``reached`` is set once
``target`` of them are in flight together. Each answer streams ``REPLY`` and a ``stop``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import orjson
from anyio.abc import SocketAttribute, SocketStream

__all__ = ["REPLY", "BatchingServer", "running"]

REPLY = "Aye."

_EVENTS = (
    b"".join(
        b"data: " + orjson.dumps(payload) + b"\n\n"
        for payload in (
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": REPLY}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        )
    )
    + b"data: [DONE]\n\n"
)
_MODELS = orjson.dumps({"data": [{"id": "m", "owned_by": "vllm"}]})


def _answer(body: bytes, content_type: str) -> bytes:
    head = f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


class BatchingServer:
    def __init__(self, target: int = 0) -> None:
        self.target = target
        self.hold = False
        self.release = anyio.Event()
        self.reached = anyio.Event()
        self.connections = 0
        self.in_flight = 0
        self.peak = 0
        self.prompts: list[str] = []
        """The last message of each chat completion, in arrival order."""

    async def serve(self, stream: SocketStream) -> None:
        self.connections += 1
        buffer = b""
        async with stream:
            try:
                while True:
                    while b"\r\n\r\n" not in buffer:
                        buffer += await stream.receive()
                    head, _, buffer = buffer.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value)
                    while len(buffer) < length:
                        buffer += await stream.receive()
                    body, buffer = buffer[:length], buffer[length:]
                    if b"/models " in head.split(b"\r\n", 1)[0]:
                        await stream.send(_answer(_MODELS, "application/json"))
                    else:
                        await self._complete(body, stream)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    async def _complete(self, body: bytes, stream: SocketStream) -> None:
        self.prompts.append(orjson.loads(body)["messages"][-1]["content"])
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        if self.in_flight == self.target:
            self.reached.set()
        try:
            if self.hold:
                await self.release.wait()
        finally:
            self.in_flight -= 1
        await stream.send(_answer(_EVENTS, "text/event-stream"))


@asynccontextmanager
async def running(target: int = 0) -> AsyncIterator[tuple[BatchingServer, str]]:
    """A ``BatchingServer`` and its base URL (``http://127.0.0.1:N/v1``), until the block ends."""
    server = BatchingServer(target)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0, backlog=1024)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, server.serve)
        port = listener.extra(SocketAttribute.local_port)
        yield server, f"http://127.0.0.1:{port}/v1"
        tg.cancel_scope.cancel()
    await listener.aclose()

"""In-memory transport: two connected byte streams, for tests and in-process hosts."""

from __future__ import annotations

import anyio
from anyio.abc import ByteStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["memory_stream_pair"]


class _MemoryByteStream(ByteStream):
    def __init__(
        self, send: MemoryObjectSendStream[bytes], receive: MemoryObjectReceiveStream[bytes]
    ) -> None:
        self._send = send
        self._receive = receive

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise anyio.EndOfStream from None

    async def send(self, item: bytes) -> None:
        try:
            await self._send.send(item)
        except anyio.ClosedResourceError:
            raise anyio.BrokenResourceError from None

    async def send_eof(self) -> None:
        await self._send.aclose()

    async def aclose(self) -> None:
        self._send.close()
        self._receive.close()


def memory_stream_pair(buffer: float = 1024) -> tuple[ByteStream, ByteStream]:
    """Returns ``(a, b)``: what ``a`` sends, ``b`` receives, and the other way round."""
    a_send, b_receive = anyio.create_memory_object_stream[bytes](buffer)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](buffer)
    return _MemoryByteStream(a_send, a_receive), _MemoryByteStream(b_send, b_receive)

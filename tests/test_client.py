"""``oamd.client.Client`` against a daemon played by the test over memory streams: every waiter
ends once the connection closes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
import pytest

from oamd.client import Client, ConnectionClosed
from oamd.transport import memory_stream_pair

pytestmark = pytest.mark.anyio


class Peer:
    """The daemon's end of the connection, played line by line by the test."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer = b""

    async def read(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self.buffer += await self.stream.receive()
        line, _, self.buffer = self.buffer.partition(b"\n")
        return orjson.loads(line)

    async def write(self, message: dict[str, Any]) -> None:
        await self.stream.send(orjson.dumps(message) + b"\n")

    async def answer(self) -> None:
        """Reads one request and answers it with an empty result."""
        request = await self.read()
        await self.write({"jsonrpc": "2.0", "id": request["id"], "result": {}})


@asynccontextmanager
async def connected(**kwargs: Any) -> AsyncIterator[tuple[Client, Peer]]:
    ours, theirs = memory_stream_pair()
    with anyio.fail_after(5):
        async with theirs, Client(ours, **kwargs) as client:
            yield client, Peer(theirs)


# ---- the connection closes ---------------------------------------------------------------------


async def test_every_request_in_flight_when_the_daemon_closes_fails_with_connection_closed():
    failed: list[str] = []

    async def ask(method: str) -> None:
        with pytest.raises(ConnectionClosed):
            await client.request(method)
        failed.append(method)

    async with connected() as (client, peer):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "test/a")
            tg.start_soon(ask, "test/b")
            await peer.read()
            await peer.read()
            await peer.stream.aclose()
    assert sorted(failed) == ["test/a", "test/b"]


async def test_a_request_started_after_the_daemon_closed_fails_with_connection_closed():
    async with connected() as (client, peer):
        await peer.stream.aclose()
        await client.closed()
        with pytest.raises(ConnectionClosed):
            await client.request("ping")
        with pytest.raises(ConnectionClosed):
            await client.next_message(lambda m: True)

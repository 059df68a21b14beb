"""``oamd.client.Client`` against a daemon played by the test over memory streams: every waiter
ends once the connection closes, and each ``next_message`` waiter gets its own match."""

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


def note(key: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "test/note", "params": {"key": key}}


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


# ---- next_message ------------------------------------------------------------------------------


async def test_concurrent_next_message_waiters_each_get_their_own_match():
    got: dict[str, dict[str, Any]] = {}

    async def watch(key: str) -> None:
        got[key] = await client.next_message(lambda m: m["params"]["key"] == key)

    async with connected() as (client, peer):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch, "first")
            tg.start_soon(watch, "second")
            await anyio.wait_all_tasks_blocked()
            await peer.write(note("first"))
            await peer.write(note("second"))
    assert got == {"first": note("first"), "second": note("second")}


async def test_one_message_wakes_every_waiter_it_matches_once():
    woken: list[dict[str, Any]] = []

    async def watch() -> None:
        woken.append(await client.next_message(lambda m: True))

    async with connected() as (client, peer):
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(watch)
            await anyio.wait_all_tasks_blocked()
            await peer.write(note("only"))
    assert woken == [note("only")] * 3


async def test_next_message_waiters_fail_with_connection_closed_when_the_daemon_closes():
    failed = 0

    async def watch() -> None:
        nonlocal failed
        with pytest.raises(ConnectionClosed):
            await client.next_message(lambda m: False)
        failed += 1

    async with connected() as (client, peer):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            tg.start_soon(watch)
            await anyio.wait_all_tasks_blocked()
            await peer.write(note("unmatched"))
            await peer.stream.aclose()
    assert failed == 2

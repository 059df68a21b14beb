"""``Client.on_notification``: handlers by method, against a daemon played by the test. A plain
function sees its method's notifications as they are read, before the response read after them
is returned; an ``async def`` runs in its own task, in arrival order, and may await requests; a
raising handler costs that one message; ``remove()`` ends the deliveries; a busy handler holds at
most ``MAX_QUEUED_NOTIFICATIONS``."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import orjson
import pytest
from test_client import Peer, connected

from oamd.client import Client, Recorder
from oamd.client._notifications import MAX_QUEUED_NOTIFICATIONS
from oamd.transport import memory_stream_pair

pytestmark = pytest.mark.anyio


def changed(n: int) -> dict[str, Any]:
    params = {"world": "village", "subscription": "sub1", "path": "gold", "newValue": n}
    return {"jsonrpc": "2.0", "method": "world/changed", "params": params}


def other(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "test/note", "params": {"n": n}}


async def test_a_plain_handler_sees_its_methods_notifications_before_the_response_read_after_them():
    seen: list[int] = []
    async with connected() as (client, peer):
        client.on_notification("world/changed", lambda params: seen.append(params["newValue"]))

        async def daemon() -> None:
            request = await peer.read()
            for n in range(3):
                await peer.write(changed(n))
                await peer.write(other(n))
            await peer.write({"jsonrpc": "2.0", "id": request["id"], "result": {}})

        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon)
            assert await client.request("ping") == {}
            assert seen == [0, 1, 2]


async def test_an_async_handler_gets_every_notification_in_order_and_may_await_a_request():
    answers: list[tuple[int, Any]] = []
    done = anyio.Event()

    async def on_changed(params: dict[str, Any]) -> None:
        # a request from inside the handler: the reader goes on reading, so its answer arrives
        answers.append((params["newValue"], await client.request("ping")))
        if len(answers) == 3:
            done.set()

    async with connected() as (client, peer):
        client.on_notification("world/changed", on_changed)
        for n in range(3):
            await peer.write(changed(n))
        for _ in range(3):
            await peer.answer()
        await done.wait()
    assert answers == [(0, {}), (1, {}), (2, {})]


async def test_a_handler_registered_before_the_client_is_entered_is_called_once_it_is():
    seen: list[int] = []
    got = anyio.Event()

    async def on_changed(params: dict[str, Any]) -> None:
        seen.append(params["newValue"])
        got.set()

    ours, theirs = memory_stream_pair()
    client = Client(ours)
    client.on_notification("world/changed", on_changed)
    with anyio.fail_after(5):
        async with theirs, client:
            await Peer(theirs).write(changed(7))
            await got.wait()
    assert seen == [7]


@pytest.mark.parametrize("kind", ["plain", "async"])
async def test_a_raising_handler_costs_that_message_only_and_is_logged(kind, caplog):
    seen: list[int] = []
    last = anyio.Event()

    def note(params: dict[str, Any]) -> None:
        if params["newValue"] == 1:
            raise RuntimeError("the handler tripped")
        seen.append(params["newValue"])
        if params["newValue"] == 2:
            last.set()

    async def async_note(params: dict[str, Any]) -> None:
        note(params)

    others: list[int] = []
    async with connected() as (client, peer):
        client.on_notification("world/changed", note if kind == "plain" else async_note)
        client.on_notification("world/changed", lambda params: others.append(params["newValue"]))
        for n in range(3):
            await peer.write(changed(n))
        await last.wait()
        ping = client.request("ping")
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.answer)
            assert await ping == {}
    assert seen == [0, 2]
    assert others == [0, 1, 2]
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == "world/changed handler failed; that notification is skipped"
    assert "the handler tripped" in str(record.exc_info[1])


async def test_after_remove_a_handler_is_called_no_more():
    seen: list[int] = []
    async with connected(recorder=Recorder()) as (client, peer):
        remove = client.on_notification("world/changed", lambda p: seen.append(p["newValue"]))
        await peer.write(changed(0))
        await client.next_message(lambda m: m.get("params", {}).get("newValue") == 0)
        remove()
        remove()  # twice is harmless
        await peer.write(changed(1))
        await client.next_message(lambda m: m.get("params", {}).get("newValue") == 1)
    assert seen == [0]


async def test_a_plain_handler_returning_a_coroutine_is_logged_and_the_coroutine_closed(caplog):
    ran: list[int] = []

    async def sink(params: dict[str, Any]) -> None:
        ran.append(params["newValue"])  # never runs: nothing awaits it

    async with connected(recorder=Recorder()) as (client, peer):
        client.on_notification("world/changed", lambda params: sink(params))
        await peer.write(changed(0))
        await client.next_message(lambda m: m.get("method") == "world/changed")
    assert ran == []  # and no "never awaited" warning, which the suite turns into an error
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "returned an awaitable, which was not awaited; register an async def" in (
        record.getMessage()
    )


async def test_a_busy_async_handler_holds_at_most_its_limit_and_drops_one_more(caplog):
    seen: list[int] = []
    release = anyio.Event()
    first = anyio.Event()
    all_read = anyio.Event()
    all_handled = anyio.Event()
    total = MAX_QUEUED_NOTIFICATIONS + 2  # one held by the handler, the limit queued, one more

    async def slow(params: dict[str, Any]) -> None:
        first.set()
        await release.wait()
        seen.append(params["newValue"])
        if len(seen) == MAX_QUEUED_NOTIFICATIONS + 1:
            all_handled.set()

    def count(params: dict[str, Any]) -> None:
        if params["newValue"] == total - 1:
            all_read.set()

    async with connected() as (client, peer):
        client.on_notification("world/changed", slow)
        client.on_notification("world/changed", count)
        await peer.write(changed(0))
        await first.wait()  # the handler holds message 0; the rest queue behind it
        await peer.stream.send(b"".join(orjson.dumps(changed(n)) + b"\n" for n in range(1, total)))
        await all_read.wait()
        release.set()
        await all_handled.wait()
    assert seen == list(range(MAX_QUEUED_NOTIFICATIONS + 1))  # the last one was dropped
    dropped = [r for r in caplog.records if r.getMessage().startswith("dropped a world/changed")]
    assert len(dropped) == 1

"""The engine in-process: error boundary, exactly-once replies, tool/call routing."""

from __future__ import annotations

import gc
import weakref
from functools import partial

import anyio
import pytest
from conftest import memory_daemon

from oamd.bridge.state import BridgeState
from oamd.client import Client
from oamd.daemon import build_registry, default_config, serve_stream
from oamd.rpc import Deferred, Registry, Result
from oamd.transport import memory_stream_pair

pytestmark = pytest.mark.anyio


def registry_with(**handlers) -> Registry:
    config = default_config(test_methods=True)
    registry = build_registry(config)
    for name, handler in handlers.items():
        registry.register(name.replace("__", "/"), handler)
    return registry


async def test_handler_bug_becomes_internal_error_and_serving_continues():
    def broken(req):
        raise RuntimeError("boom")

    async def broken_later():
        raise KeyError("boom")

    registry = registry_with(x__broken=broken, x__later=lambda req: Deferred(broken_later))
    async with memory_daemon(registry=registry) as client:
        first = await client.call("x/broken")
        second = await client.call("x/later")
        assert first["error"]["code"] == second["error"]["code"] == -32603
        assert first["error"]["data"]["code"] == "internal_error"
        assert "boom" not in first["error"]["message"]
        assert await client.request("ping") == {}


async def test_tool_call_reply_resolves_while_the_reader_keeps_serving():
    def ask(req):
        conn = req.port

        async def work():
            call = conn.start_call(
                "tool/call",
                {"requestId": req.id, "call": {"id": "c1", "name": "x", "arguments": {}}},
            )
            reply = await call.wait()
            return {"echo": reply.result}

        return Deferred(work)

    async def tool_handler(params):
        return {"output": params["call"]["name"]}

    async with memory_daemon(
        registry=registry_with(x__ask=ask), tool_handler=tool_handler
    ) as client:
        with anyio.fail_after(5):
            assert await client.request("x/ask") == {"echo": {"output": "x"}}
        assert client.recorder.tool_calls[0]["id"] == "t-1"


async def test_every_request_is_answered_exactly_once_under_shutdown():
    async with memory_daemon() as client:
        ids = [await client.start("test/sleep", {"ms": 5 * (i % 4)}) for i in range(50)]
        shutdown = await client.start("shutdown")
        tail = [await client.start("ping") for _ in range(5)]
        with anyio.fail_after(5):
            await client.closed()  # the connection closes once shutdown's response is out
        answered = [m["id"] for m in client.recorder.received if "id" in m]
        assert len(answered) == len(set(answered))
        assert set(ids) | {shutdown} <= set(answered) <= set(ids) | {shutdown} | set(tail)
        assert max(answered.index(i) for i in ids) < answered.index(shutdown)
        late = [m for m in client.recorder.received if m.get("id") in tail]
        assert len(late) == len({m["id"] for m in late})  # read before closing: -32023, once each
        assert all(m["error"]["code"] == -32023 for m in late)


async def test_result_reply_is_sent_in_arrival_order():
    registry = registry_with(x__now=lambda req: Result({"n": req.params["n"]}))
    async with memory_daemon(registry=registry) as client:
        ids = [await client.start("x/now", {"n": i}) for i in range(100)]
        with anyio.fail_after(5):
            for msg_id in ids:
                await client.wait(msg_id)
        assert [m["result"]["n"] for m in client.recorder.received] == list(range(100))


async def test_every_waiter_for_in_flight_work_wakes_when_it_ends():
    """Two ``cancel_all`` at once (as shutdown's and the end-of-input drain's can be): both return
    as soon as the work has answered, not one of them only after the grace period."""
    started = anyio.Event()
    connections = []

    def hold(req):
        connections.append(req.port)

        async def work():
            started.set()
            try:
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0.2)  # both cancel_all calls are waiting by now

        return Deferred(work)

    registry = registry_with(x__hold=hold)
    async with memory_daemon(registry=registry) as client:
        held = await client.start("x/hold")
        with anyio.fail_after(5):
            await started.wait()
        conn = connections[0]
        returned = []

        async def cancel_all(name: str) -> None:
            await conn.cancel_all()
            returned.append(name)

        with anyio.fail_after(
            1
        ):  # SHUTDOWN_GRACE_SECONDS is 2: a forgotten waiter would sit it out
            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_all, "first")
                tg.start_soon(cancel_all, "second")
            assert (await client.wait(held))["error"]["data"]["code"] == "cancelled"
    assert sorted(returned) == ["first", "second"]


async def test_a_closed_connection_is_freed_by_a_young_collection_even_when_it_is_old():
    # a long-lived connection sits in the collector's oldest generation, which the serving
    # process's thresholds almost never collect: once closed, nothing old may hold it in a cycle
    # (its own bound method, the world store's change sink pointing back at it, the budget's room
    # check that its store and every world hold, a world's observer pointing at its store)
    config = default_config(test_methods=True)
    state = BridgeState(config)
    held: list[weakref.ref] = [weakref.ref(state)]

    def remember(req):
        held.append(weakref.ref(req.port))
        return Result({})

    registry = registry_with(x__remember=remember)
    ours, theirs = memory_stream_pair()
    gc.disable()  # no collection but the ones below
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(serve_stream, theirs, config, registry=registry, state=state))
            async with Client(ours) as client:
                with anyio.fail_after(5):
                    await client.request("x/remember")
                    await client.request("world/create", {"world": "w", "state": {"a": 1}})
                    await client.request("world/subscribe", {"world": "w", "path": "a"})
                    await client.request("session/create", {"model": "scripted"})
                    # an NPC holding the world: the world holds the budget's room check
                    await client.request(
                        "npc/create",
                        {"npc": "n", "persona": {"name": "N"}, "world": "w", "model": "scripted"},
                    )
                    worlds = state.part("game").worlds  # the game extension's, opened above
                    held += [weakref.ref(worlds), weakref.ref(worlds.get("w"))]
                    del worlds
                    gc.collect()  # as if it had served for hours: everything is old now
            # leaving the client closes its end: the connection answers, closes, returns
        del state, registry, remember
        gc.collect(0)  # what `oamd serve` runs after each connection (the youngest generation)
        assert [ref() for ref in held] == [None, None, None, None]
    finally:
        gc.enable()

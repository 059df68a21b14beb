"""Ordering guarantees (§2): arrival-order handling, deferred work, exactly one answer each."""

from __future__ import annotations

import anyio
import orjson
import pytest
from conftest import OAMD

from oamd.client import Recorder, connect_stdio

pytestmark = pytest.mark.anyio


async def test_pipelined_pings_are_not_held_up_by_a_sleeping_deferred_request():
    async with connect_stdio([*OAMD, "stdio", "--test-methods"], recorder=Recorder()) as client:
        lines = [
            orjson.dumps(
                {"jsonrpc": "2.0", "id": "sleeper", "method": "test/sleep", "params": {"ms": 400}}
            )
        ]
        for i in range(1000):
            lines.append(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}))
            if i == 500:
                lines.append(
                    orjson.dumps(
                        {"jsonrpc": "2.0", "id": "mid", "method": "test/sleep", "params": {"ms": 0}}
                    )
                )
        with anyio.fail_after(10):
            await client.send_raw(b"\n".join(lines) + b"\n")
            await client.next_message(lambda m: m.get("id") == "sleeper")
        ids = [m["id"] for m in client.recorder.received]
        assert sorted(i for i in ids if isinstance(i, int)) == list(range(1000))
        assert len(ids) == len(set(ids)) == 1002
        assert ids[-1] == "sleeper"  # completed last, everything else answered meanwhile
        pings = [i for i in ids if isinstance(i, int)]
        assert pings == list(range(1000))  # synchronous replies keep arrival order


async def test_a_request_after_a_slow_one_is_answered_first(client):
    slow = await client.start("test/sleep", {"ms": 200})
    fast = await client.start("test/sleep", {"ms": 0})
    with anyio.fail_after(5):
        await client.wait(slow)
        await client.wait(fast)
    ids = [m["id"] for m in client.recorder.received]
    assert ids == [fast, slow]


async def test_invalid_params_are_named_and_the_daemon_keeps_serving(client):
    reply = await client.call("test/sleep", {"ms": "soon"})
    assert reply["error"]["code"] == -32602
    assert "'ms'" in reply["error"]["message"]
    assert await client.request("ping") == {}

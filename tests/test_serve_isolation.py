"""``oamd serve`` with several clients: each has its own objects, the model is shared fairly, and
the connection limit turns the extra client away with one error line."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from serve_harness import read_line, read_to_end, serve

pytestmark = pytest.mark.anyio

GENERATION_MS = 150
"""Each scripted generation in the fairness test holds the single model slot this long."""


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


async def test_two_clients_with_the_same_session_ids_never_see_each_other():
    async with serve() as daemon, daemon.connect("unix") as a, daemon.connect("tcp") as b:
        with anyio.fail_after(5):
            for client, word in ((a, "alpha"), (b, "beta")):
                await client.request(
                    "session/create", {"session": "s", "model": scripted({"text": word})}
                )
                await client.request("world/create", {"world": "w", "state": {"who": word}})
            assert (await a.request("session/respond", {"session": "s", "prompt": "?"}))[
                "text"
            ] == "alpha"
            assert (await b.request("session/respond", {"session": "s", "prompt": "?"}))[
                "text"
            ] == "beta"
            assert (await a.request("world/get", {"world": "w", "path": "who"}))["value"] == "alpha"
            await a.request("session/delete", {"session": "s"})
            assert [s["session"] for s in (await b.request("session/list"))["sessions"]] == ["s"]
            assert (await a.request("session/list"))["sessions"] == []


async def test_a_client_that_queued_many_turns_does_not_starve_another():
    async with serve("--max-generations", "1") as daemon:
        async with daemon.connect() as chatty, daemon.connect("tcp") as quiet:
            with anyio.fail_after(10):
                slow = scripted({"text": "slow", "delayMs": GENERATION_MS})
                await quiet.request("session/create", {"session": "q", "model": slow})
                turns = []
                for i in range(6):
                    await chatty.request("session/create", {"session": f"c{i}", "model": slow})
                for i in range(6):
                    turns.append(
                        await chatty.start("session/respond", {"session": f"c{i}", "prompt": "go"})
                    )
                await chatty.request("ping")  # every chatty turn has been handed its work
                result = await quiet.request("session/respond", {"session": "q", "prompt": "go"})
                done_before = sum(1 for m in chatty.recorder.received if m.get("id") in turns)
                assert result["text"] == "slow"
                # round-robin: at most the chatty turn in progress and one more ran first;
                # a FIFO limiter would have run all six
                assert done_before <= 2
                for turn in turns:
                    assert (await chatty.wait(turn))["result"]["text"] == "slow"


async def test_a_client_flooding_pings_does_not_hold_up_another():
    flood = 50_000
    burst = b"".join(b'{"jsonrpc":"2.0","id":"f%d","method":"ping"}\n' % i for i in range(flood))
    async with serve() as daemon, daemon.connect() as chatty, daemon.connect("tcp") as quiet:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(chatty.send_raw, burst)  # blocks while the daemon reads it
                await chatty.next_message(lambda m: m.get("id") == "f0")
                assert await quiet.request("ping") == {}
                answered = sum(1 for m in chatty.recorder.received if m.get("result") == {})
            await chatty.next_message(lambda m: m.get("id") == f"f{flood - 1}")
        assert answered < flood  # the quiet client was answered in the middle of the flood


async def test_a_connection_beyond_the_limit_gets_one_error_line_and_is_closed():
    async with serve("--max-connections", "2") as daemon, daemon.connect() as first:
        async with daemon.connect("tcp"):
            stream = await daemon.raw()
            async with stream:
                with anyio.fail_after(5):
                    reply = await read_line(stream)
                    assert reply["id"] is None
                    assert reply["error"]["code"] == -32055
                    assert reply["error"]["data"] == {"code": "limit_reached", "limit": 2}
                    assert await read_to_end(stream) == b""
        with anyio.fail_after(5):
            while (await first.request("test/serverStats"))["connections"] > 1:
                pass  # each round trip lets the daemon finish closing the second client
        async with daemon.connect("tcp") as third:
            with anyio.fail_after(5):
                assert await third.request("ping") == {}


async def test_each_connection_has_its_own_session_limit():
    async with serve("--max-sessions", "2") as daemon, daemon.connect() as a, daemon.connect() as b:
        with anyio.fail_after(5):
            for client in (a, b):
                for name in ("x", "y"):
                    await client.request("session/create", {"session": name, "model": "scripted"})
            reply = await a.call("session/create", {"session": "z", "model": "scripted"})
            assert reply["error"]["data"]["code"] == "session_limit"

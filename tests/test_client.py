"""``oamd.client.Client`` against a daemon played by the test over memory streams: every waiter
ends once the connection closes, each ``next_message`` waiter gets its own match, a failing tool
handler costs one ``tool/call``, a bad line from the daemon costs nothing but itself, nothing is
kept per message without a ``Recorder``, and a request's notifications reach its callback before
its response."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
import pytest
from conftest import OAMD

from oamd.client import Client, ConnectionClosed, Recorder, RpcError, connect_stdio
from oamd.rpc.errors import CODES
from oamd.transport import memory_stream_pair

pytestmark = pytest.mark.anyio

OPEN_GATE = {
    "name": "open_gate",
    "description": "Open a named gate.",
    "parameters": {"type": "object", "properties": {"gate": {"type": "string"}}},
}


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


def tool_call(call_id: str) -> dict[str, Any]:
    call = {"id": f"call_{call_id}", "name": "open_gate", "arguments": {"gate": "north"}}
    return {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tool/call",
        "params": {"session": "guard", "requestId": 1, "call": call},
    }


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


# ---- tool handlers -----------------------------------------------------------------------------


async def test_a_raising_tool_handler_answers_that_call_with_an_error_and_the_client_goes_on(
    caplog: pytest.LogCaptureFixture,
):
    async def jammed(params: dict[str, Any]) -> dict[str, Any]:
        if params["call"]["id"] == "call_t-1":
            raise ValueError("the portcullis chain is jammed")
        return {"output": "opened"}

    async with connected(tool_handler=jammed) as (client, peer):
        with caplog.at_level(logging.ERROR, logger="oamd.client"):
            await peer.write(tool_call("t-1"))
            failed = await peer.read()
        await peer.write(tool_call("t-2"))
        answered = await peer.read()
        request = await client.start("ping")
        await peer.answer()
        assert (await client.wait(request))["result"] == {}
    assert failed == {
        "jsonrpc": "2.0",
        "id": "t-1",
        "error": {
            "code": CODES["internal_error"],
            "message": "The engine's tool handler failed: ValueError: the portcullis chain is jammed",
            "data": {"code": "internal_error"},
        },
    }
    assert answered == {"jsonrpc": "2.0", "id": "t-2", "result": {"output": "opened"}}
    [record] = caplog.records
    assert record.exc_info is not None and "t-1" in record.getMessage()


async def test_the_model_reads_a_raising_tool_handlers_error_as_the_calls_output(client):
    async def jammed(params: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("the portcullis chain is jammed")

    client.tool_handler = jammed
    gate = {"name": "open_gate", "arguments": {"gate": "north"}}
    steps = [{"toolCalls": [gate]}, {"template": "{toolOutput}"}]
    with anyio.fail_after(5):
        await client.request(
            "session/create",
            {
                "session": "guard",
                "tools": [OPEN_GATE],
                "model": {"type": "scripted", "steps": steps},
            },
        )
        result = await client.request("session/respond", {"session": "guard", "prompt": "Open."})
    message = "The engine's tool handler failed: ValueError: the portcullis chain is jammed"
    [record] = result["toolCalls"]
    assert (record["isError"], record["output"]) == (True, message)
    assert result["text"] == f"Error: {message}"


async def test_a_tool_cancel_cancels_its_running_handler_and_that_call_is_not_answered():
    cancelled: list[str] = []

    async def slow(params: dict[str, Any]) -> dict[str, Any]:
        if params["call"]["id"] == "call_t-1":
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append(params["call"]["id"])
                raise
        return {"output": "opened"}

    async with connected(tool_handler=slow) as (client, peer):
        await peer.write(tool_call("t-1"))
        await anyio.wait_all_tasks_blocked()
        cancel = {"session": "guard", "requestId": 1, "id": "t-1", "callId": "call_t-1"}
        await peer.write(
            {"jsonrpc": "2.0", "method": "tool/cancel", "params": cancel | {"reason": "timeout"}}
        )
        await peer.write(tool_call("t-2"))
        answered = await peer.read()  # the next line out: t-1 is never answered
        assert held(client) == 0
    assert answered == {"jsonrpc": "2.0", "id": "t-2", "result": {"output": "opened"}}
    assert cancelled == ["call_t-1"]


async def test_the_daemons_tool_timeout_cancels_the_engines_handler(client):
    cancelled = anyio.Event()

    async def stuck(params: dict[str, Any]) -> dict[str, Any]:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    client.tool_handler = stuck
    gate = {"name": "open_gate", "arguments": {"gate": "north"}}
    steps = [{"toolCalls": [gate]}, {"template": "{toolOutput}"}]
    with anyio.fail_after(5):
        await client.request(
            "session/create",
            {
                "session": "guard",
                "tools": [OPEN_GATE],
                "model": {"type": "scripted", "steps": steps},
                "options": {"toolTimeoutSeconds": 0.2},
            },
        )
        result = await client.request("session/respond", {"session": "guard", "prompt": "Open."})
        await cancelled.wait()
    [record] = result["toolCalls"]
    assert record["isError"] is True


async def test_a_tool_reply_that_cannot_be_encoded_becomes_an_error_reply_and_the_client_goes_on():
    async def odd(params: dict[str, Any]) -> dict[str, Any]:
        if params["call"]["id"] == "call_t-1":
            raise RpcError(-32000, "Gate subsystem offline", {"code": "offline", "at": object()})
        return {"output": "opened"}

    async with connected(tool_handler=odd) as (client, peer):
        await peer.write(tool_call("t-1"))
        failed = await peer.read()
        await peer.write(tool_call("t-2"))
        answered = await peer.read()
        assert await one_ping(client, peer) == {}
    assert (failed["id"], failed["error"]["data"]) == ("t-1", {"code": "internal_error"})
    assert answered == {"jsonrpc": "2.0", "id": "t-2", "result": {"output": "opened"}}


# ---- bad lines from the daemon ------------------------------------------------------------------

LINE_LIMIT = 64 * 1024
BAD_LINES = [
    b"not json",
    b"[1, 2]",
    b"42",
    b'"a string"',
    b"null",
    b"[" * 20_000 + b"]" * 20_000,
    b'{"jsonrpc": "2.0", "id": 999, "result": {}}',
    b'{"jsonrpc": "2.0", "id": [1], "result": {}}',
    b'{"jsonrpc": "2.0", "method": "tool/cancel", "params": {"id": {"no": "such call"}}}',
    b"x" * (LINE_LIMIT + 1),
]


async def test_bad_lines_from_the_daemon_are_skipped_and_every_waiter_still_gets_its_answer(
    caplog: pytest.LogCaptureFixture,
):
    async with connected(max_line_bytes=LINE_LIMIT) as (client, peer):
        request = await client.start("ping")
        sent = await peer.read()
        with caplog.at_level(logging.WARNING, logger="oamd.client"):
            for bad in BAD_LINES:
                await peer.stream.send(bad + b"\n")
            await peer.write({"jsonrpc": "2.0", "id": "x-1", "method": "game/pause"})
            refused = await peer.read()
            await peer.write({"jsonrpc": "2.0", "id": sent["id"], "result": {"pong": True}})
            assert (await client.wait(request))["result"] == {"pong": True}
        assert await one_ping(client, peer) == {}
    assert refused["id"] == "x-1"
    assert refused["error"]["data"] == {"code": "method_not_found", "method": "game/pause"}
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 7


async def one_ping(client: Client, peer: Peer) -> Any:
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.answer)
        return await client.request("ping")


# ---- what a client keeps -----------------------------------------------------------------------


def held(client: Client) -> int:
    """Items in every container the client holds (lists, dicts, sets in its attributes)."""
    return sum(len(v) for v in vars(client).values() if isinstance(v, list | dict | set))


async def one_round(client: Client, peer: Peer, n: int) -> None:
    """A request with a notification and a ``tool/call`` before its response."""
    request = await client.start("test/round")
    sent = await peer.read()
    await peer.write({**note(str(n)), "params": {"key": str(n), "requestId": sent["id"]}})
    await peer.write(tool_call(f"t-{n}"))
    await peer.read()  # the tool/call's reply
    await peer.write({"jsonrpc": "2.0", "id": sent["id"], "result": {}})
    await client.wait(request)


async def test_a_client_without_a_recorder_keeps_nothing_per_message():
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": "opened"}

    async with connected(tool_handler=answer) as (client, peer):
        await one_round(client, peer, 0)
        before = held(client)
        for n in range(1, 50):
            await one_round(client, peer, n)
        assert held(client) == before
        assert client.recorder is None


async def test_an_attached_recorder_keeps_the_traffic_in_arrival_order():
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": "opened"}

    recorder = Recorder()
    async with connected(tool_handler=answer, recorder=recorder) as (client, peer):
        await one_round(client, peer, 0)
        await one_round(client, peer, 1)
    kinds = [m.get("method", "response") for m in recorder.received]
    assert kinds == ["test/note", "tool/call", "response"] * 2
    assert [n["params"]["key"] for n in recorder.notifications] == ["0", "1"]
    assert [c["id"] for c in recorder.tool_calls] == ["t-0", "t-1"]
    assert recorder.sent_methods == {1: "test/round", 2: "test/round"}
    recorder.clear()
    assert (recorder.received, recorder.notifications, recorder.tool_calls) == ([], [], [])


# ---- a request's notifications -----------------------------------------------------------------


async def test_a_requests_notifications_reach_its_callback_before_its_response(
    caplog: pytest.LogCaptureFixture,
):
    seen: list[str] = []

    def on_notification(params: dict[str, Any]) -> None:
        seen.append(params["key"])
        if params["key"] == "bad":
            raise RuntimeError("a bug in the callback")

    async with connected() as (client, peer):
        async with anyio.create_task_group() as tg:

            async def play() -> None:
                sent = await peer.read()
                for key in ("one", "bad", "two"):
                    await peer.write({**note(key), "params": {"key": key, "requestId": sent["id"]}})
                await peer.write({**note("other"), "params": {"key": "x", "requestId": "else"}})
                await peer.write({"jsonrpc": "2.0", "id": sent["id"], "result": {"done": True}})

            tg.start_soon(play)
            with caplog.at_level(logging.ERROR, logger="oamd.client"):
                result = await client.request("test/turn", on_notification=on_notification)
    assert result == {"done": True}
    assert seen == ["one", "bad", "two"]
    [record] = caplog.records
    assert record.exc_info is not None


# ---- leaving the client ------------------------------------------------------------------------


async def test_an_error_raised_inside_the_client_leaves_it_unwrapped():
    with pytest.raises(LookupError, match="no such gate"):
        async with connected():
            raise LookupError("no such gate")


async def test_an_error_response_not_caught_inside_the_client_leaves_it_as_rpc_error():
    with pytest.raises(RpcError) as raised:
        async with connect_stdio([*OAMD, "stdio"]) as client:
            with anyio.fail_after(5):
                await client.request("session/respond", {"session": "nobody", "prompt": "?"})
    assert raised.value.name == "session_not_found"

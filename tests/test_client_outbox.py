"""One client, many tasks: every write of a connection goes through one writer (``_outbox``), so
concurrent requests over a real ``oamd serve`` socket are all answered, a model step calling
several client tools at once gets every reply, a raising tool handler costs one error output, a
queued line goes out whole, and a connection that fails on writing ends every waiter with
``ConnectionClosed``."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from anyio.abc import ByteStream
from serve_harness import serve

from oamd.client import Client, ConnectionClosed
from oamd.transport import memory_stream_pair

pytestmark = pytest.mark.anyio

CONCURRENT = 50
SESSIONS = 5
MIB = 1024 * 1024

GATE = {
    "name": "open_gate",
    "description": "Open a named gate.",
    "parameters": {"type": "object", "properties": {"gate": {"type": "string"}}},
}
GATES = ["north", "south", "east", "west"]


def one_round_of(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A script whose first step calls every tool in ``calls`` at once, then answers."""
    steps = [{"toolCalls": calls}, {"template": "{toolOutputs}"}]
    return {"type": "scripted", "steps": steps}


async def create_sessions(client: Client, **params: Any) -> list[str]:
    names = [f"s{i}" for i in range(SESSIONS)]
    for name in names:
        await client.request("session/create", {"session": name, **params})
    return names


async def answered_concurrently(client: Client, requests: list[tuple[str, dict[str, Any]]]) -> int:
    """Sends every request from its own task at once; the number answered with a result."""
    results: list[Any] = []

    async def one(method: str, params: dict[str, Any]) -> None:
        results.append(await client.request(method, params))

    async with anyio.create_task_group() as tg:
        for method, params in requests:
            tg.start_soon(one, method, params)
    return len(results)


# ---- many tasks, one connection ------------------------------------------------------------------


async def test_fifty_concurrent_pings_and_turns_over_tcp_are_all_answered():
    async with serve(unix=False) as daemon, daemon.connect("tcp") as client:
        with anyio.fail_after(60):
            sessions = await create_sessions(client, model="scripted")
            requests = [
                ("ping", {})
                if i % 2
                else ("session/respond", {"session": sessions[i % SESSIONS], "prompt": f"#{i}"})
                for i in range(CONCURRENT)
            ]
            assert await answered_concurrently(client, requests) == CONCURRENT
            assert await client.request("ping") == {}


async def test_fifty_concurrent_one_mib_prompts_over_a_unix_socket_are_all_answered():
    async with serve(tcp=False) as daemon, daemon.connect("unix") as client:
        with anyio.fail_after(120):
            sessions = await create_sessions(client, model="scripted")
            requests = [
                ("session/respond", {"session": sessions[i % SESSIONS], "prompt": "x" * MIB})
                for i in range(CONCURRENT)
            ]
            assert await answered_concurrently(client, requests) == CONCURRENT
            assert await client.request("ping") == {}


async def test_a_step_calling_four_client_tools_at_once_over_tcp_gets_every_reply():
    arrived: list[str] = []
    all_arrived = anyio.Event()

    async def open_gate(params: dict[str, Any]) -> dict[str, Any]:
        gate = params["call"]["arguments"]["gate"]
        arrived.append(gate)
        if len(arrived) == len(GATES):
            all_arrived.set()
        await all_arrived.wait()  # every call is running before any reply is sent
        return {"output": f"{gate} open"}

    calls = [{"name": "open_gate", "arguments": {"gate": g}} for g in GATES]
    async with serve(unix=False) as daemon, daemon.connect("tcp", tool_handler=open_gate) as client:
        with anyio.fail_after(30):
            await client.request(
                "session/create",
                {"session": "guard", "tools": [GATE], "model": one_round_of(calls)},
            )
            result = await client.request("session/respond", {"session": "guard", "prompt": "Go."})
            assert await client.request("ping") == {}
            again = await client.request("session/respond", {"session": "guard", "prompt": "Go."})
    outputs = sorted((r["output"], r["isError"]) for r in result["toolCalls"])
    assert outputs == sorted((f"{g} open", False) for g in GATES)
    assert again["text"] == "(script exhausted)"


async def test_tool_handlers_raising_in_a_parallel_round_become_error_outputs_and_the_client_lives():
    async def jammed_on_the_east(params: dict[str, Any]) -> dict[str, Any]:
        gate = params["call"]["arguments"]["gate"]
        if gate in ("east", "west"):
            raise RuntimeError(f"the {gate} chain is jammed")
        return {"output": f"{gate} open"}

    calls = [{"name": "open_gate", "arguments": {"gate": g}} for g in GATES]
    async with (
        serve(unix=False) as daemon,
        daemon.connect("tcp", tool_handler=jammed_on_the_east) as client,
    ):
        with anyio.fail_after(30):
            await client.request(
                "session/create",
                {"session": "guard", "tools": [GATE], "model": one_round_of(calls)},
            )
            result = await client.request("session/respond", {"session": "guard", "prompt": "Go."})
            assert await client.request("ping") == {}
    failed = "The engine's tool handler failed: RuntimeError: the {} chain is jammed"
    outputs = sorted((r["output"], r["isError"]) for r in result["toolCalls"])
    assert outputs == sorted(
        [("north open", False), ("south open", False)]
        + [(failed.format(g), True) for g in ("east", "west")]
    )


# ---- lines leave whole and in order --------------------------------------------------------------


class HeldWrites(ByteStream):
    """A memory stream whose writes each wait until the test lets one through."""

    def __init__(self, inner: ByteStream) -> None:
        self.inner = inner
        self.writing = anyio.Event()
        self.release = anyio.Event()

    async def send(self, item: bytes) -> None:
        self.writing.set()
        await self.release.wait()
        await self.inner.send(item)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self.inner.receive(max_bytes)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_a_queued_line_goes_out_whole_though_its_sender_is_cancelled_mid_write():
    ours, theirs = memory_stream_pair()
    held = HeldWrites(ours)
    big = "x" * (2 * MIB)  # past the high-water mark: the next sender waits for room
    with anyio.fail_after(5):
        async with theirs, Client(held) as client:
            with anyio.CancelScope() as senders:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.notify, "test/big", {"text": big})
                    await held.writing.wait()
                    tg.start_soon(client.notify, "test/waiting")
                    await anyio.wait_all_tasks_blocked()
                    senders.cancel()  # one line is being written, the other sender waits for room
            held.release.set()
            await client.notify("test/last")
            received = b""
            while received.count(b"\n") < 2:
                received += await theirs.receive()
    first, last = (orjson.loads(line) for line in received.splitlines())
    assert (first["method"], first["params"]["text"] == big) == ("test/big", True)
    assert last["method"] == "test/last"


async def test_lines_queued_just_before_leaving_the_client_are_written():
    ours, theirs = memory_stream_pair()
    with anyio.fail_after(5):
        async with theirs:
            async with Client(ours) as client:
                for n in range(3):
                    await client.notify("session/cancel", {"session": f"s{n}"})
            received = b""
            while received.count(b"\n") < 3:
                received += await theirs.receive()
    sessions = [orjson.loads(line)["params"]["session"] for line in received.splitlines()]
    assert sessions == ["s0", "s1", "s2"]


# ---- the connection fails --------------------------------------------------------------------------


class BrokenWrites(ByteStream):
    """A memory stream whose writes fail once ``broken`` is set, as a socket reset would."""

    def __init__(self, inner: ByteStream) -> None:
        self.inner = inner
        self.broken = False

    async def send(self, item: bytes) -> None:
        if self.broken:
            raise anyio.BrokenResourceError
        await self.inner.send(item)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self.inner.receive(max_bytes)

    async def send_eof(self) -> None:
        await self.inner.send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_the_daemon_closing_its_side_while_a_line_is_being_written_closes_the_client_cleanly():
    ours, theirs = memory_stream_pair()
    held = HeldWrites(ours)
    with anyio.fail_after(5):
        async with theirs, Client(held) as client:
            request = await client.start("ping")
            await held.writing.wait()
            await theirs.send_eof()  # the daemon's side ends while our line is still going out
            await client.closed()
            held.release.set()
            with pytest.raises(ConnectionClosed):
                await client.wait(request)
            assert orjson.loads(await theirs.receive())["method"] == "ping"


async def test_a_failed_write_ends_every_waiter_with_connection_closed_and_the_client_closes_cleanly():
    ours, theirs = memory_stream_pair()
    broken = BrokenWrites(ours)
    failed: list[str] = []

    async def expect_closed(name: str, waiting: Any) -> None:
        try:
            await waiting
        except ConnectionClosed:
            failed.append(name)

    with anyio.fail_after(5):
        async with theirs, Client(broken) as client:
            in_flight = await client.start("ping")  # sent, never answered
            async with anyio.create_task_group() as tg:
                tg.start_soon(expect_closed, "in flight", client.wait(in_flight))
                tg.start_soon(expect_closed, "watch", client.next_message(lambda m: False))
                await anyio.wait_all_tasks_blocked()
                broken.broken = True
                tg.start_soon(expect_closed, "new", client.request("ping"))
            await client.closed()
            with pytest.raises(ConnectionClosed):
                await client.request("ping")
    assert sorted(failed) == ["in flight", "new", "watch"]

"""Defects the protocol fuzzer found, each reduced to its few lines (tests/fuzz_minimize.py)."""

from __future__ import annotations

import anyio
import pytest
from serve_harness import line, read_line, serve

pytestmark = pytest.mark.anyio


async def test_a_shutdown_notification_does_not_hold_later_answers(client):
    """It has no response for the -32023 answers to wait behind: they go out at once, and the
    connection closes once the cancelled work has answered, as after a ``shutdown`` request."""
    with anyio.fail_after(5):
        await client.send_raw(
            b'{"jsonrpc":"2.0","method":"shutdown"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
        )
        reply = await client.next_message(lambda m: m.get("id") == 2)
        await client.closed()
    assert reply["error"]["code"] == -32023


@pytest.mark.parametrize("started_by", ["request", "notification"])
async def test_parallel_tool_calls_cut_by_a_disconnect_are_no_internal_error(started_by):
    """Two tool calls of one step both fail when the client disconnects; the group they fail in
    is answered (to nobody) as the protocol error it holds, never logged as an internal error —
    nor, for a turn a notification started, as a failure with a traceback (the soak found that
    one through the shipped executable)."""
    tools = [{"name": "a", "description": "A"}, {"name": "b", "description": "B"}]
    calls = [{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]
    model = {"type": "scripted", "steps": [], "fallback": {"toolCalls": calls}}
    respond = {
        "jsonrpc": "2.0",
        "method": "session/respond",
        "params": {"session": "s", "prompt": "go"},
    }
    if started_by == "request":
        respond["id"] = 2
    async with serve() as daemon:
        for _ in range(3):
            stream = await daemon.raw()
            async with stream:
                with anyio.fail_after(5):
                    create = {"session": "s", "tools": tools, "model": model}
                    await stream.send(
                        line(
                            {
                                "jsonrpc": "2.0",
                                "id": 1,
                                "method": "session/create",
                                "params": create,
                            }
                        )
                        + line(respond)
                    )
                    pending = bytearray()
                    while (message := await read_line(stream, pending)) is not None:
                        if message.get("method") == "tool/call":
                            break
        async with daemon.connect() as client:
            with anyio.fail_after(5):
                assert await client.request("ping") == {}
    logged = "\n".join(daemon.log)
    assert "internal_error" not in logged, logged[-2000:]
    assert "Traceback" not in logged, logged[-2000:]


async def test_a_turn_started_by_a_notification_calls_tools_with_a_null_request_id(client):
    """It has no id to name: its tool/call carries ``requestId: null`` (bridge.json's RequestId),
    and the engine's answer still reaches the turn."""
    tool = {"name": "open_gate", "description": "Opens a gate.", "parameters": {"type": "object"}}
    steps = [{"toolCalls": [{"name": "open_gate", "arguments": {}}]}, {"text": "done"}]
    model = {"type": "scripted", "steps": steps}
    with anyio.fail_after(5):
        await client.request("session/create", {"session": "s", "tools": [tool], "model": model})
        await client.notify("session/respond", {"session": "s", "prompt": "go", "stream": True})
        call = await client.next_message(lambda m: m.get("method") == "tool/call")
        await client.send({"jsonrpc": "2.0", "id": call["id"], "result": {"output": "opened"}})
        while (await client.request("session/list"))["sessions"][0]["entries"] < 4:
            await anyio.sleep(0.01)
    assert call["params"]["requestId"] is None

"""Protocol checks run the same over every real transport: an ``oamd stdio`` pipe, and ``oamd serve``
over a Unix socket and over loopback TCP (with the token), through one ``bridge`` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import orjson
import pytest
from conftest import OAMD, recording
from serve_harness import serve

from oamd.client import Client, connect_stdio

pytestmark = pytest.mark.anyio

MAX_LINE = 4096


async def open_gate(params: dict[str, Any]) -> dict[str, Any]:
    return {"output": f"the {params['call']['arguments']['gate']} gate is open"}


@pytest.fixture(params=["stdio", "unix", "tcp"])
async def bridge(request) -> AsyncIterator[Client]:
    async with AsyncExitStack() as stack:
        if request.param == "stdio":
            argv = [*OAMD, "stdio", "--test-methods", "--max-line-bytes", str(MAX_LINE)]
            client = await stack.enter_async_context(
                connect_stdio(argv, tool_handler=open_gate, **recording())
            )
        else:
            daemon = await stack.enter_async_context(serve("--max-line-bytes", str(MAX_LINE)))
            client = await stack.enter_async_context(
                daemon.connect(request.param, tool_handler=open_gate)
            )
        client.recorder.received.clear()
        yield client


async def exchange(client: Client, raw: bytes) -> dict[str, Any]:
    """Sends one raw line followed by a ping, returns the reply to the line (if any)."""
    marker = f"after-{client.next_id()}"
    await client.send_raw(raw + b"\n")
    await client.send_raw(orjson.dumps({"jsonrpc": "2.0", "id": marker, "method": "ping"}) + b"\n")
    with anyio.fail_after(5):
        await client.next_message(lambda m: m.get("id") == marker)
    replies = [m for m in client.recorder.received if m.get("id") != marker]
    client.recorder.received.clear()
    return replies[0] if replies else {}


def err(reply: dict[str, Any]) -> tuple[int, str, Any]:
    return reply["error"]["code"], reply["error"]["data"]["code"], reply["id"]


@pytest.mark.parametrize("msg_id", ["abc", 0, -3, 9007199254740991])
async def test_valid_ids_are_echoed_exactly(bridge, msg_id):
    reply = await exchange(bridge, orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "ping"}))
    assert reply == {"jsonrpc": "2.0", "id": msg_id, "result": {}}


async def test_an_invalid_envelope_is_rejected_echoing_a_valid_id(bridge):
    assert err(await exchange(bridge, b'{"jsonrpc":"1.0","id":1,"method":"ping"}')) == (
        -32600,
        "invalid_message",
        1,
    )


async def test_invalid_json_is_a_parse_error_with_null_id(bridge):
    assert err(await exchange(bridge, b"{")) == (-32700, "parse_error", None)


async def test_notifications_get_no_response(bridge):
    assert await exchange(bridge, b'{"jsonrpc":"2.0","method":"nope"}') == {}


async def test_an_oversized_line_is_rejected_and_the_connection_keeps_working(bridge):
    big = (
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * MAX_LINE * 4 + b'"}}'
    )
    assert err(await exchange(bridge, big)) == (-32600, "invalid_message", None)
    assert (await exchange(bridge, b'{"jsonrpc":"2.0","id":2,"method":"ping"}'))["result"] == {}


async def test_a_line_split_across_many_writes_is_reassembled(bridge):
    data = orjson.dumps({"jsonrpc": "2.0", "id": "split", "method": "ping"}) + b"\n"
    for i in range(len(data)):
        await bridge.send_raw(data[i : i + 1])
    with anyio.fail_after(5):
        assert (await bridge.next_message(lambda m: m.get("id") == "split"))["result"] == {}


async def test_a_turn_with_a_client_tool_round_trips_a_tool_call(bridge):
    model = {
        "type": "scripted",
        "steps": [
            {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
            {"template": "{toolOutput}"},
        ],
    }
    tool = {
        "name": "open_gate",
        "description": "Open a gate.",
        "parameters": {"type": "object", "properties": {"gate": {"type": "string"}}},
    }
    with anyio.fail_after(5):
        await bridge.request("session/create", {"session": "g", "model": model, "tools": [tool]})
        result = await bridge.request("session/respond", {"session": "g", "prompt": "Open it."})
    assert result["text"] == "the north gate is open"
    assert [c["params"]["call"]["name"] for c in bridge.recorder.tool_calls] == ["open_gate"]


async def test_a_cancel_before_the_commit_answers_cancelled(bridge):
    slow = {"type": "scripted", "steps": [{"text": "late", "delayMs": 10_000}]}
    with anyio.fail_after(5):
        await bridge.request("session/create", {"session": "s", "model": slow})
        turn = await bridge.start("session/respond", {"session": "s", "prompt": "Wait."})
        await bridge.request("session/cancel", {"session": "s"})
        assert (await bridge.wait(turn))["error"]["data"]["code"] == "cancelled"
        assert (await bridge.request("session/transcript", {"session": "s"}))["transcript"][
            "transcript"
        ]["entries"] == []


async def test_pipelined_requests_are_answered_in_arrival_order(bridge):
    ids = [f"p{i}" for i in range(50)]
    burst = b"".join(
        orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) + b"\n" for i in ids
    )
    await bridge.send_raw(burst)
    with anyio.fail_after(5):
        await bridge.next_message(lambda m: m.get("id") == ids[-1])
    assert [m["id"] for m in bridge.recorder.received] == ids


async def test_a_decision_by_likelihood_is_scored_on_every_transport(bridge):
    # under `oamd serve` every backend is wrapped for its fair share of the model: scoring must
    # reach the backend through the wrapper as generation does
    model = {
        "type": "scripted",
        "style": "envelope",
        "capabilities": {"compactPrompts": True, "scoresText": True},
        "steps": [{"scores": [-3.0, -0.2]}, {"raw": " it is only a baker's oven."}],
    }
    options = [
        {"id": "ring_alarm", "description": "ring the alarm bell"},
        {"id": "wait", "description": "keep watching"},
    ]
    with anyio.fail_after(10):
        result = await bridge.request(
            "decision/decide",
            {"situation": "Smoke rises from the market.", "options": options, "model": model},
        )
    assert result["optionID"] == "wait"
    assert result["reasoning"] == "Because it is only a baker's oven."

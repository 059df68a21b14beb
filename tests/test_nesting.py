"""Nesting limit (``MAX_JSON_DEPTH``): a line that nests arrays and objects deeper is answered
-32600 with id ``null`` and ``data.limit``, nothing in it reaches a handler, and the daemon keeps
serving; brackets inside strings do not count. Once, a 2 KiB line of 1,025 ``[`` killed it."""

from __future__ import annotations

import subprocess

import anyio
import orjson
import pytest
from conftest import OAMD, memory_daemon

from oamd.limits import MAX_JSON_DEPTH

pytestmark = pytest.mark.anyio

PING = b'{"jsonrpc":"2.0","id":"after","method":"ping"}\n'


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def ping_with(value: str, msg_id: int = 7) -> bytes:
    return f'{{"jsonrpc":"2.0","id":{msg_id},"method":"ping","params":{{"v":{value}}}}}\n'.encode()


def test_a_line_nested_1025_deep_is_refused_over_stdio_and_the_daemon_serves_on():
    done = subprocess.run(
        [*OAMD, "stdio"],
        input=nested(1025).encode() + b"\n" + PING,
        capture_output=True,
        timeout=30,
    )
    replies = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert replies[0] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": f"Invalid request: the JSON nests deeper than {MAX_JSON_DEPTH} levels.",
            "data": {"code": "invalid_message", "limit": MAX_JSON_DEPTH},
        },
    }
    assert replies[1] == {"jsonrpc": "2.0", "id": "after", "result": {}}
    assert done.returncode == 0 and b"Traceback" not in done.stderr


async def test_the_limit_itself_is_accepted_and_one_more_level_refused():
    async with memory_daemon() as client:
        with anyio.fail_after(5):
            # the envelope and params objects take two levels of the line
            await client.send_raw(ping_with(nested(MAX_JSON_DEPTH - 2), 1))
            await client.send_raw(ping_with(nested(MAX_JSON_DEPTH - 1), 2))
            await client.send_raw(PING)
            await client.next_message(lambda m: m.get("id") == "after")
    by_id = {m["id"]: m for m in client.recorder.received}
    assert by_id[1]["result"] == {}
    assert by_id[None]["error"]["data"] == {"code": "invalid_message", "limit": MAX_JSON_DEPTH}
    assert 2 not in by_id  # refused with id null: nothing of it reached a handler


async def test_brackets_inside_strings_do_not_count():
    text = '"' + "[{" * 400 + '\\"]}' + '"'
    async with memory_daemon() as client:
        with anyio.fail_after(5):
            await client.send_raw(ping_with(text))
            reply = await client.next_message(lambda m: m.get("id") == 7)
    assert reply["result"] == {}


async def test_a_deep_tool_call_reply_is_refused_and_the_turn_goes_on_waiting():
    """A reply to our ``tool/call`` nested too deep never resolves the call; a good one does."""
    tool = {"name": "look", "parameters": {"type": "object", "properties": {}}}
    script = {"type": "scripted", "steps": [{"toolCalls": [{"name": "look"}]}, {"text": "Ok."}]}
    async with memory_daemon() as client:
        with anyio.fail_after(5):
            await client.request(
                "session/create", {"session": "s", "tools": [tool], "model": script}
            )
            turn = await client.start("session/respond", {"session": "s", "prompt": "Look."})
            call = await client.next_message(lambda m: m.get("method") == "tool/call")
            deep = f'{{"jsonrpc":"2.0","id":"{call["id"]}","result":{{"output":{nested(200)}}}}}\n'
            await client.send_raw(deep.encode())
            refused = await client.next_message(lambda m: "error" in m and m["id"] is None)
            assert refused["error"]["code"] == -32600
            good = {"jsonrpc": "2.0", "id": call["id"], "result": {"output": "a jar"}}
            await client.send_raw(orjson.dumps(good) + b"\n")
            result = (await client.wait(turn))["result"]
    assert result["toolCalls"][0]["output"] == "a jar"

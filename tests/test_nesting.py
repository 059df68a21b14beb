"""Nesting limit (``MAX_JSON_DEPTH``): a line that nests arrays and objects deeper is answered
-32600 with id ``null`` and ``data.limit``, nothing in it reaches a handler, and the daemon keeps
serving; brackets inside strings do not count. Once, a 2 KiB line of 1,025 ``[`` killed it."""

from __future__ import annotations

import subprocess

import anyio
import orjson
import pytest
from conftest import OAMD, memory_daemon
from hypothesis import given, settings
from hypothesis import strategies as st

from oamd.jsonvalue import nests_deeper_than
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


def _walked(data: bytes, limit: int) -> bool:
    """The nesting rule by its definition: every bracket outside strings, one at a time."""
    import re

    depth = 0
    text = re.sub(rb'"(?:[^"\\]|\\.)*"', b'""', data)
    for bracket in re.findall(rb"[\[\]{}]", text):
        depth += 1 if bracket in (b"[", b"{") else -1
        if depth > limit:
            return True
    return False


@given(st.binary(max_size=300).map(lambda b: bytes(b'[]{}"x\\'[c % 7] for c in b)))
@settings(max_examples=300, deadline=None)
def test_the_quick_nesting_check_agrees_with_walking_every_bracket(data: bytes):
    for limit in (1, 2, 3, 5, 128):
        assert nests_deeper_than(data, limit) == _walked(data, limit)


async def test_a_line_of_a_megabyte_or_more_is_checked_and_decoded_off_the_event_loop(monkeypatch):
    # a 14 MiB line of brackets took the event loop 1.2 s to check: every other client waited
    import threading

    import oamd.rpc.connection as connection

    seen: list[str] = []
    check = connection.check_nesting

    def watched(line: bytes) -> None:
        seen.append(threading.current_thread().name)
        check(line)

    monkeypatch.setattr(connection, "check_nesting", watched)
    flat = "[" + "[]," * (connection.DECODE_IN_THREAD_BYTES // 3) + "[]]"
    async with memory_daemon() as client:
        with anyio.fail_after(20):
            await client.request("ping", {"v": json_value(flat)})
            await client.request("ping")
    assert seen[0] != threading.main_thread().name  # the long line, in a worker thread
    assert seen[1] == threading.main_thread().name  # a short one stays on the loop


def json_value(text: str) -> object:
    return orjson.loads(text)

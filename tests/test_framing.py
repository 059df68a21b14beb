"""Framing (§1) against a real ``oamd stdio`` subprocess: ids, envelopes, errors, line limits."""

from __future__ import annotations

import os
import sys

import anyio
import orjson
import pytest
from conftest import OAMD, recording

from oamd.client import Recorder, connect_stdio

pytestmark = pytest.mark.anyio

MAX_LINE = 4096


@pytest.fixture
async def stdio():
    argv = [*OAMD, "stdio", "--test-methods", "--max-line-bytes", str(MAX_LINE)]
    async with connect_stdio(argv, **recording()) as client:
        yield client


async def exchange(client, line: bytes) -> dict:
    """Sends one raw line followed by a ping, returns the reply to the line (if any)."""
    marker = f"after-{client.next_id()}"
    await client.send_raw(line + b"\n")
    await client.send_raw(orjson.dumps({"jsonrpc": "2.0", "id": marker, "method": "ping"}) + b"\n")
    with anyio.fail_after(5):
        await client.next_message(lambda m: m.get("id") == marker)
    replies = [m for m in client.recorder.received if m.get("id") != marker]
    client.recorder.received.clear()
    return replies[0] if replies else {}


def err(reply: dict) -> tuple[int, str, object]:
    return reply["error"]["code"], reply["error"]["data"]["code"], reply["id"]


@pytest.mark.parametrize("msg_id", ["abc", "", 0, 7, -3, 9007199254740991, -9007199254740991])
async def test_valid_ids_are_echoed_exactly(stdio, msg_id):
    line = orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "ping"})
    reply = await exchange(stdio, line)
    assert reply == {"jsonrpc": "2.0", "id": msg_id, "result": {}}


async def test_integral_float_id_is_echoed_as_plain_digits(stdio):
    await stdio.send_raw(b'{"jsonrpc":"2.0","id":5.0,"method":"ping"}\n')
    with anyio.fail_after(5):
        await stdio.next_message(lambda m: "id" in m)
    assert stdio.recorder.received[0]["id"] == 5


@pytest.mark.parametrize(
    "raw_id",
    [
        b"9007199254740992",
        b"-9007199254740992",
        b"1e300",
        b"1e400",
        b"123456789012345678901234567890",
    ],
)
async def test_numeric_ids_beyond_2_pow_53_are_invalid_with_null_id(stdio, raw_id):
    reply = await exchange(stdio, b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"ping"}')
    assert err(reply) == (-32600, "invalid_message", None)


@pytest.mark.parametrize("raw_id", [b"null", b"true", b"{}", b"[1]"])
async def test_null_bool_and_structured_ids_are_rejected(stdio, raw_id):
    reply = await exchange(stdio, b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"ping"}')
    assert err(reply) == (-32600, "invalid_message", None)


@pytest.mark.parametrize(
    "line",
    [
        b'{"id":1,"method":"ping"}',
        b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
        b'{"jsonrpc":2.0,"id":1,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":5}',
        b'{"jsonrpc":"2.0","id":1,"method":""}',
        b'{"jsonrpc":"2.0","id":1}',
        b'{"jsonrpc":"2.0","id":1.0,"method":7}',
    ],
)
async def test_invalid_envelopes_are_rejected_echoing_a_valid_id(stdio, line):
    reply = await exchange(stdio, line)
    assert err(reply) == (-32600, "invalid_message", 1)


async def test_a_notification_or_reply_without_jsonrpc_is_still_answered_with_null_id(stdio):
    reply = await exchange(stdio, b'{"method":"ping"}')
    assert err(reply) == (-32600, "invalid_message", None)
    reply = await exchange(stdio, b'{"jsonrpc":"2.0","result":{}}')
    assert err(reply) == (-32600, "invalid_message", None)


@pytest.mark.parametrize("params", [b"[1,2]", b'"x"', b"3", b"true"])
async def test_params_that_are_not_an_object_are_invalid_params(stdio, params):
    reply = await exchange(
        stdio, b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + params + b"}"
    )
    assert err(reply) == (-32602, "invalid_params", 1)
    assert reply["error"]["message"] == "params must be an object."


async def test_unknown_method_is_reported_before_bad_params(stdio):
    reply = await exchange(stdio, b'{"jsonrpc":"2.0","id":1,"method":"npc/dance","params":[1]}')
    assert err(reply) == (-32601, "method_not_found", 1)


async def test_fractional_ids_are_echoed_as_sent(stdio):
    reply = await exchange(stdio, b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}')
    assert reply == {"jsonrpc": "2.0", "id": 1.5, "result": {}}


async def test_duplicate_ids_are_each_answered(stdio):
    await stdio.send_raw(b'{"jsonrpc":"2.0","id":"d","method":"test/sleep","params":{"ms":50}}\n')
    await stdio.send_raw(b'{"jsonrpc":"2.0","id":"d","method":"ping"}\n')
    with anyio.fail_after(5):
        await stdio.next_message(lambda m: m.get("result") == {"slept": 50})
    assert [m["id"] for m in stdio.recorder.received] == ["d", "d"]


async def test_batches_are_rejected(stdio):
    reply = await exchange(stdio, b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
    assert err(reply) == (-32600, "invalid_message", None)
    assert "Batch" in reply["error"]["message"]


@pytest.mark.parametrize(
    "line", [b"{", b"not json", b'{"a":1}}', b"\xff\xfe", b'{"jsonrpc":"2.0","id":NaN}']
)
async def test_invalid_json_is_a_parse_error_with_null_id(stdio, line):
    reply = await exchange(stdio, line)
    assert err(reply) == (-32700, "parse_error", None)


async def test_non_object_json_is_invalid_message(stdio):
    reply = await exchange(stdio, b"42")
    assert err(reply) == (-32600, "invalid_message", None)


async def test_unknown_method_names_it_in_data(stdio):
    reply = await exchange(stdio, b'{"jsonrpc":"2.0","id":"u","method":"nope/nothing"}')
    assert err(reply) == (-32601, "method_not_found", "u")
    assert reply["error"]["data"]["method"] == "nope/nothing"


async def test_notifications_get_no_response_even_when_unknown_or_invalid(stdio):
    assert await exchange(stdio, b'{"jsonrpc":"2.0","method":"ping"}') == {}
    assert await exchange(stdio, b'{"jsonrpc":"2.0","method":"nope"}') == {}
    assert (
        await exchange(
            stdio, b'{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"9"}}'
        )
        == {}
    )


async def test_blank_lines_are_ignored(stdio):
    assert await exchange(stdio, b"") == {}
    assert await exchange(stdio, b"   \t ") == {}
    assert await exchange(stdio, b"\r") == {}


async def test_absent_and_null_params_mean_empty_object(stdio):
    assert (await exchange(stdio, b'{"jsonrpc":"2.0","id":1,"method":"ping","params":null}'))[
        "result"
    ] == {}
    reply = await exchange(stdio, b'{"jsonrpc":"2.0","id":2,"method":"initialize"}')
    assert reply["result"]["protocolVersion"] == "1.0"


async def test_null_members_are_treated_as_absent(stdio):
    line = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":null,"client":null}}'
    assert (await exchange(stdio, line))["result"]["protocolVersion"] == "1.0"


async def test_crlf_line_endings_are_accepted(stdio):
    reply = await exchange(stdio, b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r')
    assert reply == {"jsonrpc": "2.0", "id": "crlf", "result": {}}


async def test_an_oversized_line_is_rejected_and_the_connection_keeps_working(stdio):
    big = (
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
        + b"x" * (MAX_LINE * 4)
        + b'"}}'
    )
    reply = await exchange(stdio, big)
    assert err(reply) == (-32600, "invalid_message", None)
    assert str(MAX_LINE) in reply["error"]["message"]
    assert (await exchange(stdio, b'{"jsonrpc":"2.0","id":2,"method":"ping"}'))["result"] == {}


async def test_a_line_split_across_many_writes_is_reassembled(stdio):
    line = orjson.dumps({"jsonrpc": "2.0", "id": "split", "method": "ping"}) + b"\n"
    for i in range(len(line)):
        await stdio.send_raw(line[i : i + 1])
    with anyio.fail_after(5):
        reply = await stdio.next_message(lambda m: m.get("id") == "split")
    assert reply["result"] == {}


async def test_output_is_valid_utf8_even_for_lone_surrogates(stdio):
    line = b'{"jsonrpc":"2.0","id":"\\ud800x","method":"ping"}\n'
    await stdio.send_raw(line)
    with anyio.fail_after(5):
        reply = await stdio.next_message(lambda m: "id" in m)
    assert reply["id"] == "\ud800x"


async def test_responses_to_unknown_tool_calls_are_dropped_silently(stdio):
    assert await exchange(stdio, b'{"jsonrpc":"2.0","id":"t-99","result":{"output":"x"}}') == {}
    assert (
        await exchange(stdio, b'{"jsonrpc":"2.0","id":"t-98","error":{"code":1,"message":"m"}}')
        == {}
    )


async def test_end_of_input_exits_zero():
    async with connect_stdio([*OAMD, "stdio"]) as client:
        assert await client.request("ping") == {}
        await client._stream.send_eof()
        with anyio.fail_after(5):
            await client.closed()
            assert await client.process.wait() == 0


async def test_shutdown_exits_zero_after_delivering_its_response():
    async with connect_stdio([*OAMD, "stdio", "--test-methods"]) as client:
        sleeper = await client.start("test/sleep", {"ms": 60_000})
        with anyio.fail_after(5):
            assert await client.request("shutdown") == {}
            assert (await client.wait(sleeper))["error"]["data"]["code"] == "cancelled"
            assert await client.process.wait() == 0


async def test_stdout_carries_protocol_lines_only_even_when_code_prints():
    code = (
        "import sys, oamd.bridge.core as core\n"
        "from oamd.rpc import Result\n"
        "orig = core.register\n"
        "def register(registry):\n"
        "    orig(registry)\n"
        "    def noisy(req):\n"
        "        print('stray print'); import os; os.write(1, b'raw fd write\\n')\n"
        "        return Result({'ok': True})\n"
        "    registry.register('test/noisy', noisy)\n"
        "core.register = register\n"
        "from oamd.cli import main\n"
        "sys.exit(main(['stdio']))\n"
    )
    async with connect_stdio([sys.executable, "-c", code], recorder=Recorder()) as client:
        assert await client.request("test/noisy") == {"ok": True}
        assert await client.request("ping") == {}
    assert all("jsonrpc" in m for m in client.recorder.received)


@pytest.mark.parametrize("redirect", ["stdin", "stdout"])
def test_dev_null_as_stdin_or_stdout_is_served_without_a_traceback(redirect, tmp_path):
    """epoll refuses /dev/null: it is read or written through the thread fallback instead."""
    import subprocess

    line = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    source = tmp_path / "in.jsonl"
    source.write_bytes(line)
    with open(os.devnull, "r+b") as null, open(source, "rb") as lines:
        done = subprocess.run(
            [*OAMD, "stdio"],
            stdin=null if redirect == "stdin" else lines,
            stdout=null if redirect == "stdout" else subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=30,
        )
    assert done.returncode == 0
    assert b"Traceback" not in done.stderr and b"Error" not in done.stderr
    if redirect == "stdout":
        return
    assert done.stdout == b""  # nothing was asked


@pytest.mark.parametrize(
    ("data", "answered"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"}', [1]),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"}\r', [1]),
        (  # the end-of-input rule: deferred work of the last line is still answered
            b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"test/sleep","params":{"ms":50}}',
            [1, 2],
        ),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n' + b"x" * (MAX_LINE + 1), [1, None]),
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n  ', [1]),  # blank, as any blank line
    ],
    ids=["only-line", "crlf", "deferred", "oversized", "blank"],
)
def test_a_last_line_without_a_newline_is_a_line_and_answered_before_exit_zero(data, answered):
    import subprocess

    done = subprocess.run(
        [*OAMD, "stdio", "--test-methods", "--max-line-bytes", str(MAX_LINE)],
        input=data,
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0
    replies = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert [m["id"] for m in replies] == answered
    assert all("result" in m for m in replies if m["id"] is not None)
    if None in answered:
        assert replies[-1]["error"]["data"]["limit"] == MAX_LINE

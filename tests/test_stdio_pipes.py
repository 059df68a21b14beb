"""``oamd stdio`` over the pipes a launcher may hand it: non-blocking ones are served like blocking
ones; the blocking mode of each (a flag of the open file description the parent shares) is as the
parent set it once the daemon is gone; and what the event loop still buffers at the end is written
before the daemon exits."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import orjson
import pytest
from conftest import OAMD

GATE_TOOL = {"name": "open_gate", "description": "Open a gate.", "parameters": {"type": "object"}}
CALL_GATE = {"toolCalls": [{"name": "open_gate", "arguments": {}}]}

INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1.0"}}\n'
PINGS = 2000  # about 80 KB of answers: more than a pipe holds, so writes find it full
REQUESTS = (
    INITIALIZE
    + b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % i for i in range(2, PINGS + 2))
    + b'{"jsonrpc":"2.0","id":"sleep","method":"test/sleep","params":{"ms":10}}\n'
)


@pytest.mark.parametrize("blocking", [False, True], ids=["non-blocking", "blocking"])
def test_pipes_are_served_alike_in_either_mode_and_left_in_the_parents_mode(blocking):
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.set_blocking(in_r, blocking)
    os.set_blocking(out_w, blocking)
    process = subprocess.Popen(
        [*OAMD, "stdio", "--test-methods"], stdin=in_r, stdout=out_w, stderr=subprocess.PIPE
    )
    # in_r and out_w stay open here: their flags are the ones the daemon shares with us

    def feed() -> None:
        os.write(in_w, REQUESTS)
        os.close(in_w)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        output = b""
        while output.count(b"\n") < PINGS + 2:  # our copy of out_w keeps the pipe from ending
            output += os.read(out_r, 65536)
        assert process.wait(timeout=30) == 0
        ids = [orjson.loads(line)["id"] for line in output.splitlines()]
        assert sorted(ids[:-1]) == list(range(1, PINGS + 2)) and ids[-1] == "sleep"
        assert os.get_blocking(in_r) is blocking
        assert os.get_blocking(out_w) is blocking
    finally:
        writer.join()
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        assert b"Traceback" not in process.stderr.read()
        process.stderr.close()
        for fd in (in_r, out_r, out_w):
            os.close(fd)


CLOSE_WITH_BUFFERED_OUTPUT = """
import os, anyio
from oamd.transport import stdio_stream

async def main():
    async with stdio_stream() as stream:
        assert stream.send_nowait(b"x" * %d)  # the pipe takes 64 KiB; asyncio buffers the rest
        os.write(2, b"closing\\n")

anyio.run(main)
"""


def test_output_the_event_loop_still_buffers_at_the_end_is_written_before_exit():
    size = 1 << 20
    process = subprocess.Popen(
        [sys.executable, "-c", CLOSE_WITH_BUFFERED_OUTPUT % size],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        assert process.stderr.readline() == b"closing\n"  # nothing read yet: most is buffered
        assert len(process.stdout.read()) == size
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()


def test_a_tool_reply_sent_before_its_call_is_dropped_with_a_warning_that_says_why():
    # protocol/examples/guard-and-gate.jsonl piped in one go: the t-1 reply arrives before the
    # daemon sends tool/call t-1, so the turn misses it (and shutdown cancels it)
    example = os.path.join(os.path.dirname(__file__), "..", "protocol", "examples")
    with open(os.path.join(example, "guard-and-gate.jsonl"), "rb") as lines:
        done = subprocess.run(
            [*OAMD, "stdio"], stdin=lines, capture_output=True, timeout=60, check=False
        )
    assert done.returncode == 0
    (logged,) = [orjson.loads(line) for line in done.stderr.splitlines()]
    assert logged["event"] == "reply_to_unknown_request_dropped" and logged["id"] == "t-1"
    assert logged["level"] == "warning" and "only once it has arrived" in logged["hint"]


def test_a_late_tool_reply_is_dropped_quietly():
    # the tool times out (0.2 s), tool/call t-1 was sent: its late reply is expected noise
    create = {"session": "guard", "tools": [GATE_TOOL], "options": {"toolTimeoutSeconds": 0.2}}
    create["model"] = {"type": "scripted", "steps": [CALL_GATE, {"text": "Shut."}]}
    process = subprocess.Popen(
        [*OAMD, "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "session/create", "params": create},
        {"jsonrpc": "2.0", "id": 2, "method": "session/respond",
         "params": {"session": "guard", "prompt": "Open!"}},
    ):  # fmt: skip
        process.stdin.write(orjson.dumps(message) + b"\n")
    process.stdin.flush()
    answered = [orjson.loads(process.stdout.readline())]
    while answered[-1].get("id") != 2:  # the create, tool/call t-1, its tool/cancel, the turn
        answered.append(orjson.loads(process.stdout.readline()))
    assert [m.get("id") for m in answered] == [1, "t-1", None, 2]
    process.stdin.write(b'{"jsonrpc":"2.0","id":"t-1","result":{"output":"late"}}\n')
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0
    assert b"reply_to_unknown_request_dropped" not in err  # info: below the default level

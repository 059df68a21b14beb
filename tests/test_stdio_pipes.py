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

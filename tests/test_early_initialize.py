"""``oamd stdio`` answers a leading ``initialize`` before its event loop starts: the same answer the
connection would give, written first, and every byte after it handed to the connection; anything
else is left to the connection untouched."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import orjson
import pytest
from conftest import OAMD

from oamd.backends.base import Availability, LanguageModel
from oamd.bridge.state import BridgeState
from oamd.daemon import build_registry, default_config
from oamd.daemon.early_initialize import answer_initialize

INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1.0"}}\n'
PING = b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n'


def early(data: bytes, config=None, **options) -> tuple[bytes, bytes]:
    """What ``answer_initialize`` wrote and what it handed on, reading ``data`` from a pipe."""
    config = config or default_config()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        os.write(in_w, data)
        os.close(in_w)  # all written: the read sees the data, or end of input
        in_w = -1
        rest = answer_initialize(
            build_registry(config), BridgeState(config), in_r, out_w, **options
        )
        os.close(out_w)
        out_w = -1
        written = b""
        while chunk := os.read(out_r, 65536):
            written += chunk
        return written, rest
    finally:
        for fd in (in_r, in_w, out_r, out_w):
            if fd >= 0:
                os.close(fd)


def test_a_leading_initialize_is_answered_and_the_rest_handed_on():
    written, rest = early(INITIALIZE + PING + b'{"jsonrpc":"2.0","id":3,"meth')
    answer = orjson.loads(written)
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == "1.0"
    assert "npc/talk" in answer["result"]["capabilities"]["methods"]
    assert rest == PING + b'{"jsonrpc":"2.0","id":3,"meth'


@pytest.mark.parametrize(
    "data",
    [
        PING + INITIALIZE,  # another method first: the connection answers in arrival order
        INITIALIZE[:-1],  # no complete line yet
        b'{"jsonrpc":"2.0","id":1.5,"method":"initialize"}\n',  # an id the envelope refuses
        b'{"jsonrpc":"2.0","method":"initialize"}\n',  # a notification
        b"not json\n",
        b"",  # end of input
    ],
    ids=["ping-first", "partial", "bad-id", "notification", "garbage", "eof"],
)
def test_anything_else_is_handed_on_untouched_and_unanswered(data):
    assert early(data) == (b"", data)


def test_a_refused_version_is_answered_with_the_connections_error():
    line = b'{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"2.0"}}\n'
    written, rest = early(line)
    error = orjson.loads(written)["error"]
    assert error["code"] == -32602 and "Unsupported protocol version '2.0'" in error["message"]
    assert rest == b""


class SlowModel(LanguageModel):
    """A model whose availability needs I/O (nothing known up front)."""

    async def availability(self) -> Availability:
        return Availability(available=True)

    async def generate(self, request):  # pragma: no cover - never asked here
        raise NotImplementedError
        yield


def test_an_answer_that_needs_io_is_left_to_the_connection():
    assert early(INITIALIZE + PING, default_config(SlowModel())) == (b"", INITIALIZE + PING)


def run_stdio(data: bytes) -> list[dict]:
    done = subprocess.run([*OAMD, "stdio"], input=data, capture_output=True, timeout=30, check=True)
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def test_over_stdio_the_early_answer_equals_the_connections_and_comes_first():
    early_first = run_stdio(INITIALIZE + PING)
    via_connection = run_stdio(PING + INITIALIZE)
    assert [m["id"] for m in early_first] == [1, 2]
    assert [m["id"] for m in via_connection] == [2, 1]
    assert early_first[0] == via_connection[1]


def test_stdio_serves_on_after_an_early_answer_split_across_writes():
    """Bytes of the next line that arrived with the first read are not lost."""
    process = subprocess.Popen(
        [*OAMD, "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(INITIALIZE + PING[:10])
        process.stdin.flush()
        assert orjson.loads(process.stdout.readline())["id"] == 1
        process.stdin.write(PING[10:])
        process.stdin.close()
        assert orjson.loads(process.stdout.readline()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()


@pytest.mark.parametrize("position", ["first", "second"])
def test_an_initialize_longer_than_max_line_bytes_is_refused_wherever_it_comes(position):
    limit = len(INITIALIZE) - 2  # the line without its newline is one byte too long
    data = INITIALIZE + PING if position == "first" else PING + INITIALIZE
    done = subprocess.run(
        [*OAMD, "stdio", "--max-line-bytes", str(limit)],
        input=data,
        capture_output=True,
        timeout=30,
        check=True,
    )
    replies = {m["id"]: m for m in map(orjson.loads, done.stdout.splitlines())}
    assert replies.keys() == {None, 2}
    assert replies[None]["error"]["code"] == -32600
    assert replies[None]["error"]["data"]["limit"] == limit


def test_an_initialize_of_exactly_max_line_bytes_is_answered_early():
    written, rest = early(INITIALIZE + PING, max_line_bytes=len(INITIALIZE) - 1)
    assert orjson.loads(written)["id"] == 1 and rest == PING


def test_a_non_blocking_stdin_found_empty_is_waited_for():
    """An engine may hand over a non-blocking pipe with nothing in it yet."""
    config = default_config()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.set_blocking(in_r, False)

    def arrive_when_found_empty(frame, event, arg):
        if event == "c_exception" and arg is os.read:  # the daemon read an empty pipe
            os.write(in_w, INITIALIZE + PING)

    try:
        sys.setprofile(arrive_when_found_empty)
        try:
            rest = answer_initialize(build_registry(config), BridgeState(config), in_r, out_w)
        finally:
            sys.setprofile(None)
        assert rest == PING
        assert orjson.loads(os.read(out_r, 65536))["id"] == 1
        assert not os.get_blocking(in_r)  # the flag belongs to the parent's pipe too
    finally:
        for fd in (in_r, in_w, out_r, out_w):
            os.close(fd)


def test_a_full_non_blocking_stdout_is_waited_for_and_the_answer_written_whole():
    config = default_config()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.set_blocking(out_w, False)
    filler = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            filler += os.write(out_w, bytes(4096))
    drained = bytearray()

    def make_room_when_found_full(frame, event, arg):
        if event == "c_exception" and arg is os.write and not drained:  # the daemon found it full
            drained.extend(os.read(out_r, filler))

    os.write(in_w, INITIALIZE)
    try:
        sys.setprofile(make_room_when_found_full)
        try:
            answer_initialize(build_registry(config), BridgeState(config), in_r, out_w)
        finally:
            sys.setprofile(None)
        os.set_blocking(out_r, False)
        written = bytes(drained)
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(out_r, 65536):
                written += chunk
        assert len(drained) > 0
        assert written.count(0) == filler
        answer = written.replace(b"\0", b"")
        assert answer.endswith(b"\n") and orjson.loads(answer)["id"] == 1
    finally:
        for fd in (in_r, in_w, out_r, out_w):
            os.close(fd)

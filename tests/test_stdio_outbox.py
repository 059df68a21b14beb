"""``oamd stdio`` and an engine that reads its stdout slowly or not at all: the outbox has the same
byte limit as a socket's (``--max-outbox-bytes``). An engine that stops reading while more than that
waits is taken for gone — everything is cancelled and the daemon exits 141, as when stdout breaks —
and a streaming turn waits for a slow engine instead of piling its events up."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Any

from conftest import OAMD

from oamd.cli.exits import EXIT_OUTPUT_BROKEN


def request(msg_id: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()


def start(*flags: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*OAMD, "stdio", *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def stop(process: subprocess.Popen[bytes]) -> bytes:
    """Kills the daemon if it is still running; returns its stderr."""
    if process.poll() is None:
        process.kill()
        process.wait()
    assert process.stderr is not None
    stderr = process.stderr.read()
    process.stderr.close()
    return stderr


def test_an_engine_that_stops_reading_stdout_has_the_daemon_cancel_everything_and_exit_141():
    # twelve answers of 300 kB each: far past a 1 MB limit and the pipe's buffer
    model = {"type": "scripted", "steps": [], "fallback": {"text": "x" * 300_000, "chunks": 1}}
    lines = [request(1, "session/create", {"session": "s", "model": model})]
    lines += [
        request(2 + i, "session/respond", {"session": "s", "prompt": "Talk."}) for i in range(12)
    ]
    process = start("--max-outbox-bytes", "1000000")
    assert process.stdin is not None
    try:
        process.stdin.write(b"\n".join(lines) + b"\n")
        process.stdin.flush()  # stdin stays open: only the unread output ends the daemon
        assert process.wait(timeout=30) == EXIT_OUTPUT_BROKEN
    finally:
        stderr = stop(process)
        process.stdin.close()
        assert process.stdout is not None
        process.stdout.close()
    assert b"peer_not_reading" in stderr
    assert b"Traceback" not in stderr


def test_a_slow_engine_slows_a_streaming_turn_instead_of_being_cut_off():
    # a fast stream of text events: megabytes of them, each up to 400 kB
    model = {"type": "scripted", "steps": [{"text": "x" * 200_000, "chunks": 100_000}]}
    process = start("--max-outbox-bytes", "2000000")
    assert process.stdin is not None and process.stdout is not None
    out = process.stdout
    received: list[dict[str, Any]] = []

    def read_slowly() -> None:  # about 1 MB/s: slower than the turn makes its events
        pending = b""
        while chunk := out.read1(1024):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            received.extend(json.loads(line) for line in complete)
            time.sleep(0.001)

    reader = threading.Thread(target=read_slowly)
    reader.start()
    try:
        process.stdin.write(request(1, "session/create", {"session": "s", "model": model}) + b"\n")
        process.stdin.write(
            request(2, "session/respond", {"session": "s", "prompt": "Talk.", "stream": True})
            + b"\n"
        )
        process.stdin.close()  # end of input: the daemon answers what it received, then exits
        assert process.wait(timeout=60) == 0
        reader.join(timeout=30)
    finally:
        stderr = stop(process)
        reader.join(timeout=5)
        out.close()
    assert b"peer_not_reading" not in stderr
    (response,) = [m for m in received if m.get("id") == 2]
    texts = [
        m["params"]["event"]
        for m in received
        if m.get("method") == "session/event" and m["params"]["event"]["type"] == "text"
    ]
    assert texts[-1]["text"] == response["result"]["text"] == "x" * 200_000

"""An orphaned daemon stops: once stdin is at its end and a write to stdout failed (the engine is
gone), ``oamd stdio`` cancels everything still queued or running and exits with 141 (128 + SIGPIPE)
at once, instead of playing the received turns for up to ``EOF_DRAIN_SECONDS``. The reader of its
stdout going away is enough, seen without a write (the write end of a pipe reports it). With stdout still
open, end of input keeps answering everything received (tested in ``test_ordering.py``)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest
from conftest import OAMD

from oamd.cli.exits import EXIT_OUTPUT_BROKEN

STEP_MS = 1000
LINES = [
    b'{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"session":"s","model":'
    b'{"type":"scripted","steps":[{"text":"a","delayMs":%d},{"text":"b","delayMs":%d},'
    b'{"text":"c","delayMs":%d}]}}}\n' % (STEP_MS, STEP_MS, STEP_MS),
    b'{"jsonrpc":"2.0","id":2,"method":"session/respond","params":{"session":"s","prompt":"x",'
    b'"stream":true}}\n',
    b'{"jsonrpc":"2.0","id":3,"method":"session/respond","params":{"session":"s","prompt":"y"}}\n',
    b'{"jsonrpc":"2.0","id":4,"method":"session/respond","params":{"session":"s","prompt":"z"}}\n',
]


def test_a_daemon_whose_parent_is_gone_cancels_everything_and_exits_141():
    process = subprocess.Popen(
        [*OAMD, "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"".join(LINES))
    process.stdin.flush()
    assert b'"id":1' in process.stdout.readline()  # the session exists; the turns are queued
    process.stdout.close()  # the engine is gone: nobody reads
    process.stdin.close()  # and its end of our input
    gone = time.monotonic()
    try:
        assert process.wait(timeout=30) == EXIT_OUTPUT_BROKEN
        # the first write after it (turn x's first event, one step in) fails; then nothing waits
        assert time.monotonic() - gone < 2 * STEP_MS / 1000 + 1
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        stderr = process.stderr.read()
        process.stderr.close()
    assert b"Traceback" not in stderr


LONG_TURN = [  # a turn that writes nothing for ten minutes (EOF_DRAIN_SECONDS would wait it out)
    b'{"jsonrpc":"2.0","id":1,"method":"session/create","params":{"session":"s","model":'
    b'{"type":"scripted","steps":[{"text":"a","delayMs":600000}]}}}\n',
    b'{"jsonrpc":"2.0","id":2,"method":"session/respond","params":{"session":"s","prompt":"x"}}\n',
]


def exit_status(process: subprocess.Popen[bytes]) -> int:
    """The status of a daemon that should be exiting now; its stderr must hold no traceback."""
    try:
        return process.wait(timeout=30)  # the turn would hold it for ten minutes
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        stderr = process.stderr.read()
        process.stderr.close()
        assert b"Traceback" not in stderr


def test_a_daemon_whose_stdout_had_no_reader_from_the_start_exits_141_at_once():
    """Its first answer goes out through the eager write, which must not swallow ``EPIPE``."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the engine is gone before the daemon's first answer
    process = subprocess.Popen(
        [*OAMD, "stdio"], stdin=subprocess.PIPE, stdout=write_end, stderr=subprocess.PIPE
    )
    os.close(write_end)
    assert process.stdin is not None
    process.stdin.write(b"".join(LONG_TURN))  # read with the first chunk: answered eagerly
    process.stdin.close()
    assert exit_status(process) == EXIT_OUTPUT_BROKEN


@pytest.mark.parametrize("stdin_too", [True, False], ids=["parent-gone", "stdout-closed"])
def test_a_daemon_whose_stdout_reader_leaves_while_a_turn_runs_exits_141_without_writing(
    stdin_too,
):
    process = subprocess.Popen(
        [*OAMD, "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"".join(LONG_TURN))
    process.stdin.flush()
    assert b'"id":1' in process.stdout.readline()  # the turn runs; it has nothing to write
    process.stdout.close()  # nobody reads any more
    if stdin_too:
        process.stdin.close()
    try:
        assert exit_status(process) == EXIT_OUTPUT_BROKEN
    finally:
        if not stdin_too:
            process.stdin.close()

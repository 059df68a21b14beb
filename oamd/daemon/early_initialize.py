"""``oamd stdio`` answers a leading ``initialize`` before the event loop exists.

Engines spawn the daemon and send ``initialize`` first. Answering it needs the core handler, the
registry's method list and the system model's availability when that is known without I/O; it does
not need asyncio and anyio, whose imports are most of the daemon's start-up (about 50 ms of 100 on
two cores). So the first read happens here, with a plain ``os.read``: when it holds a complete,
well-formed ``initialize`` request no longer than ``--max-line-bytes`` whose answer is ready, the
answer is written to fd 1 at once, and everything read after that line is handed to the served
connection, which reads on from there. Anything else (another method, a partial, bad or too long
line, an answer that needs I/O) is handed over unanswered, and the connection handles it exactly as
if it had read it itself.

The parent may hand us non-blocking descriptors (an event-loop engine's pipes): a read or write that
would block waits for the descriptor with ``select`` instead, leaving its flags alone (they belong
to the open file description the parent shares).

Nothing here imports the event loop, the rpc connection or the transports.
"""

from __future__ import annotations

import contextlib
import os
import select
from typing import Any

import orjson

from oamd.bridge.state import BridgeState
from oamd.errors import InvalidMessage
from oamd.limits import MAX_LINE_BYTES
from oamd.rpc.errors import to_wire_error
from oamd.rpc.message import check_nesting, encode, is_plain_id
from oamd.rpc.registry import Registry, Request, Result

__all__ = ["FIRST_READ_BYTES", "answer_initialize"]

FIRST_READ_BYTES = 65536
"""The first read; an ``initialize`` line is a few hundred bytes."""


class _Early:
    """Stands for the connection while its ``initialize`` is answered: handlers read ``state``."""

    __slots__ = ("state",)

    def __init__(self, state: BridgeState) -> None:
        self.state = state


def _initialize_request(line: bytes) -> tuple[Any, dict[str, Any]] | None:
    """``(id, params)`` of a well-formed ``initialize`` request, else ``None``."""
    try:
        check_nesting(line)
        message = orjson.loads(line)
    except (InvalidMessage, orjson.JSONDecodeError):
        return None
    if type(message) is not dict or message.get("jsonrpc") != "2.0":
        return None
    if message.get("method") != "initialize" or set(message) - {
        "jsonrpc",
        "id",
        "method",
        "params",
    }:
        return None
    msg_id = message.get("id")
    if not is_plain_id(msg_id):
        return None
    params = message.get("params", {})
    if type(params) is not dict:
        return None
    return msg_id, params


def _read_once(fd: int) -> bytes:
    """One ``os.read``, waiting for data first when ``fd`` is non-blocking."""
    while True:
        try:
            return os.read(fd, FIRST_READ_BYTES)
        except BlockingIOError:
            select.select([fd], [], [])


def _write_all(fd: int, data: bytes) -> None:
    """Writes all of ``data``, waiting for room when ``fd`` is non-blocking and full."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


def answer_initialize(
    registry: Registry,
    state: BridgeState,
    in_fd: int = 0,
    out_fd: int = 1,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> bytes:
    """Reads once from ``in_fd``; answers a leading ``initialize`` on ``out_fd`` when it can.

    Returns the bytes read and not consumed (the connection starts with them): everything after
    the answered line, or everything read when nothing was answered. An empty result with nothing
    answered means end of input. A first line longer than ``max_line_bytes`` is left to the
    connection, which refuses it as it would any line that long.
    """
    data = _read_once(in_fd)
    end = data.find(b"\n")
    if end < 0 or end > max_line_bytes:  # counted as the connection's framer counts
        return data
    request = _initialize_request(data[:end])
    handler = registry.get("initialize")
    if request is None or handler is None:
        return data
    msg_id, params = request
    try:
        reply = handler(Request(_Early(state), msg_id, "initialize", params))  # type: ignore[arg-type]
    except Exception as exc:
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "error": to_wire_error(exc)}
    else:
        if type(reply) is not Result:
            return data  # the answer needs I/O (a model to load): the connection awaits it
        answer = {"jsonrpc": "2.0", "id": msg_id, "result": reply.value}
    with contextlib.suppress(OSError):  # stdout gone: the connection finds out when it writes
        _write_all(out_fd, encode(answer))
    return data[end + 1 :]

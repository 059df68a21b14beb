"""Baseline JSON-RPC server for ``ping_throughput.py``: a bare synchronous orjson echo loop.

Every request line gets ``{"jsonrpc":"2.0","id":<id>,"result":{}}``; lines without an
``id`` (notifications) get no reply. It reads whatever input is already buffered in the
pipe (up to 64 KiB), answers all complete lines of that chunk in one write and flushes,
so pipelined pings are batched while a single ping is answered at once. No validation,
no dispatch, no event loop: this is the ceiling a Python stdio JSON-RPC server can reach.

Run as ``python bench/echo_server.py``; it exits at EOF on stdin.
"""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

import orjson

READ_SIZE = 65536


def reply_chunk(lines: list[bytes]) -> bytes:
    """Encode the replies to the complete request lines of one input chunk."""
    out = bytearray()
    for line in lines:
        if not line.strip():
            continue
        msg = orjson.loads(line)
        if "id" in msg:
            out += orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
            out += b"\n"
    return bytes(out)


def serve(in_fd: int, out: BinaryIO) -> None:
    """Answer request lines from ``in_fd`` on the binary stream ``out`` until EOF."""
    write = out.write
    flush = out.flush
    pending = b""
    while chunk := os.read(in_fd, READ_SIZE):
        *lines, pending = (pending + chunk).split(b"\n")
        replies = reply_chunk(lines)
        if replies:
            write(replies)
            flush()


def main() -> None:
    """Serve stdin/stdout until EOF."""
    serve(sys.stdin.buffer.fileno(), sys.stdout.buffer)


if __name__ == "__main__":
    main()

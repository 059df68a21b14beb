"""A fake batching OpenAI-compatible server for ``bench/openai_scale.py``: every chat completion
takes the same ``--delay`` seconds however many run at once, as on vLLM or a llama.cpp server
with enough slots, and is answered as a short event stream. It counts the completions in flight
and their peak.

HTTP/1.1 with keep-alive (httpx reuses connections, as with a real server), on 127.0.0.1:

- ``GET /v1/models``: one model, ``m``, owned by ``vllm``;
- ``POST /v1/chat/completions``: waits ``--delay``, then streams ``Hi there.`` and a ``stop``;
- ``GET /stats``: ``{"in_flight", "peak", "completions"}``; ``POST /stats/reset`` zeroes them.

Run as ``python bench/batching_server.py [--delay 0.3]``; it prints its port on stdout, then
serves until stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import orjson

_EVENTS = (
    b"".join(
        b"data: " + orjson.dumps(event) + b"\n\n"
        for event in (
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi "}}]},
            {"choices": [{"index": 0, "delta": {"content": "there."}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 3}},
        )
    )
    + b"data: [DONE]\n\n"
)
_MODELS = orjson.dumps({"data": [{"id": "m", "owned_by": "vllm"}]})


class Stats:
    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.completions = 0


def _whole(status: int, body: bytes, content_type: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


async def _serve(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stats: Stats, delay: float
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head.decode("latin-1").split("\r\n")
            length = 0
            for line in lines:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if length:
                await reader.readexactly(length)
            method, path, _ = request_line.split(" ", 2)
            if path.endswith("/chat/completions"):
                stats.in_flight += 1
                stats.peak = max(stats.peak, stats.in_flight)
                stats.completions += 1
                try:
                    await asyncio.sleep(delay)
                finally:
                    stats.in_flight -= 1
                writer.write(_whole(200, _EVENTS, "text/event-stream"))
            elif path.endswith("/models"):
                writer.write(_whole(200, _MODELS))
            elif path == "/stats/reset" and method == "POST":
                stats.in_flight = stats.peak = stats.completions = 0
                writer.write(_whole(200, b"{}"))
            elif path == "/stats":
                report = {
                    "in_flight": stats.in_flight,
                    "peak": stats.peak,
                    "completions": stats.completions,
                }
                writer.write(_whole(200, orjson.dumps(report)))
            else:
                writer.write(_whole(404, b'{"error": {"message": "not found"}}'))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass  # the client left, or the server is exiting
    finally:
        writer.close()


async def main(delay: float) -> None:
    stats = Stats()
    server = await asyncio.start_server(
        lambda r, w: _serve(r, w, stats, delay), "127.0.0.1", 0, backlog=1024
    )
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.buffer.read)  # until stdin closes
    server.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.3, help="seconds a completion takes")
    asyncio.run(main(parser.parse_args().delay))

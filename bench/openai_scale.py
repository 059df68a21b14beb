"""Many sessions against one batching model server: how many chat completions oamd keeps in
flight, and how close a round of turns comes to the ideal wall time.

``bench/batching_server.py`` answers every chat completion after ``--delay`` seconds however many
run at once (vLLM, a llama.cpp server farm). For each session count (``--sessions``, default
64,128,256) a fresh ``oamd stdio --model openai:…`` with ``--max-sessions`` that many gets one
untimed warm-up turn, then ``--rounds`` rounds in which every session sends one
``session/respond`` at once. Printed per count, for the best round: the peak of completions in
flight at the server, and the round's wall time divided by the ideal (the model steps per turn x
``--delay``: what a server that takes them all at once allows). The floor beside it is the same
ratio for a bare asyncio client sending as many requests at once on warm connections: what the
server, the machine and Python cost before oamd does anything.

    .venv/bin/python bench/openai_scale.py [--sessions 64,128,256] [--delay 0.3] [--rounds 3]
        [--spec-options max_in_flight=100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from time import perf_counter
from typing import Any

import orjson
from _harness import BENCH_DIR, PYTHON, write_json
from _turns import daemon

ROUND_TIMEOUT_S = 120.0
_COMPLETION = b"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-length: 2\r\n\r\n{}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="64,128,256", help="session counts, comma-separated")
    parser.add_argument("--delay", type=float, default=0.3, help="seconds a completion takes")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per count; the best is kept")
    parser.add_argument(
        "--spec-options", default="", help="more openai: spec options, e.g. max_in_flight=100"
    )
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


@contextmanager
def batching_server(delay: float) -> Iterator[int]:
    """A running ``batching_server.py``; yields its port on 127.0.0.1."""
    proc = subprocess.Popen(
        [PYTHON, os.path.join(BENCH_DIR, "batching_server.py"), "--delay", str(delay)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        yield int(proc.stdout.readline())
    finally:
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> bytes:
    writer.write(request)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return await reader.readexactly(length)


def server_stats(port: int, reset: bool = False) -> dict[str, Any]:
    """The server's counters (``in_flight``, ``peak``, ``completions``); zeroed after when
    ``reset``."""

    async def ask() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        method = b"POST /stats/reset" if reset else b"GET /stats"
        body = await _exchange(reader, writer, method + b" HTTP/1.1\r\nhost: bench\r\n\r\n")
        writer.close()
        return body

    return orjson.loads(asyncio.run(ask()))


def floor_ratio(port: int, count: int, delay: float, rounds: int) -> float:
    """Best wall time ÷ ``delay`` of ``count`` completions sent at once by a bare client, each on
    its own warm connection."""

    async def measure() -> float:
        connections = [await asyncio.open_connection("127.0.0.1", port) for _ in range(count)]
        best = float("inf")
        for _ in range(rounds + 1):  # the first round warms up
            started = perf_counter()
            await asyncio.gather(*(_exchange(r, w, _COMPLETION) for r, w in connections))
            best = min(best, perf_counter() - started)
        for _, writer in connections:
            writer.close()
        return best

    return asyncio.run(measure()) / delay


def oamd_round(port: int, sessions: int, delay: float, rounds: int, options: str) -> dict[str, Any]:
    """The best of ``rounds`` rounds of one turn per session, on a fresh daemon."""
    spec = f"openai:http://127.0.0.1:{port}/v1#m?tools=envelope&json=none&top_k=off"
    if options:
        spec += "&" + options
    best: dict[str, Any] = {}
    with daemon("--model", spec, "--max-sessions", str(sessions)) as client:
        names = [client.call("session/create", {})["session"] for _ in range(sessions)]
        client.call("session/respond", {"session": names[0], "prompt": "Warm up."})
        for _ in range(rounds):
            server_stats(port, reset=True)
            started = perf_counter()
            ids = [client.send("session/respond", {"session": s, "prompt": "Hi?"}) for s in names]
            for msg_id in ids:
                reply = client.wait(msg_id, ROUND_TIMEOUT_S)
                if "result" not in reply:
                    raise client.server.error(f"turn failed: {reply}")
            wall = perf_counter() - started
            stats = server_stats(port)
            ideal = stats["completions"] / sessions * delay  # model steps per turn x delay
            row = {
                "sessions": sessions,
                "peak_in_flight": stats["peak"],
                "wall_s": round(wall, 3),
                "ideal_s": round(ideal, 3),
                "ratio": round(wall / ideal, 2),
            }
            if not best or row["ratio"] < best["ratio"]:
                best = row
    return best


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = []
    with batching_server(args.delay) as port:
        for count in (int(n) for n in args.sessions.split(",")):
            row = oamd_round(port, count, args.delay, args.rounds, args.spec_options)
            row["floor_ratio"] = round(floor_ratio(port, count, args.delay, args.rounds), 2)
            rows.append(row)
    if args.json:
        write_json(rows)
        return 0
    print(
        f"one turn per session at once, a batching server ({args.delay * 1000:g} ms a completion)"
    )
    print(f"{'sessions':>8}  {'peak in flight':>14}  {'wall s':>7}  {'÷ ideal':>7}  {'floor':>6}")
    for row in rows:
        print(
            f"{row['sessions']:>8}  {row['peak_in_flight']:>14}  {row['wall_s']:>7.2f}  "
            f"{row['ratio']:>7.2f}  {row['floor_ratio']:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

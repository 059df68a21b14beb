"""What the daemon holds after long runs: resident memory after 64 sessions x 100 turns, and after
one session x 10,000 turns (scripted, one client tool per turn), each on a fresh ``oamd stdio``.

With ``--tracemalloc`` the 64 x 100 run is repeated in this process (daemon and client joined by
memory streams) and the allocation sites still holding the most memory are listed, the client's
own excluded: where the bytes are.

    .venv/bin/python bench/memory.py [--sessions 64] [--turns 100] [--long 10000] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc

from _harness import write_json
from _turns import TOOL, daemon, rss_kib, tool_turn_steps


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--turns", type=int, default=100, help="turns per session (many)")
    parser.add_argument("--long", type=int, default=10_000, help="turns of the one long session")
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def many_sessions(sessions: int, turns: int) -> dict:
    """``sessions`` sessions, each playing ``turns`` turns, one turn of each in flight at once."""
    with daemon() as client:
        script = tool_turn_steps(turns)
        pid = client.server.proc.pid
        idle = rss_kib(pid)
        for n in range(sessions):
            client.call("session/create", {"session": f"s{n}", "tools": [TOOL], "model": script})
        created = rss_kib(pid)
        left = {f"s{n}": turns for n in range(sessions)}
        in_flight = {}
        for session in left:
            in_flight[client.send("session/respond", {"session": session, "prompt": "Look?"})] = (
                session
            )
        while in_flight:
            client.pump(1.0)
            for msg_id in [i for i in client.done if i in in_flight]:
                client.done.pop(msg_id)
                session = in_flight.pop(msg_id)
                left[session] -= 1
                if left[session]:
                    params = {"session": session, "prompt": "Look?"}
                    in_flight[client.send("session/respond", params)] = session
        entries = sum(s["entries"] for s in client.call("session/list")["sessions"])
        return {"idle": idle, "created": created, "end": rss_kib(pid), "entries": entries}


def one_long_session(turns: int) -> dict:
    with daemon() as client:
        pid = client.server.proc.pid
        client.call(
            "session/create", {"session": "s", "tools": [TOOL], "model": tool_turn_steps(turns)}
        )
        created = rss_kib(pid)
        marks = {}
        for n in range(1, turns + 1):
            client.call("session/respond", {"session": "s", "prompt": "Look?"})
            if n in (turns // 10, turns // 2, turns):
                marks[n] = rss_kib(pid)
        entries = client.call("session/list")["sessions"][0]["entries"]
        return {"created": created, "marks": marks, "entries": entries}


def where_the_bytes_are(sessions: int, turns: int, top: int = 15) -> list[str]:
    """The 64 x 100 run in this process under tracemalloc; the daemon's biggest holders."""
    import anyio

    from oamd.client import Client
    from oamd.daemon import default_config, serve_stream
    from oamd.transport import memory_stream_pair

    async def engine(params: dict) -> dict:
        return {"output": f"{params['call']['arguments'].get('thing')}: a jar"}

    async def run() -> tracemalloc.Snapshot:
        ours, theirs = memory_stream_pair()
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve_stream, theirs, default_config())
            async with Client(ours, tool_handler=engine) as client:
                script = tool_turn_steps(turns)
                for n in range(sessions):
                    await client.request(
                        "session/create", {"session": f"s{n}", "tools": [TOOL], "model": script}
                    )
                tracemalloc.start(8)

                async def play(session: str) -> None:
                    for _ in range(turns):
                        await client.request("session/respond", {"session": session, "prompt": "?"})

                async with anyio.create_task_group() as players:
                    for n in range(sessions):
                        players.start_soon(play, f"s{n}")
                snapshot = tracemalloc.take_snapshot()
                tracemalloc.stop()
            tg.cancel_scope.cancel()
        return snapshot

    snapshot = anyio.run(run)
    daemon_only = snapshot.filter_traces(
        [tracemalloc.Filter(False, "*/oamd/client/*"), tracemalloc.Filter(False, "*/anyio/*")]
    )
    total = sum(s.size for s in daemon_only.statistics("filename"))
    lines = [f"  traced, daemon side: {total / 2**20:.1f} MiB held after the run"]
    for stat in daemon_only.statistics("lineno")[:top]:
        frame = stat.traceback[0]
        where = f"{frame.filename.split('/oamd/')[-1]}:{frame.lineno}"
        lines.append(f"  {stat.size / 2**20:7.2f} MiB {stat.count:>8} blocks  {where}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    many = many_sessions(args.sessions, args.turns)
    long = one_long_session(args.long)
    report = {"many": many, "long": long}
    if args.json:
        write_json(report)
        return 0
    mib = 1024
    lines = [
        f"memory: {args.sessions} sessions x {args.turns} turns ({many['entries']} entries)",
        f"  RSS idle {many['idle'] / mib:.1f} MiB, sessions created {many['created'] / mib:.1f}"
        f" MiB, after the turns {many['end'] / mib:.1f} MiB",
        f"memory: one session x {args.long} turns ({long['entries']} entries)",
        f"  RSS after create {long['created'] / mib:.1f} MiB; "
        + ", ".join(f"turn {n}: {kib / mib:.1f} MiB" for n, kib in long["marks"].items()),
        f"  growth over the run: {(long['marks'][args.long] - long['created']) / mib:.1f} MiB",
    ]
    if args.tracemalloc:
        lines.append(f"where the bytes are ({args.sessions} x {args.turns}, in-process):")
        lines.extend(where_the_bytes_are(args.sessions, args.turns))
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``ping`` latency while 64 scripted sessions stream turns: how long a cheap request waits behind
the work of busy sessions on the one event loop.

Each session plays turns back to back (one ``look`` tool call answered at once, then a streamed
reply); a session whose script is used up is deleted and created anew. Meanwhile one probe
``ping`` at a time, sent about every millisecond, is timed from its write to the read of its
reply. Prints probe p50/p99/max and the turns per second sustained.

    .venv/bin/python bench/load.py [--sessions 64] [--seconds 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from time import perf_counter

from _harness import percentile, write_json
from _turns import TOOL, daemon, rss_kib, tool_turn_steps

TURNS_PER_SCRIPT = 200


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--probe-every", type=float, default=0.001, help="seconds between probes")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def measure(args: argparse.Namespace) -> dict:
    script = tool_turn_steps(TURNS_PER_SCRIPT)
    probes: list[float] = []
    probe: dict[str, float] = {}
    with daemon() as client:

        def on_reply(msg: dict, read_at: float) -> None:
            sent = probe.pop(msg["id"], None)
            if sent is not None:
                probes.append((read_at - sent) * 1000)

        client.on_reply = on_reply
        turns_left: dict[str, int] = {}
        in_flight: dict[int, str] = {}

        def start_turn(session: str) -> None:
            if turns_left[session] == 0:
                client.call("session/delete", {"session": session})
                client.call(
                    "session/create", {"session": session, "tools": [TOOL], "model": script}
                )
                turns_left[session] = TURNS_PER_SCRIPT
            turns_left[session] -= 1
            msg_id = client.send(
                "session/respond", {"session": session, "prompt": "What is there?", "stream": True}
            )
            in_flight[msg_id] = session

        for n in range(args.sessions):
            session = f"s{n}"
            client.call("session/create", {"session": session, "tools": [TOOL], "model": script})
            turns_left[session] = TURNS_PER_SCRIPT
        rss_start = rss_kib(client.server.proc.pid)
        for session in list(turns_left):
            start_turn(session)
        started = perf_counter()
        deadline = started + args.seconds
        last_probe = 0.0
        turns = 0
        while perf_counter() < deadline:
            now = perf_counter()
            if not probe and now - last_probe >= args.probe_every:
                probe_id = client.server.take_ids(1)
                probe[probe_id] = perf_counter()
                client.server.send({"jsonrpc": "2.0", "id": probe_id, "method": "ping"})
                last_probe = now
            client.pump(args.probe_every)
            for msg_id in [i for i in client.done if i in in_flight]:
                client.done.pop(msg_id)
                turns += 1
                start_turn(in_flight.pop(msg_id))
            for msg_id in [i for i in client.done if i not in in_flight]:
                client.done.pop(msg_id)  # probe replies (already timed)
        elapsed = perf_counter() - started
        rss_end = rss_kib(client.server.proc.pid)
    ordered = sorted(probes)
    return {
        "sessions": args.sessions,
        "seconds": elapsed,
        "turns": turns,
        "turns_per_s": turns / elapsed,
        "probes": len(ordered),
        "p50_ms": statistics.median(ordered),
        "p99_ms": percentile(ordered, 0.99),
        "max_ms": ordered[-1],
        "rss_mib": {"start": rss_start / 1024, "end": rss_end / 1024},
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = measure(args)
    if args.json:
        write_json(report)
        return 0
    sys.stdout.write(
        f"ping under load: {report['sessions']} sessions streaming scripted turns "
        f"(one tool call each), {report['seconds']:.0f} s\n"
        f"  turns: {report['turns']} ({report['turns_per_s']:,.0f}/s)\n"
        f"  probes: {report['probes']}  p50 {report['p50_ms']:.2f} ms  "
        f"p99 {report['p99_ms']:.2f} ms  max {report['max_ms']:.2f} ms\n"
        f"  daemon RSS: {report['rss_mib']['start']:.1f} MiB -> {report['rss_mib']['end']:.1f} MiB\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cost of one turn as a conversation grows: one scripted session over ``oamd stdio``, one client
tool per turn (``session/respond``, the client answering each ``tool/call`` at once).

Prints the median ms per turn around turns 10, 100, 1,000 and 5,000 (each the median of the
``--window`` turns starting there), the ratio of the last checkpoint to the first, and the curve
in buckets. A flat curve means a turn costs what it sends, not what was said before it.

    .venv/bin/python bench/turn_cost.py [--checkpoints 10,100,1000,5000] [--style native|envelope]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from time import perf_counter

from _harness import write_json
from _turns import daemon, rss_kib, tool_turn_steps


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoints", default="10,100,1000,5000")
    parser.add_argument("--window", type=int, default=20, help="turns per checkpoint median")
    parser.add_argument("--style", choices=["native", "envelope"], default="native")
    parser.add_argument("--buckets", type=int, default=10, help="rows of the curve")
    parser.add_argument(
        "--executable", help="time this oamd (e.g. dist/oamd/oamd) instead of python -m oamd"
    )
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def measure(args: argparse.Namespace) -> dict:
    checkpoints = [int(c) for c in args.checkpoints.split(",")]
    turns = max(checkpoints) + args.window
    times: list[float] = []
    with daemon(executable=args.executable) as client:
        session = client.create_session(tool_turn_steps(turns, args.style))
        rss_start = rss_kib(client.server.proc.pid)
        for i in range(turns):
            started = perf_counter()
            result = client.call("session/respond", {"session": session, "prompt": f"Turn {i}?"})
            times.append((perf_counter() - started) * 1000)
            if not result["toolCalls"]:
                raise SystemExit(f"turn {i} made no tool call: {result}")
        rss_end = rss_kib(client.server.proc.pid)
        entries = client.call("session/list")["sessions"][0]["entries"]
    at = {k: statistics.median(times[k : k + args.window]) for k in checkpoints}
    size = max(1, turns // args.buckets)
    curve = [
        {
            "turns": f"{s}-{min(s + size, turns) - 1}",
            "median_ms": statistics.median(times[s : s + size]),
        }
        for s in range(0, turns, size)
    ]
    return {
        "style": args.style,
        "turns": turns,
        "entries": entries,
        "ms_at_turn": at,
        "ratio_last_first": at[checkpoints[-1]] / at[checkpoints[0]],
        "curve": curve,
        "rss_kib": {"after_create": rss_start, "end": rss_end},
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = measure(args)
    if args.json:
        write_json(report)
        return 0
    first, last = min(report["ms_at_turn"]), max(report["ms_at_turn"])
    lines = [
        f"turn cost: one {report['style']} session, one client tool per turn, "
        f"{report['turns']} turns ({report['entries']} entries), median of {args.window} turns",
        f"  {'turn':>6}{'ms':>9}",
        *(f"  {k:>6}{v:>9.2f}" for k, v in report["ms_at_turn"].items()),
        f"  turn {last} / turn {first}: {report['ratio_last_first']:.2f}",
        "  curve:",
        *(f"    {row['turns']:>12}  {row['median_ms']:.2f} ms" for row in report["curve"]),
        f"  daemon RSS: {report['rss_kib']['after_create'] / 1024:.1f} MiB after create, "
        f"{report['rss_kib']['end'] / 1024:.1f} MiB at the end",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

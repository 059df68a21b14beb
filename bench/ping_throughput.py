"""Ping benchmark: oamd's stdio server against a bare orjson echo loop and the MCP Python SDK.

Usage: ``python bench/ping_throughput.py [--count 20000] [--rounds 3] [--json]``

For each server (``echo``, ``oamd stdio``, the MCP SDK server) it measures:

* pipelined ping throughput: after the server's handshake, N pings are written as fast as
  possible from a writer thread while the replies are read; the clock runs from the first
  byte written to the last reply read; every id must come back exactly once; best of
  ``--rounds``, after an untimed warm-up. N is ``--count`` for oamd; echo gets 5N (it is too
  fast to time N reliably) and the MCP SDK server N/10, at least 1000 (~500x slower than echo).
* cold start: spawn to the reply to the opening request (``initialize``; a ping for echo),
  median of ``--cold-runs``.
* ping latency under load: one ping at a time every ~1 ms while another thread keeps
  ``--load-window`` bulk pings in flight on the same process; p50/p99 of the paced pings.

See bench/README.md for how to read the figures. Only the report goes to stdout; server
failures are reported in it (details on stderr) and make the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from _harness import (
    SERVERS,
    BenchError,
    cold_start_ms,
    latency_under_load,
    throughput,
    write_json,
)

T = TypeVar("T")
Report = dict[str, Any]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000, help="pings per round (default 20000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, best kept (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--servers", default="echo,oamd,mcp", help="comma-separated subset")
    parser.add_argument("--cold-runs", type=int, default=5, help="cold starts (default 5)")
    parser.add_argument("--load-seconds", type=float, default=2.0, help="latency run length")
    parser.add_argument("--load-window", type=int, default=128, help="bulk pings in flight")
    parser.add_argument("--round-timeout", type=float, default=15.0, help="seconds per round")
    args = parser.parse_args(argv)
    unknown = set(args.servers.split(",")) - SERVERS.keys()
    if unknown:
        parser.error(f"unknown servers: {', '.join(sorted(unknown))}")
    if min(args.count, args.rounds, args.cold_runs, args.load_window) < 1:
        parser.error("--count, --rounds, --cold-runs and --load-window must be positive")
    return args


def attempt(errors: dict[str, str], key: str, run: Callable[[], T]) -> T | None:
    """Run one measurement; record a server failure under ``key`` instead of raising."""
    try:
        return run()
    except BenchError as exc:
        errors[key] = str(exc)
        print(f"bench: {key}: {exc}", file=sys.stderr)
        return None


def measure(args: argparse.Namespace) -> Report:
    """Run every measurement for the selected servers."""
    specs = [SERVERS[name] for name in args.servers.split(",")]
    errors: dict[str, str] = {}
    report: Report = {"throughput": {}, "cold_start": {}, "latency": {}, "errors": errors}
    for spec in specs:
        n = spec.round_count(args.count)
        result = attempt(
            errors,
            f"throughput.{spec.name}",
            lambda s=spec, n=n: throughput(s, n, args.rounds, args.round_timeout),
        )
        if result is not None:
            report["throughput"][spec.name] = {
                "count": result.count,
                "msgs_per_s": result.msgs_per_s,
                "round_seconds": result.round_seconds,
            }
    for spec in specs:
        samples = attempt(
            errors, f"cold_start.{spec.name}", lambda s=spec: cold_start_ms(s, args.cold_runs)
        )
        if samples is not None:
            report["cold_start"][spec.name] = {
                "median_ms": statistics.median(samples),
                "samples_ms": samples,
                "reply_to": spec.opening()["method"],
            }
    for spec in specs:
        latency = attempt(
            errors,
            f"latency.{spec.name}",
            lambda s=spec: latency_under_load(s, args.load_seconds, 0.001, args.load_window),
        )
        if latency is not None:
            report["latency"][spec.name] = latency.summary()
    add_ratios(report)
    report["config"] = {
        "count": args.count,
        "rounds": args.rounds,
        "cold_runs": args.cold_runs,
        "load_seconds": args.load_seconds,
        "load_window": args.load_window,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    return report


def add_ratios(report: Report) -> None:
    """Throughput ratios: each server vs echo, and oamd vs the MCP SDK."""
    rates = {name: r["msgs_per_s"] for name, r in report["throughput"].items()}
    for name, rate in rates.items():
        ratio = rate / rates["echo"] if "echo" in rates else None
        report["throughput"][name]["vs_echo"] = ratio
    report["oamd_vs_mcp"] = (
        rates["oamd"] / rates["mcp"] if {"oamd", "mcp"} <= rates.keys() else None
    )


def fmt(value: float | None, spec: str) -> str:
    """Format a figure, or a dash when it is missing."""
    return "-" if value is None else format(value, spec)


def throughput_table(report: Report, args: argparse.Namespace) -> list[str]:
    """The throughput section of the text report."""
    lines = [
        f"ping throughput: pipelined, best of {args.rounds} rounds",
        f"  {'server':<8}{'pings':>8}{'msgs/s':>12}{'vs echo':>10}",
    ]
    for name in args.servers.split(","):
        row = report["throughput"].get(name)
        if row is None:
            lines.append(f"  {name:<8}{'error (see stderr)':>30}")
            continue
        scale = SERVERS[name].scale
        note = (
            "" if scale == 1 else f"   (count x {scale:g}" + (", min 1000)" if scale < 1 else ")")
        )
        lines.append(
            f"  {name:<8}{row['count']:>8}{row['msgs_per_s']:>12,.0f}"
            f"{fmt(row['vs_echo'], '#.3g'):>10}{note}"
        )
    ratio = report["oamd_vs_mcp"]
    lines.append(f"  oamd / mcp: {'-' if ratio is None else f'{ratio:.1f}x'}")
    return lines


def cold_start_table(report: Report, args: argparse.Namespace) -> list[str]:
    """The cold-start section of the text report."""
    lines = [
        f"cold start: spawn -> first reply, median of {args.cold_runs}",
        f"  {'server':<8}{'ms':>8}  reply to",
    ]
    for name in args.servers.split(","):
        row = report["cold_start"].get(name)
        if row is None:
            lines.append(f"  {name:<8}{'error':>8}")
        else:
            lines.append(f"  {name:<8}{row['median_ms']:>8.1f}  {row['reply_to']}")
    return lines


def latency_table(report: Report, args: argparse.Namespace) -> list[str]:
    """The latency-under-load section of the text report."""
    lines = [
        f"ping latency under load: a ping every ~1 ms, {args.load_window} bulk pings in "
        f"flight, {args.load_seconds:g} s",
        f"  {'server':<8}{'probes':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'bulk msgs/s':>13}",
    ]
    for name in args.servers.split(","):
        row = report["latency"].get(name)
        if row is None:
            lines.append(f"  {name:<8}{'error':>8}")
            continue
        lines.append(
            f"  {name:<8}{row['probes']:>8}{row['p50_ms']:>9.3f}{row['p99_ms']:>9.3f}"
            f"{row['max_ms']:>9.3f}{row['bulk_msgs_per_s']:>13,.0f}"
        )
    return lines


def render_text(report: Report, args: argparse.Namespace) -> str:
    """The human-readable report."""
    config = report["config"]
    header = f"oamd ping bench (python {config['python']}, {config['cpus']} cpus)"
    sections = [
        [header],
        throughput_table(report, args),
        cold_start_table(report, args),
        latency_table(report, args),
    ]
    if report["errors"]:
        sections.append(["errors: " + ", ".join(sorted(report["errors"]))])
    return "\n\n".join("\n".join(section) for section in sections)


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print the report; 1 if any server failed."""
    args = parse_args(argv)
    report = measure(args)
    if args.json:
        write_json(report)
    else:
        sys.stdout.write(render_text(report, args) + "\n")
    return 1 if report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m oamd.conformance run|diff|record|list`` (also reachable as ``main(argv)``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio

from .fmt import format_files
from .report import json_report, print_report
from .runner import Options, diff_corpus, record_corpus, run_corpus, show_corpus
from .scenario import ScenarioError, load_scenarios
from .transport import Target, default_command, read_token

__all__ = ["main"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scenarios",
        action="append",
        metavar="PATH",
        help="a scenario file or directory (repeatable; default: the bundled corpus)",
    )
    p.add_argument(
        "-k",
        "--select",
        action="append",
        metavar="TEXT",
        help="only scenarios whose name contains TEXT (repeatable)",
    )
    p.add_argument("-j", "--jobs", type=int, default=4, help="scenarios played at once (default 4)")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="play scenarios that allow it one after another on one process/connection "
        "(cleaning up between them) instead of a fresh one each",
    )
    p.add_argument(
        "--scenario-timeout",
        type=float,
        default=60.0,
        help="hard bound for one scenario, in seconds (default 60)",
    )
    p.add_argument("--json-report", metavar="PATH", help="also write a JSON report")
    p.add_argument("-v", "--verbose", action="store_true", help="details for passing scenarios too")


def _transport(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--transport",
        choices=["stdio", "unix", "tcp"],
        default="stdio",
        help="how to reach the candidate (sockets: an already running `oamd serve`)",
    )
    p.add_argument("--address", help="unix: socket path; tcp: HOST:PORT")
    p.add_argument("--token-file", help="file holding the token sent as initialize's 'auth'")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m oamd.conformance",
        description="Plays protocol scenarios against bridge implementations (oamd, Apple's oam).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="play the corpus and check its expectations")
    run.add_argument("--candidate", default=default_command(), help="command (default: oamd stdio)")
    _transport(run)
    _common(run)
    diff = sub.add_parser("diff", help="play each scenario against two implementations and compare")
    diff.add_argument(
        "--candidate", default=default_command(), help="command (default: oamd stdio)"
    )
    diff.add_argument("--reference", required=True, help='e.g. "oam stdio"')
    _transport(diff)
    _common(diff)
    rec = sub.add_parser("record", help="record a reference run into expectation files")
    rec.add_argument("--reference", required=True, help='e.g. "oam stdio"')
    rec.add_argument("--out", required=True, help="directory for the recorded scenario files")
    _common(rec)
    show = sub.add_parser(
        "show", help="play scenarios and print the messages (raw) or the exchanges diff compares"
    )
    show.add_argument(
        "--candidate", default=default_command(), help="command (default: oamd stdio)"
    )
    show.add_argument("--raw", action="store_true", help="print the raw message log instead")
    _transport(show)
    _common(show)
    fmt = sub.add_parser("fmt", help="rewrite scenario files in the house style")
    fmt.add_argument("--scenarios", action="append", metavar="PATH")
    fmt.add_argument("-k", "--select", action="append", metavar="TEXT")
    fmt.add_argument("--check", action="store_true", help="only report files that would change")
    lst = sub.add_parser("list", help="list the scenarios")
    lst.add_argument("--scenarios", action="append", metavar="PATH")
    lst.add_argument("-k", "--select", action="append", metavar="TEXT")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        scenarios = load_scenarios(args.scenarios, select=args.select)
    except ScenarioError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    if args.command == "fmt":
        changed = format_files([s.path for s in scenarios], check=args.check)
        for path in changed:
            print(f"{'would reformat' if args.check else 'reformatted'} {path}")
        return 1 if args.check and changed else 0
    if args.command == "list":
        for s in scenarios:
            flags = " [own process]" if s.needs_own_process() else ""
            xf = f" [xfail: {s.xfail}]" if s.xfail else ""
            print(f"{s.name}{flags}{xf}  {s.description}")
        print(f"{len(scenarios)} scenario(s)")
        return 0
    if not scenarios:
        print("conformance: no scenario selected", file=sys.stderr)
        return 2
    options = Options(
        jobs=args.jobs,
        reuse=args.reuse,
        scenario_timeout=args.scenario_timeout,
        out_dir=Path(args.out) if args.command == "record" else None,
    )
    meta: dict[str, object] = {"mode": args.command}
    if args.command in ("run", "diff", "show"):
        if args.transport != "stdio" and not args.address:
            print("conformance: --address is required with --transport unix|tcp", file=sys.stderr)
            return 2
        candidate = Target(
            "candidate",
            transport=args.transport,
            command=args.candidate,
            address=args.address,
            token=read_token(args.token_file),
        )
        meta.update(candidate=candidate.describe(), transport=args.transport)
    t0 = time.monotonic()
    if args.command == "show":
        return anyio.run(show_corpus, scenarios, candidate, options, args.raw)
    if args.command == "run":
        results = anyio.run(run_corpus, scenarios, candidate, options)
    elif args.command == "diff":
        reference = Target("reference", command=args.reference)
        meta["reference"] = reference.describe()
        results = anyio.run(diff_corpus, scenarios, candidate, reference, options)
    else:
        reference = Target("reference", command=args.reference)
        meta["reference"] = reference.describe()
        results = anyio.run(record_corpus, scenarios, reference, options)
    elapsed = time.monotonic() - t0
    print_report(results, sys.stdout, verbose=args.verbose, elapsed=elapsed)
    if args.json_report:
        meta["elapsedSeconds"] = round(elapsed, 3)
        json_report(results, Path(args.json_report), meta)
    return 0 if all(r.ok for r in results) else 1

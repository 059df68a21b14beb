"""``python -m oamd.conformance run|diff|record|show|fmt|list`` (also ``oamd conformance …``, and
reachable as ``main(argv)``)."""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
import time
from pathlib import Path

import anyio

from .fmt import format_files
from .report import json_report, print_report
from .runner import Options, diff_corpus, record_corpus, run_corpus, show_corpus
from .scenario import ScenarioError, load_scenarios
from .transport import Target, default_command, read_token

__all__ = ["main"]


PROG = "python -m oamd.conformance"
DEFAULT_JOBS = 4
DEFAULT_SCENARIO_TIMEOUT = 60.0
EXIT_USAGE = 2
EPILOG_WIDTH = 78
"""Exit-code tables are wrapped by hand (argparse keeps an epilog as written): to 78 columns."""


def _exit_codes(*rows: tuple[int, str]) -> str:
    lines = ["exit codes:"]
    for code, meaning in rows:
        first, *more = textwrap.wrap(meaning, width=EPILOG_WIDTH - len("  0  "))
        lines += [f"  {code:<3}{first}", *(f"{'':5}{line}" for line in more)]
    return "\n".join(lines)


USAGE_ROW = (
    EXIT_USAGE,
    "a usage error: a bad option or value, an unreadable scenario file, no scenario selected",
)
PLAYED_EXITS = {
    "run": _exit_codes(
        (0, "every scenario passed, was an expected failure or was skipped"),
        (1, "a scenario failed"),
        USAGE_ROW,
    ),
    "diff": _exit_codes(
        (0, "every scenario's exchanges were the same (or it was skipped)"),
        (1, "a scenario's exchanges differed"),
        USAGE_ROW,
    ),
    "record": _exit_codes(
        (0, "every scenario was recorded"), (1, "a scenario failed to play"), USAGE_ROW
    ),
    "show": _exit_codes((0, "every scenario played"), (1, "a scenario failed to play"), USAGE_ROW),
}


class _CommandParser(argparse.ArgumentParser):
    """A command's parser that reports its unknown arguments itself, with its own usage (argparse
    leaves them to the top-level parser, whose usage does not show the command's options)."""

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _positive(text: str) -> int:
    """A whole number of at least 1 (the runner took ``-j 0`` or ``-j -3`` for one at a time)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _seconds(text: str) -> float:
    """A finite number of seconds above 0 (nan would never time out, 0 fails everything)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, not {text}")
    return value


def _selection(p: argparse.ArgumentParser) -> None:
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
        help="only scenarios whose name contains TEXT; a whole name selects just that one"
        " (repeatable; default: every scenario)",
    )


def _common(p: argparse.ArgumentParser) -> None:
    _selection(p)
    p.add_argument(
        "-j",
        "--jobs",
        type=_positive,
        default=DEFAULT_JOBS,
        metavar="N",
        help=f"scenarios played at once (default: {DEFAULT_JOBS})",
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help="play scenarios that allow it one after another on one process/connection "
        "(cleaning up between them) instead of a fresh one each",
    )
    p.add_argument(
        "--scenario-timeout",
        type=_seconds,
        default=DEFAULT_SCENARIO_TIMEOUT,
        metavar="SECONDS",
        help=f"hard bound for one scenario (default: {DEFAULT_SCENARIO_TIMEOUT:g})",
    )
    p.add_argument(
        "--json-report",
        metavar="PATH",
        help="also write a JSON report to PATH (default: the text report on stdout only)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="details for passing scenarios too (default: for failures only)",
    )


def _candidate(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--candidate",
        default=default_command(),
        metavar="COMMAND",
        help="the implementation to play against, a command line (default: %(default)s)",
    )
    p.add_argument(
        "--transport",
        choices=["stdio", "unix", "tcp"],
        default="stdio",
        help="how to reach the candidate: spawn --candidate (stdio), or connect to an already"
        " running oamd serve at --address (default: %(default)s)",
    )
    p.add_argument(
        "--address",
        metavar="ADDRESS",
        help="unix: the socket path; tcp: HOST:PORT (required with --transport unix|tcp)",
    )
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="a file holding the token sent as initialize's auth (default: no token)",
    )


def _reference(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--reference",
        required=True,
        metavar="COMMAND",
        help='the reference implementation, a command line, e.g. "oam stdio" (required)',
    )


def _parser(prog: str) -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Plays protocol scenarios against bridge implementations (oamd, Apple's oam).",
        epilog=f'"{prog} <command> --help" explains a command\'s options and its exit codes.',
    )
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        title="commands",
        parser_class=_CommandParser,
    )

    def command(name: str, what: str, epilog: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=what,
            description=what[0].upper() + what[1:] + ".",
            epilog=epilog,
            formatter_class=formatter,
        )

    run = command("run", "play the corpus and check its expectations", PLAYED_EXITS["run"])
    _candidate(run)
    _common(run)
    diff = command(
        "diff",
        "play each scenario against two implementations and compare",
        PLAYED_EXITS["diff"],
    )
    _candidate(diff)
    _reference(diff)
    _common(diff)
    rec = command("record", "record a reference run into expectation files", PLAYED_EXITS["record"])
    _reference(rec)
    rec.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="directory for the recorded scenario files (required)",
    )
    _common(rec)
    show = command(
        "show",
        "play scenarios and print the messages (raw) or the exchanges diff compares",
        PLAYED_EXITS["show"],
    )
    _candidate(show)
    show.add_argument(
        "--raw",
        action="store_true",
        help="print the raw message log (default: the exchanges diff compares)",
    )
    _common(show)
    fmt = command(
        "fmt",
        "rewrite scenario files in the house style",
        _exit_codes(
            (0, "done, or nothing to change"), (1, "with --check: a file would change"), USAGE_ROW
        ),
    )
    _selection(fmt)
    fmt.add_argument(
        "--check",
        action="store_true",
        help="only report files that would change (default: rewrite them)",
    )
    lst = command("list", "list the scenarios", _exit_codes((0, "listed"), USAGE_ROW))
    _selection(lst)
    return parser


def main(argv: list[str] | None = None, *, prog: str = PROG) -> int:
    """Runs the command line ``argv`` (default: ``sys.argv[1:]``); ``prog`` names the command in
    usage and help (``oamd conformance`` when the ``oamd`` command hands its arguments on)."""
    args = _parser(prog).parse_args(argv)
    try:
        scenarios = load_scenarios(args.scenarios, select=args.select)
    except ScenarioError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return EXIT_USAGE
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
        return EXIT_USAGE
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
            return EXIT_USAGE
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

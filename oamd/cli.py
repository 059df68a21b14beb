"""The ``oamd`` command: ``stdio`` serves the protocol, ``check`` reports the model, ``version``."""

from __future__ import annotations

import argparse
import os
import sys

import anyio
import orjson

from oamd import __version__
from oamd.app import default_config, serve_stdio
from oamd.backends.base import LanguageModel, UnconfiguredModel
from oamd.limits import DEFAULT_TOOL_TIMEOUT_SECONDS, MAX_LINE_BYTES, MAX_SESSIONS
from oamd.log import configure_logging

__all__ = ["main"]

EXIT_UNAVAILABLE = 3


def _model_from_spec(spec: str | None) -> LanguageModel:
    if not spec or spec == "none":
        return UnconfiguredModel()
    raise SystemExit(f"oamd: unknown --model {spec!r} (no backend of that kind is installed)")


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--model",
        default=os.environ.get("OAMD_MODEL"),
        help='the backend behind "system" (default: $OAMD_MODEL; none configured = unavailable)',
    )
    common.add_argument("--log-level", default=os.environ.get("OAMD_LOG_LEVEL", "warning"))
    common.add_argument("--log-format", choices=["json", "console"], default="json")
    parser = argparse.ArgumentParser(prog="oamd", description=__doc__, parents=[common])
    sub = parser.add_subparsers(dest="command", required=True)
    stdio = sub.add_parser("stdio", parents=[common], help="serve the protocol on stdin/stdout")
    stdio.add_argument("--max-line-bytes", type=int, default=MAX_LINE_BYTES)
    stdio.add_argument(
        "--no-scripted",
        "--no-scripted-models",
        dest="no_scripted",
        action="store_true",
        help="disable scripted models",
    )
    stdio.add_argument("--max-sessions", type=int, default=MAX_SESSIONS)
    stdio.add_argument(
        "--tool-timeout",
        type=float,
        default=DEFAULT_TOOL_TIMEOUT_SECONDS,
        help="seconds the engine has to answer a tool/call (0 = forever)",
    )
    stdio.add_argument("--test-methods", action="store_true", help=argparse.SUPPRESS)
    sub.add_parser("check", parents=[common], help="print model availability as JSON")
    sub.add_parser("version", parents=[common], help="print the version")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    if args.command == "version":
        print(f"oamd {__version__}")
        return 0
    model = _model_from_spec(args.model)
    if args.command == "check":
        availability = anyio.run(model.availability)
        sys.stdout.write(orjson.dumps(availability.to_wire()).decode() + "\n")
        return 0 if availability.available else EXIT_UNAVAILABLE
    config = default_config(
        model,
        allow_scripted=not args.no_scripted,
        test_methods=args.test_methods,
        max_sessions=args.max_sessions,
        tool_timeout=args.tool_timeout,
    )
    try:
        anyio.run(lambda: serve_stdio(config, max_line_bytes=args.max_line_bytes))
    except KeyboardInterrupt:
        return 130
    return 0

"""The ``oamd`` command: ``stdio`` serves the protocol on stdin/stdout, ``serve`` on Unix and
loopback TCP sockets for many clients, ``check`` reports the model, ``version``."""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import orjson

from oamd import __version__
from oamd.app import build_registry, default_config, serve_stdio
from oamd.backends.base import Availability, LanguageModel, UnconfiguredModel
from oamd.limits import (
    AUTH_TIMEOUT_SECONDS,
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    MAX_CONCURRENT_GENERATIONS,
    MAX_CONNECTION_BYTES,
    MAX_CONNECTIONS,
    MAX_LINE_BYTES,
    MAX_OUTBOX_BYTES,
    MAX_PENDING_AUTH,
    MAX_SESSIONS,
    WRITE_GRACE_SECONDS,
)
from oamd.log import configure_logging

if TYPE_CHECKING:
    from oamd.methods.state import DaemonConfig
    from oamd.serve import ServeOptions

__all__ = ["main"]

EXIT_UNAVAILABLE = 3
EXIT_USAGE = 2
EXIT_OUTPUT_BROKEN = 141
"""``oamd stdio`` could no longer write its stdout (the engine is gone), or the engine let more than
``--max-outbox-bytes`` wait unread (taken for gone, logged as ``peer_not_reading``): everything
still running was cancelled at once. 128 + SIGPIPE, as a shell reports a process killed by a broken
pipe."""

GC_THRESHOLDS = (50_000, 50, 1000)
"""The serving process's collector: a young collection every 50,000 net allocations instead of
700. A turn allocates many containers; with the defaults, collections took 40 % of a loaded
daemon's time and stalled the event loop often (``ping`` p99 ~95 ms with 64 busy sessions, ~5 ms
with these, after ``gc.freeze()`` of everything loaded at start; ``bench/load.py``). A full
collection practically never runs, so nothing may rely on one: a closed connection is freed by
reference counting, and ``oamd serve`` collects the youngest generation after each connection
ends (``serve.server.collect_after_close``); ``oamd stdio``'s one connection ends with the
process."""


def _tune_gc() -> None:
    gc.freeze()  # what start-up loaded lives as long as the process: never scan it again
    gc.set_threshold(*GC_THRESHOLDS)


MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc: allocations from this size on get their own mapping, returned to the system when freed.
glibc raises the threshold as large blocks are freed, after which long lines, prompts and model
outputs are carved from the heap and leave it fragmented: under a 150 s socket soak RSS grew
97 → 241 MiB while Python's own heap held 14 MB; with the threshold fixed it stayed at 61–72 MiB."""


def _tune_malloc() -> None:
    """Fixes glibc's mmap threshold (no-op elsewhere). After the early ``initialize``: ctypes
    costs 1.6 ms of start-up."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, MMAP_THRESHOLD_BYTES)  # M_MMAP_THRESHOLD; musl has no mallopt
    except (OSError, AttributeError):
        return


def _model_from_spec(spec: str | None) -> LanguageModel:
    if not spec:
        return UnconfiguredModel()
    from oamd.backends.spec import model_from_spec  # backends load their clients lazily

    try:
        return model_from_spec(spec)
    except ValueError as exc:
        raise SystemExit(f"oamd: {exc}") from None


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
    serving = argparse.ArgumentParser(add_help=False, parents=[common])
    serving.add_argument("--max-line-bytes", type=_positive, default=MAX_LINE_BYTES)
    serving.add_argument(
        "--no-scripted",
        "--no-scripted-models",
        dest="no_scripted",
        action="store_true",
        help="disable scripted models",
    )
    serving.add_argument("--max-sessions", type=_positive, default=MAX_SESSIONS)
    serving.add_argument(
        "--max-outbox-bytes",
        type=_positive,
        default=MAX_OUTBOX_BYTES,
        help="bytes waiting for a peer that does not read before it is cut off (stdio: exit 141)",
    )
    serving.add_argument(
        "--max-connection-bytes",
        type=_positive,
        default=MAX_CONNECTION_BYTES,
        help="bytes of histories and worlds one connection may hold",
    )
    serving.add_argument(
        "--tool-timeout",
        type=_seconds,
        default=DEFAULT_TOOL_TIMEOUT_SECONDS,
        help="seconds the engine has to answer a tool/call (0 = forever)",
    )
    serving.add_argument("--test-methods", action="store_true", help=argparse.SUPPRESS)
    sub.add_parser("stdio", parents=[serving], help="serve the protocol on stdin/stdout")
    _add_serve(sub.add_parser("serve", parents=[serving], help="serve on Unix/TCP sockets"))
    sub.add_parser("check", parents=[common], help="print model availability as JSON")
    sub.add_parser("version", parents=[common], help="print the version")
    sub.add_parser("conformance", help="run the conformance corpus (see conformance/README.md)")
    return parser


def _add_serve(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unix", action="append", default=[], metavar="PATH", help="a Unix socket (0600)"
    )
    p.add_argument(
        "--tcp", action="append", default=[], metavar="HOST:PORT", help="loopback TCP (port 0: any)"
    )
    p.add_argument(
        "--abstract", action="append", default=[], metavar="NAME", help="a Linux abstract socket"
    )
    p.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --tcp address")
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the token from PATH, or write a new one there (default: beside the socket)",
    )
    p.add_argument(
        "--require-token", action="store_true", help="ask same-user Unix clients for the token too"
    )
    p.add_argument("--ready-file", metavar="PATH", help="also write the ready line to PATH")
    p.add_argument("--max-connections", type=_positive, default=MAX_CONNECTIONS)
    p.add_argument(
        "--max-generations",
        type=_positive,
        default=MAX_CONCURRENT_GENERATIONS,
        help="model generations at once, shared fairly among clients",
    )
    p.add_argument(
        "--max-pending-auth",
        type=_positive,
        default=MAX_PENDING_AUTH,
        help="connections still to authenticate (the oldest is dropped when one more arrives)",
    )
    p.add_argument(
        "--auth-timeout",
        type=_seconds,
        default=AUTH_TIMEOUT_SECONDS,
        help="seconds a client has to authenticate",
    )


def _positive(text: str) -> int:
    """A whole number of at least 1 (argparse reports the message and exits 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _seconds(text: str) -> float:
    """A finite number of seconds, at least 0 (nan or a negative value would mean "forever")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, not {text}")
    return value


def _serve_options(args: argparse.Namespace) -> ServeOptions:
    from oamd.serve import ServeOptions

    return ServeOptions(
        unix=args.unix,
        tcp=args.tcp,
        abstract=args.abstract,
        allow_remote=args.allow_remote,
        token_file=args.token_file,
        require_token=args.require_token,
        ready_file=args.ready_file,
        max_connections=args.max_connections,
        max_generations=args.max_generations,
        max_outbox_bytes=args.max_outbox_bytes,
        max_line_bytes=args.max_line_bytes,
        auth_timeout=args.auth_timeout,
        max_pending_auth=args.max_pending_auth,
    )


async def _closing(model: LanguageModel, run: Callable[[], Awaitable[object]]) -> object:
    """Runs the server, then releases the backend (HTTP clients, a loaded llama.cpp model)."""
    import anyio

    try:
        return await run()
    finally:
        with anyio.move_on_after(WRITE_GRACE_SECONDS, shield=True):
            await model.aclose()


async def _checked(model: LanguageModel) -> Availability:
    try:
        return await model.availability()
    finally:
        await model.aclose()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["conformance"]:  # the conformance runner has its own command line
        from oamd.conformance import main as conformance_main

        return conformance_main(argv[1:])
    args = _parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    if args.command == "version":
        print(f"oamd {__version__}")
        return 0
    model = _model_from_spec(args.model)
    if args.command == "check":
        import anyio

        availability = anyio.run(_checked, model)
        sys.stdout.write(orjson.dumps(availability.to_wire()).decode() + "\n")
        return 0 if availability.available else EXIT_UNAVAILABLE
    _tune_gc()
    config = default_config(
        model,
        allow_scripted=not args.no_scripted,
        test_methods=args.test_methods,
        max_sessions=args.max_sessions,
        tool_timeout=args.tool_timeout,
        max_connection_bytes=args.max_connection_bytes,
    )
    if args.command == "serve":
        import anyio

        from oamd.serve import EndpointError, serve  # sockets load only for `oamd serve`

        _tune_malloc()

        try:
            anyio.run(_closing, model, lambda: serve(config, _serve_options(args)))
        except EndpointError as exc:
            sys.stderr.write(f"oamd serve: {exc}\n")
            return EXIT_USAGE
        except KeyboardInterrupt:  # a second Ctrl-C during the drain
            return 130
        return 0
    return _serve_stdio(config, model, args.max_line_bytes, args.max_outbox_bytes)


def _serve_stdio(
    config: DaemonConfig, model: LanguageModel, max_line_bytes: int, max_outbox_bytes: int
) -> int:
    """A leading ``initialize`` is answered before the event loop's libraries load."""
    from oamd.early_initialize import answer_initialize
    from oamd.methods.state import BridgeState

    registry, state = build_registry(config), BridgeState(config)
    try:
        initial = answer_initialize(registry, state, max_line_bytes=max_line_bytes)
        _tune_malloc()
        import anyio

        output_broken = anyio.run(
            _closing,
            model,
            lambda: serve_stdio(
                config,
                registry=registry,
                state=state,
                initial=initial,
                max_line_bytes=max_line_bytes,
                max_outbox_bytes=max_outbox_bytes,
            ),
        )
    except KeyboardInterrupt:
        return 130
    return EXIT_OUTPUT_BROKEN if output_broken else 0

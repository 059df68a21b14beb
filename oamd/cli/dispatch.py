"""The ``oamd`` command: ``stdio`` serves the protocol on stdin/stdout, ``serve`` on Unix and
loopback TCP sockets for many clients (either one recording its connections with ``--record``),
``replay`` plays recordings back, ``check`` reports the model, ``version``, ``models`` manages
the local model store (``oamd.cli.models_command``), and ``conformance`` hands its arguments to
the conformance runner. It only wires: the command line's grammar, help and usage errors are
``oamd.cli.command_line``'s."""

from __future__ import annotations

import gc
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oamd import __version__
from oamd.app import build_registry, default_config, serve_stdio
from oamd.backends.base import Availability, LanguageModel, UnconfiguredModel
from oamd.cli.command_line import CommandLine, parse_command_line
from oamd.cli.exits import (
    EXIT_INTERRUPTED,
    EXIT_OUTPUT_BROKEN,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)
from oamd.jsonvalue import dumps_text
from oamd.limits import WRITE_GRACE_SECONDS
from oamd.log import configure_logging

if TYPE_CHECKING:
    from argparse import Namespace

    from anyio.abc import TaskStatus

    from oamd.app import ConnectionTap
    from oamd.inspector import Inspector
    from oamd.methods.state import DaemonConfig
    from oamd.serve import ServeOptions

__all__ = ["main", "model_for"]

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


def _model_from_spec(line: CommandLine) -> LanguageModel:
    """The backend ``--model`` (or ``$OAMD_MODEL``) names; a spec it cannot read is a usage
    error naming where it came from."""
    spec = line.args.model
    if not spec:
        return UnconfiguredModel()
    try:
        return model_for(spec)
    except ValueError as exc:
        line.refuse(f"{line.model_source}: {exc}")


def model_for(spec: str) -> LanguageModel:
    """The model a ``--model`` spec names, as the command line makes it: names looked up in the
    model store and the folders of Ollama and Hugging Face, faster copies kept in the store
    (``make eval`` and the benchmarks make theirs with this too).

    Raises:
        ValueError: the spec is malformed or names what cannot be found.
    """
    from oamd.backends.spec import model_from_spec  # backends load their clients lazily

    return model_from_spec(spec, _resolve, _derived_folder)


def _resolve(kind: str, reference: str) -> Any:
    """The model store's lookup, loaded only for a spec that names a model (the backends may
    not import it: it is handed to them here)."""
    from oamd.models.resolve import locator

    return locator(kind, reference)


def _derived_folder() -> Path:
    """Where faster copies of llama.cpp models are kept: the model store's ``fast/``."""
    from oamd.models.store import store_folder

    return store_folder() / "fast"


def _serve_options(args: Namespace) -> ServeOptions:
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


def _recorder(line: CommandLine, config: DaemonConfig, transport: str) -> ConnectionTap | None:
    """``--record DIR``'s tap (``None`` without it: nothing of the recording is even loaded)."""
    args = line.args
    if not args.record:
        return None
    from oamd.recording import Recorder, RecordingError, prepare_directory

    try:
        directory = prepare_directory(args.record)
    except RecordingError as exc:
        line.refuse(f"argument --record: {exc}")
    return Recorder(
        directory,
        config,
        transport=transport,
        max_line_bytes=args.max_line_bytes,
        max_outbox_bytes=args.max_outbox_bytes,
    )


async def _closing(model: LanguageModel, run: Callable[[], Awaitable[object]]) -> object:
    """Runs the server, then releases the backend (HTTP clients, a loaded llama.cpp model)."""
    import anyio

    try:
        return await run()
    finally:
        with anyio.move_on_after(WRITE_GRACE_SECONDS, shield=True):
            await model.aclose()


def _inspector(line: CommandLine) -> Inspector | None:
    """``--inspect``'s page server, bound now: before anything is served, an address or token
    file that cannot be used exits ``EXIT_USAGE`` with one line, as ``oamd serve``'s do."""
    if not line.args.inspect:
        return None
    from oamd.inspector import Inspector  # never imported without --inspect
    from oamd.transport.sockets import EndpointError

    try:
        inspector = Inspector(line.args.inspect, transport=line.command)
    except EndpointError as exc:
        sys.stderr.write(f"oamd {line.command}: {exc}\n")
        raise SystemExit(EXIT_USAGE) from None
    if line.command == "stdio":
        try:
            inspector.use_token_file(line.args.inspect_token_file)
        except EndpointError as exc:
            inspector.close()
            sys.stderr.write(f"oamd {line.command}: {exc}\n")
            raise SystemExit(EXIT_USAGE) from None
    return inspector


async def _checked(model: LanguageModel) -> Availability:
    try:
        return await model.availability()
    finally:
        await model.aclose()


def main(argv: list[str] | None = None) -> int:
    line = parse_command_line(sys.argv[1:] if argv is None else argv)
    args = line.args
    if line.command == "conformance":  # the conformance runner reads its own command line
        from oamd.conformance import main as conformance_main

        return conformance_main(args.arguments, prog="oamd conformance")
    if line.command == "models":  # the store's actions print for people, they do not log
        from oamd.cli.models_command import run_models

        return run_models(line)
    configure_logging(args.log_level, args.log_format)
    if line.command == "version":
        print(f"oamd {__version__}")
        return 0
    if line.command == "replay":
        from oamd.recording._command import replay_main

        return replay_main(args.recordings, args.show)
    model = _model_from_spec(line)
    if line.command == "check":
        import anyio

        availability = anyio.run(_checked, model)
        sys.stdout.write(dumps_text(availability.to_wire()) + "\n")
        return 0 if availability.available else EXIT_UNAVAILABLE
    inspector = _inspector(line)
    _tune_gc()
    config = default_config(
        model,
        allow_scripted=not args.no_scripted,
        test_methods=args.test_methods,
        max_sessions=args.max_sessions,
        tool_timeout=args.tool_timeout,
        max_connection_bytes=args.max_connection_bytes,
    )
    if line.command == "serve":
        tap = _recorder(line, config, "socket")
        return _serve(config, model, _serve_options(args), inspector, tap)
    tap = _recorder(line, config, "stdio")
    return _serve_stdio(config, model, args.max_line_bytes, args.max_outbox_bytes, inspector, tap)


def _serve(
    config: DaemonConfig,
    model: LanguageModel,
    options: ServeOptions,
    inspector: Inspector | None,
    tap: ConnectionTap | None,
) -> int:
    import anyio

    from oamd.serve import EndpointError, Server  # sockets load only for `oamd serve`

    _tune_malloc()

    async def run(task_status: TaskStatus[object] = anyio.TASK_STATUS_IGNORED) -> None:
        await Server(config, options, tap).run(task_status=task_status)

    def watched() -> Awaitable[object]:
        if inspector is None:
            return run()
        return inspector.run_beside(run, token_file_of=lambda ready: ready["tokenFile"])

    try:
        anyio.run(_closing, model, watched)
    except EndpointError as exc:
        sys.stderr.write(f"oamd serve: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:  # a second Ctrl-C during the drain
        return EXIT_INTERRUPTED
    return 0


def _serve_stdio(
    config: DaemonConfig,
    model: LanguageModel,
    max_line_bytes: int,
    max_outbox_bytes: int,
    inspector: Inspector | None,
    tap: ConnectionTap | None,
) -> int:
    """A leading ``initialize`` is answered before the event loop's libraries load (not when
    recording: the recording must see that line and its answer go by; not when inspecting: the
    page is served from the event loop, which must not wait for the engine's first line)."""
    from oamd.early_initialize import answer_initialize
    from oamd.methods.state import BridgeState

    registry = build_registry(config)
    state = None if tap is not None else BridgeState(config)
    try:
        initial = b""
        if state is not None and inspector is None:
            initial = answer_initialize(registry, state, max_line_bytes=max_line_bytes)
        _tune_malloc()
        import anyio

        async def run(task_status: TaskStatus[object] = anyio.TASK_STATUS_IGNORED) -> bool:
            task_status.started()
            return await serve_stdio(
                config,
                registry=registry,
                state=state,
                initial=initial,
                max_line_bytes=max_line_bytes,
                max_outbox_bytes=max_outbox_bytes,
                tap=tap,
            )

        def watched() -> Awaitable[object]:
            return run() if inspector is None else inspector.run_beside(run)

        output_broken = anyio.run(_closing, model, watched)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OUTPUT_BROKEN if output_broken else 0

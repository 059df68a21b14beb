"""``oamd stdio`` and ``oamd serve``: the daemon's configuration from the command line, the
``--record`` tap and the ``--inspect`` page when asked for (each imported only then), a leading
``initialize`` on stdio answered before the event loop's libraries load, then the event loop until
the engine, or a signal, ends it. The backend is released last."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from oamd.cli.exits import EXIT_INTERRUPTED, EXIT_OUTPUT_BROKEN, EXIT_USAGE
from oamd.cli.tuning import tune_gc, tune_malloc
from oamd.daemon import build_registry, default_config, serve_stdio
from oamd.limits import WRITE_GRACE_SECONDS

if TYPE_CHECKING:
    from argparse import Namespace

    from anyio.abc import TaskStatus

    from oamd.backends.base import LanguageModel
    from oamd.bridge.state import DaemonConfig
    from oamd.cli.command_line import CommandLine
    from oamd.daemon import ConnectionTap
    from oamd.inspector import Inspector
    from oamd.serve import ServeOptions

__all__ = ["run_serving"]


def run_serving(line: CommandLine, model: LanguageModel) -> int:
    """Serves ``model`` as ``oamd stdio`` or ``oamd serve``; returns the exit code its help
    documents."""
    args = line.args
    inspector = _inspector(line)
    tune_gc()
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


def _serve(
    config: DaemonConfig,
    model: LanguageModel,
    options: ServeOptions,
    inspector: Inspector | None,
    tap: ConnectionTap | None,
) -> int:
    import anyio

    from oamd.serve import EndpointError, Server  # sockets load only for `oamd serve`

    tune_malloc()

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
    from oamd.bridge.state import BridgeState
    from oamd.daemon.early_initialize import answer_initialize

    registry = build_registry(config)
    state = None if tap is not None else BridgeState(config)
    try:
        initial = b""
        if state is not None and inspector is None:
            initial = answer_initialize(registry, state, max_line_bytes=max_line_bytes)
        tune_malloc()
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

"""Ways to reach a bridge: a spawned ``oamd stdio`` subprocess, an ``oamd serve`` socket (Unix or
TCP, authenticated with the daemon's token), or any byte stream."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
from anyio.abc import ByteStream, Process
from anyio.streams.stapled import StapledByteStream

from oamd.client._client import Client
from oamd.client._daemon import DaemonProcess, daemon_command, daemon_env
from oamd.client._errors import ConnectionClosed, RpcError
from oamd.client._handshake import initialize as send_initialize

__all__ = ["connect_stdio", "connect_stream", "connect_tcp", "connect_unix"]

EXIT_GRACE_SECONDS = 5.0
"""How long leaving a ``connect_stdio`` client waits for the daemon to exit before killing it."""

HANDSHAKE_RECONNECTS = 1
"""Times a socket client connects again when the daemon closed the connection before answering
its ``initialize`` (dropped from the pool of connections still to authenticate)."""


@asynccontextmanager
async def connect_stream(stream: ByteStream, **kwargs: Any) -> AsyncIterator[Client]:
    async with Client(stream, **kwargs) as client:
        yield client


@asynccontextmanager
async def connect_stdio(
    argv: Sequence[str] | None = None,
    *,
    args: Sequence[str] = (),
    stderr: Any = None,
    **kwargs: Any,
) -> AsyncIterator[Client]:
    """Spawns ``argv`` (default: ``oamd stdio`` with ``args``, run by this Python from the oamd
    package this client is, whatever the working directory holds) and talks to it over pipes.

    The daemon's stderr is read as it comes and its last lines are kept: when the daemon exits
    before answering, each ``ConnectionClosed`` quotes them with its exit status. ``stderr=``
    (a file, ``sys.stderr``, ``subprocess.DEVNULL``) sends the stderr there instead, untouched.
    On exit, stdin is closed (end of input) and the process is given ``EXIT_GRACE_SECONDS`` to
    exit before it is killed; ``client.process`` exposes it (``returncode``) for tests.

    Raises:
        ValueError: both ``argv`` and ``args`` were given (``argv`` is the whole command).
    """
    if argv and args:
        raise ValueError("argv is the whole command; put the daemon's arguments in it.")
    process: Process = await anyio.open_process(
        list(argv) if argv else daemon_command(list(args)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr if stderr is not None else subprocess.PIPE,
        env=None if argv else daemon_env(),
    )
    assert process.stdin is not None and process.stdout is not None
    daemon = DaemonProcess(process)
    stream = StapledByteStream(process.stdin, process.stdout)
    try:
        async with Client(stream, monitor=daemon, **kwargs) as client:
            client.process = process  # type: ignore[attr-defined]
            yield client
    finally:
        with anyio.CancelScope(shield=True):
            await daemon.finish(EXIT_GRACE_SECONDS)


@asynccontextmanager
async def _over_socket(
    open_stream: Callable[[], Awaitable[ByteStream]],
    token: str | None,
    initialize: bool,
    kwargs: dict[str, Any],
) -> AsyncIterator[Client]:
    """A client over a new ``open_stream()``, ``initialize`` answered first. A connection the
    daemon closes before answering it is opened once more: ``oamd serve`` drops the oldest
    silent connection still to authenticate when its pool is full, and under a flood of peers
    that never speak, ours can be that one in the moment before its first line leaves."""
    for attempt in range(1 + HANDSHAKE_RECONNECTS):
        refused: RpcError | ConnectionClosed | None = None
        stream = await open_stream()
        async with stream, Client(stream, **kwargs) as client:  # the socket closes whatever happens
            if initialize:
                try:
                    client.initialized = await send_initialize(client, token=token)  # type: ignore[attr-defined]
                except (RpcError, ConnectionClosed) as exc:
                    refused = exc  # raised once the client is closed, not wrapped in its task group
            if refused is None:
                yield client
                return
        if not isinstance(refused, ConnectionClosed) or attempt == HANDSHAKE_RECONNECTS:
            raise refused
    raise AssertionError("unreachable")  # pragma: no cover


@asynccontextmanager
async def connect_unix(
    path: str, *, token: str | None = None, initialize: bool = True, **kwargs: Any
) -> AsyncIterator[Client]:
    """Connects to ``oamd serve --unix PATH`` (``@name``: ``--abstract name``) and, unless
    ``initialize`` is false, sends ``initialize`` first with ``token`` as ``auth``; its result is
    ``client.initialized``. A same-user peer may leave ``token`` out (see ``protocol/PROTOCOL.md``).

    Raises:
        OSError: nothing listens there.
        RpcError: ``initialize`` was refused (``invalid_message``: token missing or wrong).
        ConnectionClosed: the daemon closed the connection before answering ``initialize``,
            and again on the one reconnect (``HANDSHAKE_RECONNECTS``).
    """
    address = "\0" + path[1:] if path.startswith("@") else path
    async with _over_socket(
        partial(anyio.connect_unix, address), token, initialize, kwargs
    ) as client:
        yield client


@asynccontextmanager
async def connect_tcp(
    host: str, port: int, *, token: str | None = None, initialize: bool = True, **kwargs: Any
) -> AsyncIterator[Client]:
    """Connects to ``oamd serve --tcp HOST:PORT`` and sends ``initialize`` with ``auth`` first.

    Raises:
        OSError: nothing listens there.
        RpcError: ``initialize`` was refused (token missing or wrong).
        ConnectionClosed: the daemon closed the connection before answering ``initialize``,
            and again on the one reconnect (``HANDSHAKE_RECONNECTS``).
    """
    async with _over_socket(
        partial(anyio.connect_tcp, host, port), token, initialize, kwargs
    ) as client:
        yield client

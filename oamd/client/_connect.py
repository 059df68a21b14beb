"""Ways to reach a bridge: a spawned ``oamd stdio`` subprocess, an ``oamd serve`` socket (Unix or
TCP, authenticated with the daemon's token), or any byte stream."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import ByteStream, Process
from anyio.streams.stapled import StapledByteStream

from oamd.client._client import Client, RpcError

__all__ = ["connect_stdio", "connect_stream", "connect_tcp", "connect_unix"]

CLIENT_INFO = {"name": "oamd.client"}


@asynccontextmanager
async def connect_stream(stream: ByteStream, **kwargs: Any) -> AsyncIterator[Client]:
    async with Client(stream, **kwargs) as client:
        yield client


@asynccontextmanager
async def connect_stdio(
    argv: Sequence[str] | None = None, *, stderr: Any = None, **kwargs: Any
) -> AsyncIterator[Client]:
    """Spawns ``argv`` (default: this Python's ``-m oamd stdio``) and talks to it over pipes.

    On exit, stdin is closed (end of input) and the process is given a moment to exit before it
    is killed; ``client.process`` exposes it (``returncode``) for tests.
    """
    command = list(argv) if argv else [sys.executable, "-m", "oamd", "stdio"]
    process: Process = await anyio.open_process(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr if stderr is not None else subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    stream = StapledByteStream(process.stdin, process.stdout)
    try:
        async with Client(stream, **kwargs) as client:
            client.process = process  # type: ignore[attr-defined]
            yield client
    finally:
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


@asynccontextmanager
async def _over_socket(
    stream: ByteStream, token: str | None, initialize: bool, kwargs: dict[str, Any]
) -> AsyncIterator[Client]:
    refused: RpcError | None = None
    async with stream, Client(stream, **kwargs) as client:  # the socket closes whatever happens
        if initialize:
            params: dict[str, Any] = {"protocolVersion": "1.0", "client": CLIENT_INFO}
            if token is not None:
                params["auth"] = token
            try:
                client.initialized = await client.request("initialize", params)  # type: ignore[attr-defined]
            except RpcError as exc:
                refused = exc  # raised once the client is closed, not wrapped in its task group
        if refused is None:
            yield client
    if refused is not None:
        raise refused


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
    """
    address = "\0" + path[1:] if path.startswith("@") else path
    stream = await anyio.connect_unix(address)
    async with _over_socket(stream, token, initialize, kwargs) as client:
        yield client


@asynccontextmanager
async def connect_tcp(
    host: str, port: int, *, token: str | None = None, initialize: bool = True, **kwargs: Any
) -> AsyncIterator[Client]:
    """Connects to ``oamd serve --tcp HOST:PORT`` and sends ``initialize`` with ``auth`` first.

    Raises:
        OSError: nothing listens there.
        RpcError: ``initialize`` was refused (token missing or wrong).
    """
    stream = await anyio.connect_tcp(host, port)
    async with _over_socket(stream, token, initialize, kwargs) as client:
        yield client

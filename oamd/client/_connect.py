"""Ways to reach a bridge: a spawned ``oamd stdio`` subprocess, or any byte stream."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import ByteStream, Process
from anyio.streams.stapled import StapledByteStream

from oamd.client._client import Client

__all__ = ["connect_stdio", "connect_stream"]


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

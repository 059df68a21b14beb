"""One connection, however it arrives: ``open_connection`` gives a byte stream its state, its
close hook and its ``Connection``, for stdio (``serve_stdio``, whose state may already have
answered an early ``initialize``), memory streams (``serve_stream``), a tapped (recorded)
stream and every socket client of ``oamd serve``."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import TYPE_CHECKING

from oamd.agent.models import ModelFactory
from oamd.bridge.state import BridgeState, DaemonConfig
from oamd.daemon.wiring import build_registry
from oamd.limits import MAX_LINE_BYTES, MAX_OUTBOX_BYTES
from oamd.rpc import Registry

if TYPE_CHECKING:
    from anyio.abc import ByteStream

    from oamd.rpc import Connection
    from oamd.rpc.connection import Gate

__all__ = ["ConnectionTap", "open_connection", "serve_stdio", "serve_stream"]


ConnectionTap = Callable[
    ["ByteStream", ModelFactory], AbstractAsyncContextManager[tuple["ByteStream", ModelFactory]]
]
"""Sees one connection (``--record``): given its stream and models, it yields the stream and models
to serve it with, and its block ends once the connection has closed. A tap that has a
``keep_secret(text)`` method is given the socket token by ``oamd serve``, which it must not keep."""


def open_connection(
    stream: ByteStream,
    registry: Registry,
    state: BridgeState,
    *,
    max_line_bytes: int,
    max_outbox_bytes: float,
    hangup_on_eof: bool,
    gate: Gate | None = None,
) -> Connection:
    """The ``Connection`` serving ``stream`` with ``state``, which lets go of every session, NPC
    and world (cancelling their work) once the connection closes."""
    from oamd.rpc import Connection  # the event loop's side loads once serving begins

    async def on_close() -> None:
        state.cancel_all_work()

    return Connection(
        stream,
        registry,
        state,
        max_line_bytes=max_line_bytes,
        on_close=on_close,
        gate=gate,
        hangup_on_eof=hangup_on_eof,
        max_outbox_bytes=max_outbox_bytes,
    )


async def serve_stream(
    stream: ByteStream,
    config: DaemonConfig,
    *,
    registry: Registry | None = None,
    state: BridgeState | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_outbox_bytes: float = float("inf"),
    tap: ConnectionTap | None = None,
    hangup_on_eof: bool = False,
) -> bool:
    """Serves one connection until it closes; its sessions die with it. Returns whether it ended
    because its output broke (or the peer let more than ``max_outbox_bytes`` pile up). A ``tap``
    sees the connection (it serves with the state it makes, so ``state`` must be ``None``);
    ``hangup_on_eof``: end of input means the peer is gone, as on a socket (``Connection``)."""
    if tap is not None:
        if state is not None:
            raise ValueError("a tapped connection makes its own state")
        async with tap(stream, config.models) as (tapped, models):
            return await serve_stream(
                tapped,
                replace(config, models=models),
                registry=registry,
                max_line_bytes=max_line_bytes,
                max_outbox_bytes=max_outbox_bytes,
                hangup_on_eof=hangup_on_eof,
            )
    conn = open_connection(
        stream,
        registry or build_registry(config),
        state or BridgeState(config),
        max_line_bytes=max_line_bytes,
        max_outbox_bytes=max_outbox_bytes,
        hangup_on_eof=hangup_on_eof,
    )
    async with stream:
        await conn.run()
    return conn.outbox.broken.is_set()


async def serve_stdio(
    config: DaemonConfig,
    *,
    registry: Registry | None = None,
    state: BridgeState | None = None,
    initial: bytes = b"",
    max_line_bytes: int = MAX_LINE_BYTES,
    max_outbox_bytes: int = MAX_OUTBOX_BYTES,
    tap: ConnectionTap | None = None,
) -> bool:
    """Serves stdin/stdout (``True``: it ended because stdout broke, or the parent let more than
    ``max_outbox_bytes`` pile up); ``initial``: what was read before (``oamd.daemon.early_initialize``),
    with the ``registry`` and ``state`` that answered it; ``tap``: see ``serve_stream``."""
    from oamd.transport import stdio_stream

    async with stdio_stream(initial=initial) as stream:
        return await serve_stream(
            stream,
            config,
            registry=registry,
            state=state,
            max_line_bytes=max_line_bytes,
            max_outbox_bytes=max_outbox_bytes,
            tap=tap,
        )

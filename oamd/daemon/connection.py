"""Wiring: the registry with every method set, per-connection state, and the served transports.

Start-up loads only what answering ``initialize`` needs (the core methods, the rpc layer, the
transport): every other namespace is listed from ``bridge.extensions`` at once and its module (with the
agent, game and schema code under it) loads on the first call of one of its methods.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oamd.agent.models import ModelFactory, ModelMaker
from oamd.backends.base import LanguageModel, UnconfiguredModel
from oamd.bridge import core
from oamd.bridge.extensions import EXTENSIONS, TESTING
from oamd.bridge.state import BridgeState, DaemonConfig
from oamd.limits import (
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    MAX_CONNECTION_BYTES,
    MAX_LINE_BYTES,
    MAX_OUTBOX_BYTES,
    MAX_SESSIONS,
)
from oamd.rpc import Registry

if TYPE_CHECKING:
    from anyio.abc import ByteStream

__all__ = [
    "ConnectionTap",
    "DaemonConfig",
    "build_registry",
    "default_config",
    "serve_stdio",
    "serve_stream",
]


ConnectionTap = Callable[
    ["ByteStream", ModelFactory], AbstractAsyncContextManager[tuple["ByteStream", ModelFactory]]
]
"""Sees one connection (``--record``): given its stream and models, it yields the stream and models
to serve it with, and its block ends once the connection has closed. A tap that has a
``keep_secret(text)`` method is given the socket token by ``oamd serve``, which it must not keep."""


def _loader(module: str) -> Any:
    def load(registry: Registry) -> None:
        importlib.import_module(f"oamd.bridge.{module}").register(registry)

    return load


def build_registry(config: DaemonConfig) -> Registry:
    """The core methods, and every namespace of every extension listed to load on first use."""
    registry = Registry()
    core.register(registry)
    extensions = [*EXTENSIONS, TESTING] if config.test_methods else EXTENSIONS
    for namespace in (n for extension in extensions for n in extension.namespaces):
        for method in namespace.notifications:
            registry.declare_notification(method)
        for method in namespace.client_requests:
            registry.declare_client_request(method)
        registry.register_on_first_use(namespace.name, namespace.methods, _loader(namespace.module))
    return registry


def _scripted_maker(record: bool) -> ModelMaker:
    """Builds scripted models; they keep what they were shown only for ``test/modelRequests``."""

    def make(spec: dict[str, Any], path: str) -> LanguageModel:
        from oamd.backends.scripted.model import ScriptedModel, parse_script  # loads with a session

        steps, fallback = parse_script(spec, path)
        return ScriptedModel(steps, fallback, record=record)

    return make


def default_config(
    system_model: LanguageModel | None = None,
    *,
    allow_scripted: bool = True,
    test_methods: bool = False,
    max_sessions: int = MAX_SESSIONS,
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT_SECONDS,
    max_connection_bytes: int = MAX_CONNECTION_BYTES,
) -> DaemonConfig:
    models = ModelFactory(
        system_model or UnconfiguredModel(),
        types={"scripted": _scripted_maker(record=test_methods)},
        allow_scripted=allow_scripted,
    )
    return DaemonConfig(
        models=models,
        test_methods=test_methods,
        max_sessions=max_sessions,
        tool_timeout=tool_timeout,
        max_connection_bytes=max_connection_bytes,
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
    from oamd.rpc import Connection  # the event loop's side loads once serving begins

    state = state or BridgeState(config)

    async def on_close() -> None:
        state.cancel_all_work()

    conn = Connection(
        stream,
        registry or build_registry(config),
        state,
        max_line_bytes=max_line_bytes,
        on_close=on_close,
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
    ``max_outbox_bytes`` pile up); ``initial``: what was read before (``oamd.early_initialize``),
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

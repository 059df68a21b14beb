"""Wiring: the registry with every method set, per-connection state, and the served transports."""

from __future__ import annotations

from anyio.abc import ByteStream

from oamd.agent.models import ModelFactory
from oamd.backends.base import LanguageModel, UnconfiguredModel
from oamd.limits import MAX_LINE_BYTES
from oamd.methods import core
from oamd.methods.state import BridgeState, DaemonConfig
from oamd.rpc import Connection, Registry
from oamd.transport import stdio_stream

__all__ = ["DaemonConfig", "build_registry", "default_config", "serve_stdio", "serve_stream"]


def build_registry(config: DaemonConfig) -> Registry:
    registry = Registry()
    core.register(registry)
    if config.test_methods:
        core.register_test_methods(registry)
    return registry


def default_config(
    system_model: LanguageModel | None = None,
    *,
    allow_scripted: bool = True,
    test_methods: bool = False,
) -> DaemonConfig:
    models = ModelFactory(system_model or UnconfiguredModel(), allow_scripted=allow_scripted)
    return DaemonConfig(models=models, test_methods=test_methods)


async def serve_stream(
    stream: ByteStream,
    config: DaemonConfig,
    *,
    registry: Registry | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> None:
    """Serves one connection until it closes."""
    state = BridgeState(config)
    conn = Connection(
        stream,
        registry or build_registry(config),
        state,
        max_line_bytes=max_line_bytes,
    )
    async with stream:
        await conn.run()


async def serve_stdio(config: DaemonConfig, *, max_line_bytes: int = MAX_LINE_BYTES) -> None:
    async with stdio_stream() as stream:
        await serve_stream(stream, config, max_line_bytes=max_line_bytes)

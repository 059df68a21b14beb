"""Wiring: the registry with every method set, per-connection state, and the served transports."""

from __future__ import annotations

from typing import Any

from anyio.abc import ByteStream

from oamd.agent.models import ModelFactory, ModelMaker
from oamd.backends.base import LanguageModel, UnconfiguredModel
from oamd.backends.scripted import ScriptedModel, parse_script
from oamd.limits import DEFAULT_TOOL_TIMEOUT_SECONDS, MAX_LINE_BYTES, MAX_SESSIONS
from oamd.methods import content, core, decision, npc, session, testing, validate, world
from oamd.methods.state import BridgeState, DaemonConfig
from oamd.rpc import Connection, Registry
from oamd.transport import stdio_stream

__all__ = ["DaemonConfig", "build_registry", "default_config", "serve_stdio", "serve_stream"]


def build_registry(config: DaemonConfig) -> Registry:
    registry = Registry()
    core.register(registry)
    validate.register(registry)
    session.register(registry)
    npc.register(registry)
    world.register(registry)
    decision.register(registry)
    content.register(registry)
    if config.test_methods:
        testing.register(registry)
    return registry


def _scripted_maker(record: bool) -> ModelMaker:
    """Builds scripted models; they keep what they were shown only for ``test/modelRequests``."""

    def make(spec: dict[str, Any], path: str) -> LanguageModel:
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
    )


async def serve_stream(
    stream: ByteStream,
    config: DaemonConfig,
    *,
    registry: Registry | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> None:
    """Serves one connection until it closes; its sessions die with it."""
    state = BridgeState(config)

    async def on_close() -> None:
        state.cancel_all_work()

    conn = Connection(
        stream,
        registry or build_registry(config),
        state,
        max_line_bytes=max_line_bytes,
        on_close=on_close,
    )
    async with stream:
        await conn.run()


async def serve_stdio(config: DaemonConfig, *, max_line_bytes: int = MAX_LINE_BYTES) -> None:
    async with stdio_stream() as stream:
        await serve_stream(stream, config, max_line_bytes=max_line_bytes)

"""The daemon's method set and configuration: every namespace of every extension listed, the core
loaded; the models a connection may ask for.

Start-up loads only what answering ``initialize`` needs (the core methods, the rpc layer, the
transport): every other namespace is listed from ``bridge.extensions`` at once and its module
(with the agent, game and schema code under it) loads on the first call of one of its methods.
"""

from __future__ import annotations

import importlib
from typing import Any

from oamd.agent.models import ModelFactory, ModelMaker
from oamd.backends.base import LanguageModel, UnconfiguredModel
from oamd.bridge import core
from oamd.bridge.extensions import EXTENSIONS, TESTING
from oamd.bridge.state import DaemonConfig
from oamd.limits import DEFAULT_TOOL_TIMEOUT_SECONDS, MAX_CONNECTION_BYTES, MAX_SESSIONS
from oamd.rpc import Registry

__all__ = ["DaemonConfig", "build_registry", "default_config"]


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

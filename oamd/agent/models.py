"""Which model a session runs on: ``"system"`` (the daemon's backend) or a host-registered type.

``ModelFactory`` is the one place that knows the daemon-wide backend and the model types the host
registered (``scripted`` among them), so handlers never touch ``backends/`` directly; reading the
protocol's ``model`` parameter into one of them is the adapters' (``oamd.bridge.model_params``). Every use of ``"system"`` goes through ``bind`` when
one is set (``oamd stdio --record`` wraps each use to record it; ``oamd replay`` hands each use the
script recorded for it), so the model a session, NPC or call gets is its own; without ``bind``
they all share the one backend and resolving costs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oamd.backends.base import Availability, LanguageModel

__all__ = ["ModelFactory", "ModelMaker", "SystemBinder"]

ModelMaker = Callable[[dict[str, Any], str], LanguageModel]
"""Builds a model from its spec object (``{"type": …, …}``) and the param path for errors."""

SystemBinder = Callable[[LanguageModel, Any], LanguageModel]
"""The model one use of ``"system"`` gets, from the system backend and the use (``resolve``'s
``use``: the method and id of the request that asked)."""


@dataclass
class ModelFactory:
    system: LanguageModel
    """The backend given at start (``--model`` / ``OAMD_MODEL``)."""
    types: dict[str, ModelMaker] = field(default_factory=dict)
    """Model types besides ``system`` (``scripted``), by name."""
    allow_scripted: bool = True
    """Hosts may disable ``{"type": "scripted"}`` models."""
    bind: SystemBinder | None = None
    """Gives each use of ``system`` its own stand-in (see the module's docstring)."""

    def cached_availability(self) -> Availability | None:
        return self.system.cached_availability()

    def last_known_availability(self) -> Availability | None:
        return self.system.last_known_availability()

    async def availability(self) -> Availability:
        return await self.system.availability()

    def model_types(self) -> list[str]:
        return ["system", *(t for t in self.types if t != "scripted" or self.allow_scripted)]

    def allows(self, kind: str) -> bool:
        """Whether models of ``kind`` may be made here (scripted ones may be disabled)."""
        return kind != "scripted" or self.allow_scripted

    def maker(self, kind: str) -> ModelMaker | None:
        return self.types.get(kind)

    def system_model(self, use: Any) -> LanguageModel:
        """The model one use of ``"system"`` gets (``use``: who asks, for ``bind``)."""
        return self.system if self.bind is None else self.bind(self.system, use)

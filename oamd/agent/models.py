"""Which model a session runs on: ``"system"`` (the daemon's backend) or a scripted model.

``ModelFactory`` resolves the protocol's ``model`` parameter. It is the one place that knows the
daemon-wide backend, so handlers never touch ``backends/`` directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oamd.backends.base import Availability, LanguageModel

__all__ = ["ModelFactory"]


@dataclass
class ModelFactory:
    system: LanguageModel
    """The backend given at start (``--model`` / ``OAMD_MODEL``)."""
    allow_scripted: bool = True
    """Hosts may disable ``{"type": "scripted"}`` models."""

    def cached_availability(self) -> Availability | None:
        return self.system.cached_availability()

    async def availability(self) -> Availability:
        return await self.system.availability()

    def model_types(self) -> list[str]:
        return ["system", "scripted"] if self.allow_scripted else ["system"]

    def describe(self, spec: Any) -> str:
        """The short name ``session/list`` shows for a model spec."""
        if spec is None or spec == "system":
            return "system"
        if spec == "scripted" or (isinstance(spec, dict) and spec.get("type") == "scripted"):
            return "scripted"
        return str(spec.get("type")) if isinstance(spec, dict) else str(spec)

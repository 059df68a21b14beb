"""What the method handlers share: the daemon's configuration and one connection's objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oamd.agent.models import ModelFactory

__all__ = ["BridgeState", "DaemonConfig"]


@dataclass
class DaemonConfig:
    """Fixed at start: the models the daemon serves and what the host allows."""

    models: ModelFactory
    test_methods: bool = False
    """Registers ``test/*`` methods used by the end-to-end suite (never in production)."""


@dataclass
class BridgeState:
    """Per connection: every session, NPC and world lives here and dies with the connection."""

    config: DaemonConfig
    extras: dict[str, Any] = field(default_factory=dict)

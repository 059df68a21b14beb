"""What the method handlers share: the daemon's configuration and one connection's objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oamd.agent.models import ModelFactory
from oamd.limits import MAX_CONNECTION_BYTES, MAX_SESSIONS

if TYPE_CHECKING:
    from oamd.agent.session import SessionStore

__all__ = ["BridgeState", "DaemonConfig"]


@dataclass
class DaemonConfig:
    """Fixed at start: the models the daemon serves and what the host allows."""

    models: ModelFactory
    test_methods: bool = False
    """Registers ``test/*`` methods used by the end-to-end suite (never in production)."""
    max_sessions: int = MAX_SESSIONS
    max_connection_bytes: int = MAX_CONNECTION_BYTES
    """What one connection's histories and worlds may hold (``--max-connection-bytes``)."""
    tool_timeout: float = 120.0
    """The default time the engine has to answer a ``tool/call`` (``--tool-timeout``)."""


@dataclass
class BridgeState:
    """Per connection: every session, NPC and world lives here and dies with the connection."""

    config: DaemonConfig
    extras: dict[str, Any] = field(default_factory=dict)
    _sessions: SessionStore | None = field(default=None, init=False, repr=False)

    @property
    def sessions(self) -> SessionStore:
        """The connection's sessions, created by the first ``session/*`` call (the session
        modules load on first use, not at start)."""
        if self._sessions is None:
            from oamd.agent.session import SessionStore

            self._sessions = SessionStore(self.config.max_sessions)
        return self._sessions

    def held_bytes(self) -> int:
        """About how much the connection's histories and world documents hold, as JSON: a sum
        over its objects (a few hundred at most), each of which keeps its own count."""
        total = 0 if self._sessions is None else self._sessions.held_bytes()
        for store in self.extras.values():
            total += store.held_bytes()
        return total

    def cancel_all_work(self) -> None:
        """Cancels every queued and running operation and forgets every object (shutdown)."""
        if self._sessions is not None:
            self._sessions.clear()
        for store in self.extras.values():
            store.clear()

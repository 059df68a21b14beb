"""What the method handlers share: the daemon's configuration and one connection's objects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from oamd.agent.models import ModelFactory
from oamd.bridge.budget import Budget, Part
from oamd.limits import MAX_CONNECTION_BYTES, MAX_SESSIONS

if TYPE_CHECKING:
    from oamd.agent.session import SessionStore

__all__ = ["BridgeState", "DaemonConfig", "sessions"]

P = TypeVar("P", bound=Part)


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
    """Per connection: its budget, and its parts — the core's sessions (``"sessions"``), each
    extension's stores (``"game"``: NPCs and worlds) — which die with the connection.

    The budget is made with the state, when the connection opens. A part is opened once, by the
    first call that needs it (``open``), so the modules it is made of load on first use, not at
    start (``tests/test_app.py``); readers that must not open anything (the inspector, the
    budget) see only the parts opened so far (``part``).
    """

    config: DaemonConfig
    world_watch: Any = field(default=None, init=False, repr=False)
    """Hears every change of every world of the connection (``WorldStore.watch``; set before
    the game extension opens: ``oamd --inspect`` sets it when the connection opens)."""
    _parts: dict[str, Part] = field(default_factory=dict, init=False, repr=False)
    budget: Budget = field(init=False)

    def __post_init__(self) -> None:
        self.budget = Budget(self.config.max_connection_bytes, self._parts)

    def open(self, name: str, make: Callable[[], P]) -> P:
        """The part ``name``, made by ``make`` the first time it is asked for."""
        part = self._parts.get(name)
        if part is None:
            part = self._parts[name] = make()
        return part  # type: ignore[return-value]

    def part(self, name: str) -> Any:
        """The part ``name`` if it was opened, else ``None``."""
        return self._parts.get(name)

    def held_bytes(self) -> int:
        """About how much the connection holds, as JSON (``Budget.held_bytes``)."""
        return self.budget.held_bytes()

    def cancel_all_work(self) -> None:
        """Cancels every queued and running operation and forgets every object (shutdown)."""
        for part in list(self._parts.values()):
            part.clear()


def sessions(state: BridgeState) -> SessionStore:
    """The connection's sessions (the core's part)."""

    def make() -> SessionStore:
        from oamd.agent.session import SessionStore  # loads with the first session call

        return SessionStore(state.config.max_sessions)

    return state.open("sessions", make)

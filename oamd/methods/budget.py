"""The connection's byte budget: requests that would add to what it holds are refused once it
holds more than ``DaemonConfig.max_connection_bytes`` (see ``oamd.limits.MAX_CONNECTION_BYTES``).

Checked before the handler runs, so a refused request changes nothing; reading, deleting,
resetting and cancelling are never wrapped, so the client can always make room.
"""

from __future__ import annotations

from oamd.errors import LimitReached
from oamd.methods.state import BridgeState
from oamd.rpc import Handler, Reply, Request

__all__ = ["needs_room"]


def needs_room(handler: Handler) -> Handler:
    """``handler``, refused -32055 ``limit_reached`` while the connection is over its budget."""

    def guarded(req: Request) -> Reply:
        state: BridgeState = req.state
        limit = state.config.max_connection_bytes
        held = state.held_bytes()
        if held > limit:
            raise LimitReached(
                "bytes",
                limit,
                f"This connection holds about {held} bytes of histories and world state; the "
                f"limit is {limit}. Delete, reset or compact sessions, NPCs or worlds first.",
            )
        return handler(req)

    guarded.__name__ = getattr(handler, "__name__", "handler")
    guarded.__doc__ = handler.__doc__
    return guarded

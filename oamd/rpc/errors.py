"""The error table and the one place where an exception becomes a wire ``error`` member.

Codes are grouped as in the protocol (§8): JSON-RPC's own (-32700…-32603), agent and model
(-32001…-32012), bridge (-32020…-32024), game methods (-32050…-32056). ``to_wire_error`` is the only
function that turns an exception into ``{"code", "message", "data": {"code", …}}``.
"""

from __future__ import annotations

from typing import Any

from oamd.errors import OamdError
from oamd.log import get_logger

__all__ = [
    "CODES",
    "ParseError",
    "error_object",
    "to_wire_error",
]

log = get_logger("oamd.rpc")

CODES: dict[str, int] = {
    # JSON-RPC
    "parse_error": -32700,
    "invalid_message": -32600,
    "method_not_found": -32601,
    "invalid_params": -32602,
    "internal_error": -32603,
    # agent and model
    "model_unavailable": -32001,
    "guardrail_violation": -32002,
    "refusal": -32003,
    "context_size_exceeded": -32004,
    "rate_limited": -32005,
    "unsupported_language": -32006,
    "invalid_schema": -32007,
    "tool_failed": -32008,
    "cancelled": -32009,
    "busy": -32010,
    "invalid_request": -32011,
    "generation_failed": -32012,
    # bridge
    "session_not_found": -32020,
    "session_exists": -32021,
    "session_limit": -32022,
    "shut_down": -32023,
    "timeout": -32024,
    # game methods
    "npc_not_found": -32050,
    "npc_exists": -32051,
    "world_not_found": -32052,
    "world_exists": -32053,
    "world_error": -32054,
    "limit_reached": -32055,
    "subscription_not_found": -32056,
}
"""``data.code`` → JSON-RPC error number, for every error the daemon sends."""


class ParseError(OamdError):
    """The line is not valid JSON (or not UTF-8); answered with ``id: null``."""

    name = "parse_error"


def error_object(name: str, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"code": -32602, "message": "…", "data": {"code": "invalid_params", …}}``."""
    return {"code": CODES[name], "message": message, "data": {"code": name, **(data or {})}}


def to_wire_error(exc: BaseException) -> dict[str, Any]:
    """The exception-to-wire boundary. ``OamdError`` → its row; anything else → -32603, logged
    with its traceback. A group (concurrent tool calls failing together) answers as its first
    protocol error."""
    if isinstance(exc, BaseExceptionGroup):
        exc = _first_protocol_error(exc)
    if isinstance(exc, OamdError):
        return error_object(exc.name, exc.message, exc.data)
    log.error("internal_error", exc_info=exc)
    return error_object("internal_error", "Internal error; please report it.")


def _first_protocol_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first ``OamdError`` in ``group`` (nested groups included), else its first exception."""
    matched, _ = group.split(OamdError)
    leaves = matched or group
    while isinstance(leaves, BaseExceptionGroup):
        leaves = leaves.exceptions[0]
    return leaves

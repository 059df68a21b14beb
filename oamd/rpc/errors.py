"""The error table and the one place where an exception becomes a wire ``error`` member.

Codes are grouped as in the protocol (§8): JSON-RPC's own (-32700…-32603), agent and model
(-32001…-32012), bridge (-32020…-32024), game methods (-32050…-32056). ``to_wire_error`` is the only
function that turns an exception into ``{"code", "message", "data": {"code", …}}``.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import orjson

from oamd.errors import OamdError
from oamd.log import get_logger

__all__ = [
    "CODES",
    "ParseError",
    "error_object",
    "param_path",
    "to_wire_error",
    "validation_message",
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


def param_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    """Turns a pydantic error location into ``options.toolChoice`` or ``tools[0].parameters``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before", "function-plain", "tagged-union"):
            continue
        elif isinstance(part, str) and (part.startswith("function-") or "[" in part):
            continue  # pydantic's internal names for validators and unions
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


_KINDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "an array",
}


def _shown(value: Any) -> str:
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def validation_message(exc: Any, prefix: str = "") -> tuple[str, str]:
    """``(path, message)`` for the first error, worded as the reference words them:
    ``Missing required parameter 'prompt'.`` / ``Parameter 'prompt' must be a string; got 5.``"""
    first = exc.errors(include_url=False)[0]
    path = param_path(first["loc"], prefix)
    kind = first["type"]
    ctx = first.get("ctx") or {}
    if kind == "missing":
        return path, f"Missing required parameter '{path}'."
    if kind in _KINDS:
        return path, f"Parameter '{path}' must be {_KINDS[kind]}; got {_shown(first.get('input'))}."
    if kind in ("greater_than_equal", "greater_than"):
        return path, f"Parameter '{path}' must be at least {ctx.get('ge', ctx.get('gt'))}."
    if kind == "finite_number":
        return path, f"Parameter '{path}' must be a finite number."
    if kind == "value_error" and "error" in ctx:
        reason = str(ctx["error"])
        return path, reason if reason.startswith("'") or reason[
            :1
        ].isupper() else f"'{path}' {reason}"
    msg = first["msg"]
    return path, f"'{path}' {msg[0].lower()}{msg[1:]}." if path else f"Invalid params: {msg}."


def _is_pydantic_error(exc: BaseException) -> bool:
    # pydantic is imported only by code that uses it; no need to load it to recognise its errors
    pydantic_core = sys.modules.get("pydantic_core")
    return pydantic_core is not None and isinstance(exc, pydantic_core.ValidationError)


def to_wire_error(exc: BaseException) -> dict[str, Any]:
    """The exception-to-wire boundary. ``OamdError`` → its row; a pydantic ``ValidationError`` →
    -32602 naming the dotted path; anything else → -32603, logged with its traceback. A group
    (concurrent tool calls failing together) answers as its first protocol error."""
    if isinstance(exc, BaseExceptionGroup):
        exc = _first_protocol_error(exc)
    if isinstance(exc, OamdError):
        return error_object(exc.name, exc.message, exc.data)
    if _is_pydantic_error(exc):
        _, message = validation_message(exc)
        return error_object("invalid_params", message)
    log.error("internal_error", exc_info=exc)
    return error_object("internal_error", "Internal error; please report it.")


def _first_protocol_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """The first ``OamdError`` in ``group`` (nested groups included), else its first exception."""
    matched, _ = group.split(OamdError)
    leaves = matched or group
    while isinstance(leaves, BaseExceptionGroup):
        leaves = leaves.exceptions[0]
    return leaves


def is_finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

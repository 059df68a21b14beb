"""Envelope rules (§1): a line in, a checked message out; a message out, a line of valid UTF-8.

Ids are strings or numbers and are echoed exactly; integral numbers travel as plain digits and must
be within ±(2^53-1). ``null`` ids, booleans, objects and batches are rejected with -32600. Params are
by name; ``null`` members count as absent.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from oamd.errors import InvalidMessage
from oamd.limits import MAX_SAFE_INTEGER
from oamd.rpc.errors import ParseError

__all__ = ["Message", "decode_line", "encode", "parse_message"]


class Message:
    """One checked incoming message: a request (``id`` set), a notification, or a response."""

    __slots__ = ("error", "id", "method", "params", "result")

    def __init__(
        self,
        method: str | None,
        id: Any,
        params: dict[str, Any],
        result: Any = None,
        error: Any = None,
    ) -> None:
        self.method = method
        self.id = id
        self.params = params
        self.result = result
        self.error = error

    @property
    def is_response(self) -> bool:
        return self.method is None


_NO_ID = object()


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def decode_line(line: bytes) -> Any:
    """Parses one line. orjson first; the stdlib parser only when orjson refuses, so numbers
    orjson cannot hold (``1e400``) and escaped lone surrogates still parse and are judged later.

    Raises:
        ParseError: the line is not JSON (or not UTF-8).
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError):
        raise ParseError("Parse error: the line is not valid JSON.") from None


def _check_id(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        raise InvalidMessage("Invalid request: 'id' must be a string or a number.")
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise InvalidMessage("Invalid request: numeric 'id' exceeds 2^53-1; use a string id.")
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_SAFE_INTEGER:
            raise InvalidMessage("Invalid request: numeric 'id' exceeds 2^53-1; use a string id.")
        return int(value) if value.is_integer() else value
    raise InvalidMessage("Invalid request: 'id' must be a string or a number.")


def parse_message(obj: Any) -> Message:
    """Checks the JSON-RPC envelope of a decoded line.

    ``null`` param members are kept: most params treat them as absent, but some (``world/set``'s
    ``value``, a restore's overriding keys) give ``null`` a meaning, so the params models decide.

    Raises:
        InvalidMessage: not a JSON-RPC 2.0 message; ``.echo_id`` carries the id to echo when the
            id itself was valid (else the response uses ``null``).
    """
    if not isinstance(obj, dict):
        if isinstance(obj, list):
            raise InvalidMessage("Invalid request: batches are not supported; send one per line.")
        raise InvalidMessage("Invalid request: a message must be a JSON object.")
    raw_id = obj.get("id", _NO_ID)
    msg_id = None if raw_id is _NO_ID else _check_id(raw_id)
    try:
        if obj.get("jsonrpc") != "2.0":
            raise InvalidMessage("Invalid request: 'jsonrpc' must be \"2.0\".")
        method = obj.get("method")
        if method is None:
            if raw_id is _NO_ID or ("result" not in obj and "error" not in obj):
                raise InvalidMessage("Invalid request: 'method' is required.")
            return Message(None, msg_id, {}, obj.get("result"), obj.get("error"))
        if not isinstance(method, str):
            raise InvalidMessage("Invalid request: 'method' must be a string.")
        params = obj.get("params")
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            raise InvalidMessage("Invalid request: 'params' must be an object (by name).")
    except InvalidMessage as exc:
        exc.echo_id = msg_id
        raise
    return Message(method, None if raw_id is _NO_ID else msg_id, params)


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line (with ``\\n``). Valid UTF-8 always: text orjson refuses (lone
    surrogates) is written with ASCII escapes instead."""
    try:
        return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"

"""JSON-RPC message rules (§1): a line in, a checked message out; a message out, a UTF-8 line.

Ids are strings or numbers and are echoed exactly; integral numbers travel as plain digits and must
be within ±(2^53-1). ``null`` ids, booleans, objects and batches are rejected with -32600. Params are
by name; ``null`` members count as absent.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import orjson

from oamd.errors import InvalidMessage
from oamd.jsonvalue import JsonTextError, loads, nests_deeper_than
from oamd.limits import MAX_JSON_DEPTH, MAX_SAFE_INTEGER
from oamd.rpc.errors import CODES, ParseError

__all__ = [
    "Message",
    "check_nesting",
    "decode_line",
    "encode",
    "is_plain_id",
    "parse_message",
    "plain_request",
]


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


_NO_ID = object()


def is_plain_id(value: Any) -> bool:
    """An id echoed exactly as it came: a string, or an integer within ±(2^53-1). The one id rule
    of every fast path (the connection's, the parser's, the early ``initialize``); any other id
    goes through ``parse_message``'s full checks."""
    return type(value) is str or (
        type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    )


def plain_request(obj: Any) -> tuple[str, Any, Any] | None:
    """``(method, id, params)`` of a decoded line that is a well-formed request with a plain id
    (``params`` as sent, ``None`` when absent), else ``None``: then ``parse_message`` decides."""
    if type(obj) is not dict:
        return None
    method = obj.get("method")
    msg_id = obj.get("id")
    if type(method) is str and method and obj.get("jsonrpc") == "2.0" and is_plain_id(msg_id):
        return method, msg_id, obj.get("params")
    return None


def check_nesting(line: bytes, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuses a line nesting arrays and objects deeper than ``limit``, before any parser or
    handler recurses into it.

    Raises:
        InvalidMessage: the line nests too deep (answered with id ``null``).
    """
    if nests_deeper_than(line, limit):
        raise InvalidMessage(
            f"Invalid request: the JSON nests deeper than {limit} levels.", limit=limit
        )


def decode_line(line: bytes) -> Any:
    """Parses one line under the daemon's JSON rules (``oamd.jsonvalue``): numbers orjson cannot
    hold and lone surrogate escapes are read, not refused.

    Raises:
        ParseError: the line is not JSON (or not UTF-8).
    """
    try:
        return loads(line, limit=sys.maxsize, keep_id=True)  # nesting checked by the caller
    except JsonTextError as exc:
        raise ParseError(str(exc)) from None


_ID_TYPE_MESSAGE = "'id' must be a string or a number."
_ID_RANGE_MESSAGE = (
    "A numeric 'id' must be an integer of magnitude at most 2^53-1 (9007199254740991) so it "
    "can be echoed exactly; use a string id."
)


def _id_problem(value: Any) -> str | None:
    """Why ``value`` is not a usable id, or ``None`` when it is."""
    if isinstance(value, str):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _ID_TYPE_MESSAGE
    if isinstance(value, float) and not math.isfinite(value):
        return _ID_RANGE_MESSAGE
    return None if abs(value) <= MAX_SAFE_INTEGER else _ID_RANGE_MESSAGE


def _normal_id(value: Any) -> Any:
    # integral numbers travel as plain digits: 5.0 is echoed as 5
    return int(value) if isinstance(value, float) and value.is_integer() else value


def parse_message(obj: Any) -> Message:
    """Checks the JSON-RPC envelope of a decoded line (fast path: a well-formed request).

    Checks run in the reference's order: an object; ``jsonrpc`` is ``"2.0"``; a valid ``id``;
    a non-empty string ``method`` (request or notification) or else ``result``/``error`` with an
    id (a reply to our ``tool/call``). ``params`` is passed on as sent: the connection rejects a
    non-object with -32602 once the method is known. ``null`` param members are kept, since some
    params (``world/set``'s ``value``) give ``null`` a meaning; each handler's parameter parsing decides.

    Raises:
        InvalidMessage: not a JSON-RPC 2.0 message; ``.echo_id`` carries the id to echo when the
            id itself was valid (else the response uses ``null``).
    """
    request = plain_request(obj)
    if request is not None:
        method, msg_id, params = request
        return Message(method, msg_id, {} if params is None else params)
    if type(obj) is dict and "id" not in obj:  # a well-formed notification
        method = obj.get("method")
        if type(method) is str and method and obj.get("jsonrpc") == "2.0":
            params = obj.get("params")
            return Message(method, None, {} if params is None else params)
    return _parse_slowly(obj)


def _invalid(message: str, echo_id: Any = None) -> InvalidMessage:
    exc = InvalidMessage(message)
    exc.echo_id = echo_id
    return exc


def _parse_slowly(obj: Any) -> Message:
    if not isinstance(obj, dict):
        if isinstance(obj, list):
            raise _invalid("Batch requests are not supported; send one message per line.")
        raise _invalid("A JSON-RPC message must be an object.")
    has_id = "id" in obj
    raw_id = obj.get("id")
    problem = _id_problem(raw_id) if has_id else None
    echo_id = _normal_id(raw_id) if has_id and problem is None else None
    if obj.get("jsonrpc") != "2.0":
        raise _invalid("Missing or unsupported 'jsonrpc' version; expected \"2.0\".", echo_id)
    if problem is not None:
        raise _invalid(problem)
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str) or not method:
            raise _invalid("'method' must be a non-empty string.", echo_id)
        params = obj.get("params")
        return Message(method, echo_id, {} if params is None else params)
    if has_id and ("result" in obj or "error" in obj):
        return Message(None, echo_id, {}, obj.get("result"), obj.get("error"))
    raise _invalid(
        "A message needs 'method' (request or notification) or 'result'/'error' (response).",
        echo_id,
    )


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line (with ``\\n``). Valid UTF-8 always: text orjson refuses (an id with a
    lone surrogate, echoed exactly) is written with ASCII escapes instead. A message that cannot
    be written at all (a defect: nothing the daemon reads can produce one) becomes, for a
    response, an internal error naming why, so its request is still answered once.

    Raises:
        ValueError: a request or notification that cannot be written (the caller drops it).
    """
    try:
        return orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        pass
    try:
        return (
            json.dumps(message, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()
            + b"\n"
        )
    except (TypeError, ValueError, RecursionError) as exc:
        if "method" in message:
            raise ValueError(f"{message['method']} cannot be written as JSON: {exc}") from None
        failure = {
            "code": CODES["internal_error"],
            "message": f"Internal error: the response could not be written as JSON ({exc}).",
            "data": {"code": "internal_error"},
        }
        return encode({"jsonrpc": "2.0", "id": message.get("id"), "error": failure})

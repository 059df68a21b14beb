"""Answering the daemon's requests to the client: ``tool/call`` through the client's
``tool_handler``, anything else with ``method_not_found``; and ``tool/cancel``, which ends the
running handler call it names.

What it guarantees: nothing the engine's handler does escapes into the client. A handler that
raises (or returns what is not JSON) costs that one ``tool/call``: ``RpcError`` is sent as itself,
anything else as ``internal_error`` (its message is what the model reads), logged with its
traceback. A cancelled call (``tool/cancel``, or the connection ending) is not answered: the
daemon no longer needs its output, or cannot receive it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson

from oamd.client._correlation import lookup
from oamd.client._errors import RpcError
from oamd.rpc.errors import CODES

__all__ = ["ToolCalls", "ToolHandler"]

log = logging.getLogger("oamd.client")

ToolHandler = Callable[[dict[str, Any]], Awaitable[Any]]
"""Answers a ``tool/call``: given its ``params``, returns the reply's ``result``."""


class ToolCalls:
    """The daemon's requests being answered, by id, so a ``tool/cancel`` can end its own."""

    def __init__(self) -> None:
        self._running: dict[Any, anyio.CancelScope] = {}

    async def answer(self, msg: dict[str, Any], handler: ToolHandler | None) -> bytes | None:
        """The reply line (without its newline) to the daemon's request ``msg``; ``None`` when it
        is left unanswered: no handler (the daemon's own timeout applies), or the call was
        cancelled."""
        call_id = msg["id"]
        if msg["method"] != "tool/call":
            return _reply_line(call_id, _unknown_method(msg["method"]))
        if handler is None:
            return None
        with anyio.CancelScope() as scope:
            with contextlib.suppress(TypeError):  # an unhashable id: no tool/cancel names it
                self._running[call_id] = scope
            try:
                return _reply_line(call_id, await _outcome(handler, msg))
            finally:
                if lookup(self._running, call_id) is scope:
                    del self._running[call_id]
        return None  # cancelled: the daemon no longer needs this output, or cannot get it

    def cancel(self, params: Any) -> None:
        """Ends the running call a ``tool/cancel`` names (its ``id``), if it still runs."""
        if isinstance(params, dict):
            scope = lookup(self._running, params.get("id"))
            if scope is not None:
                scope.cancel()

    def cancel_all(self) -> None:
        """Ends every running call: the connection is over, no reply could reach the daemon."""
        for scope in self._running.values():
            scope.cancel()


async def _outcome(handler: ToolHandler, msg: dict[str, Any]) -> dict[str, Any]:
    """The reply's ``result`` or ``error`` member: what the handler returns, or what it raised."""
    try:
        return {"result": await handler(msg.get("params", {}))}
    except RpcError as exc:
        return {"error": exc.to_error()}
    except Exception as exc:
        return _handler_failed(msg["id"], exc)


def _handler_failed(call_id: Any, exc: Exception) -> dict[str, Any]:
    log.exception("tool handler failed on tool/call %r; answered with an error", call_id)
    message = f"The engine's tool handler failed: {type(exc).__name__}: {exc}"
    return {
        "error": {
            "code": CODES["internal_error"],
            "message": message,
            "data": {"code": "internal_error"},
        }
    }


def _unknown_method(method: Any) -> dict[str, Any]:
    message = f"The client serves tool/call only, not {method!r}."
    data = {"code": "method_not_found", "method": method}
    return {"error": {"code": CODES["method_not_found"], "message": message, "data": data}}


def _reply_line(call_id: Any, outcome: dict[str, Any]) -> bytes | None:
    """The reply to request ``call_id``; a result (or an ``RpcError``'s data) that is not JSON
    becomes an error reply, as a failure of the handler. ``None`` (logged) when not even that
    can be written: an id no encoder takes."""
    try:
        return orjson.dumps({"jsonrpc": "2.0", "id": call_id, **outcome})
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        failed = _handler_failed(call_id, exc)
    try:
        return orjson.dumps({"jsonrpc": "2.0", "id": call_id, **failed})
    except TypeError:
        log.error("could not encode a reply to request %r; left unanswered", call_id)
        return None

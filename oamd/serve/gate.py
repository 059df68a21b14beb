"""The token gate of ``oamd serve``: what a connection that must authenticate may send first.

Its first message must be ``initialize`` carrying the daemon's token in ``params.auth`` (compared
in constant time); anything else is refused -32600 ``invalid_message`` with ``data.auth``
(``required`` or ``invalid``), echoing the request's id when it had a valid one. The gate also asks
the server for a client slot when the token is right, so the slot is taken at admission.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

import anyio

from oamd.errors import InvalidMessage, LimitReached
from oamd.limits import MAX_SAFE_INTEGER

__all__ = ["TokenGate", "refusal"]


class TokenGate:
    """The connection's gate: admits only ``initialize`` carrying the right ``auth``, and only
    when ``take_slot`` (which raises ``LimitReached`` when every slot is taken) gives it a slot."""

    __slots__ = ("_take_slot", "_token", "admitted")

    def __init__(self, token: str, take_slot: Callable[[], None]) -> None:
        self._token = token.encode()
        self._take_slot = take_slot
        self.admitted = anyio.Event()

    def __call__(self, message: Any) -> None:
        msg_id: Any = None
        if type(message) is dict:
            raw_id = message.get("id")
            if type(raw_id) is str or (type(raw_id) is int and abs(raw_id) <= MAX_SAFE_INTEGER):
                msg_id = raw_id
            params = message.get("params")
            if (
                message.get("method") == "initialize"
                and message.get("jsonrpc") == "2.0"
                and msg_id is not None
                and type(params) is dict
                and type(params.get("auth")) is str
            ):
                offered = params["auth"].encode("utf-8", "surrogatepass")
                if hmac.compare_digest(offered, self._token):
                    try:
                        self._take_slot()
                    except LimitReached as exc:
                        exc.echo_id = msg_id  # type: ignore[attr-defined]
                        raise
                    self.admitted.set()
                    return
                raise refusal(
                    "Authentication failed: the token in 'auth' is wrong.", msg_id, "invalid"
                )
        raise refusal(
            "Authentication required: the first message must be an 'initialize' request "
            "carrying the daemon's token in params 'auth'.",
            msg_id,
            "required",
        )


def refusal(message: str, msg_id: Any, reason: str) -> InvalidMessage:
    error = InvalidMessage(message, auth=reason)
    error.echo_id = msg_id
    return error

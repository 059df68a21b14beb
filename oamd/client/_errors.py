"""The client's exceptions: what a caller of ``Client`` or ``Bridge`` catches. Every request ends in
exactly one of a result or one of these::

    Exception
    ├── RpcError           the daemon answered a request with an error
    ├── ConnectionClosed   no answer can arrive any more
    └── TimeoutError       (the builtin) the request's ``timeout=`` passed before its answer
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConnectionClosed", "RpcError"]


class RpcError(Exception):
    """An error response: ``code``, ``message`` and ``data`` (``data["code"]`` is the stable name).

    Raised by ``request`` when the daemon answers with an error; a ``tool_handler`` raises it to
    answer a ``tool/call`` with exactly this error.
    """

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message
        self.data = data or {}

    @classmethod
    def from_error(cls, error: dict[str, Any]) -> RpcError:
        """The exception for a response's ``error`` member."""
        return cls(error.get("code", 0), error.get("message", ""), error.get("data"))

    @property
    def name(self) -> str:
        """The stable snake_case name (``data.code``), e.g. ``session_not_found``."""
        return str(self.data.get("code", ""))

    def to_error(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            out["data"] = self.data
        return out


class ConnectionClosed(Exception):
    """Raised when an answer can no longer arrive: by a request (or ``wait``, ``next_message``,
    ``send``) once the daemon has closed its side of the connection or the client was closed,
    whether the request was already in flight or started afterwards. When the client's monitor
    knows why the daemon closed (``connect_stdio``: it exited), the message ends with that."""

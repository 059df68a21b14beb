"""Recorder: an opt-in log of a client's traffic, for tests and tools that assert on order.

A ``Client`` keeps nothing per message; attach ``Recorder()`` (``Client(stream,
recorder=Recorder())``) and every message the daemon sends is appended here in arrival order, with
each request the client sent remembered by id. It grows until ``clear()``: attach one only where
the history is wanted.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Recorder"]


class Recorder:
    """What a client sent and received, in order. Lists are plain and may be cleared by tests."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        """Every message from the daemon, in arrival order."""
        self.notifications: list[dict[str, Any]] = []
        """Every notification from the daemon (a message with ``method`` and no ``id``)."""
        self.tool_calls: list[dict[str, Any]] = []
        """Every ``tool/call`` request from the daemon."""
        self.sent_methods: dict[Any, str] = {}
        """Request id → method, for every request the client sent (to check responses by method)."""

    def record_sent(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.sent_methods[message["id"]] = message["method"]

    def record_received(self, message: dict[str, Any]) -> None:
        self.received.append(message)
        if "method" in message:
            (self.tool_calls if "id" in message else self.notifications).append(message)

    def events_for(self, request_id: Any) -> list[dict[str, Any]]:
        """The ``event`` payloads of every notification carrying ``requestId``, in order."""
        return [
            n["params"]["event"]
            for n in self.notifications
            if n.get("params", {}).get("requestId") == request_id and "event" in n["params"]
        ]

    def clear(self) -> None:
        """Forgets everything recorded so far."""
        self.received.clear()
        self.notifications.clear()
        self.tool_calls.clear()
        self.sent_methods.clear()

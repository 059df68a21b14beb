"""Correlation: who waits for what arrives. Requests in flight by id (each with its notification
callback and its response hook) and ``next_message`` waiters (each with its predicate).

What it guarantees: a response wakes the one request it answers, once; a late response (its
waiter gone: timed out or cancelled) and one to an id nobody sent are dropped. A request's
notification callback sees only notifications naming its id, and only until its response
arrives. Each waiter has its own event, so a wake-up is never shared or lost, and ``end`` wakes
every waiter at once (those without an answer find none and raise).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio

__all__ = ["Correlator", "NotificationCallback", "ResponseHook", "lookup"]

log = logging.getLogger("oamd.client")

NotificationCallback = Callable[[dict[str, Any]], None]
"""Receives the ``params`` of each notification carrying a request's id as ``requestId``."""

ResponseHook = Callable[[dict[str, Any]], None]
"""Receives a request's response message as it is read, before any later message is handled."""


def lookup(table: dict[Any, Any], key: Any) -> Any:
    """``table[key]``, or ``None``; an unhashable key (a list or object id) matches nothing we
    sent."""
    try:
        return table.get(key)
    except TypeError:
        return None


class _Pending:
    """A request in flight: its response once it arrives, and its callbacks."""

    __slots__ = ("event", "on_notification", "on_response", "response")

    def __init__(
        self, on_notification: NotificationCallback | None, on_response: ResponseHook | None
    ) -> None:
        self.event = anyio.Event()
        self.response: dict[str, Any] | None = None
        self.on_notification = on_notification
        self.on_response = on_response


class _Watch:
    """One ``next_message`` waiter, with its own event: a wake-up is never shared or lost."""

    __slots__ = ("error", "event", "match", "predicate")

    def __init__(self, predicate: Callable[[dict[str, Any]], bool]) -> None:
        self.predicate = predicate
        self.event = anyio.Event()
        self.match: dict[str, Any] | None = None
        self.error: Exception | None = None


class Correlator:
    """The waiters of one connection."""

    def __init__(self) -> None:
        self._pending: dict[Any, _Pending] = {}
        self._watches: list[_Watch] = []

    def expect(
        self,
        msg_id: Any,
        on_notification: NotificationCallback | None = None,
        on_response: ResponseHook | None = None,
    ) -> None:
        """Starts waiting for the response to ``msg_id`` (before the request is sent)."""
        self._pending[msg_id] = _Pending(on_notification, on_response)

    def forget(self, msg_id: Any) -> None:
        """Stops waiting for ``msg_id`` (its request could not be sent)."""
        self._pending.pop(msg_id, None)

    async def response(self, msg_id: Any) -> dict[str, Any] | None:
        """The response to ``msg_id`` once it arrives; ``None`` when the connection ended first.
        Leaving, by any way, drops a response arriving later."""
        pending = self._pending[msg_id]
        try:
            await pending.event.wait()
        finally:
            del self._pending[msg_id]
        return pending.response

    async def watch(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """The first message ``offer``-ed after this call matching ``predicate``; ``None`` when
        the connection ended first.

        Raises:
            Exception: whatever ``predicate`` raised.
        """
        watch = _Watch(predicate)
        self._watches.append(watch)
        try:
            await watch.event.wait()
        finally:
            self._watches.remove(watch)
        if watch.error is not None:
            raise watch.error
        return watch.match

    def offer(self, msg: dict[str, Any]) -> None:
        """Wakes every waiter whose predicate ``msg`` matches (a raising predicate wakes its
        waiter with that error: it is the waiter's, not the connection's)."""
        for watch in self._watches:
            if watch.match is None and watch.error is None:
                try:
                    if watch.predicate(msg):
                        watch.match = msg
                        watch.event.set()
                except Exception as exc:
                    watch.error = exc
                    watch.event.set()

    def resolve(self, msg: dict[str, Any]) -> None:
        """Hands a response to the request it answers (dropped when nobody waits for it)."""
        pending = lookup(self._pending, msg.get("id"))
        if pending is None or pending.response is not None:
            return
        pending.response = msg
        if pending.on_response is not None:
            try:
                pending.on_response(msg)
            except Exception:
                log.exception("response hook failed on request %r; skipped", msg.get("id"))
        pending.event.set()

    def route(self, method: str, params: Any) -> None:
        """Hands a notification to the callback of the request it names as ``requestId``."""
        if not isinstance(params, dict) or "requestId" not in params:
            return
        pending = lookup(self._pending, params["requestId"])
        if pending is None or pending.on_notification is None or pending.response is not None:
            return
        try:
            pending.on_notification(params)
        except Exception:
            log.exception("notification callback failed on %s; skipped", method)

    def end(self) -> None:
        """Wakes every waiter: the connection is over."""
        for pending in self._pending.values():
            pending.event.set()
        for watch in self._watches:
            watch.event.set()

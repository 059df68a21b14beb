"""Notification handlers by method: ``client.on_notification("world/changed", handler)``.

A handler receives the ``params`` of every notification of its method, whichever request (or
none) caused it; a request's own ``on_notification`` callback is separate and still called.

What it guarantees:

- A plain function runs in the client's reader, as the line is read: it sees the notifications
  of its method in arrival order, each before the response read after it is returned to its
  caller. It must not block; it cannot await.
- A coroutine function (``async def``) runs in a task of its own, one per registration: it
  receives its notifications in arrival order, one at a time, and may await anything (a request
  on the same client included) without holding up the reader. While it is busy, at most
  ``MAX_QUEUED_NOTIFICATIONS`` wait for it; one more is dropped and logged.
- A handler that raises is logged with its traceback and costs that one message, never the
  client or another handler; so does a plain function returning an awaitable (register an
  ``async def`` instead), which is closed unawaited.
- After ``remove()`` (what ``add`` returns) the handler is called no more; what waited for it is
  dropped. Handlers registered before the client is entered start with it; once it is closed
  none is called.
"""

from __future__ import annotations

import inspect
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

__all__ = [
    "MAX_QUEUED_NOTIFICATIONS",
    "NotificationHandler",
    "Notifications",
    "is_coroutine_function",
]

log = logging.getLogger("oamd.client")

NotificationHandler = Callable[[dict[str, Any]], Any]
"""Receives a notification's ``params``: a plain function (run as the line is read) or a
coroutine function (run in its own task, in arrival order)."""

MAX_QUEUED_NOTIFICATIONS = 10_000
"""Notifications waiting for one busy ``async`` handler; one more is dropped for that handler
(logged), so a handler that stopped cannot take the client's memory."""


def is_coroutine_function(handler: Callable[..., Any]) -> bool:
    """Whether calling ``handler`` makes a coroutine (an ``async def``, or an object whose
    ``__call__`` is one)."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        type(handler).__call__
    )


class _Registration:
    __slots__ = ("handler", "is_async", "method", "queue", "removed", "wakeup")

    def __init__(self, method: str, handler: NotificationHandler) -> None:
        self.method = method
        self.handler = handler
        self.is_async = is_coroutine_function(handler)
        self.queue: deque[dict[str, Any]] = deque()
        self.wakeup = anyio.Event()
        self.removed = False


class Notifications:
    """The notification handlers of one client, by method."""

    def __init__(self) -> None:
        self._by_method: dict[str, list[_Registration]] = {}
        self._tg: TaskGroup | None = None
        self._closed = False

    def add(self, method: str, handler: NotificationHandler) -> Callable[[], None]:
        """Calls ``handler`` with the ``params`` of each notification ``method``; returns the
        function that removes it."""
        registration = _Registration(method, handler)
        self._by_method.setdefault(method, []).append(registration)
        if registration.is_async and self._tg is not None:
            self._tg.start_soon(self._serve, registration)

        def remove() -> None:
            registration.removed = True
            registration.queue.clear()
            registration.wakeup.set()
            registrations = self._by_method.get(method, [])
            if registration in registrations:
                registrations.remove(registration)

        return remove

    def start(self, tg: TaskGroup) -> None:
        """Runs the ``async`` handlers in ``tg`` (the client's), from now on."""
        self._tg = tg
        for registrations in self._by_method.values():
            for registration in registrations:
                if registration.is_async:
                    tg.start_soon(self._serve, registration)

    def close(self) -> None:
        """No handler is called any more (the client is closed; its task group ends the tasks)."""
        self._closed = True
        self._tg = None

    def dispatch(self, method: str, params: dict[str, Any]) -> None:
        """Hands ``params`` to every handler of ``method``."""
        if self._closed:
            return
        for registration in tuple(self._by_method.get(method, ())):
            if registration.is_async:
                if len(registration.queue) >= MAX_QUEUED_NOTIFICATIONS:
                    log.warning(
                        "dropped a %s notification: %d wait for its busy handler %r",
                        method,
                        len(registration.queue),
                        registration.handler,
                    )
                    continue
                registration.queue.append(params)
                registration.wakeup.set()
            else:
                _call(registration, params)

    async def _serve(self, registration: _Registration) -> None:
        while not registration.removed:
            if not registration.queue:
                registration.wakeup = anyio.Event()
                await registration.wakeup.wait()
                continue
            params = registration.queue.popleft()
            try:
                await registration.handler(params)
            except Exception:
                log.exception(
                    "%s handler failed; that notification is skipped", registration.method
                )


def _call(registration: _Registration, params: dict[str, Any]) -> None:
    try:
        returned = registration.handler(params)
    except Exception:
        log.exception("%s handler failed; that notification is skipped", registration.method)
        return
    if inspect.isawaitable(returned):
        close = getattr(returned, "close", None)
        if close is not None:
            close()  # never awaited: the handler was not registered as the coroutine it is
        log.error(
            "%s handler %r returned an awaitable, which was not awaited; register an async def",
            registration.method,
            registration.handler,
        )

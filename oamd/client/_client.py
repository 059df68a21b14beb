"""Client: one connection to a bridge, speaking the protocol as dicts. Correlates the messages
read (``_lines``) with their waiters (``_correlation``), hands a request's notifications to its
callback and every notification to the handlers of its method (``on_notification``,
``_notifications``), answers ``tool/call`` through ``tool_handler`` (``_tool_calls``: what it
returns is sent as the ``result``; raise ``RpcError`` to answer with an ``error``), and writes
through one outbox (``_outbox``).

What it guarantees:

- Any number of tasks may use one client at once: sending queues a line, and a single writer
  task writes every line (requests, notifications, ``tool/call`` replies) whole and in order.
  Leaving the client first lets the lines still queued go out (for a while).
- Every request ends exactly once: with its response, with ``ConnectionClosed`` once the
  connection is over (the daemon closed its side, a write failed, or the client was closed), or
  with ``TimeoutError`` when its ``timeout=`` passed first (its response, should it come later,
  is dropped; the daemon is not told: the typed API cancels a timed-out turn, see ``Session``).
  A request started once the connection is over fails at once.
- Each ``next_message`` waiter is woken once, with the first message matching its own predicate.
- Notifications and the response of one request reach the caller in arrival order: a request's
  ``on_notification`` callback, and every plain-function notification handler, has seen every
  event before its response is returned.
- What the engine's code does cannot take the connection down: a ``tool_handler`` that raises
  costs that one ``tool/call``; a notification callback or handler that raises is logged and
  costs that one message.
- Neither can one bad line from the daemon: a line that is not a JSON object is logged and
  skipped, a response to an id nobody waits for is dropped, and a request other than
  ``tool/call`` is answered ``method_not_found``.
- A ``tool/cancel`` cancels the running ``tool_handler`` call it names, and that call is not
  answered; once the connection is over, every running call is cancelled the same way.
- Nothing is kept per message unless a ``Recorder`` is attached (``recorder=``).
- A ``ConnectionClosed`` says why the far end closed when a ``ConnectionMonitor`` knows
  (``connect_stdio``: the daemon's exit status and its last stderr lines); at the end of input the
  client waits up to ``_SETTLE_SECONDS`` for that account before failing the waiters.
- An exception raised inside ``async with client`` leaves it as itself; only a failure of the
  client's own tasks comes out as an ``ExceptionGroup``.

Its exceptions are drawn in ``_errors``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable
from enum import Enum
from typing import Any, Protocol

import anyio
import orjson
from anyio.abc import ByteStream, TaskGroup

from oamd.client._correlation import Correlator, NotificationCallback, ResponseHook
from oamd.client._errors import ConnectionClosed, RpcError
from oamd.client._lines import MessageReader
from oamd.client._notifications import NotificationHandler, Notifications
from oamd.client._outbox import Outbox
from oamd.client._recorder import Recorder
from oamd.client._tool_calls import ToolCalls, ToolHandler

__all__ = ["Client", "ConnectionMonitor"]

log = logging.getLogger("oamd.client")


class ConnectionMonitor(Protocol):
    """Watches the far end of a connection for its client (``connect_stdio``: the daemon process)."""

    async def watch(self) -> None:
        """Runs in the client's task group while the client is open."""

    async def settle(self) -> None:
        """Returns once the far end has given its account of the end of input."""

    def reason(self) -> str | None:
        """Why the far end closed, once it has; added to ``ConnectionClosed`` messages."""


class _State(Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


_MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest line read from the daemon; a longer one is skipped unread (and logged)."""

_HIGH_WATER_BYTES = 1 << 20
"""Bytes queued for writing past which senders wait until the daemon has read some."""

_SETTLE_SECONDS = 2.0
"""How long the end of input waits for the monitor's account (a daemon's exit after it closed its
stdout) before the waiters fail without it."""

_FLUSH_SECONDS = 5.0
"""How long leaving a client waits for the lines still queued to be written; a daemon that reads
nothing costs no more than this."""


class Client:
    """A connection to a bridge over a byte stream. Use as an async context manager.

    ``tool_handler`` answers ``tool/call`` requests (without one they stay unanswered and the
    daemon's timeout applies); ``on_message`` sees every message from the daemon, in arrival
    order (an exception it raises ends the client: the tests use it to check the contract);
    ``recorder`` keeps a log of the traffic as ``client.recorder``; without one nothing is kept;
    ``monitor`` watches the far end and explains its closing.
    """

    def __init__(
        self,
        stream: ByteStream,
        *,
        tool_handler: ToolHandler | None = None,
        on_message: Callable[[dict[str, Any]], None] | None = None,
        recorder: Recorder | None = None,
        monitor: ConnectionMonitor | None = None,
        max_line_bytes: int = _MAX_LINE_BYTES,
    ) -> None:
        self._stream = stream
        self._monitor = monitor
        self.tool_handler = tool_handler
        self.recorder = recorder
        self._on_message = on_message
        self._lines = MessageReader(max_line_bytes)
        self._outbox = Outbox(stream, _HIGH_WATER_BYTES)
        self._reader = anyio.CancelScope()
        self._ids = itertools.count(1)
        self._waiters = Correlator()
        self._tool_calls = ToolCalls()
        self._notifications = Notifications()
        self._tg: TaskGroup | None = None
        self._state = _State.UNOPENED
        self._closed = anyio.Event()

    async def __aenter__(self) -> Client:
        if self._state is not _State.UNOPENED:
            raise RuntimeError(f"A client can be entered once; this one is {self._state.value}.")
        self._state = _State.OPEN
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._read)
        self._tg.start_soon(self._write)
        if self._monitor is not None:
            self._tg.start_soon(self._monitor.watch)
        self._notifications.start(self._tg)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if self._tg is None:
            raise RuntimeError("The client was never entered.")
        with anyio.move_on_after(_FLUSH_SECONDS, shield=True):
            await self._outbox.flush()
        self._tg.cancel_scope.cancel()
        try:
            if exc is None or isinstance(exc, anyio.get_cancelled_exc_class()):
                await self._tg.__aexit__(exc_type, exc, tb)
            else:  # the caller's own error leaves as itself, not wrapped in an ExceptionGroup
                await self._tg.__aexit__(None, None, None)
        finally:
            self._fail_waiters()
            await self._stream.aclose()

    # ---- notifications -----------------------------------------------------------------------

    def on_notification(self, method: str, handler: NotificationHandler) -> Callable[[], None]:
        """Calls ``handler`` with the ``params`` of every notification ``method`` (``world/changed``,
        ``session/event``…) from now on; returns the function that removes it. A plain function
        runs as the line is read; an ``async def`` in its own task, in arrival order. One that
        raises is logged and costs that message only (see ``_notifications``)."""
        return self._notifications.add(method, handler)

    # ---- sending -----------------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    async def send_raw(self, data: bytes) -> None:
        """Writes bytes as they are (tests of framing), after everything sent before them.

        Returns once they are queued (waiting first while much is queued); should writing fail
        later, the connection is over and every waiter gets ``ConnectionClosed``.

        Raises:
            ConnectionClosed: the connection is closed.
        """
        self._check_open()
        try:
            await self._outbox.send(data)
        except anyio.ClosedResourceError as exc:
            raise self._closed_error("The connection is closed; nothing can be sent.") from exc

    async def send(self, message: dict[str, Any]) -> None:
        """Sends one message as it is (recorded when a recorder is attached).

        Raises:
            ConnectionClosed: the connection is closed.
        """
        if self.recorder is not None:
            self.recorder.record_sent(message)
        await self.send_raw(orjson.dumps(message) + b"\n")

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)

    async def start(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        id: Any = None,
        on_notification: NotificationCallback | None = None,
        on_response: ResponseHook | None = None,
    ) -> Any:
        """Sends a request without waiting; returns its id, which must be passed to ``wait``.

        ``on_notification`` receives the ``params`` of every notification whose ``requestId`` is
        this request's id, until its response arrives; ``on_response`` the response message as
        it is read, before any later message is handled (``World.subscribe`` registers its
        handler there, so no change read right after the answer is missed). A raising one is
        logged.

        Raises:
            ConnectionClosed: the connection is already closed.
        """
        self._check_open()
        msg_id = self.next_id() if id is None else id
        self._waiters.expect(msg_id, on_notification, on_response)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            await self.send(msg)
        except BaseException:
            self._waiters.forget(msg_id)
            raise
        return msg_id

    async def wait(self, msg_id: Any) -> dict[str, Any]:
        """The raw response message for a request sent with ``start``.

        Raises:
            ConnectionClosed: the connection closed before the response arrived.
        """
        response = await self._waiters.response(msg_id)
        if response is None:
            raise self._closed_error(
                f"The connection closed before request {msg_id!r} was answered."
            )
        return response

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_notification: NotificationCallback | None = None,
        on_response: ResponseHook | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Sends a request and returns the raw response message (``result`` or ``error``).

        ``timeout`` (seconds, from now) bounds sending and waiting alike; past it the request
        stops waiting and its response, should it come, is dropped. The daemon is not told.

        Raises:
            TimeoutError: ``timeout`` passed before the response arrived.
            ConnectionClosed: the connection closed before the response arrived.
        """
        msg_id = None
        try:
            with anyio.fail_after(timeout):
                msg_id = await self.start(
                    method, params, on_notification=on_notification, on_response=on_response
                )
                return await self.wait(msg_id)
        except TimeoutError:
            which = f"request {msg_id!r}" if msg_id is not None else "the request (unsent)"
            raise TimeoutError(f"No answer to {method} ({which}) within {timeout} s.") from None

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_notification: NotificationCallback | None = None,
        on_response: ResponseHook | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Sends a request and returns its ``result`` (``on_response`` as for ``start``,
        ``timeout`` as for ``call``).

        Raises:
            RpcError: the daemon answered with an error.
            TimeoutError: ``timeout`` passed before the response arrived.
            ConnectionClosed: the connection closed before the response arrived.
        """
        response = await self.call(
            method,
            params,
            on_notification=on_notification,
            on_response=on_response,
            timeout=timeout,
        )
        if "error" in response:
            raise RpcError.from_error(response["error"])
        return response["result"]

    async def next_message(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Waits for (and returns) the first message from the daemon matching ``predicate``.

        With a recorder attached the search starts at the first message received; without one,
        only messages arriving after the call are seen.

        Raises:
            ConnectionClosed: the connection closed before a matching message arrived.
        """
        if self.recorder is not None:
            for msg in self.recorder.received:
                if predicate(msg):
                    return msg
        self._check_open()
        match = await self._waiters.watch(predicate)
        if match is None:
            raise self._closed_error("The connection closed before a matching message arrived.")
        return match

    async def closed(self) -> None:
        """Returns once the connection is over: the daemon closed its side, or a write failed."""
        await self._closed.wait()

    # ---- receiving ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state is _State.CLOSED:
            raise self._closed_error("The connection is closed.")
        if self._state is _State.UNOPENED:
            raise RuntimeError("Enter the client (async with) before using it.")

    def _closed_error(self, text: str) -> ConnectionClosed:
        reason = self._monitor.reason() if self._monitor is not None else None
        return ConnectionClosed(f"{text} {reason}" if reason else text)

    def _fail_waiters(self) -> None:
        """Ends the connection: wakes every waiter (those without an answer raise
        ``ConnectionClosed``), fails every unsent line, stops the reader, the notification
        handlers and the running ``tool_handler`` calls (no reply could reach the daemon)."""
        self._state = _State.CLOSED
        self._closed.set()
        self._outbox.close()
        self._reader.cancel()
        self._notifications.close()
        self._tool_calls.cancel_all()
        self._waiters.end()

    async def _write(self) -> None:
        await self._outbox.run()
        if self._outbox.failure is not None:
            log.warning(
                "writing to the daemon failed (%r); the connection is over", self._outbox.failure
            )
            self._fail_waiters()

    async def _read(self) -> None:
        try:
            with self._reader:
                while True:
                    try:
                        chunk = await self._stream.receive()
                    except (
                        anyio.EndOfStream,
                        anyio.ClosedResourceError,
                        anyio.BrokenResourceError,
                    ):
                        if self._monitor is not None:
                            with anyio.move_on_after(_SETTLE_SECONDS):
                                await self._monitor.settle()
                        return
                    for msg in self._lines.feed(chunk):
                        self._handle(msg)
        finally:
            self._fail_waiters()

    def _handle(self, msg: dict[str, Any]) -> None:
        if self.recorder is not None:
            self.recorder.record_received(msg)
        if self._on_message is not None:
            self._on_message(msg)
        self._waiters.offer(msg)  # after recording: a predicate may look at what was received
        if "method" not in msg:
            self._waiters.resolve(msg)
        elif "id" in msg:
            assert self._tg is not None
            self._tg.start_soon(self._answer, msg)
        else:
            method, params = msg["method"], msg.get("params")
            if method == "tool/cancel":
                self._tool_calls.cancel(params)
            self._waiters.route(method, params)
            if isinstance(method, str) and isinstance(params, dict):
                self._notifications.dispatch(method, params)

    async def _answer(self, msg: dict[str, Any]) -> None:
        """Answers one request from the daemon; nothing it meets escapes into the task group."""
        line = await self._tool_calls.answer(msg, self.tool_handler)
        if line is not None:
            with contextlib.suppress(ConnectionClosed):
                await self.send_raw(line + b"\n")

"""Client: one connection to a bridge. Correlates responses, hands a request's notifications to its
callback, answers ``tool/call`` through ``tool_handler`` (what it returns is sent as the
``result``; raise ``RpcError`` to answer with an ``error``).

What it guarantees:

- Any number of tasks may use one client at once: sending queues a line, and a single writer
  task writes every line (requests, notifications, ``tool/call`` replies) whole and in order
  (``_outbox``). Leaving the client first lets the lines still queued go out (for a while).
- Every request ends exactly once: with its response, or with ``ConnectionClosed`` once the
  connection is over: the daemon closed its side, a write failed, or the client was closed. A
  request started after that fails at once.
- Each ``next_message`` waiter is woken once, with the first message matching its own predicate.
- Notifications and the response of one request reach the caller in arrival order: a request's
  ``on_notification`` callback has seen every event before its response is returned.
- What the engine's code does cannot take the connection down: a ``tool_handler`` that raises
  (or returns what is not JSON) costs that one ``tool/call`` (``RpcError`` is sent as itself,
  anything else as ``internal_error``, whose message the model reads, logged with its
  traceback); a notification callback that raises is logged and skipped.
- Neither can one bad line from the daemon: a line that is not a JSON object is logged and
  skipped, a response to an id nobody waits for is dropped, and a request other than
  ``tool/call`` is answered ``method_not_found``.
- A ``tool/cancel`` cancels the running ``tool_handler`` call it names, and that call is not
  answered: the daemon no longer needs its output. Once the connection is over, every running
  ``tool_handler`` call is cancelled the same way.
- Nothing is kept per message unless a ``Recorder`` is attached (``recorder=``).
- A ``ConnectionClosed`` says why the far end closed when a ``ConnectionMonitor`` knows
  (``connect_stdio``: the daemon's exit status and its last stderr lines); at the end of input the
  client waits up to ``_SETTLE_SECONDS`` for that account before failing the waiters.
- An exception raised inside ``async with client`` leaves it as itself; only a failure of the
  client's own tasks comes out as an ``ExceptionGroup``.

Exceptions::

    Exception
    ├── RpcError           the daemon answered a request with an error
    └── ConnectionClosed   no answer can arrive any more
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Any, Protocol

import anyio
import orjson
from anyio.abc import ByteStream, TaskGroup

from oamd.client._outbox import Outbox
from oamd.client._recorder import Recorder
from oamd.rpc.errors import CODES
from oamd.transport.framing import LineFramer, OversizedLine

__all__ = [
    "Client",
    "ConnectionClosed",
    "ConnectionMonitor",
    "NotificationCallback",
    "RpcError",
    "ToolHandler",
]

log = logging.getLogger("oamd.client")

ToolHandler = Callable[[dict[str, Any]], Awaitable[Any]]
"""Answers a ``tool/call``: given its ``params``, returns the reply's ``result``."""

NotificationCallback = Callable[[dict[str, Any]], None]
"""Receives the ``params`` of each notification carrying a request's id as ``requestId``."""


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


def _decode(line: bytes) -> dict[str, Any] | None:
    """The message a line holds; ``None`` (logged) for a line that is not a JSON object."""
    try:
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            msg = json.loads(line)  # what orjson refuses: escaped lone surrogates
    except (ValueError, RecursionError) as exc:  # not JSON (or nested past Python's stack)
        log.warning("skipped a line from the daemon that is not JSON (%s): %.80r", exc, line)
        return None
    if not isinstance(msg, dict):
        log.warning("skipped a line from the daemon that is not a JSON object: %.80r", line)
        return None
    return msg


def _lookup(table: dict[Any, Any], key: Any) -> Any:
    try:
        return table.get(key)
    except TypeError:  # an unhashable id (a list or object) matches nothing we sent
        return None


class _Pending:
    """A request in flight: its response once it arrives, and its notification callback."""

    __slots__ = ("event", "on_notification", "response")

    def __init__(self, on_notification: NotificationCallback | None) -> None:
        self.event = anyio.Event()
        self.response: dict[str, Any] | None = None
        self.on_notification = on_notification


class _Watch:
    """One ``next_message`` waiter, with its own event: a wake-up is never shared or lost."""

    __slots__ = ("error", "event", "match", "predicate")

    def __init__(self, predicate: Callable[[dict[str, Any]], bool]) -> None:
        self.predicate = predicate
        self.event = anyio.Event()
        self.match: dict[str, Any] | None = None
        self.error: Exception | None = None


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
        self._framer = LineFramer(max_line_bytes)
        self._outbox = Outbox(stream, _HIGH_WATER_BYTES)
        self._reader = anyio.CancelScope()
        self._ids = itertools.count(1)
        self._pending: dict[Any, _Pending] = {}
        self._tool_calls: dict[Any, anyio.CancelScope] = {}
        """Running ``tool_handler`` calls by ``tool/call`` id: a ``tool/cancel`` ends its one."""
        self._watches: list[_Watch] = []
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
    ) -> Any:
        """Sends a request without waiting; returns its id, which must be passed to ``wait``.

        ``on_notification`` receives the ``params`` of every notification whose ``requestId`` is
        this request's id, until its response arrives.

        Raises:
            ConnectionClosed: the connection is already closed.
        """
        self._check_open()
        msg_id = self.next_id() if id is None else id
        self._pending[msg_id] = _Pending(on_notification)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        try:
            await self.send(msg)
        except BaseException:
            self._pending.pop(msg_id, None)
            raise
        return msg_id

    async def wait(self, msg_id: Any) -> dict[str, Any]:
        """The raw response message for a request sent with ``start``.

        Raises:
            ConnectionClosed: the connection closed before the response arrived.
        """
        pending = self._pending[msg_id]
        try:
            await pending.event.wait()
        finally:
            del self._pending[msg_id]  # cancelled or not: a late response is dropped
        if pending.response is None:
            raise self._closed_error(
                f"The connection closed before request {msg_id!r} was answered."
            )
        return pending.response

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_notification: NotificationCallback | None = None,
    ) -> dict[str, Any]:
        """Sends a request and returns the raw response message (``result`` or ``error``).

        Raises:
            ConnectionClosed: the connection closed before the response arrived.
        """
        return await self.wait(await self.start(method, params, on_notification=on_notification))

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_notification: NotificationCallback | None = None,
    ) -> Any:
        """Sends a request and returns its ``result``.

        Raises:
            RpcError: the daemon answered with an error.
            ConnectionClosed: the connection closed before the response arrived.
        """
        response = await self.call(method, params, on_notification=on_notification)
        if "error" in response:
            err = response["error"]
            raise RpcError(err.get("code", 0), err.get("message", ""), err.get("data"))
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
        watch = _Watch(predicate)
        self._watches.append(watch)
        try:
            await watch.event.wait()
        finally:
            self._watches.remove(watch)
        if watch.error is not None:
            raise watch.error
        if watch.match is None:
            raise self._closed_error("The connection closed before a matching message arrived.")
        return watch.match

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
        ``ConnectionClosed``), fails every unsent line, stops the reader and the running
        ``tool_handler`` calls (no reply could reach the daemon)."""
        self._state = _State.CLOSED
        self._closed.set()
        self._outbox.close()
        self._reader.cancel()
        for scope in self._tool_calls.values():
            scope.cancel()
        for pending in self._pending.values():
            pending.event.set()
        for watch in self._watches:
            watch.event.set()

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
                    for line in self._framer.feed(chunk):
                        if isinstance(line, OversizedLine):
                            log.warning(
                                "skipped a line of %d bytes from the daemon (the limit is %d)",
                                line.size,
                                self._framer.limit,
                            )
                        elif line.strip():
                            msg = _decode(line)
                            if msg is not None:
                                self._handle(msg)
        finally:
            self._fail_waiters()

    def _handle(self, msg: dict[str, Any]) -> None:
        if self.recorder is not None:
            self.recorder.record_received(msg)
        if self._on_message is not None:
            self._on_message(msg)
        self._wake_watches(msg)  # after recording: a predicate may look at what was received
        if "method" in msg:
            if "id" in msg:
                assert self._tg is not None
                self._tg.start_soon(self._answer, msg)
            else:
                if msg["method"] == "tool/cancel":
                    self._cancel_tool_call(msg.get("params"))
                self._route(msg)
            return
        pending = _lookup(self._pending, msg.get("id"))
        if pending is not None:
            pending.response = msg
            pending.event.set()

    def _route(self, msg: dict[str, Any]) -> None:
        params = msg.get("params")
        if not isinstance(params, dict) or "requestId" not in params:
            return
        pending = _lookup(self._pending, params["requestId"])
        if pending is None or pending.on_notification is None or pending.response is not None:
            return
        try:
            pending.on_notification(params)
        except Exception:
            log.exception("notification callback failed on %s; skipped", msg.get("method"))

    def _wake_watches(self, msg: dict[str, Any]) -> None:
        for watch in self._watches:
            if watch.match is None and watch.error is None:
                try:
                    if watch.predicate(msg):
                        watch.match = msg
                        watch.event.set()
                except Exception as exc:  # the waiter's own predicate: its error, not ours
                    watch.error = exc
                    watch.event.set()

    def _cancel_tool_call(self, params: Any) -> None:
        if isinstance(params, dict):
            scope = _lookup(self._tool_calls, params.get("id"))
            if scope is not None:
                scope.cancel()

    async def _answer(self, msg: dict[str, Any]) -> None:
        """Answers one request from the daemon; nothing it meets escapes into the task group."""
        call_id = msg["id"]
        if msg["method"] != "tool/call":
            line = _reply_line(call_id, _unknown_method(msg["method"]))
        else:
            handler = self.tool_handler
            if handler is None:
                return  # left unanswered: the daemon's timeout applies
            with anyio.CancelScope() as scope:
                with contextlib.suppress(TypeError):  # an unhashable id: no tool/cancel names it
                    self._tool_calls[call_id] = scope
                try:
                    line = _reply_line(call_id, await _outcome(handler, msg))
                finally:
                    if _lookup(self._tool_calls, call_id) is scope:
                        del self._tool_calls[call_id]
            if scope.cancelled_caught:
                return  # the daemon no longer needs this output (tool/cancel), or cannot get it
        if line is None:
            return
        with contextlib.suppress(ConnectionClosed):
            await self.send_raw(line + b"\n")


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

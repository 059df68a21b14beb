"""Connection: the engine of one client. Reads lines, dispatches in arrival order, answers once.

Ordering (§2). One reader handles messages strictly in arrival order: a handler validates and
does its order-sensitive step before the next message is looked at, and anything slow runs as
deferred work, concurrently. Replies to our own requests (``tool/call``, ids ``t-<n>``) resolve
their waiter the moment they are read and never wait behind anything.

Delivery. Every outgoing message goes through the one ``Outbox`` in production order, so the
events and ``tool/call``s a request causes precede its response. Every request gets exactly one
response: handlers' exceptions, deferred failures and cancellations all become error responses
at the single boundary ``to_wire_error``. Cancelled work answers -32009.

Lifecycle: running → shut down (``shutdown`` received: later requests fail -32023) → closed
(end of input, transport broke, or the ``shutdown`` response went out). At end of input every
request already received is still answered (as the reference does), a last line without its
newline included; ``tool/call``s that can no longer be answered fail at once. A transport that can
see its output go without writing (``wait_output_lost``: stdio's pipe) breaks the outbox then.
Closing cancels what is left, lets it answer within ``SHUTDOWN_GRACE_SECONDS``, flushes, and
returns from ``run``.

Sockets (``oamd serve``) set three options; stdio sets only ``max_outbox_bytes``.
``gate`` is consulted with each message until one is admitted (the authentication handshake):
until then nothing is dispatched, a line may not pass ``MAX_PREAUTH_LINE_BYTES``, and a refused
message is answered with the gate's error and closes the connection. ``hangup_on_eof``: end of input means the peer is gone, so nothing more is
written, ``tool/call``s still waiting are dropped and every in-flight request is cancelled.
``max_outbox_bytes``: a peer that stops reading while more than that waits is cut off: nothing more
is written and ``run`` closes as when the transport breaks (everything in flight is cancelled).
A ``ConnectionWatch`` set in the context (``oamd.rpc.observe``) hears when the connection starts
serving and when it has closed; each request's deferred work runs with it as ``current_request``.
"""

from __future__ import annotations

import contextvars
import enum
import itertools
from collections.abc import Awaitable, Callable
from json import JSONDecodeError
from typing import Any

import anyio
import orjson
from anyio.abc import ByteStream, TaskGroup, TaskStatus

from oamd.errors import (
    Cancelled,
    InvalidMessage,
    InvalidParams,
    LimitReached,
    MethodNotFound,
    OamdError,
    ShutDown,
)
from oamd.limits import (
    MAX_IN_FLIGHT_REQUESTS,
    MAX_LINE_BYTES,
    MAX_PREAUTH_LINE_BYTES,
    OUTBOX_HIGH_WATER_BYTES,
    SHUTDOWN_GRACE_SECONDS,
    WRITE_GRACE_SECONDS,
)
from oamd.log import get_logger
from oamd.rpc.errors import ParseError, error_object, to_wire_error
from oamd.rpc.message import Message, check_nesting, decode_line, parse_message, plain_request
from oamd.rpc.observe import CONNECTION_WATCH, CURRENT_REQUEST, report
from oamd.rpc.outbox import Outbox
from oamd.rpc.registry import Deferred, Registry, Request, Result
from oamd.transport.framing import LineFramer, OversizedLine

__all__ = ["Connection", "Gate", "Lifecycle", "PendingCall"]

log = get_logger("oamd.rpc")

_loads = orjson.loads
_NOT_DECODED = object()
_BLANK = object()

DECODE_IN_THREAD_BYTES = 1 << 20
"""Lines at least this long are checked and decoded in a worker thread (``_decode_large``)."""

EOF_DRAIN_SECONDS = 600.0
"""After end of input, how long received requests may take to finish before they are cancelled."""

_CLIENT_GONE_REPLY = Message(None, None, {}, None, {"message": "The client closed its input."})

Gate = Callable[[Any], None]
"""Judges a message that arrived before one was admitted: the decoded JSON value (``None`` when the
line is not JSON or is too long). Returning admits it, and every later message, unchecked; raising
an ``OamdError`` refuses the connection (the error goes out with ``InvalidMessage.echo_id``)."""

_current_work: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "oamd_current_work", default=None
)


class Lifecycle(enum.Enum):
    RUNNING = "running"
    SHUT_DOWN = "shut_down"
    CLOSED = "closed"


class PendingCall:
    """A request we sent to the client (``tool/call``); ``wait`` returns its reply message."""

    __slots__ = ("_conn", "_event", "id", "reply")

    def __init__(self, conn: Connection, call_id: str) -> None:
        self._conn = conn
        self._event = anyio.Event()
        self.id = call_id
        self.reply: Message | None = None

    def resolve(self, reply: Message) -> None:
        self.reply = reply
        self._event.set()

    async def wait(self) -> Message:
        await self._event.wait()
        assert self.reply is not None
        return self.reply

    def abandon(self) -> None:
        """Forgets the call: a reply arriving later is logged and dropped."""
        self._conn.forget_call(self)


class Connection:
    """Serves the protocol on one byte stream. ``state`` is the application's per-connection
    object (sessions, NPCs, worlds); ``on_close`` runs once when the connection closes."""

    def __init__(
        self,
        stream: ByteStream,
        registry: Registry,
        state: Any = None,
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        on_close: Callable[[], Awaitable[None]] | None = None,
        gate: Gate | None = None,
        hangup_on_eof: bool = False,
        max_outbox_bytes: float = float("inf"),
    ) -> None:
        self.registry = registry
        self._handlers = registry.handlers
        self.state = state
        self.outbox = Outbox(
            stream, min(OUTBOX_HIGH_WATER_BYTES, max_outbox_bytes // 2), max_outbox_bytes
        )
        self.lifecycle = Lifecycle.RUNNING
        self._stream = stream
        self._framer = LineFramer(
            max_line_bytes if gate is None else min(max_line_bytes, MAX_PREAUTH_LINE_BYTES)
        )
        self._max_line_bytes = max_line_bytes
        self._on_close = on_close
        self._tg: TaskGroup | None = None
        self._reader_scope = anyio.CancelScope()
        self._tokens = itertools.count(1)
        self._in_flight: dict[int, anyio.CancelScope] = {}
        self._in_flight_changed = anyio.Event()
        self._outgoing: dict[str, PendingCall] = {}
        self._outgoing_ids = itertools.count(1)
        self._sent_calls = 0
        """How many ``t-<n>`` requests went out: a reply naming a later one came too early."""
        self._close_after_reply = False
        self._held_replies: list[dict[str, Any]] | None = None
        """While a ``shutdown`` response is pending: the -32023 answers to requests read after it,
        sent right after that response (arrival order)."""
        self._input_closed = False
        self._gate = gate
        """Consulted until a message is admitted or refused; ``None`` from then on."""
        self._hangup_on_eof = hangup_on_eof
        self._on_line: Callable[[bytes], None] = (
            self._dispatch_line if gate is None else self._gated_line
        )

    # ---- serving -------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serves until end of input, a broken transport, or a delivered ``shutdown`` response."""
        watch = CONNECTION_WATCH.get()
        if watch is not None:
            report(watch, "opened", self)
        try:
            await self._serve(task_status)
        finally:
            if watch is not None:
                report(watch, "closed", self)
        self._release()

    async def _serve(self, task_status: TaskStatus[None]) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self.outbox.run)
            tg.start_soon(self._watch_transport)
            wait_output_lost = getattr(self._stream, "wait_output_lost", None)
            if wait_output_lost is not None:  # stdio: its reader can go away while we are silent
                tg.start_soon(self._watch_output, wait_output_lost)
            task_status.started()
            with self._reader_scope:
                await self._read_loop()
                # end of input: like the reference, answer everything already received first
                self._input_closed = True
                if self._hangup_on_eof:
                    self.outbox.discard()  # the peer is gone: _close cancels what is left
                for call in list(self._outgoing.values()):
                    call.resolve(_CLIENT_GONE_REPLY)
                self._outgoing.clear()
                with anyio.move_on_after(0 if self._hangup_on_eof else EOF_DRAIN_SECONDS):
                    while self._in_flight:
                        await self._in_flight_changed.wait()
            await self._close()
            tg.cancel_scope.cancel()

    async def _read_loop(self) -> None:
        receive = self._stream.receive
        feed = self._framer.feed
        outbox = self.outbox
        while True:
            try:
                chunk = await receive()
            except anyio.EndOfStream:
                for line in self._framer.finish():  # a last line without "\n" is a line too
                    if type(line) is bytes:
                        self._on_line(line)
                    else:
                        self._reject_oversized(line)
                return
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            for line in feed(chunk):
                if type(line) is not bytes:
                    self._reject_oversized(line)
                elif len(line) >= DECODE_IN_THREAD_BYTES and self._on_line == self._dispatch_line:
                    await self._dispatch_large_line(line)
                else:
                    self._on_line(line)
            if self._gate is not None and self._framer.discarding:
                self._gated_line(None)  # refused now, not after megabytes more of a first line
            outbox.write_now()  # a chunk's few answers leave before the work other tasks queued
            if outbox.over_high_water:
                await outbox.flush()  # backpressure: stop reading while the client is not

    async def _watch_transport(self) -> None:
        await self.outbox.broken.wait()
        self._reader_scope.cancel()

    async def _watch_output(self, wait_output_lost: Callable[[], Awaitable[None]]) -> None:
        """A transport that sees its output go without a write (a pipe whose reader closed it)
        breaks the outbox at once, as a failed write would: a running turn need not finish first."""
        await wait_output_lost()
        if not self.outbox.broken.is_set():
            log.info("transport_closed", error="the reader of the output went away")
            self.outbox.discard()

    def _dispatch_line(self, line: bytes) -> None:
        try:
            check_nesting(line)
        except InvalidMessage as exc:
            self._send_error(None, to_wire_error(exc))
            return
        try:
            obj = _loads(line)
        except JSONDecodeError:
            if not line or line.isspace():
                return  # blank lines are ignored
            obj = _NOT_DECODED
        self._dispatch_object(line, obj)

    async def _dispatch_large_line(self, line: bytes) -> None:
        """A line of ``DECODE_IN_THREAD_BYTES`` or more is checked and decoded in a worker thread
        (the reader waits, so this connection's order holds): scanning megabytes of brackets on
        the event loop held every other client for up to a second."""
        decoded = await anyio.to_thread.run_sync(_decode_large, line)
        if isinstance(decoded, InvalidMessage | ParseError):
            self._send_error(None, to_wire_error(decoded))
        elif decoded is not _BLANK:
            self._dispatch_object(line, decoded)

    def _dispatch_object(self, line: bytes, obj: Any) -> None:
        request = plain_request(obj)  # fast path: a well-formed request
        if request is not None:
            method, msg_id, params = request
            self._dispatch(method, msg_id, {} if params is None else params)
            return
        try:
            msg = parse_message(decode_line(line) if obj is _NOT_DECODED else obj)
        except ParseError as exc:
            self._send_error(None, to_wire_error(exc))
            return
        except InvalidMessage as exc:
            self._send_error(exc.echo_id, to_wire_error(exc))
            return
        if msg.method is None:
            self._resolve_outgoing(msg)
        else:
            self._dispatch(msg.method, msg.id, msg.params)

    def _gated_line(self, line: bytes | None) -> None:
        """Before admission: the gate sees each message; nothing reaches a handler until it agrees."""
        assert self._gate is not None
        try:
            obj = None if line is None else _loads(line)
        except JSONDecodeError:
            if not line or line.isspace():
                return
            obj = None
        try:
            self._gate(obj)
        except OamdError as exc:
            self._send_error(getattr(exc, "echo_id", None), to_wire_error(exc))
            self._gate = None
            self._on_line = _ignore_line  # the rest of this chunk is not looked at
            self._reader_scope.cancel()
            return
        self._gate = None  # admitted: the gate is not consulted again
        self._on_line = self._dispatch_line
        self._framer.limit = self._max_line_bytes
        if line is not None:
            self._dispatch_line(line)

    def _reject_oversized(self, line: OversizedLine) -> None:
        if self._on_line is _ignore_line:
            return
        if self._gate is not None:
            self._gated_line(None)  # before admission, too long is refused like garbage
            return
        log.warning("line_too_long", size=line.size, limit=self._max_line_bytes)
        self._send_error(
            None,
            error_object(
                "invalid_message",
                f"Invalid request: the line has {line.size} bytes; the limit is "
                f"{self._max_line_bytes}.",
                {"limit": self._max_line_bytes},
            ),
        )

    def _dispatch(self, method: str, msg_id: Any, params: Any) -> None:
        """Runs the handler of a request (``msg_id`` set) or notification (``None``)."""
        is_request = msg_id is not None
        try:
            if self.lifecycle is not Lifecycle.RUNNING:
                raise ShutDown()
            handler = self._handlers.get(method)
            if handler is None:
                raise MethodNotFound(method)
            if type(params) is not dict:
                raise InvalidParams("params must be an object.")
            request = Request(self, msg_id, method, params)
            reply = handler(request)
        except Exception as exc:
            error = to_wire_error(exc)
            if is_request:
                self._send_error(msg_id, error)
            else:
                _log_notification_error(method, error)
            return
        if type(reply) is Result:
            if is_request:
                self.outbox.send({"jsonrpc": "2.0", "id": msg_id, "result": reply.value})
        else:
            assert isinstance(reply, Deferred)
            if len(self._in_flight) < MAX_IN_FLIGHT_REQUESTS:
                self.start_deferred(msg_id, reply.work, respond=is_request, request=request)
                return
            if reply.withdraw is not None:  # give its queue place up in order, doing nothing
                reply.withdraw()
                self.start_deferred(None, reply.work, respond=False)
            if is_request:
                self._send_error(msg_id, to_wire_error(_too_many_in_flight()))

    def start_deferred(
        self,
        msg_id: Any,
        work: Callable[[], Awaitable[Any]],
        *,
        respond: bool = True,
        request: Request | None = None,
    ) -> None:
        """Runs ``work`` concurrently in its own cancel scope; answers ``msg_id`` with its outcome.
        ``request``: what it serves, for ``observe.current_request`` in its task."""
        assert self._tg is not None
        token = next(self._tokens)
        scope = anyio.CancelScope()
        self._in_flight[token] = scope  # registered now, so a shutdown right after sees it
        self._tg.start_soon(self._run_deferred, token, scope, msg_id, work, respond, request)

    async def _run_deferred(
        self,
        token: int,
        scope: anyio.CancelScope,
        msg_id: Any,
        work: Callable[[], Awaitable[Any]],
        respond: bool,
        request: Request | None,
    ) -> None:
        message: dict[str, Any]
        _current_work.set(token)
        if request is not None:
            CURRENT_REQUEST.set(request)
        try:
            with scope:
                value = await work()
            if scope.cancelled_caught:
                raise Cancelled()
            message = {"jsonrpc": "2.0", "id": msg_id, "result": value}
        except Exception as exc:
            message = {"jsonrpc": "2.0", "id": msg_id, "error": to_wire_error(exc)}
            if not respond:
                _log_notification_error("deferred", message["error"])
        finally:
            del self._in_flight[token]
            # every waiter wakes (the drain and cancel_all may wait at once), then waits anew
            changed, self._in_flight_changed = self._in_flight_changed, anyio.Event()
            changed.set()
        if respond:
            self.outbox.send(message)
        if self._close_after_reply:  # shutdown's work is done (as a notification: no response)
            self._release_held_replies()  # after shutdown's own response, in arrival order
            self._reader_scope.cancel()

    def _send_error(self, msg_id: Any, error: dict[str, Any]) -> None:
        message = {"jsonrpc": "2.0", "id": msg_id, "error": error}
        if self._held_replies is not None:
            self._held_replies.append(message)
        else:
            self.outbox.send(message)

    def _release_held_replies(self) -> None:
        held, self._held_replies = self._held_replies, None
        for message in held or ():
            self.outbox.send(message)

    # ---- requests to the client ------------------------------------------------------------

    async def wait_writable(self) -> None:
        """Until the outbox has room (a streaming turn's pace)."""
        await self.outbox.wait_writable()

    def send_notification(self, method: str, params: dict[str, Any]) -> None:
        self.outbox.send({"jsonrpc": "2.0", "method": method, "params": params})

    def start_call(self, method: str, params: dict[str, Any]) -> PendingCall:
        """Sends a request to the client (id ``t-<n>``); its reply bypasses every queue."""
        if self.lifecycle is Lifecycle.CLOSED:
            raise ShutDown()
        self._sent_calls = next(self._outgoing_ids)
        call = PendingCall(self, f"t-{self._sent_calls}")
        if self._input_closed:
            call.resolve(_CLIENT_GONE_REPLY)  # no reply can arrive any more
            return call
        self._outgoing[call.id] = call
        self.outbox.send({"jsonrpc": "2.0", "id": call.id, "method": method, "params": params})
        return call

    def forget_call(self, call: PendingCall) -> None:
        """Stops waiting for ``call``'s reply (``PendingCall.abandon``): one arriving later is
        logged and dropped like a reply to a request never sent."""
        self._outgoing.pop(call.id, None)

    def _resolve_outgoing(self, msg: Message) -> None:
        call = self._outgoing.pop(msg.id, None) if isinstance(msg.id, str) else None
        if call is None:
            if self._sent_yet(msg.id):  # a late reply (a timed-out call): nothing waits for it
                log.info("reply_to_unknown_request_dropped", id=msg.id)
            else:  # an engine replying before the tool/call arrived: its turn will miss it
                log.warning(
                    "reply_to_unknown_request_dropped",
                    id=msg.id,
                    hint="no request with this id was sent (yet): reply to a tool/call only once"
                    " it has arrived",
                )
            return
        call.resolve(msg)

    def _sent_yet(self, reply_id: Any) -> bool:
        """Whether ``reply_id`` names a ``t-<n>`` request this connection has sent."""
        text = reply_id if isinstance(reply_id, str) else ""
        number = text.removeprefix("t-")
        if not text.startswith("t-") or not number.isdigit() or len(number) > 19:  # int() bound
            return False
        return 0 < int(number) <= self._sent_calls

    # ---- shutdown -----------------------------------------------------------------------------

    def begin_shutdown(self, *, reply_pending: bool = False) -> None:
        """From now on every request fails -32023; in-flight work keeps running until cancelled.

        ``reply_pending``: a ``shutdown`` request's response is still to come; the -32023 answers
        wait for it (``close_after_reply``), so answers keep the order the requests came in."""
        if self.lifecycle is Lifecycle.RUNNING:
            self.lifecycle = Lifecycle.SHUT_DOWN
            if reply_pending:
                self._held_replies = []

    def stop_reading(self) -> None:
        """Stops reading at once; ``run`` then closes as at end of input (``oamd serve`` drains)."""
        self._reader_scope.cancel()

    def close_after_reply(self) -> None:
        """Closes the connection as soon as the next deferred response has been queued."""
        self._close_after_reply = True

    async def cancel_all(self) -> None:
        """Cancels every other in-flight deferred work and waits (bounded) for its responses.

        Called from deferred work (``shutdown``), it spares that work itself."""
        keep = _current_work.get()
        for token, scope in list(self._in_flight.items()):
            if token != keep:
                scope.cancel()
        with anyio.move_on_after(SHUTDOWN_GRACE_SECONDS, shield=True):
            while any(t != keep for t in self._in_flight):
                await self._in_flight_changed.wait()

    @property
    def in_flight_count(self) -> int:
        """Requests (and the daemon's own follow-ups) whose deferred work has not ended."""
        return len(self._in_flight)

    def extra(self, attribute: Any, default: Any = None) -> Any:
        """A typed attribute of the connection's stream (anyio's ``SocketAttribute.family``…)."""
        return self._stream.extra(attribute, default)

    @property
    def has_partial_line(self) -> bool:
        """Part of a line has been read and waits for the rest (or is being skipped)."""
        return self._framer.pending > 0 or self._framer.discarding

    def _release(self) -> None:
        """Lets go of what a closed connection held, so that it and everything the client made
        are freed by reference counting the moment the last outside reference goes: a cycle
        through it (its own bound method below; the application's state pointing back at the
        connection, as a world's change sink does) would wait for a full collection, which the
        tuned collector of a serving process almost never runs (``cli.tuning.GC_THRESHOLDS``)."""
        self._on_line = _ignore_line  # was a bound method of self
        self._on_close = None
        self._gate = None
        self._outgoing.clear()
        self._held_replies = None
        self.state = None

    async def _close(self) -> None:
        self.lifecycle = Lifecycle.CLOSED
        with anyio.CancelScope(shield=True):
            await self.cancel_all()
            if self._on_close is not None:
                try:
                    with anyio.move_on_after(SHUTDOWN_GRACE_SECONDS):
                        await self._on_close()
                except Exception:
                    log.exception("on_close_failed")
            self._release_held_replies()  # shutdown's own response, if any, is queued by now
            with anyio.move_on_after(WRITE_GRACE_SECONDS):
                await self.outbox.flush()


def _decode_large(line: bytes) -> Any:
    """A long line's value, decoded off the event loop (a worker thread): the value itself (by
    the daemon's JSON rules when orjson refuses it), ``_BLANK``, or the error to answer."""
    try:
        check_nesting(line)
    except InvalidMessage as exc:
        return exc
    try:
        return _loads(line)
    except JSONDecodeError:
        if line.isspace():
            return _BLANK
    try:
        return decode_line(line)
    except ParseError as exc:
        return exc


def _ignore_line(line: bytes) -> None:
    return None


def _too_many_in_flight() -> LimitReached:
    return LimitReached(
        "requests in flight",
        MAX_IN_FLIGHT_REQUESTS,
        f"{MAX_IN_FLIGHT_REQUESTS} requests of this connection are still waiting for their "
        "answers; wait for some before sending more.",
    )


def _log_notification_error(method: str | None, error: dict[str, Any]) -> None:
    """A notification has no response to carry its error: the log does (``to_wire_error`` has
    already logged an internal one with its traceback, and read a group as its protocol error)."""
    log.info(
        "notification_failed", method=method, error=error["data"]["code"], message=error["message"]
    )

"""Client: correlates responses, routes notifications by ``requestId``, answers ``tool/call``.

Every message the daemon sends is also appended to ``received`` in arrival order, so tests can
assert on ordering. ``tool_handler`` answers ``tool/call`` requests; what it returns is sent as the
``result`` (raise ``RpcError`` to answer with an ``error``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from anyio.abc import ByteStream, TaskGroup

from oamd.transport.framing import LineFramer

__all__ = ["Client", "RpcError", "ToolHandler"]

ToolHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class RpcError(Exception):
    """An error response: ``code``, ``message`` and ``data`` (``data["code"]`` is the stable name)."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code} {message}")
        self.code = code
        self.message = message
        self.data = data or {}

    @property
    def name(self) -> str:
        return str(self.data.get("code", ""))

    def to_error(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            out["data"] = self.data
        return out


def _decode(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)  # what orjson refuses: escaped lone surrogates


class _Waiter:
    __slots__ = ("event", "events", "response")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.response: dict[str, Any] | None = None
        self.events: list[dict[str, Any]] = []


class Client:
    """A connection to a bridge. Use as an async context manager around a byte stream."""

    def __init__(
        self,
        stream: ByteStream,
        *,
        tool_handler: ToolHandler | None = None,
        on_message: Callable[[dict[str, Any]], None] | None = None,
        max_line_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self._stream = stream
        self.tool_handler = tool_handler
        self._on_message = on_message
        self._framer = LineFramer(max_line_bytes)
        self._ids = itertools.count(1)
        self._waiters: dict[Any, _Waiter] = {}
        self._tg: TaskGroup | None = None
        self._closed = anyio.Event()
        self._message_arrived = anyio.Event()
        self.received: list[dict[str, Any]] = []
        """Every message from the daemon, in arrival order."""
        self.notifications: list[dict[str, Any]] = []
        self.tool_calls: list[dict[str, Any]] = []
        """Every ``tool/call`` request received."""
        self.sent_methods: dict[Any, str] = {}
        """Request id → method, for every request sent (lets tests check responses per method)."""

    async def __aenter__(self) -> Client:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._read)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(*exc_info)
        await self._stream.aclose()

    # ---- sending -----------------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    async def send_raw(self, data: bytes) -> None:
        """Writes bytes as they are (tests of framing)."""
        await self._stream.send(data)

    async def send(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:
            self.sent_methods[message["id"]] = message["method"]
        await self._stream.send(orjson.dumps(message) + b"\n")

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)

    async def start(
        self, method: str, params: dict[str, Any] | None = None, *, id: Any = None
    ) -> Any:
        """Sends a request without waiting; returns its id (pass it to ``wait``)."""
        msg_id = self.next_id() if id is None else id
        self._waiters[msg_id] = _Waiter()
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)
        return msg_id

    async def wait(self, msg_id: Any) -> dict[str, Any]:
        """The raw response message for a request sent with ``start``."""
        waiter = self._waiters[msg_id]
        await waiter.event.wait()
        del self._waiters[msg_id]
        assert waiter.response is not None
        return waiter.response

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Sends a request and returns the raw response message (``result`` or ``error``)."""
        return await self.wait(await self.start(method, params))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Sends a request and returns its ``result``.

        Raises:
            RpcError: the daemon answered with an error.
        """
        response = await self.call(method, params)
        if "error" in response:
            err = response["error"]
            raise RpcError(err.get("code", 0), err.get("message", ""), err.get("data"))
        return response["result"]

    def events_for(self, request_id: Any) -> list[dict[str, Any]]:
        """The ``event`` payloads of every notification carrying ``requestId``, in order."""
        return [
            n["params"]["event"]
            for n in self.notifications
            if n.get("params", {}).get("requestId") == request_id and "event" in n["params"]
        ]

    async def next_message(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Waits for (and returns) the first received message matching ``predicate``."""
        seen = 0
        while True:
            for msg in self.received[seen:]:
                if predicate(msg):
                    return msg
            seen = len(self.received)
            if self._closed.is_set():
                raise anyio.EndOfStream
            self._message_arrived = anyio.Event()
            await self._message_arrived.wait()

    async def closed(self) -> None:
        """Returns once the daemon closed its side."""
        await self._closed.wait()

    # ---- receiving ---------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while True:
                try:
                    chunk = await self._stream.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                for line in self._framer.feed(chunk):
                    if isinstance(line, bytes) and line.strip():
                        self._handle(_decode(line))
        finally:
            self._closed.set()
            self._message_arrived.set()
            for waiter in self._waiters.values():
                waiter.event.set()

    def _handle(self, msg: dict[str, Any]) -> None:
        self.received.append(msg)
        if self._on_message is not None:
            self._on_message(msg)
        self._message_arrived.set()
        if "method" in msg:
            if "id" in msg:
                self.tool_calls.append(msg)
                assert self._tg is not None
                self._tg.start_soon(self._answer, msg)
            else:
                self.notifications.append(msg)
            return
        waiter = self._waiters.get(msg.get("id"))
        if waiter is not None:
            waiter.response = msg
            waiter.event.set()

    async def _answer(self, msg: dict[str, Any]) -> None:
        if self.tool_handler is None:
            return  # left unanswered: the daemon's timeout applies
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"]}
        try:
            reply["result"] = await self.tool_handler(msg.get("params", {}))
        except RpcError as exc:
            reply["error"] = exc.to_error()
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self.send(reply)

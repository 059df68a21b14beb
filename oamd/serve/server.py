"""``oamd serve``: the protocol for many clients at once, on Unix sockets and loopback TCP.

Isolation. Each connection is served the way ``oamd stdio`` serves its one client: its own
``Connection`` (reader, outbox, in-flight work) and its own ``BridgeState`` (sessions, NPCs, worlds,
subscriptions), so two clients using the same session ids never see each other. Sharing. The model
backends are shared; their generations go through one ``FairGenerations`` limiter that serves
waiting clients in turn (see ``oamd.serve.fair`` for why a fair limiter and not a per-connection bound).

Authentication. A TCP client, and a Unix client whose uid (``SO_PEERCRED``) is not ours, passes
the token gate (``oamd.serve.gate``) or is closed, as is silence past ``--auth-timeout``. A same-uid
Unix peer is trusted (the kernel vouches for it; a socket file is 0600 anyway) unless
``--require-token``. Connections that must authenticate wait in their own small pool
(``--max-pending-auth``, ``MAX_PREAUTH_LINE_BYTES`` lines); when one more arrives one waiting
connection is dropped (see ``_make_room_to_authenticate``), so peers that connect and say nothing
can neither fill ``--max-connections`` nor keep out a token holder, who authenticates at once. A
connection takes a ``--max-connections`` slot when it is admitted (a trusted peer: on connecting).

Limits: ``--max-connections`` clients (one more gets one ``limit_reached`` line and is closed), the
per-connection session/NPC/world limits of the protocol, ``--max-outbox-bytes`` waiting for a
client that does not read (then it is disconnected). Lifecycle: running → draining (SIGTERM or
SIGINT: stop accepting; every connection shuts down as on ``shutdown`` — its turns are cancelled
and answer -32009, later requests -32023 — and is flushed and closed, within ``DRAIN_SECONDS``)
→ closed, then the process exits 0. A client that disconnects has its work cancelled at once and
nothing more is written to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import itertools
import os
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import anyio
from anyio.abc import ByteStream, TaskGroup, TaskStatus

from oamd.agent.models import ModelFactory
from oamd.bridge.state import BridgeState, DaemonConfig
from oamd.daemon import ConnectionTap, build_registry, open_connection
from oamd.errors import LimitReached
from oamd.jsonvalue import dumps_text
from oamd.limits import (
    AUTH_TIMEOUT_SECONDS,
    DRAIN_SECONDS,
    MAX_CONCURRENT_GENERATIONS,
    MAX_CONNECTIONS,
    MAX_LINE_BYTES,
    MAX_OUTBOX_BYTES,
    MAX_PENDING_AUTH,
    WRITE_GRACE_SECONDS,
)
from oamd.log import get_logger
from oamd.rpc import Connection, Registry, Request, Result, error_object
from oamd.rpc.message import encode
from oamd.serve.fair import FairGenerations
from oamd.serve.gate import TokenGate
from oamd.transport.sockets import (
    Endpoint,
    EndpointError,
    PrivateFiles,
    has_unread_bytes,
    open_abstract,
    open_tcp,
    open_unix,
    parse_host_port,
    peer_uid,
)

__all__ = ["EndpointError", "ServeOptions", "Server", "serve"]

log = get_logger("oamd.serve")

ACCEPT_RETRY_SECONDS = 0.1
"""Pause after a failed ``accept`` (out of file descriptors) before accepting again."""

LINGER_SECONDS = 1.0
"""After refusing a client: how long to keep reading (and dropping) what it still sends, so the
refusal reaches it instead of a connection reset."""

LINGER_BYTES = 1 << 20
"""…and how many bytes at most."""

EVICTION_GRACE_SECONDS = 0.25
"""A connection still to authenticate is not dropped for a newer one in its first moments, while
its ``initialize`` may be on its way, unless every waiting one is as new."""

FULL_COLLECTION_SECONDS = 60.0
"""Longest the serving process goes without a full collection while connections keep closing."""


def collect_after_close(state: dict[str, float], *, idle: bool = False) -> None:
    """Collects after a connection ended: the youngest generation, and the older ones when their
    turn comes, as the automatic collector would.

    A closed connection's objects are freed by reference counting (``Connection`` lets go of them
    as it closes), but every task cancelled at its end (its writer, a turn's tool calls) leaves
    its exception in a cycle with anyio's task-done frame, and the traceback holds the task's
    frames and their locals: a writer's batch of unsent output, up to ``--max-outbox-bytes``, an
    unauthenticated peer's unfinished line. Those cycles are new, so a young collection frees
    them. But an explicit young collection resets the count that starts the automatic ones, so
    with connections closing all the time (peers that connect and never authenticate: 1,200 a
    second in the soak) the middle generation was never collected and what other connections
    had left there stayed: RSS 31 → 600 MiB in 30 s. So the middle generation is collected when
    its count passes its threshold, and everything at most ``FULL_COLLECTION_SECONDS`` apart
    (``cli.tuning.GC_THRESHOLDS``: the automatic full collection practically never runs), or when
    the last client has left (``idle``: nobody waits for it then)."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    now = time.monotonic()
    if idle:
        gc.collect(2)
        state["full"] = now
        return
    if counts[1] >= thresholds[1]:
        if counts[2] >= thresholds[2] or now - state["full"] >= FULL_COLLECTION_SECONDS:
            gc.collect(2)
            state["full"] = now
            return
        gc.collect(1)
        return
    gc.collect(0)


@dataclass
class ServeOptions:
    """What ``oamd serve`` listens on and how it guards it (the command-line flags)."""

    unix: list[str] = field(default_factory=list)
    tcp: list[str] = field(default_factory=list)
    abstract: list[str] = field(default_factory=list)
    allow_remote: bool = False
    token_file: str | None = None
    require_token: bool = False
    """Ask same-uid Unix peers for the token too."""
    ready_file: str | None = None
    max_connections: int = MAX_CONNECTIONS
    max_generations: int = MAX_CONCURRENT_GENERATIONS
    max_outbox_bytes: int = MAX_OUTBOX_BYTES
    max_line_bytes: int = MAX_LINE_BYTES
    auth_timeout: float = AUTH_TIMEOUT_SECONDS
    max_pending_auth: int = MAX_PENDING_AUTH


class ServerState(enum.Enum):
    RUNNING = "running"
    DRAINING = "draining"
    CLOSED = "closed"


@dataclass
class _Client:
    conn: Connection
    state: BridgeState
    stream: ByteStream
    admitted: bool = False
    """Holds one of the ``--max-connections`` slots (authenticated, or a trusted peer)."""
    evicted: bool = False
    """Dropped from the pool of connections still to authenticate to make room for a newer one."""
    connected_at: float = field(default_factory=anyio.current_time)


class Server:
    """Serves ``config`` on the endpoints of ``options`` until SIGTERM/SIGINT (``run``)."""

    def __init__(
        self, config: DaemonConfig, options: ServeOptions, tap: ConnectionTap | None = None
    ) -> None:
        self.config = config
        self.options = options
        self._tap = tap
        """Sees each connection (``--record``)."""
        self.state = ServerState.RUNNING
        self.endpoints: list[Endpoint] = []
        self.registry = self._registry()
        self._fair = FairGenerations(options.max_generations)
        self._files = PrivateFiles()
        self._token = ""
        self._ids = itertools.count(1)
        self._collected = {"full": time.monotonic()}
        """When the last full collection ran (``collect_after_close``)."""
        self._clients: dict[int, _Client] = {}
        self._unauthenticated: dict[int, _Client] = {}  # a subset of _clients, oldest first
        self._clients_changed = anyio.Event()
        self._stop = anyio.Event()

    def _registry(self) -> Registry:
        registry = build_registry(self.config)
        if self.config.test_methods:
            registry.register("test/serverStats", self._stats)
        return registry

    def _stats(self, req: Request) -> Result:
        """``test/serverStats`` → live connections, asyncio tasks and open fds of the daemon."""
        fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1
        tasks = len(asyncio.all_tasks())
        return Result(
            {
                "connections": len(self._clients),
                "admitted": self._admitted_count(),
                "unauthenticated": len(self._unauthenticated),
                "tasks": tasks,
                "fds": fds,
            }
        )

    # ---- start ---------------------------------------------------------------------------------

    async def open(self) -> dict[str, Any]:
        """Binds every endpoint and prepares the token; returns the ready line's object.

        Raises:
            EndpointError: an endpoint or the token file cannot be used safely.
        """
        o = self.options
        if not (o.unix or o.tcp or o.abstract):
            raise EndpointError(
                "nothing to serve: give --unix PATH, --tcp HOST:PORT or --abstract."
            )
        try:
            for path in o.unix:
                self.endpoints.append(await open_unix(path))
            for name in o.abstract:
                self.endpoints.append(await open_abstract(name))
            for spec in o.tcp:
                host, port = parse_host_port(spec)
                self.endpoints.append(await open_tcp(host, port, allow_remote=o.allow_remote))
            token_file = o.token_file or self._files.default_token_path(o.unix)
            self._token = self._files.token(token_file)
            keep_secret = getattr(self._tap, "keep_secret", None)
            if keep_secret is not None:  # --record: no recording may hold the token
                keep_secret(self._token)
        except BaseException:
            await self._close_endpoints()
            raise
        return {
            "event": "ready",
            "pid": os.getpid(),
            "endpoints": [e.address for e in self.endpoints],
            "tokenFile": token_file,
        }

    # ---- serving -------------------------------------------------------------------------------

    async def run(
        self, *, task_status: TaskStatus[dict[str, Any]] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serves until a signal (or ``stop``), drains, cleans up. Reports the ready object."""
        asyncio.get_running_loop().set_exception_handler(_loop_exception)
        try:
            ready = await self.open()
            async with anyio.create_task_group() as connections:
                async with anyio.create_task_group() as accepting:
                    await accepting.start(self._watch_signals)
                    for endpoint in self.endpoints:
                        accepting.start_soon(self._accept, endpoint, connections)
                    self._announce(ready)
                    task_status.started(ready)
                    await self._stop.wait()
                    accepting.cancel_scope.cancel()
                await self._drain()
                connections.cancel_scope.cancel()
        finally:
            self.state = ServerState.CLOSED
            with anyio.CancelScope(shield=True):
                await self._close_endpoints()
            self._files.remove()

    def stop(self) -> None:
        """Begins the drain (what SIGTERM and SIGINT do)."""
        self._stop.set()

    def _announce(self, ready: dict[str, Any]) -> None:
        line = dumps_text(ready) + "\n"
        if self.options.ready_file:
            self._files.write_ready(self.options.ready_file, line)
        sys.stderr.write(line)
        sys.stderr.flush()

    async def _watch_signals(self, *, task_status: TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                log.info("draining", signal=signal.Signals(signum).name)
                self.stop()
                return

    async def _accept(self, endpoint: Endpoint, connections: TaskGroup) -> None:
        while True:
            try:
                stream = await endpoint.listener.accept()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            except OSError as exc:  # EMFILE and friends: let connections close, then go on
                log.warning("accept_failed", endpoint=endpoint.address, error=repr(exc))
                await anyio.sleep(ACCEPT_RETRY_SECONDS)
                continue
            connections.start_soon(self._serve_client_safely, stream, endpoint.kind)

    async def _serve_client_safely(self, stream: ByteStream, kind: str) -> None:
        """One connection's failure is that connection's end, never the server's."""
        try:
            await self._serve_client(stream, kind)
        except Exception:
            log.exception("connection_failed")
        # the connection and everything it made are unreachable now; cycles its end left are new
        collect_after_close(self._collected, idle=not self._clients)

    async def _serve_client(self, stream: ByteStream, kind: str) -> None:
        async with stream:
            key = next(self._ids)
            trusted = self._trusted(stream, kind)
            if trusted:
                if self._admitted_count() >= self.options.max_connections:
                    await self._turn_away(stream)
                    return
                gate = None
            else:
                gate = TokenGate(self._token, lambda: self._take_slot(key))
                self._make_room_to_authenticate()
            models = self._fair.models_for(self.config.models, key)
            if self._tap is None:
                await self._serve_connection(key, stream, models, gate, trusted=trusted)
            else:
                async with self._tap(stream, models) as (tapped, models):
                    await self._serve_connection(key, tapped, models, gate, trusted=trusted)

    async def _serve_connection(
        self,
        key: int,
        stream: ByteStream,
        models: ModelFactory,
        gate: TokenGate | None,
        *,
        trusted: bool,
    ) -> None:
        state = BridgeState(replace(self.config, models=models))
        conn = open_connection(
            stream,
            self.registry,
            state,
            max_line_bytes=self.options.max_line_bytes,
            max_outbox_bytes=self.options.max_outbox_bytes,
            hangup_on_eof=True,
            gate=gate,
        )
        client = self._clients[key] = _Client(conn, state, stream, admitted=trusted)
        if gate is not None:
            self._unauthenticated[key] = client
        try:
            async with anyio.create_task_group() as tg:
                if gate is not None:
                    tg.start_soon(self._auth_deadline, gate, conn, self.options.auth_timeout)
                await conn.run()
                tg.cancel_scope.cancel()
            if gate is not None and not gate.admitted.is_set() and not client.evicted:
                await _linger(stream)
        finally:
            del self._clients[key]
            self._unauthenticated.pop(key, None)
            changed, self._clients_changed = self._clients_changed, anyio.Event()
            changed.set()  # every waiter wakes, then waits on the new event

    def _admitted_count(self) -> int:
        return sum(client.admitted for client in self._clients.values())  # at most a few dozen

    def _take_slot(self, key: int) -> None:
        """The gate admits connection ``key``: it leaves the waiting pool for a client slot."""
        if key not in self._unauthenticated:  # dropped for a newer one as its line was read
            raise LimitReached(
                "connections waiting to authenticate",
                self.options.max_pending_auth,
                "Too many connections are waiting to authenticate; connect again.",
            )
        limit = self.options.max_connections
        if self._admitted_count() >= limit:
            log.warning("connection_limit", limit=limit)
            raise LimitReached(
                "connections",
                limit,
                f"Too many connections: this daemon serves at most {limit} clients at once.",
            )
        self._unauthenticated.pop(key).admitted = True

    def _make_room_to_authenticate(self) -> None:
        """Drops waiting connections until one more fits, the least likely to be a client whose
        ``initialize`` is on its way first (``_eviction_rank``)."""
        waiting = self._unauthenticated
        while len(waiting) >= self.options.max_pending_auth:
            key = min(waiting, key=partial(_eviction_rank, waiting, anyio.current_time()))
            dropped = waiting.pop(key)
            dropped.evicted = True
            dropped.conn.stop_reading()
            log.info("unauthenticated_dropped", limit=self.options.max_pending_auth)

    def _trusted(self, stream: ByteStream, kind: str) -> bool:
        if kind == "tcp" or self.options.require_token:
            return False
        return peer_uid(stream) == os.getuid()

    @staticmethod
    async def _auth_deadline(gate: TokenGate, conn: Connection, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await gate.admitted.wait()
            return
        log.info("auth_timeout")
        conn.stop_reading()

    async def _turn_away(self, stream: ByteStream) -> None:
        limit = self.options.max_connections
        error = error_object(
            "limit_reached",
            f"Too many connections: this daemon serves at most {limit} clients at once.",
            {"limit": limit},
        )
        log.warning("connection_limit", limit=limit)
        with anyio.move_on_after(WRITE_GRACE_SECONDS):
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await stream.send(encode({"jsonrpc": "2.0", "id": None, "error": error}))
        await _linger(stream)

    # ---- stop ----------------------------------------------------------------------------------

    async def _drain(self) -> None:
        self.state = ServerState.DRAINING
        await self._close_endpoints()  # stop accepting before anything else
        with anyio.move_on_after(DRAIN_SECONDS):
            async with anyio.create_task_group() as tg:
                for client in list(self._clients.values()):
                    tg.start_soon(self._drain_client, client)
            while self._clients:
                await self._clients_changed.wait()

    @staticmethod
    async def _drain_client(client: _Client) -> None:
        client.conn.begin_shutdown()  # later requests fail -32023
        client.state.cancel_all_work()
        await client.conn.cancel_all()  # running turns answer -32009
        client.conn.stop_reading()  # run() then flushes and closes

    async def _close_endpoints(self) -> None:
        for endpoint in self.endpoints:
            try:
                await endpoint.aclose()
            except Exception:
                log.exception("endpoint_close_failed", endpoint=endpoint.address)
        self.endpoints.clear()


def _eviction_rank(
    waiting: dict[int, _Client], now: float, key: int
) -> tuple[bool, bool, bool, float]:
    """Lower is dropped first: a connection past the grace before a young one (a client sends
    its ``initialize`` at once); then one holding part of a line (a line that never ends);
    then one that sent nothing; last one whose complete line has arrived unread (a client's
    ``initialize`` about to be read; a hog streaming a long line holds part of one too).
    Among equals the earliest connected."""
    client = waiting[key]
    young = client.connected_at > now - EVICTION_GRACE_SECONDS
    part = client.conn.has_partial_line
    line_here = not part and has_unread_bytes(client.stream)
    return young, line_here, not part, client.connected_at


def _loop_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's errors go to the log. One is known and harmless: anyio's Unix socket
    stream (4.16) can have a reader callback fire on a wait that was just cancelled
    (``Future.set_result`` → ``InvalidStateError``; the fd's reader is removed right after)."""
    exc = context.get("exception")
    if isinstance(exc, asyncio.InvalidStateError) and "set_result" in repr(context.get("handle")):
        log.debug("cancelled_socket_wait_woken")
        return
    log.error("event_loop_error", message=context.get("message"), exc_info=exc)


async def _linger(stream: ByteStream) -> None:
    """Half-closes, then reads and drops what the peer still sends, until it closes or a bound."""
    with (
        anyio.move_on_after(LINGER_SECONDS),
        contextlib.suppress(
            anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError
        ),
    ):
        await stream.send_eof()
        received = 0
        while received < LINGER_BYTES:
            received += len(await stream.receive())


async def serve(
    config: DaemonConfig, options: ServeOptions, tap: ConnectionTap | None = None
) -> None:
    """Runs ``oamd serve`` until SIGTERM/SIGINT, then drains and returns; ``tap`` sees each
    connection (``--record``).

    Raises:
        EndpointError: an endpoint or the token file cannot be used safely.
    """
    await Server(config, options, tap).run()

"""``--inspect HOST:PORT``: the inspector's address, token, routes and lifetime.

Safety. The address must be loopback, always (there is no ``--allow-remote`` here: the page
shows every prompt); it is bound before the daemon serves anything, so a bad one is a usage
error. Every ``/api/`` request carries the token (``?token=``, ``Authorization: Bearer`` or
``X-Oamd-Token``, compared in constant time) — ``oamd serve``'s own token, or for ``oamd stdio``
the one in ``--inspect-token-file`` (read, or written 0600 when missing, and removed at exit
when oamd wrote it). The page itself (``/``, ``/page.js``) holds no data and needs none. A
``Host`` header that is not a loopback name is refused, so a web page elsewhere cannot reach the
inspector through a name it resolves to 127.0.0.1.

Lifetime. ``install`` makes the recorder the watch of every connection and the tracer of every
turn started from the calling task on (``oamd.rpc.observe``, ``oamd.agent.trace``); ``run``
serves pages until cancelled. Without ``--inspect`` none of this is imported.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import socket
import sys
from collections.abc import Awaitable, Callable
from functools import cache, partial
from importlib import resources
from typing import Any, TypeVar

import anyio
from anyio.abc import SocketListener, TaskStatus

from oamd.agent.trace import TURN_TRACER
from oamd.inspector._encode import encode
from oamd.inspector._http import EventStream, HttpRequest, HttpResponse, serve_http
from oamd.inspector._record import Recorder
from oamd.inspector._views import (
    NotFound,
    connection,
    connection_view,
    daemon_view,
    npc_view,
    other_turns_view,
    session_view,
    turn_view,
    world_view,
)
from oamd.jsonvalue import dumps_text
from oamd.rpc.observe import CONNECTION_WATCH
from oamd.transport.sockets import BACKLOG, EndpointError, PrivateFiles, parse_host_port

__all__ = ["Inspector", "bind_loopback"]

T = TypeVar("T")

TOKEN_HEADER = "x-oamd-token"
RETRY_MS = 2000
"""What the event stream tells a page to wait before reconnecting."""

STATIC = {
    "": ("page.html", "text/html; charset=utf-8"),
    "page.js": ("page.js", "text/javascript; charset=utf-8"),
}
PAGE_HEADERS = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self';"
        " img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    )
]


def _refused(spec: str, why: str) -> EndpointError:
    return EndpointError(f"--inspect {spec}: {why}")


def bind_loopback(spec: str) -> socket.socket:
    """A listening socket on ``spec`` (``HOST:PORT``; port 0: the OS picks), loopback only.

    Raises:
        EndpointError: no port, a host that is not loopback or does not resolve, or the bind
            failed.
    """
    try:
        host, port = parse_host_port(spec)
    except EndpointError:
        raise _refused(spec, "expected HOST:PORT with a port from 0 to 65535.") from None
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise _refused(spec, f"{exc.strerror}.") from exc
    family, _, _, _, sockaddr = infos[0]
    ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
    if not host:
        raise _refused(spec, "name the host: 127.0.0.1:PORT, [::1]:PORT or localhost:PORT.")
    if not ip.is_loopback:
        raise _refused(
            spec, f"{ip} is not a loopback address; the inspector listens on 127.0.0.1 or ::1 only."
        )
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise _refused(spec, f"{exc.strerror or exc}.") from exc
    return sock


def _is_loopback_host(host: str) -> bool:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Inspector:
    """The recorder and the page server of one daemon (``oamd stdio|serve --inspect``)."""

    def __init__(self, spec: str, *, transport: str) -> None:
        """Binds ``spec`` at once.

        Raises:
            EndpointError: the address cannot be used (``bind_loopback``).
        """
        self._socket: socket.socket | None = bind_loopback(spec)
        self.host, self.port = self._socket.getsockname()[:2]
        self.recorder = Recorder(default_transport=transport)
        self._files = PrivateFiles()
        self._token = b""
        self.token_file = ""

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def use_token_file(self, path: str | None, option: str = "--inspect-token-file") -> str:
        """Reads the token in ``path`` (a new one is written there, 0600, when it does not
        exist; without ``path``, in a private default place); returns the path.

        Raises:
            EndpointError: the file cannot be used safely (``PrivateFiles.token``).
        """
        path = path or self._files.default_token_path([])
        try:
            self._token = self._files.token(path).encode()
        except EndpointError as exc:
            message = str(exc)
            raise EndpointError(message.replace("--token-file", option, 1)) from None
        self.token_file = path
        return path

    def install(self) -> None:
        """Watches every connection and traces every turn started from this task on."""
        CONNECTION_WATCH.set(self.recorder)
        TURN_TRACER.set(self.recorder)

    def announcement(self) -> dict[str, Any]:
        return {"event": "inspector", "url": self.url, "tokenFile": self.token_file}

    def announce(self) -> None:
        """One JSON line on stderr: where the page is and where its token lives."""
        sys.stderr.write(dumps_text(self.announcement()) + "\n")
        sys.stderr.flush()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serves pages until cancelled (``/api/`` answers 401 until a token is set); then
        stops listening and removes the token file it wrote."""
        assert self._socket is not None, "an inspector runs once"
        sock, self._socket = self._socket, None
        listener = await SocketListener.from_socket(sock)
        try:
            async with listener, anyio.create_task_group() as tg:
                task_status.started()
                await serve_http(listener, self.handle, tg)
        finally:
            self.recorder.close_feeds()
            self._files.remove()

    async def run_beside(
        self,
        serve: Callable[[TaskStatus[Any]], Awaitable[T]],
        token_file_of: Callable[[Any], str] | None = None,
    ) -> T:
        """Runs ``serve(task_status)`` — the daemon — watched and traced, with the page server
        beside it until it returns. With ``token_file_of``, once ``serve`` reports ready the
        token is read from the file ``token_file_of(ready)`` names (``oamd serve``'s own) and
        the ``inspector`` line is written; without it (``oamd stdio``, whose token is already
        set), the line is written as soon as the page server accepts, before ``serve`` starts
        reading: what the line announces is served from then on.

        Raises:
            Whatever ``serve`` raises, once the page server has stopped.
        """
        self.install()
        failure: BaseException | None = None
        async with anyio.create_task_group() as tg:
            await tg.start(self.run)
            if token_file_of is None:
                self.announce()
            try:
                result = await serve(_Ready(partial(self._ready, token_file_of)))
            except BaseException as exc:
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    raise
                failure = exc  # raised as itself below, not inside the task group's group
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return result

    def _ready(self, token_file_of: Callable[[Any], str] | None, ready: Any) -> None:
        if token_file_of is not None:
            self.use_token_file(token_file_of(ready), "--token-file")
            self.announce()

    def close(self) -> None:
        """Releases what ``run`` would have (the socket, a token file) when it never ran."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        self._files.remove()

    # ---- requests ------------------------------------------------------------------------------

    async def handle(self, request: HttpRequest) -> HttpResponse | EventStream:
        if not _is_loopback_host(request.headers.get("host", "")):
            return _json(403, {"error": "the Host header must name a loopback address"})
        if request.method != "GET":
            return _json(405, {"error": "only GET"})
        path = request.path
        if len(path) <= 1 and (path[0] if path else "") in STATIC:
            return _static(path[0] if path else "")
        if not path or path[0] != "api":
            return _json(404, {"error": "not found"})
        if not self._authorized(request):
            return _json(401, {"error": "a valid token is required (?token=, or X-Oamd-Token)"})
        try:
            return self._api(path[1:])
        except NotFound as exc:
            return _json(404, {"error": str(exc)})

    def _authorized(self, request: HttpRequest) -> bool:
        offered = request.query.get("token", [""])[-1]
        if not offered:
            offered = request.headers.get(TOKEN_HEADER, "")
        if not offered:
            scheme, _, value = request.headers.get("authorization", "").partition(" ")
            offered = value.strip() if scheme.lower() == "bearer" else ""
        return bool(offered and self._token) and hmac.compare_digest(
            offered.encode("utf-8", "surrogatepass"), self._token
        )

    def _api(self, path: list[str]) -> HttpResponse | EventStream:
        recorder = self.recorder
        if path == ["events"]:
            hello = encode({"pid": os.getpid()})
            events = recorder.subscribe()
            return EventStream(
                events,
                first=f"retry: {RETRY_MS}\n\n".encode() + b"event: hello\ndata: " + hello + b"\n\n",
                on_close=partial(recorder.unsubscribe, events),
            )
        if path == ["daemon"]:
            return _json(200, daemon_view(recorder, os.getpid()))
        if len(path) < 2 or path[0] != "connections":
            raise NotFound("no such API path")
        record = connection(recorder, path[1])
        rest = path[2:]
        if not rest:
            return _json(200, connection_view(record))
        if rest == ["turns"]:
            return _json(200, other_turns_view(record))
        views = {
            "sessions": session_view,
            "npcs": npc_view,
            "worlds": world_view,
            "turns": turn_view,
        }
        if len(rest) == 2 and rest[0] in views:
            return _json(200, views[rest[0]](record, rest[1]))
        raise NotFound("no such API path")


class _Ready:
    """The ``task_status`` handed to the daemon: its ready report calls back."""

    def __init__(self, callback: Callable[[Any], None]) -> None:
        self._callback = callback

    def started(self, value: Any = None) -> None:
        self._callback(value)


def _json(status: int, value: Any) -> HttpResponse:
    return HttpResponse(status, encode(value))


@cache
def _page_file(file: str) -> bytes:
    return resources.files("oamd.inspector").joinpath(file).read_bytes()


def _static(name: str) -> HttpResponse:
    file, content_type = STATIC[name]
    return HttpResponse(200, _page_file(file), content_type, PAGE_HEADERS)

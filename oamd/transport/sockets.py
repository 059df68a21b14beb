"""Socket endpoints for ``oamd serve``: a Unix socket path, a Linux abstract name, loopback TCP.

Whether an endpoint is safe to serve is decided here, before anything is accepted. A Unix socket
file is bound under a 0177 umask (never briefly open to others) and is 0600; an existing file at
the path is removed only when it is our own socket that nobody answers on, and a symlink, another
kind of file or a live socket there is refused. A TCP address must be loopback unless remote binds
are allowed explicitly. The private files that go with a socket live here too: the token file
(created 0600 with ``O_EXCL | O_NOFOLLOW``, or read back when it exists and only its owner can
read it) and the ready file (written whole, then renamed into place). Accepting is anyio's
event-loop listener; a Unix peer's uid comes from ``SO_PEERCRED`` where the OS has it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import socket
import stat
import struct
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from anyio.abc import ByteStream, SocketAttribute, SocketListener

__all__ = [
    "Endpoint",
    "EndpointError",
    "PrivateFiles",
    "has_unread_bytes",
    "open_abstract",
    "open_tcp",
    "open_unix",
    "parse_host_port",
    "peer_uid",
]

TOKEN_BYTES = 32
"""Random bytes in a generated token (``secrets.token_urlsafe``: 43 characters)."""

STALE_PROBE_SECONDS = 1.0
"""How long a connect to an existing socket file may take to tell a live server from a stale file."""

BACKLOG = 128
"""Pending connections the kernel queues for each listener."""


class EndpointError(Exception):
    """An endpoint or private file cannot be used safely; the message says which and why."""


@dataclass
class Endpoint:
    """A listening socket: ``kind`` is ``unix``, ``abstract`` or ``tcp``; ``address`` is what the
    ready line shows (``{"transport": "tcp", "host": "127.0.0.1", "port": 40123}``)."""

    kind: str
    listener: SocketListener
    address: dict[str, Any]
    _cleanup: Callable[[], None] = field(default=lambda: None, repr=False)

    async def aclose(self) -> None:
        """Stops listening and removes the socket file if it is still the one bound."""
        await self.listener.aclose()
        self._cleanup()


def _listening(sock: socket.socket) -> socket.socket:
    sock.listen(BACKLOG)
    sock.setblocking(False)
    return sock


def _clear_stale(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise EndpointError(f"--unix {path}: it is a symbolic link; refusing to follow it.")
    if not stat.S_ISSOCK(st.st_mode):
        raise EndpointError(f"--unix {path}: a file that is not a socket is in the way.")
    if st.st_uid != os.getuid():
        raise EndpointError(f"--unix {path}: the socket there belongs to another user.")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(STALE_PROBE_SECONDS)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)  # a socket nobody listens on: left behind by a daemon that died
        return
    except FileNotFoundError:
        return
    except OSError as exc:
        raise EndpointError(f"--unix {path}: cannot tell whether it is in use ({exc}).") from exc
    finally:
        probe.close()
    raise EndpointError(f"--unix {path}: another server is listening there.")


async def open_unix(path: str) -> Endpoint:
    """A Unix socket at ``path``, mode 0600; a stale socket file there is replaced.

    Raises:
        EndpointError: a symlink, a non-socket, a live or foreign socket is at ``path``, or the
            bind failed.
    """
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old_umask = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old_umask)
        os.chmod(path, 0o600)
        bound = os.lstat(path)
        _listening(sock)
    except OSError as exc:
        sock.close()
        raise EndpointError(f"--unix {path}: {exc.strerror or exc}.") from exc

    def cleanup() -> None:
        with contextlib.suppress(OSError):
            now = os.lstat(path)
            if (now.st_dev, now.st_ino) == (bound.st_dev, bound.st_ino):
                os.unlink(path)

    listener = await SocketListener.from_socket(sock)
    return Endpoint("unix", listener, {"transport": "unix", "path": path}, cleanup)


async def open_abstract(name: str) -> Endpoint:
    """A Linux abstract Unix socket ``@name`` (no file; gone when the process exits).

    Raises:
        EndpointError: not Linux, an empty name, or the name is taken.
    """
    if not sys.platform.startswith("linux"):
        raise EndpointError("--abstract: abstract Unix sockets exist only on Linux and Android.")
    if not name:
        raise EndpointError("--abstract: the name must not be empty.")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("\0" + name)
        _listening(sock)
    except OSError as exc:
        sock.close()
        raise EndpointError(f"--abstract {name}: {exc.strerror or exc}.") from exc
    listener = await SocketListener.from_socket(sock)
    return Endpoint("abstract", listener, {"transport": "abstract", "name": name})


def parse_host_port(text: str) -> tuple[str, int]:
    """``127.0.0.1:0`` / ``[::1]:8080`` / ``localhost:9000`` → ``(host, port)``.

    Raises:
        EndpointError: no port, or a port outside 0–65535.
    """
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise EndpointError(f"--tcp {text}: expected HOST:PORT with a port from 0 to 65535.")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


async def open_tcp(host: str, port: int, *, allow_remote: bool = False) -> Endpoint:
    """A TCP listener on ``host:port`` (port 0: the OS picks; ``address`` has the real one).

    Raises:
        EndpointError: the address is not loopback and ``allow_remote`` is false, it does not
            resolve, or the bind failed.
    """
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise EndpointError(f"--tcp {host}:{port}: {exc.strerror}.") from exc
    family, _, _, _, sockaddr = infos[0]
    ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
    if not ip.is_loopback and not allow_remote:
        raise EndpointError(
            f"--tcp {host}:{port}: {ip} is not a loopback address, so other machines could "
            "connect; bind 127.0.0.1 or ::1, or pass --allow-remote to mean it."
        )
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        _listening(sock)
    except OSError as exc:
        sock.close()
        raise EndpointError(f"--tcp {host}:{port}: {exc.strerror or exc}.") from exc
    bound_host, bound_port = sock.getsockname()[:2]
    listener = await SocketListener.from_socket(sock)
    return Endpoint("tcp", listener, {"transport": "tcp", "host": bound_host, "port": bound_port})


def peer_uid(stream: ByteStream) -> int | None:
    """The uid of the process at the other end of a Unix socket, or ``None`` when unknown."""
    sock = stream.extra(SocketAttribute.raw_socket, None)
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or sock.family != socket.AF_UNIX or option is None:
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("iII"))
    except OSError:
        return None
    return int(struct.unpack("iII", creds)[1])


def has_unread_bytes(stream: ByteStream) -> bool:
    """Whether the peer sent bytes this side has not read yet: still in the kernel (a peek), or,
    on a TCP stream, already in the queue of anyio's asyncio protocol (read eagerly by the
    transport; anyio exposes no public way to ask, hence the guarded attribute lookup)."""
    queued = getattr(getattr(stream, "_protocol", None), "read_queue", None)
    if queued:
        return True
    sock = stream.extra(SocketAttribute.raw_socket, None)
    if sock is None:
        return False
    try:
        # TCP streams hand out asyncio's TransportSocket, which cannot recv: peek through a dup
        with socket.fromfd(sock.fileno(), sock.family, sock.type) as peek:
            return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # nothing waiting (EAGAIN), or the socket is gone
        return False


class PrivateFiles:
    """The token and ready files of one ``oamd serve``; ``remove`` deletes those it created."""

    def __init__(self) -> None:
        self._created: list[str] = []
        self._dirs: list[str] = []

    def default_token_path(self, unix_paths: list[str]) -> str:
        """Beside the first socket file; else in ``$XDG_RUNTIME_DIR``; else in a new 0700 temp dir."""
        if unix_paths:
            return unix_paths[0] + ".token"
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        if runtime and os.path.isdir(runtime):
            return os.path.join(runtime, f"oamd-{os.getpid()}.token")
        directory = tempfile.mkdtemp(prefix="oamd-")
        self._dirs.append(directory)
        return os.path.join(directory, "token")

    def token(self, path: str) -> str:
        """The token in ``path``, or a new one written there (0600) when the file does not exist.

        Raises:
            EndpointError: the file is a symlink, not a regular file, not ours, readable by
                others, or empty.
        """
        try:
            # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, before
            # the fstat below could refuse it; a regular file reads the same either way
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
        except FileNotFoundError:
            token = secrets.token_urlsafe(TOKEN_BYTES)
            self._write_new(path, token + "\n")
            return token
        except OSError as exc:
            raise EndpointError(f"--token-file {path}: {exc.strerror or exc}.") from exc
        with os.fdopen(fd, encoding="utf-8") as file:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                raise EndpointError(f"--token-file {path}: not a regular file of this user.")
            if st.st_mode & 0o077:
                raise EndpointError(f"--token-file {path}: others may read it; chmod 600 it.")
            token = file.read().strip()
        if not token:
            raise EndpointError(f"--token-file {path}: the file is empty.")
        return token

    def write_ready(self, path: str, text: str) -> None:
        """Writes ``text`` to ``path`` (0600) in one step: a reader never sees half of it."""
        temporary = f"{path}.{os.getpid()}.tmp"
        self._write_new(temporary, text)
        os.replace(temporary, path)  # replaces a symlink itself, never its target
        self._created[-1] = path

    def _write_new(self, path: str, text: str) -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise EndpointError(f"{path}: {exc.strerror or exc}.") from exc
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        self._created.append(path)

    def remove(self) -> None:
        for path in reversed(self._created):
            with contextlib.suppress(OSError):
                os.unlink(path)
        for directory in self._dirs:
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        self._created.clear()
        self._dirs.clear()

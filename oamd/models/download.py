"""``pull``: one model's download into the store, with httpx.

Guarantees:

- one pull of a model at a time: the model's lock is held from the first byte to the rename, a
  second pull waits for it (``Progress.waiting``) and then finds the model already there;
- resumable: bytes land in ``NAME.gguf.part``; a pull that finds one asks for the rest
  (``Range``), a connection cut while bytes were arriving is resumed at once (up to
  ``MAX_ATTEMPTS`` requests), and a pull that gives up keeps the part for the next one;
- verified: the size (the catalog's, else the server's), the GGUF header and the SHA-256 (the
  catalog's or the caller's, else the one this URL had the first time) are checked on the
  bytes on disk; a file that fails is deleted, never kept; no byte past a size known before the
  body (the catalog's, the URL's first, ``Content-Range``'s or ``Content-Length``'s) is written:
  a server sending more is refused at once;
- atomic: ``NAME.gguf`` appears by one rename of a verified part, so a reader never sees half
  a model;
- every failure is one ``PullError`` whose message names the URL and says what to do.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

import httpx

from oamd import __version__
from oamd.models.store import GGUF_HEADER_BYTES, Store, StoredModel, gguf_problem

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "MAX_ATTEMPTS",
    "OFFLINE_HINT",
    "READ_TIMEOUT_SECONDS",
    "Progress",
    "PullError",
    "PullRequest",
    "pull",
]

MAX_ATTEMPTS = 5
"""Requests one pull makes while each one brings new bytes; a request that brings none ends it."""
CONNECT_TIMEOUT_SECONDS = 15.0
READ_TIMEOUT_SECONDS = 60.0
"""How long a silent server is waited for, per read, before the connection counts as cut."""
HASH_BLOCK_BYTES = 8 * 1024 * 1024
HTTP_PARTIAL = 206
HTTP_RANGE_NOT_SATISFIABLE = 416
HTTP_CLIENT_ERRORS = 400
HTTP_SERVER_ERRORS = 500
OFFLINE_HINT = "without a network, load a GGUF file you have: --model llamacpp:/path/to/model.gguf"


class PullError(Exception):
    """A pull that did not end with a verified model; ``kind`` says which way it failed:
    ``http`` (the server refused: 404, 5xx…), ``network`` (no connection, or it broke),
    ``verify`` (size, header or checksum wrong; the file was deleted), ``disk`` (the store
    cannot be written)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class PullRequest:
    name: str
    url: str
    sha256: str | None = None
    size_bytes: int | None = None


class Progress(Protocol):
    """What a pull reports as it goes (a terminal bar, JSON lines, or nothing)."""

    def waiting(self, name: str) -> None:
        """Another pull of ``name`` holds its lock; this one waits for it."""

    def started(self, name: str, total: int | None, offset: int) -> None:
        """Bytes start arriving; ``offset`` of ``total`` were on disk already."""

    def advanced(self, done: int) -> None:
        """``done`` bytes of the file are on disk."""

    def verifying(self, name: str) -> None:
        """The download is complete; its checksum is being computed."""


ClientFactory = Callable[[], httpx.Client]


def _client() -> httpx.Client:
    return httpx.Client(
        follow_redirects=True,
        timeout=httpx.Timeout(READ_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS),
        headers={"User-Agent": f"oamd/{__version__}", "Accept-Encoding": "identity"},
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(HASH_BLOCK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _number(text: str) -> int | None:
    """A header's decimal number; ``isdigit`` alone is also true of '²', which ``int`` refuses."""
    return int(text) if text.isascii() and text.isdigit() else None


def _length(response: httpx.Response) -> int | None:
    return _number(response.headers.get("content-length", ""))


def _total_of(response: httpx.Response, offset: int) -> int | None:
    """The whole file's size: from ``Content-Range`` (``bytes a-b/total``), else the length."""
    total = _number(response.headers.get("content-range", "").rpartition("/")[2])
    if total is not None:
        return total
    length = _length(response)
    if length is not None:
        return length + (offset if response.status_code == HTTP_PARTIAL else 0)
    return None


def _range_start(response: httpx.Response) -> int | None:
    """Where a 206's bytes start (``Content-Range: bytes START-END/TOTAL``)."""
    unit, _, spec = response.headers.get("content-range", "").partition(" ")
    return _number(spec.partition("-")[0]) if unit == "bytes" else None


def _http_error(url: str, status: int) -> PullError:
    if status == httpx.codes.NOT_FOUND:
        what = "not found (HTTP 404): check the name or URL"
    elif status in (httpx.codes.UNAUTHORIZED, httpx.codes.FORBIDDEN):
        what = f"refused (HTTP {status}): the file needs a login or accepting a licence"
    elif status >= HTTP_SERVER_ERRORS:
        what = f"the server failed (HTTP {status}): try again later"
    else:
        what = f"unexpected answer (HTTP {status})"
    return PullError("http", f"{url}: {what}; {OFFLINE_HINT}")


def _refused(store: Store, request: PullRequest, problem: str) -> PullError:
    """A file that is not the one expected: its part is deleted (its bytes are of no use to a
    later pull) and the pull is no longer announced."""
    store.part_path(request.name).unlink(missing_ok=True)
    store.end_pull(request.name)
    return PullError(
        "verify",
        f"{request.url}: refused, {problem}; the file was deleted (a changed or broken upload, or"
        f" a page instead of a model); {OFFLINE_HINT}",
    )


def _disk_error(url: str, path: Path, exc: OSError) -> PullError:
    if exc.errno == errno.ENOSPC:
        return PullError(
            "disk",
            f"{url}: the disk filled up writing {path}; free some space and run the same command"
            f" again to resume, or move the store with $OAMD_MODELS; {OFFLINE_HINT}",
        )
    return PullError("disk", f"{url}: cannot write {path}: {exc.strerror or exc}; {OFFLINE_HINT}")


class _Attempt:
    """One GET of the rest of the file into the part; ``moved`` says whether bytes arrived."""

    def __init__(self, store: Store, request: PullRequest, progress: Progress) -> None:
        self.store, self.request, self.progress = store, request, progress
        self.part = store.part_path(request.name)
        self.total: int | None = None
        self.moved = False

    @property
    def limit(self) -> int | None:
        """The file's size as known before its bytes arrive: no byte past it is written."""
        return self.request.size_bytes if self.request.size_bytes is not None else self.total

    def run(self, client: httpx.Client) -> bool:
        """Whether the part now holds the whole file (``False``: the connection broke)."""
        offset = _size_of(self.part)
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        url = self.request.url
        with client.stream("GET", url, headers=headers) as response:
            status = response.status_code
            if status == HTTP_RANGE_NOT_SATISFIABLE and offset:  # to a plain GET: an error below
                self.total = _total_of(response, offset)
                if self.total == offset:
                    return True  # the part was complete: only its check was left to do
                self.part.unlink()  # longer than the file: not a prefix of it
                self.moved = True
                return False
            if status >= HTTP_CLIENT_ERRORS:
                raise _http_error(url, status)
            if status == HTTP_PARTIAL and _range_start(response) != offset:
                self.part.unlink(missing_ok=True)  # not the bytes asked for: ask for all of it
                self.moved = True
                return False
            if status != HTTP_PARTIAL:
                offset = 0  # the whole file came back (no Range support): start over
            self.total = _total_of(response, offset)
            self._check_room(response, offset)
            self.store.announce_pull(self.request.name, url, self.total)
            self.progress.started(self.request.name, self.total, offset)
            return self._receive(response, offset)

    def _check_room(self, response: httpx.Response, offset: int) -> None:
        expected = self.request.size_bytes
        if expected is not None and self.total is not None and self.total != expected:
            raise _refused(
                self.store,
                self.request,
                f"the server offers {self.total} bytes, {expected} were expected (the file"
                " changed upstream)",
            )
        length = _length(response)
        if self.limit is not None and length is not None and offset + length > self.limit:
            raise self._too_long()
        if self.total is None:
            return
        needed = self.total - offset
        free = shutil.disk_usage(self.store.folder).free
        if free < needed:
            raise PullError(
                "disk",
                f"{self.request.url}: not enough space in {self.store.folder}: {needed} bytes"
                f" needed, {free} free; free some space or move the store with $OAMD_MODELS;"
                f" {OFFLINE_HINT}",
            )

    def _too_long(self) -> PullError:
        return _refused(
            self.store,
            self.request,
            f"the server sent more than the {self.limit} bytes the file has",
        )

    def _receive(self, response: httpx.Response, offset: int) -> bool:
        done, limit, too_long = offset, self.limit, False
        try:
            with open(self.part, "r+b" if offset else "wb") as file:
                file.seek(offset)
                file.truncate()
                for chunk in response.iter_raw():  # as it arrives: a cut loses no received byte
                    if limit is not None and done + len(chunk) > limit:
                        too_long = True  # refused once the file is closed (deleted then)
                        break
                    file.write(chunk)
                    done += len(chunk)
                    self.moved = True
                    self.progress.advanced(done)
                file.flush()
                os.fsync(file.fileno())
        except OSError as exc:
            raise _disk_error(self.request.url, self.part, exc) from exc
        except httpx.TransportError:
            return False  # cut mid-body (RemoteProtocolError, ReadTimeout, ReadError…)
        if too_long:
            raise self._too_long()
        return self.total is None or done >= self.total


def _verified(store: Store, request: PullRequest, path: Path, total: int | None) -> str:
    """The SHA-256 of ``path`` once its size, header and digest are right.

    Raises:
        PullError: one of them is not (``path`` is deleted).
    """
    expected_size = request.size_bytes if request.size_bytes is not None else total
    expected_sha = request.sha256
    size = _size_of(path)
    with open(path, "rb") as file:
        problem = gguf_problem(file.read(GGUF_HEADER_BYTES))
    if expected_size is not None and size != expected_size:
        problem = f"it has {size} bytes, {expected_size} were expected"
    digest = sha256_of(path) if problem is None else ""
    if problem is None and expected_sha is not None and digest != expected_sha.lower():
        problem = f"its SHA-256 is {digest}, {expected_sha.lower()} was expected"
    if problem is not None:
        raise _refused(store, request, problem)
    return digest


def _already_there(store: Store, request: PullRequest) -> StoredModel | None:
    """The stored model when it is still what it should be; a stored file that no longer
    matches its record (or the catalog) is deleted so it is downloaded again."""
    stored = store.stored(request.name)
    if stored is None:
        return None
    expected = request.sha256 or stored.sha256
    if expected is not None and sha256_of(stored.path) == expected.lower():
        return stored
    stored.path.unlink(missing_ok=True)
    store.record_path(request.name).unlink(missing_ok=True)
    return None


def _with_known_digest(store: Store, request: PullRequest) -> PullRequest:
    """``request`` expecting what its URL held the first time, where it names nothing itself."""
    known = store.digests.get(request.url)
    if known is None or (request.sha256 is not None and request.sha256 != known[0]):
        return request  # an explicit digest overrides what the URL had (a new upload)
    sha256, size = known
    return replace(
        request,
        sha256=request.sha256 or sha256,
        size_bytes=request.size_bytes if request.size_bytes is not None else size,
    )


def _download(store: Store, request: PullRequest, progress: Progress, http: httpx.Client) -> int:
    """Fills the part with the whole file; returns its size (the server's, when it said).

    Raises:
        PullError: the server refused, could not be reached, or kept breaking the connection.
    """
    attempt = _Attempt(store, request, progress)
    arrived = False
    for _ in range(MAX_ATTEMPTS):
        attempt.moved = False
        try:
            if attempt.run(http):
                return attempt.total if attempt.total is not None else _size_of(attempt.part)
        except httpx.TooManyRedirects as exc:
            raise PullError(
                "http",
                f"{request.url}: the server redirects in a loop (more than {http.max_redirects}"
                f" redirects); {OFFLINE_HINT}",
            ) from exc
        except httpx.TransportError as exc:
            if not arrived:
                host = urlsplit(request.url).netloc
                raise PullError(
                    "network",
                    f"{request.url}: cannot reach {host} ({exc or type(exc).__name__}): no"
                    f" network? {OFFLINE_HINT}",
                ) from exc
        arrived = arrived or attempt.moved
        if not attempt.moved:
            break
    total = f" of {attempt.total}" if attempt.total is not None else ""
    raise PullError(
        "network",
        f"{request.url}: the connection broke at {_size_of(attempt.part)}{total} bytes; run the"
        f" same command again to resume ({attempt.part} is kept); {OFFLINE_HINT}",
    )


def _store_error(store: Store, url: str, exc: OSError) -> PullError:
    if not store.folder.is_dir():
        return PullError(
            "disk",
            f"{url}: the store {store.folder} is not a folder and cannot be made one"
            f" ({exc.strerror or exc}); move what is there, or choose another store with"
            f" $OAMD_MODELS; {OFFLINE_HINT}",
        )
    return _disk_error(url, Path(exc.filename or store.folder), exc)


def pull(
    store: Store, request: PullRequest, progress: Progress, client: ClientFactory = _client
) -> StoredModel:
    """Downloads ``request`` into ``store`` (see the module docstring), or finds it there.

    Raises:
        PullError: the model could not be downloaded and verified; the message says why.
    """
    try:
        return _locked_pull(store, request, progress, client)
    except OSError as exc:  # the store: a file where its folder should be, no permission, full
        raise _store_error(store, request.url, exc) from exc


def _locked_pull(
    store: Store, request: PullRequest, progress: Progress, client: ClientFactory
) -> StoredModel:
    lock = store.lock(request.name)
    if not lock.try_acquire():
        progress.waiting(request.name)
        lock.acquire()
    try:
        request = _with_known_digest(store, request)
        stored = _already_there(store, request)
        if stored is not None:
            return stored
        with client() as http:
            total = _download(store, request, progress, http)
        part = store.part_path(request.name)
        progress.verifying(request.name)
        digest = _verified(store, request, part, total)
        size = _size_of(part)
        # the records before the rename: a disk too full for them keeps the verified part for
        # the next pull to finish, never a model without its record
        store.record(request.name, request.url, size, digest)
        store.digests.remember(request.url, digest, size)  # the first, or the one asked for
        os.replace(part, store.model_path(request.name))
        store.end_pull(request.name)
        stored = store.stored(request.name)
        assert stored is not None
        return stored
    finally:
        lock.release()

"""KV states that outlive the process (opt-in, spec option ``kvcache=<folder>``): a game restarted
from a save gets its NPCs warm.

``oamd.backends.llamacpp.kv_slots`` hands this store every state it drops from memory, and every
state it holds when the model closes; a step whose prompt starts the way a stored state does
loads it instead of evaluating those tokens again. Each file is one state, named by the SHA-256 of
the model's identity and the exact tokens it holds::

    OAMDKV1\\n  u32 header length  header (JSON: model, tokens, bytes, sha256)  tokens (i32 LE)  state

It is a cache, so nothing in it is trusted: a file whose magic, header, model, length or digest
do not match is deleted unread by llama.cpp, and a state llama.cpp refuses is dropped. The folder
is bounded (``kvcache_mib``, default ``DEFAULT_MAX_BYTES``): past it the least recently used files
go. Only files this store names (``*.kv`` in the model's own subfolder) are ever read or deleted.
Blocking: called in the model's worker thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import stat
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from oamd.backends.llamacpp.kv_slots import MIN_PARK, ParkedState
from oamd.backends.llamacpp.scoring import shared_length
from oamd.log import get_logger

__all__ = ["DEFAULT_MAX_BYTES", "KvStore", "model_identity"]

DEFAULT_MAX_BYTES = 1024 * 1024 * 1024
"""What the folder may hold at most unless told (``kvcache_mib``): about forty 1,200-token NPC
states of SmolLM2-135M."""

MAGIC = b"OAMDKV1\n"
MAX_HEADER = 4096
MAX_TOKENS = 1 << 20
_SUFFIX = ".kv"

log = get_logger("oamd.backends.llamacpp.kv_store")


def model_identity(path: Path, version: str) -> str:
    """What a state is only valid for: the model file (its size and its first and last MiB, not
    its whole gigabytes) and the llama.cpp build that wrote it."""
    digest = hashlib.sha256(version.encode())
    size = path.stat().st_size
    digest.update(str(size).encode())
    with path.open("rb") as file:
        digest.update(file.read(1 << 20))
        file.seek(max(0, size - (1 << 20)))
        digest.update(file.read(1 << 20))
    return digest.hexdigest()


def _open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (a FIFO or device named like a state
    would block or never end).

    Raises:
        OSError: it cannot be opened, or is no regular file.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


@dataclass(slots=True)
class _Entry:
    path: Path
    tokens: tuple[int, ...]
    size: int
    """The file's bytes."""


class KvStore:
    """One model's states in ``folder`` (its subfolder named by ``identity``)."""

    def __init__(self, folder: Path, identity: str, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._identity = identity
        self._folder = folder / identity[:32]
        self._max_bytes = max(0, max_bytes)
        self._entries: dict[Path, _Entry] | None = None
        """Read from the folder at first use (headers and tokens only)."""

    # ---- reading ------------------------------------------------------------------------------

    def _index(self) -> dict[Path, _Entry]:
        if self._entries is None:
            self._entries = {}
            try:
                paths = sorted(self._folder.glob(f"*{_SUFFIX}"))
            except OSError:
                paths = []
            for path in paths:
                entry = self._read_head(path)
                if entry is not None:
                    self._entries[path] = entry
        return self._entries

    def _read_head(self, path: Path) -> _Entry | None:
        try:
            with _open_regular(path) as file:
                tokens, _, _ = self._head(file, path)
            size = path.stat().st_size
        except (OSError, ValueError, struct.error) as exc:
            self._discard(path, str(exc))
            return None
        return _Entry(path, tokens, size)

    def _head(self, file: BinaryIO, path: Path) -> tuple[tuple[int, ...], int, str]:
        """The tokens, state length and digest a file's header gives, checked against this
        store's model and the file's name.

        Raises:
            ValueError: the header is not this store's.
        """
        read = file.read
        if read(len(MAGIC)) != MAGIC:
            raise ValueError("not a state file")
        (length,) = struct.unpack("<I", read(4))
        if not 0 < length <= MAX_HEADER:
            raise ValueError("header length out of range")
        header = orjson.loads(read(length))
        if not isinstance(header, dict) or header.get("model") != self._identity:
            raise ValueError("another model's state")
        count, size, digest = header.get("tokens"), header.get("bytes"), header.get("sha256")
        if not isinstance(count, int) or not MIN_PARK <= count <= MAX_TOKENS:
            raise ValueError("token count out of range")
        if not isinstance(size, int) or not 0 < size <= self._max_bytes:
            raise ValueError("state size out of range")
        if not isinstance(digest, str):
            raise ValueError("no digest")
        raw = read(4 * count)
        if len(raw) != 4 * count:
            raise ValueError("truncated tokens")
        tokens = struct.unpack(f"<{count}i", raw)
        if path.name != self._name(tokens):
            raise ValueError("named for other tokens")
        if os.fstat(file.fileno()).st_size != len(MAGIC) + 4 + length + 4 * count + size:
            raise ValueError("file length does not match its header")
        return tokens, size, digest

    def find(self, tokens: Sequence[int], more_than: int) -> ParkedState | None:
        """The stored state sharing the longest beginning with ``tokens``, if it shares more than
        ``more_than`` tokens and reads back whole."""
        best: _Entry | None = None
        best_shared = more_than
        for entry in self._index().values():
            shared = shared_length(entry.tokens, tokens)
            if shared > best_shared:
                best, best_shared = entry, shared
        if best is None:
            return None
        try:
            with _open_regular(best.path) as file:
                stored, size, digest = self._head(file, best.path)
                data = (ctypes.c_uint8 * size)()
                if file.readinto(data) != size or file.read(1):
                    raise ValueError("state length does not match its header")
            if hashlib.sha256(data).hexdigest() != digest or stored != best.tokens:
                raise ValueError("state digest does not match")
            os.utime(best.path)  # recently used: the last to go
        except (OSError, ValueError, struct.error) as exc:
            self._discard(best.path, str(exc))
            return None
        return ParkedState(best.tokens, data)

    def _discard(self, path: Path, why: str) -> None:
        log.warning("kv_state_dropped", file=path.name, why=why)
        if self._entries is not None:
            self._entries.pop(path, None)
        with contextlib.suppress(OSError):
            path.unlink()

    # ---- writing ------------------------------------------------------------------------------

    def _name(self, tokens: Sequence[int]) -> str:
        digest = hashlib.sha256(self._identity.encode())
        digest.update(struct.pack(f"<{len(tokens)}i", *tokens))
        return digest.hexdigest() + _SUFFIX

    def save(self, state: ParkedState) -> None:
        """Writes ``state`` (replacing the older state of the same conversation), then drops the
        least recently used files past the folder's bound.

        Raises:
            OSError: the folder cannot be written.
        """
        size = state.nbytes
        if len(state.tokens) > MAX_TOKENS or not 0 < size <= self._max_bytes:
            return
        entries = self._index()
        self._folder.mkdir(parents=True, exist_ok=True)
        path = self._folder / self._name(state.tokens)
        header = orjson.dumps(
            {
                "model": self._identity,
                "tokens": len(state.tokens),
                "bytes": size,
                "sha256": hashlib.sha256(state.data).hexdigest(),
            }
        )
        partial = path.with_suffix(".part")
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()  # a leftover, or a link planted to be written through
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(partial, flags, 0o600), "wb") as file:
            file.write(MAGIC + struct.pack("<I", len(header)) + header)
            file.write(struct.pack(f"<{len(state.tokens)}i", *state.tokens))
            file.write(memoryview(state.data))
            written = file.tell()
        os.replace(partial, path)
        for other in list(entries.values()):
            if other.path != path and 2 * shared_length(other.tokens, state.tokens) > len(
                other.tokens
            ):
                self._discard(other.path, "replaced by a newer state of its conversation")
        entries[path] = _Entry(path, state.tokens, written)
        self._bound()

    def _bound(self) -> None:
        entries = self._index()
        total = sum(e.size for e in entries.values())
        if total <= self._max_bytes:
            return

        def used(entry: _Entry) -> float:
            try:
                return entry.path.stat().st_mtime
            except OSError:
                return 0.0

        for entry in sorted(entries.values(), key=used):
            if total <= self._max_bytes:
                break
            total -= entry.size
            self._discard(entry.path, "the cache folder is full")

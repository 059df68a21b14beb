"""The store folder and what lies in it: one ``NAME.gguf`` per pulled model with its record
``NAME.json`` (where it came from, its size and SHA-256), and while a pull runs its
``NAME.gguf.part``, its ``NAME.pull.json`` (the URL and the expected size, for
``model/availability`` to report progress) and its lock ``NAME.lock``.

The folder is ``$OAMD_MODELS`` when set, else the platform's data folder: ``$XDG_DATA_HOME``
(or ``~/.local/share``) ``/oamd/models`` on Linux and other POSIX systems, ``~/Library/
Application Support/oamd/models`` on macOS, ``%LOCALAPPDATA%\\oamd\\models`` on Windows.
Guarantees: a ``NAME.gguf`` is only ever complete and verified (it appears by one rename), every
JSON file is replaced whole, and ``digests.json`` remembers each URL's first digest after the
model is removed, so a later pull of the same URL is checked against it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from oamd.models.lock import PullLock, pull_running

__all__ = [
    "GGUF_HEADER_BYTES",
    "GGUF_MAGIC",
    "MODELS_VARIABLE",
    "KnownDigests",
    "PullRunning",
    "PullState",
    "Store",
    "StoredModel",
    "check_name",
    "gguf_problem",
    "name_from_url",
    "store_folder",
    "write_json",
]

MODELS_VARIABLE = "OAMD_MODELS"
GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (1, 2, 3)
"""GGUF format versions llama.cpp has written; the header's next four bytes, little-endian."""
GGUF_HEADER_BYTES = 8
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
"""A stored model's name: also a file name on every platform, and never a path. Always
``fullmatch``: ``$`` would accept a name ending in a line break."""
MODEL_SUFFIX = ".gguf"


def store_folder(
    environ: Mapping[str, str] | None = None, platform: str | None = None, home: Path | None = None
) -> Path:
    """Where pulled models live (see the module docstring)."""
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    home = Path.home() if home is None else home
    chosen = environ.get(MODELS_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    if platform == "win32":
        local = environ.get("LOCALAPPDATA")
        return (Path(local) if local else home / "AppData" / "Local") / "oamd" / "models"
    if platform == "darwin":
        return home / "Library" / "Application Support" / "oamd" / "models"
    data = environ.get("XDG_DATA_HOME")
    base = Path(data) if data and Path(data).is_absolute() else home / ".local" / "share"
    return base / "oamd" / "models"


def gguf_problem(head: bytes) -> str | None:
    """Why a file starting with ``head`` is not a GGUF model, or ``None`` when it looks like one."""
    if len(head) < GGUF_HEADER_BYTES or not head.startswith(GGUF_MAGIC):
        shown = head[:16].decode("latin-1").encode("unicode_escape").decode()
        return f"it is not a GGUF file (it starts with {shown!r}, not 'GGUF')"
    version = int.from_bytes(head[len(GGUF_MAGIC) : GGUF_HEADER_BYTES], "little")
    if version not in GGUF_VERSIONS:
        return f"its GGUF version is {version}; llama.cpp reads versions 1 to 3"
    return None


def name_from_url(url: str) -> str:
    """The store name a URL's file gets: its file name without ``.gguf``, lower-cased.

    Raises:
        ValueError: the URL names no file usable as a name.
    """
    file = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    stem = file[: -len(MODEL_SUFFIX)] if file.lower().endswith(MODEL_SUFFIX) else file
    name = stem.lower()
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"cannot name a model after {file!r}; give one with --name")
    return name


def check_name(name: str) -> str:
    """``name`` when it can name a stored model.

    Raises:
        ValueError: it holds characters a file name cannot, or a path separator.
    """
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a model name (lower-case letters, digits, '.', '_' and '-')"
        )
    return name


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def write_json(path: Path, value: dict[str, Any]) -> None:
    """Replaces ``path`` whole: a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2))
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
        raise


@dataclass(frozen=True, slots=True)
class StoredModel:
    name: str
    path: Path
    url: str | None
    size: int
    sha256: str | None


@dataclass(frozen=True, slots=True)
class PullState:
    """A pull running now: where it reads from and how far it got."""

    url: str | None
    bytes_downloaded: int
    total_bytes: int | None


class PullRunning(Exception):
    """Another process is pulling the model the store was asked to change."""


class KnownDigests:
    """``digests.json``: each URL's SHA-256 and size as first downloaded (trust on first use)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "digests.json"

    def get(self, url: str) -> tuple[str, int | None] | None:
        """The digest and size ``url`` had when first downloaded, or ``None``."""
        entry = (_read_json(self.path) or {}).get(url)
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            return None
        size = entry.get("size")
        return entry["sha256"], size if isinstance(size, int) and size >= 0 else None

    def remember(self, url: str, sha256: str, size: int) -> None:
        known = _read_json(self.path) or {}
        known[url] = {"sha256": sha256, "size": size}
        write_json(self.path, known)


class Store:
    """The files of the store folder, by model name (a name is checked before it is used)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = store_folder() if folder is None else folder
        self.digests = KnownDigests(self.folder)

    def model_path(self, name: str) -> Path:
        return self.folder / f"{check_name(name)}{MODEL_SUFFIX}"

    def part_path(self, name: str) -> Path:
        return self.folder / f"{check_name(name)}{MODEL_SUFFIX}.part"

    def record_path(self, name: str) -> Path:
        return self.folder / f"{check_name(name)}.json"

    def pull_path(self, name: str) -> Path:
        return self.folder / f"{check_name(name)}.pull.json"

    def lock(self, name: str) -> PullLock:
        return PullLock(self.folder / f"{check_name(name)}.lock")

    def stored(self, name: str) -> StoredModel | None:
        """The pulled model ``name``, or ``None`` when it is not (completely) in the store."""
        path = self.model_path(name)
        try:
            size = path.stat().st_size
        except OSError:
            return None
        record = _read_json(self.record_path(name))
        if not isinstance(record, dict):
            record = {}
        # a record edited by hand (or half written) is read as far as its types hold
        url, sha256 = record.get("url"), record.get("sha256")
        return StoredModel(
            name,
            path,
            url if isinstance(url, str) else None,
            size,
            sha256 if isinstance(sha256, str) else None,
        )

    def models(self) -> list[StoredModel]:
        """Every pulled model, by name."""
        if not self.folder.is_dir():
            return []
        names = (p.stem for p in sorted(self.folder.glob(f"*{MODEL_SUFFIX}")))
        found = (self.stored(name) for name in names if NAME_PATTERN.fullmatch(name))
        return [model for model in found if model is not None]

    def record(self, name: str, url: str, size: int, sha256: str) -> None:
        write_json(
            self.record_path(name), {"name": name, "url": url, "size": size, "sha256": sha256}
        )

    def announce_pull(self, name: str, url: str, total_bytes: int | None) -> None:
        """Tells ``pull_state`` readers which URL this pull reads and how large the file is."""
        write_json(
            self.pull_path(name), {"url": url, "totalBytes": total_bytes, "pid": os.getpid()}
        )

    def end_pull(self, name: str) -> None:
        self.pull_path(name).unlink(missing_ok=True)

    def pull_state(self, name: str) -> PullState | None:
        """The pull of ``name`` running now (in any process), or ``None`` when none is."""
        if not pull_running(self.folder / f"{check_name(name)}.lock"):
            return None
        announced = _read_json(self.pull_path(name)) or {}
        total = announced.get("totalBytes")
        try:
            done = self.part_path(name).stat().st_size
        except OSError:
            done = 0
        return PullState(
            announced.get("url"), done, total if isinstance(total, int) and total >= 0 else None
        )

    def pending_url(self, name: str) -> str | None:
        """The URL an unfinished pull of ``name`` read from (its ``.pull.json`` is kept)."""
        return (_read_json(self.pull_path(name)) or {}).get("url")

    def remove(self, name: str) -> bool:
        """Deletes the model and its record (and any unfinished download); whether there was one.

        Raises:
            PullRunning: a pull of ``name`` is writing it now.
        """
        if not self.folder.is_dir():
            return False
        lock = self.lock(name)
        if not lock.try_acquire():
            raise PullRunning(f"a pull of {name} is running; stop it or let it finish first")
        try:
            found = False
            for path in (
                self.model_path(name),
                self.record_path(name),
                self.part_path(name),
                self.pull_path(name),
            ):
                if path.exists():
                    path.unlink()
                    found = True
            return found
        finally:
            lock.release()

"""``--record DIR``: a ``ConnectionTap`` that records each connection into a file of its own.

Per connection it taps the byte stream (``TappedStream``) and gives every use of the system model
its own ``RecordingUse``; when the connection has closed it writes
``DIR/<UTC time>-<pid>-<n>.json`` in a worker thread, within ``RECORDING_WRITE_SECONDS`` (a
connection that sent nothing leaves no file). Guarantees: the event loop never waits for the disk
or encodes JSON for a recording; a connection holds at most ``MAX_RECORDING_BYTES`` of it; a
recording that cannot be written (a full disk, a line no encoder takes, a bug) is logged, never
the connection's failure, and leaves no partial file; files are the owner's only (0600), and so is
every folder ``prepare_directory`` makes (0700). ``keep_secret`` names what no file may hold (the
socket token of ``oamd serve``).
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import ByteStream

from oamd.agent.models import ModelFactory
from oamd.backends.base import LanguageModel
from oamd.limits import (
    MAX_LINE_BYTES,
    MAX_OUTBOX_BYTES,
    MAX_RECORDING_BYTES,
    RECORDING_WRITE_SECONDS,
)
from oamd.log import get_logger
from oamd.recording._format import RecordedConnection, RecordingError, write_document
from oamd.recording._log import CLIENT, LineLog, TappedStream
from oamd.recording._model import (
    STEP_OVERHEAD_BYTES,
    AvailabilityLog,
    Budget,
    RecordingSystem,
    RecordingUse,
    UseLog,
)

if TYPE_CHECKING:
    from oamd.bridge.state import DaemonConfig

__all__ = ["Recorder", "prepare_directory"]

log = get_logger("oamd.recording")


DIRECTORY_MODE = 0o700
"""A folder ``--record`` makes: recordings hold every prompt and line of a play session."""


def prepare_directory(directory: str) -> Path:
    """``directory``, created (with each missing parent, ``DIRECTORY_MODE``) when missing, once it
    is known to take files. A folder that exists keeps its mode: it is the user's.

    Raises:
        RecordingError: it cannot be created or written to.
    """
    path = Path(directory)
    if path.exists() and not path.is_dir():
        raise RecordingError(f"{directory!r} is not a directory")
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        for folder in reversed(missing):
            folder.mkdir(mode=DIRECTORY_MODE, exist_ok=True)
    except OSError as exc:
        raise RecordingError(f"cannot create {directory!r}: {exc.strerror or exc}") from exc
    if not path.is_dir():
        raise RecordingError(f"{directory!r} is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise RecordingError(f"{directory!r} is not a directory this user can write to")
    return path


class Recorder:
    """Records every connection it taps into ``directory`` (see the module's docstring)."""

    def __init__(
        self,
        directory: Path,
        config: DaemonConfig,
        *,
        transport: str,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_outbox_bytes: int = MAX_OUTBOX_BYTES,
        limit: int = MAX_RECORDING_BYTES,
    ) -> None:
        self.directory = directory
        self._transport = transport
        self._daemon = {  # what shapes the daemon's answers, for the replay's daemon
            "scripted": config.models.allow_scripted,
            "testMethods": config.test_methods,
            "maxSessions": config.max_sessions,
            "toolTimeoutSeconds": config.tool_timeout,
            "maxConnectionBytes": config.max_connection_bytes,
            "maxLineBytes": max_line_bytes,
            "maxOutboxBytes": max_outbox_bytes,
        }
        self._max_line_bytes = max_line_bytes
        self._limit = limit
        self._numbers = itertools.count(1)
        self._secrets: tuple[str, ...] = ()

    def keep_secret(self, secret: str) -> None:
        """No recording from now on holds ``secret`` (in clear, escaped or encoded)."""
        self._secrets = (*self._secrets, secret)

    @asynccontextmanager
    async def __call__(
        self, stream: ByteStream, models: ModelFactory
    ) -> AsyncIterator[tuple[ByteStream, ModelFactory]]:
        budget = Budget(self._limit)
        lines = LineLog(budget, self._max_line_bytes)
        availability = AvailabilityLog()
        system = RecordingSystem(models.system, availability, budget)
        recorded = RecordedConnection(
            self._transport,
            self._daemon,
            models.system,
            lines,
            budget,
            availability,
            secrets=self._secrets,
        )
        path = self._path()

        def bind(_system: LanguageModel, use: Any) -> LanguageModel:
            method, request_id = use if isinstance(use, tuple) else (str(use), None)
            used = UseLog(method, request_id)
            if budget.spend(STEP_OVERHEAD_BYTES):
                recorded.uses.append(used)
            return RecordingUse(system, used, budget)

        try:
            yield TappedStream(stream, lines), replace(models, system=system, bind=bind)
        finally:
            lines.finish()
            if budget.truncated:
                log.warning("recording_truncated", path=str(path), limit=self._limit)
            if any(side == CLIENT for side, *_ in lines.lines):
                with anyio.move_on_after(RECORDING_WRITE_SECONDS, shield=True) as scope:
                    await _write(path, recorded)
                if scope.cancelled_caught:
                    log.error("recording_not_written", path=str(path), reason="timeout")

    def _path(self) -> Path:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        return self.directory / f"{stamp}-{os.getpid()}-{next(self._numbers)}.json"


async def _write(path: Path, recorded: RecordedConnection) -> None:
    try:
        await anyio.to_thread.run_sync(write_document, path, recorded, abandon_on_cancel=True)
    except OSError as exc:
        log.error("recording_not_written", path=str(path), reason=str(exc))
    except Exception as exc:  # a bug of ours: the connection it recorded still ends well
        log.error("recording_not_written", path=str(path), reason=repr(exc), exc_info=exc)
    else:
        log.info("recording_written", path=str(path))

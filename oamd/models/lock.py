"""One pull of a model at a time: an exclusive lock on a small file beside the model, held by the
pull for as long as it writes (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows).

The operating system drops the lock when its holder exits, however it exits, so a crashed pull
never blocks the next one and a lock that can be taken means no pull is running: that is how
``model/availability`` tells a download in progress from one abandoned half-way. Lock files are
never deleted (a waiter holding the old file while a new one is created would lock a
different file than the next pull).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import IO

__all__ = ["PullLock", "pull_running"]

WINDOWS_RETRY_SECONDS = 0.2
"""``msvcrt`` has no blocking lock that waits forever: a waiting pull retries at this pace."""


def _try_lock(handle: IO[bytes]) -> bool:
    if sys.platform == "win32":
        import msvcrt

        try:
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _lock(handle: IO[bytes]) -> None:
    if sys.platform == "win32":
        while not _try_lock(handle):
            time.sleep(WINDOWS_RETRY_SECONDS)
        return
    import fcntl

    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)


def _unlock(handle: IO[bytes]) -> None:
    if sys.platform == "win32":
        import msvcrt

        handle.seek(0)
        msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        return
    import fcntl

    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class PullLock:
    """The lock of one model's pull: ``try_acquire`` without waiting, or ``acquire`` waiting for
    the pull that holds it; ``release`` (or leaving the ``with`` block) lets the next one in."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[bytes] | None = None

    def _open(self) -> IO[bytes]:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(self.path, "a+b")  # noqa: SIM115 - held until release()
        return self._handle

    def try_acquire(self) -> bool:
        if _try_lock(self._open()):
            return True
        self.close()
        return False

    def acquire(self) -> None:
        _lock(self._open())

    def release(self) -> None:
        if self._handle is not None:
            _unlock(self._handle)
            self.close()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> PullLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def pull_running(path: Path) -> bool:
    """Whether some pull holds the lock at ``path`` now (taking it for an instant to tell)."""
    if not path.exists():
        return False
    probe = PullLock(path)
    if probe.try_acquire():
        probe.release()
        return False
    return True

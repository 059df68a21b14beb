"""A catalog model fetched when the engine asks for it (``--model llamacpp:NAME?pull=on-request``):
a shipped game has no command line to run ``oamd models pull`` from, so the availability check
the engine already polls starts the download, as Gemini Nano's does on Android.

``OnRequestPull.check()`` is called by that check (in the daemon, at each ``model/availability``
until the model loads): the first call starts one pull in a background thread (the same pull as
``oamd models pull``: resumable, verified, into the same store, under the model's lock), later
calls report how far it got, a failure is reported once and the next call starts the pull again.
The thread is a daemon thread: a process that exits mid-download leaves the ``.part`` file, and
the next pull resumes it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from oamd.log import get_logger
from oamd.models.store import Store

__all__ = ["Fetching", "OnRequestPull"]

log = get_logger("oamd.models")


@dataclass(frozen=True, slots=True)
class Fetching:
    """What the pull is doing now: ``running`` with its progress, or the failure of the last one
    (``failure``, reported once)."""

    running: bool
    bytes_downloaded: int = 0
    total_bytes: int | None = None
    failure: str | None = None


class OnRequestPull:
    """One model's download started by availability checks (see the module docstring)."""

    def __init__(self, store: Store, name: str, url: str, sha256: str | None, size: int | None):
        self._store = store
        self._name, self._url, self._sha256, self._size = name, url, sha256, size
        self._mutex = threading.Lock()
        self._thread: threading.Thread | None = None
        self._failure: str | None = None
        self._done = 0
        self._total = size

    def check(self) -> Fetching:
        """Starts the pull unless one runs (or has just failed: that is reported instead)."""
        with self._mutex:
            if self._thread is not None and self._thread.is_alive():
                return Fetching(True, self._done, self._total)
            if self._failure is not None:
                failure, self._failure = self._failure, None
                return Fetching(False, failure=failure)
            self._done = self._part_size()
            self._thread = threading.Thread(
                target=self._run, name=f"oamd-pull-{self._name}", daemon=True
            )
            self._thread.start()
            return Fetching(True, self._done, self._total)

    def _part_size(self) -> int:
        try:
            return self._store.part_path(self._name).stat().st_size
        except OSError:
            return 0

    def _run(self) -> None:
        # httpx and the pull are imported here: a daemon that never fetches never loads them
        from oamd.models.download import PullError, PullRequest, pull

        request = PullRequest(self._name, self._url, self._sha256, self._size)
        log.info("model_pull_started", model=self._name, url=self._url, reason="on request")
        try:
            stored = pull(self._store, request, self)
        except PullError as exc:
            log.warning("model_pull_failed", model=self._name, kind=exc.kind, error=str(exc))
            with self._mutex:
                self._failure = str(exc)
            return
        except Exception as exc:  # a thread's failure must reach the engine, whatever it is
            log.exception("model_pull_failed", model=self._name)
            with self._mutex:
                self._failure = f"{type(exc).__name__}: {exc}"
            return
        log.info("model_pull_done", model=self._name, path=str(stored.path), bytes=stored.size)

    # the pull's Progress (kept here for check: the pull's lock may not be held yet, so the
    # store's pull_state cannot tell)

    def waiting(self, name: str) -> None:
        log.info("model_pull_waiting", model=name, reason="another pull of it runs")

    def started(self, name: str, total: int | None, offset: int) -> None:
        with self._mutex:
            self._done = offset
            if total is not None:
                self._total = total

    def advanced(self, done: int) -> None:
        self._done = done  # one int written by one thread, read whole by others

    def verifying(self, name: str) -> None:
        log.info("model_pull_verifying", model=name)

"""The JVM seam shared by the Android backends: one thread owns every pyjnius call, and Java
callbacks reach the event loop thread-safely.

Owns the pyjnius import (class path set before the VM starts), the single ``oamd-jvm`` worker
thread, and the registry that keeps each Python callback object alive until its terminal call
(a Java-held proxy whose Python object is collected crashes the VM). Leaves prompts, options and
the error table to ``oamd.backends.android.mlkit``. Guarantees: no pyjnius call runs on the event loop
or on two threads at once (Android's ``FindClass`` and pyjnius#287 need one thread); a callback
object is reachable from the registry from before ``generate`` is called until its ``onDone`` /
``onError`` returns, and an exception inside a callback is logged, never lost silently.

The worker is a one-thread ``ThreadPoolExecutor`` rather than ``anyio.to_thread``: anyio's pool
does not promise the same thread twice, and the JVM's class loader context is per thread.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from oamd.errors import ModelError

__all__ = [
    "JVM_CALL_TIMEOUT_SECONDS",
    "Chunk",
    "Done",
    "DownloadProgress",
    "Failed",
    "JvmRuntime",
    "JvmUnavailable",
    "SinkEvent",
    "jnius_available",
]

_log = logging.getLogger("oamd.backends.android.jvm")

T = TypeVar("T")

JVM_CALL_TIMEOUT_SECONDS = 30.0
"""Longest a ``JvmRuntime.call`` (status, tokenLimit, countTokens, generate's start, close) may take,
waiting in line on the worker included; past it the caller gets ``generation_failed`` (the worker
thread stays busy until Java returns)."""

SINK_INTERFACE = "org/oamd/host/GenerationSink"
"""The Java callback interface, in pyjnius's slash form."""

GUARD_CLASS = "org.oamd.host.GuardedSink"
"""The Java guard every backend gets instead of the Python sink (``android_host/java``)."""


class JvmUnavailable(RuntimeError):
    """pyjnius cannot be imported or the JVM cannot start (no JDK, or a bad class path)."""


def jnius_available() -> str | None:
    """``None`` when pyjnius imports, else the reason it does not (for skip messages)."""
    try:
        import jnius_config  # noqa: F401
    except ImportError as exc:
        return f"pyjnius is not installed ({exc})"
    return None


@dataclass(frozen=True, slots=True)
class Chunk:
    text: str


@dataclass(frozen=True, slots=True)
class Done:
    usage_json: str | None
    finish_reason: str | None


@dataclass(frozen=True, slots=True)
class Failed:
    code: int
    message: str
    retry_after_millis: int


SinkEvent = Chunk | Done | Failed


class DownloadProgress:
    """One model download as its ``org.oamd.host.DownloadListener`` reports it, from any Java
    thread: ``state`` goes ``downloading`` → ``completed`` or ``failed`` once; calls after that
    are ignored. Read it from anywhere (each update is one attribute assignment under a lock)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.state = "downloading"
        self.bytes_downloaded: int | None = None
        self.total_bytes: int | None = None
        self.error: str | None = None

    def progress(self, downloaded: int, total: int) -> None:
        with self._changed:
            if self.state == "downloading":
                self.bytes_downloaded = max(0, downloaded)
                self.total_bytes = total if total >= 0 else None
                self._changed.notify_all()

    def end(self, error: str | None = None) -> None:
        with self._changed:
            if self.state == "downloading":
                self.state = "failed" if error is not None else "completed"
                self.error = error
                self._changed.notify_all()

    def wait_until(self, predicate: Callable[[DownloadProgress], bool], timeout: float) -> bool:
        """Blocks (never on the event loop) until ``predicate(self)`` holds; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self), timeout)


class _LoopPort:
    """Posts sink events from any thread into one memory stream read on the event loop; the
    terminal event closes the stream (on the loop, where the stream lives)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, send: MemoryObjectSendStream[Any]) -> None:
        self._loop = loop
        self._send = send

    def post(self, event: SinkEvent, terminal: bool = False) -> None:
        try:
            self._loop.call_soon_threadsafe(self._deliver, event, terminal)
        except RuntimeError:  # the loop has closed: nobody is listening any more
            _log.debug("jvm event after the loop closed: %r", event)

    def _deliver(self, event: SinkEvent, terminal: bool = False) -> None:
        try:
            self._send.send_nowait(event)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the consumer went away (cancelled); the terminal still released the sink
        finally:
            if terminal:
                self._send.close()

    def close(self) -> None:
        """Closes the stream; on the loop only."""
        self._send.close()


class JvmRuntime:
    """The JVM of this process: started once with a class path, driven from one thread.

    ``call(fn, *args)`` runs ``fn`` on the ``oamd-jvm`` thread and awaits it; ``open_sink()``
    makes a registered ``GenerationSink`` proxy and the stream its events arrive on.
    """

    _instance: JvmRuntime | None = None
    _instance_lock = threading.Lock()

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oamd-jvm")
        self._registry: dict[int, Any] = {}
        self._registry_lock = threading.Lock()
        self._next_token = 0
        self._sink_class: type | None = None
        self._listener_class: Any = None
        self.call_timeout = JVM_CALL_TIMEOUT_SECONDS
        """``call``'s limit (``JVM_CALL_TIMEOUT_SECONDS``; tests lower it)."""
        self.autoclass: Callable[[str], Any] | None = None

    @classmethod
    def start(cls, classpath: list[str] | None = None) -> JvmRuntime:
        """Returns the process's runtime, starting the VM on first use.

        On the desktop the class path is set before pyjnius starts the VM; on Android (where
        ``jnius_config`` cannot change it) the APK's classes are already visible. A class path
        given after the VM started is ignored: the VM cannot change it.

        Raises:
            JvmUnavailable: pyjnius is missing or the VM fails to start.
        """
        with cls._instance_lock:
            if cls._instance is None:
                runtime = cls()
                try:
                    runtime._executor.submit(runtime._boot, classpath or []).result()
                except ImportError as exc:
                    runtime._executor.shutdown(wait=False)
                    raise JvmUnavailable(f"pyjnius is not importable: {exc}") from exc
                except Exception as exc:
                    runtime._executor.shutdown(wait=False)
                    raise JvmUnavailable(f"the JVM did not start: {exc}") from exc
                cls._instance = runtime
            return cls._instance

    def _boot(self, classpath: list[str]) -> None:
        import jnius_config

        if not jnius_config.vm_running and "ANDROID_ARGUMENT" not in os.environ:
            for entry in classpath:
                jnius_config.add_classpath(entry)
        from jnius import PythonJavaClass, autoclass, java_method

        self.autoclass = autoclass
        self._sink_class = _define_sink(PythonJavaClass, java_method, self)
        self._listener_class = _define_download_listener(PythonJavaClass, java_method)
        self._guard = autoclass(GUARD_CLASS)

    # ---- the worker thread ----------------------------------------------------------------------

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Runs ``fn(*args)`` on the JVM thread; the caller waits (cancellable) for its result.

        A cancelled caller stops waiting; the Java call itself runs to its end on the worker.

        Raises:
            ModelError: ``generation_failed`` when no result came within ``call_timeout``
                seconds (``JVM_CALL_TIMEOUT_SECONDS``).
        """
        limit = self.call_timeout
        future = self._executor.submit(fn, *args)
        with anyio.move_on_after(limit):
            return await asyncio.wrap_future(future)
        name = getattr(fn, "__name__", None) or repr(fn)
        raise ModelError("generation_failed", f"the Java call {name} took longer than {limit:g} s")

    def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Runs ``fn(*args)`` on the JVM thread and blocks until it returns. Never call it on the
        event loop: for set-up code and threads of our own."""
        return self._executor.submit(fn, *args).result()

    def guard(self, sink: Any) -> Any:
        """``sink`` behind ``org.oamd.host.GuardedSink``: what a backend is handed instead of the
        Python proxy (no null String and no call after the terminal one ever reaches Python,
        either of which kills the JVM). On the JVM thread only."""
        return self._guard.wrap(sink)

    def download_listener(self, progress: DownloadProgress) -> Any:
        """A ``DownloadListener`` proxy feeding ``progress``. The caller keeps it referenced for
        as long as Java may call it (a collected proxy crashes the VM)."""
        return self._listener_class(progress)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queues ``fn(*args)`` on the JVM thread without waiting (cancel, close)."""
        future = self._executor.submit(fn, *args)
        future.add_done_callback(_log_failure)

    # ---- callbacks ----------------------------------------------------------------------------

    def open_sink(self) -> tuple[Any, int, MemoryObjectReceiveStream[SinkEvent]]:
        """A new registered sink, its registry token, and the stream its events arrive on.

        Called on the event loop. The sink stays registered until its terminal callback (or
        ``release`` when Java never got it)."""
        assert self._sink_class is not None
        send, receive = anyio.create_memory_object_stream[SinkEvent](math.inf)
        port = _LoopPort(asyncio.get_running_loop(), send)
        with self._registry_lock:
            self._next_token += 1
            token = self._next_token
            sink = self._sink_class(port, token)
            self._registry[token] = sink
        return sink, token, receive

    def release(self, token: int) -> None:
        """Drops a sink from the registry (its terminal call arrived, or Java never saw it)."""
        with self._registry_lock:
            self._registry.pop(token, None)

    def discard(self, sink: Any, token: int) -> None:
        """Drops a sink Java never received (``generate`` failed) and closes its stream; on the
        loop only."""
        self.release(token)
        sink.port.close()

    def registered(self) -> int:
        """Sinks still held for Java (awaiting their terminal callback)."""
        with self._registry_lock:
            return len(self._registry)


def _log_failure(future: Any) -> None:
    exc = future.exception()
    if exc is not None:
        _log.warning("jvm call failed: %r", exc)


def _define_download_listener(python_java_class: type, java_method: Any) -> type:
    """The ``DownloadListener`` proxy class, defined once pyjnius is imported."""

    class PythonDownloadListener(python_java_class):  # type: ignore[misc, valid-type]
        __javainterfaces__ = ["org/oamd/host/DownloadListener"]  # noqa: RUF012
        __javacontext__ = "app" if "ANDROID_ARGUMENT" in os.environ else "system"

        def __init__(self, progress: DownloadProgress) -> None:
            super().__init__()
            self.progress = progress

        @java_method("(JJ)V")
        def onProgress(self, downloaded: int, total: int) -> None:
            try:
                self.progress.progress(int(downloaded), int(total))
            except Exception:
                _log.exception("download listener failed")

        @java_method("()V")
        def onCompleted(self) -> None:
            self.progress.end()

        @java_method("(ILjava/lang/String;)V")
        def onError(self, code: int, message: str | None) -> None:
            self.progress.end(f"{message or 'download failed'} (code {int(code)})")

    return PythonDownloadListener


def _define_sink(python_java_class: type, java_method: Any, runtime: JvmRuntime) -> type:
    """The ``GenerationSink`` proxy class, defined once pyjnius is imported."""

    class PythonGenerationSink(python_java_class):  # type: ignore[misc, valid-type]
        """Forwards a Java generation to the loop. Exceptions are logged here because pyjnius
        would print and drop them; calls after the terminal one are counted and ignored."""

        __javainterfaces__ = [SINK_INTERFACE]  # noqa: RUF012 (pyjnius reads a list)
        # Android: interfaces shipped in the APK need the app class loader; desktop: system
        __javacontext__ = "app" if "ANDROID_ARGUMENT" in os.environ else "system"

        def __init__(self, port: _LoopPort, token: int) -> None:
            super().__init__()
            self.port = port
            self.token = token
            self.ended = False
            self.late_calls = 0
            self.threads: set[str] = set()

        def _post(self, event: SinkEvent, terminal: bool) -> None:
            try:
                self.threads.add(threading.current_thread().name)
                if self.ended:
                    self.late_calls += 1
                    _log.warning("jvm sink %d called after its terminal call", self.token)
                    return
                if terminal:
                    self.ended = True
                    # released before the event is posted, so a caller that saw the terminal
                    # event sees the registry without it; self lives on in this frame
                    runtime.release(self.token)
                self.port.post(event, terminal)
            except Exception:
                _log.exception("jvm sink %d failed", self.token)

        @java_method("(Ljava/lang/String;)V")
        def onChunk(self, text: str) -> None:
            self._post(Chunk(text or ""), terminal=False)

        @java_method("(Ljava/lang/String;Ljava/lang/String;)V")
        def onDone(self, usage_json: str | None, finish_reason: str | None) -> None:
            self._post(Done(usage_json, finish_reason), terminal=True)

        @java_method("(ILjava/lang/String;J)V")
        def onError(self, code: int, message: str | None, retry_after_millis: int) -> None:
            self._post(Failed(int(code), message or "", int(retry_after_millis)), terminal=True)

    return PythonGenerationSink

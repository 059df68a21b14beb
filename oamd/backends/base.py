"""The model interface every backend implements, and what a backend can do.

A backend turns one ``GenerationRequest`` (messages, offered tools, an optional output schema,
sampling) into a stream of ``TextDelta`` / ``ToolCallRequest`` / ``Usage`` items. It reports its
``ModelCapabilities`` so the agent picks the tool loop (native tool calls, or the JSON envelope for
text-only models) and whether to ask for constrained JSON. Failures are ``ModelError``s carrying
the protocol's ``data.code`` (``guardrail_violation``, ``rate_limited`` with ``retry_after`` …).
Cancellation is the caller's cancel scope: a backend must stop generating when it is cancelled
and run blocking work in worker threads, never on the event loop.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from oamd.errors import ModelError

__all__ = [
    "Availability",
    "ChatMessage",
    "GenerationEvent",
    "GenerationRequest",
    "LanguageModel",
    "ModelCapabilities",
    "ModelError",
    "Sampling",
    "ScoredText",
    "Scores",
    "TextDelta",
    "ToolCallRequest",
    "ToolSpec",
    "Usage",
    "estimate_tokens",
]


DEFAULT_CONTEXT_SIZE = 8192
"""The context size reported when a backend does not know its own (the on-device model's)."""


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    native_tools: bool = False
    """Tool calls through an API (OpenAI ``tools``, LiteRT-LM, the scripted model)."""
    constrained_json: bool = False
    """Decoding can be constrained to a JSON Schema (llama.cpp grammars, ``response_format``)."""
    prefix_cache: bool = False
    """A byte-stable prompt prefix is reused across steps."""
    context_size: int = DEFAULT_CONTEXT_SIZE
    """Input + output tokens the model can hold."""
    max_output_tokens: int | None = None
    scores_text: bool = False
    """``score`` reports how likely the model finds given texts (token log-probabilities): closed
    choices (an action, an option, an emotion) are then read off one evaluation, no decoding."""
    compact_prompts: bool = False
    """A small model (well under a billion parameters): its turns are laid out for what such a
    model can follow — short prose instructions, plain chat, free text where words are wanted,
    closed choices by likelihood — rather than the JSON envelope a larger model reads."""
    append_only_steps: bool = False
    """Text-only models: each step of a turn extends the last step's messages (the model's raw
    reply, then one user message with what is new) instead of re-rendering them, for a backend
    whose conversation only appends (LiteRT-LM). Such a conversation fixes its sampling and
    output limit, so every step of the turn uses the turn's sampling and is read to its end."""


@dataclass(frozen=True, slots=True)
class Availability:
    """``model/availability``: Apple's fields plus Android's ``status`` and ``detail``."""

    available: bool
    reason: str | None = None
    """When unavailable: ``device_not_eligible``, ``model_not_ready``, ``not_configured``, ``unknown``…"""
    status: str = "available"
    """``available``, ``downloadable``, ``downloading`` or ``unavailable``."""
    detail: str | None = None
    context_size: int | None = None
    variant: str | None = None
    supported_languages: tuple[str, ...] = ()
    bytes_downloaded: int | None = None
    """While ``downloading``: bytes received so far, when the backend reports them."""
    total_bytes: int | None = None
    """While ``downloading``: the download's size, when known."""

    def to_wire(self) -> dict[str, Any]:
        """Apple's keys in Apple's order (``contextSize`` and ``supportedLanguages`` always,
        ``reason``/``variant`` when known), then Android's ``status``, ``detail`` and download
        progress (``bytesDownloaded``, ``totalBytes``) when known."""
        out: dict[str, Any] = {"available": self.available}
        if self.reason is not None:
            out["reason"] = self.reason
        out["contextSize"] = (
            DEFAULT_CONTEXT_SIZE if self.context_size is None else self.context_size
        )
        if self.variant is not None:
            out["variant"] = self.variant
        out["supportedLanguages"] = list(self.supported_languages)
        out["status"] = self.status
        if self.detail is not None:
            out["detail"] = self.detail
        if self.bytes_downloaded is not None:
            out["bytesDownloaded"] = self.bytes_downloaded
        if self.total_bytes is not None:
            out["totalBytes"] = self.total_bytes
        return out


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as offered to the model."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class ChatMessage:
    """One entry of the prompt. ``role`` is ``system``, ``user``, ``assistant`` or ``tool``."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    """Assistant messages: the calls the model made."""
    tool_call_id: str | None = None
    """Tool messages: which call this output answers."""
    tool_name: str | None = None
    output: Any = None
    """Tool messages: the output as the engine returned it (a string or any JSON)."""


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float | None = None
    greedy: bool = False
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    repetition_penalty: float | None = None
    """Above 1, tokens already in the recent text are made less likely (llama.cpp's
    ``repeat_penalty``); small models otherwise copy their own or the user's words."""


@dataclass(slots=True)
class GenerationRequest:
    messages: list[ChatMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    tool_mode: str = "none"
    """``allowed``, ``required``, ``none``, or a tool name the step must call."""
    schema: dict[str, Any] | None = None
    """When set, the answer must be JSON valid against it (constrained where the backend can)."""
    sampling: Sampling = field(default_factory=Sampling)
    kind: str = "answer"
    """What the step is for: ``answer``, ``structured``, ``decide``, ``toolArguments``…"""
    reply_prefix: str = ""
    """Text the answer starts with: the model continues it (its stream does not repeat it).
    Backends that cannot continue a reply (chat-completion servers) leave it out."""
    stop: tuple[str, ...] = ()
    """Strings that end the step where they start (not part of the text), besides the model's
    own end of message: speaker labels a reply must not run into."""
    estimated_input_tokens: int | None = None
    """The agent's chars/4 estimate of the whole prompt, from figures it keeps per history turn,
    so a backend without a tokenizer can report usage without reading every message again."""


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    name: str
    arguments: dict[str, Any]
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0


GenerationEvent = TextDelta | ToolCallRequest | Usage


@dataclass(frozen=True, slots=True)
class ScoredText:
    """One candidate of a likelihood choice: a conversation whose last message ends with the
    text scored (``scored``, a suffix of that message's content). The message's end counts too,
    so a candidate that would go on scores lower than one that is complete."""

    messages: list[ChatMessage]
    scored: str


@dataclass(frozen=True, slots=True)
class Scores:
    """``LanguageModel.score``'s answer, one entry per candidate, in order."""

    logprobs: tuple[float, ...]
    """The summed natural-log probability of each candidate's scored tokens."""
    tokens: tuple[int, ...]
    """How many tokens each candidate's score sums."""
    usage: Usage
    """Tokens evaluated (and served from the cache) for all of them."""


def estimate_tokens(text: str) -> int:
    """The chars/4 estimate used where a backend has no tokenizer at hand."""
    return (len(text) + 3) // 4


class LanguageModel(ABC):
    """A model backend. One instance may serve many sessions concurrently."""

    name: str = "model"
    capabilities: ModelCapabilities = ModelCapabilities()

    @abstractmethod
    async def availability(self) -> Availability: ...

    def cached_availability(self) -> Availability | None:
        """The availability known without I/O, or ``None`` (then ``availability`` is awaited).

        Lets ``initialize`` answer in arrival order when nothing has to be asked."""
        return None

    def last_known_availability(self) -> Availability | None:
        """What the backend last learnt of its availability, without I/O, possibly stale (a
        server's last answer): for warnings that must not wait, never for ``initialize`` or
        ``model/availability``, which ask again. ``None`` when nothing is known yet."""
        return self.cached_availability()

    async def settle_capabilities(self) -> None:
        """Makes ``capabilities`` final before a turn is planned with them, for a backend that
        must ask first (an OpenAI-compatible server's kind). Awaited at the start of every turn,
        so it returns at once when nothing is left to ask; concurrent first calls share one
        question. The default does nothing.

        Raises:
            ModelError: the backend cannot say now (``model_unavailable``, or a transient
                ``busy``/``rate_limited``); nothing is cached, the next call asks again.
        """
        return None

    @abstractmethod
    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        """Streams one model step. Raises ``ModelError`` for model failures."""

    async def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)

    async def score(self, candidates: list[ScoredText]) -> Scores:
        """How likely the model finds each candidate's scored text, given what precedes it
        (``capabilities.scores_text``). Candidates that share their beginning share its cost.

        Raises:
            ModelError: the model failed; ``invalid_request`` when it cannot score at all.
        """
        raise ModelError("invalid_request", f"The {self.name} model cannot score texts.")

    async def prefill(self, messages: list[ChatMessage]) -> None:
        """Evaluates the prompt ``messages`` begin, ahead of the step that will send them, into a
        prefix cache (``capabilities.prefix_cache``). Best effort: a backend may skip it (not
        loaded, busy) and must never delay a step for long because of it. The default does
        nothing."""
        return None

    async def aclose(self) -> None:
        """Releases the backend's resources (processes, threads, JVM objects)."""
        return None


class UnconfiguredModel(LanguageModel):
    """Stands for ``"system"`` when no backend was configured: unavailable, with how to fix it."""

    name = "none"

    async def availability(self) -> Availability:
        return self.cached_availability()

    def cached_availability(self) -> Availability:
        return Availability(
            available=False,
            reason="not_configured",
            status="unavailable",
            detail=(
                "No system model is configured. Start oamd with --model (or set OAMD_MODEL), "
                "e.g. --model openai:http://127.0.0.1:8080/v1 or --model llamacpp:/path/model.gguf; "
                'sessions with "model": {"type": "scripted", ...} work without one.'
            ),
        )

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        for event in ():  # an async generator that fails at its first step
            yield event
        raise ModelError("model_unavailable", "No system model is configured (see --model).")


__all__ += ["UnconfiguredModel"]

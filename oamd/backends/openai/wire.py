"""OpenAI chat-completions wire shapes, without I/O: the request body built from a
``GenerationRequest`` (always with an output cap suited to the step's kind) and the events decoded
from a streamed (SSE) or whole response; the ``ModelError`` a failed response maps to is
``oamd.backends.openai.errors``'s.

``oamd.backends.openai.model`` owns the HTTP exchange and calls these; keeping them pure lets the
server differences (``response_format`` forms, ``tool_choice`` forms, ``top_k``) be tested without
a socket.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from oamd.backends._reasoning import ReasoningFilter
from oamd.backends.base import (
    ChatMessage,
    GenerationEvent,
    GenerationRequest,
    TextDelta,
    ToolCallRequest,
    Usage,
    estimate_tokens,
)
from oamd.backends.openai.errors import clip, error_from_body, status_of
from oamd.errors import ModelError
from oamd.jsonvalue import JsonTextError, dumps_text, loads_embedded

__all__ = [
    "DECIDE_MAX_TOKENS",
    "MAX_STEP_TOOL_CALLS",
    "MAX_STEP_TOOL_CALL_CHARS",
    "REPLY_MAX_TOKENS",
    "STRUCTURED_MAX_TOKENS",
    "TOOL_ARGUMENTS_MAX_TOKENS",
    "JsonMode",
    "StreamDecoder",
    "WireOptions",
    "chat_body",
    "output_cap",
    "sampled",
]

JsonMode = Literal["json_schema", "json_object", "none"]
"""How a schema is sent: OpenAI's ``{"type": "json_schema", "json_schema": {…}}``, llama.cpp's
``{"type": "json_object", "schema": …}``, or not at all."""

# Every step carries ``max_tokens``. Without it a server generates until its context is full:
# llama-cpp-python's default for chat is "unlimited", and a small model under a ``json_object``
# grammar may pad its JSON with whitespace to the end (one decision ran 145 s on a CPU).

DECIDE_MAX_TOKENS = 256
"""Output cap of a ``decide`` step: one short envelope (``{"action": …, "arguments": {…}}``);
the agent asks for as much, and no request may raise it."""

TOOL_ARGUMENTS_MAX_TOKENS = 256
"""Output cap of a ``toolArguments`` step: one arguments object of a few short fields; no
request may raise it."""

REPLY_MAX_TOKENS = 512
"""Output cap of a reply (``respond``, or a native-loop ``answer`` that may call tools) when the
turn sets none (``maxResponseTokens``): a few sentences of dialogue, with room to spare; the
embedded llama.cpp backend caps unset steps the same."""

STRUCTURED_MAX_TOKENS = 1024
"""Output cap of a ``structured`` step when the turn sets none: JSON spends tokens on its syntax,
and ``content/generate`` may ask for a list of items."""

_STEP_CAPS = {
    "decide": DECIDE_MAX_TOKENS,
    "toolArguments": TOOL_ARGUMENTS_MAX_TOKENS,
    "respond": REPLY_MAX_TOKENS,
    "answer": REPLY_MAX_TOKENS,
    "structured": STRUCTURED_MAX_TOKENS,
}
_FIXED_CAP_KINDS = frozenset({"decide", "toolArguments"})
"""Steps that pick rather than write: a turn's ``maxResponseTokens`` may lower their cap, never
raise it."""

MAX_STEP_TOOL_CALLS = 256
"""Most tool calls one response may hold (distinct ``index`` values); past it the step fails
``generation_failed``. A step offers at most ``MAX_TOOLS`` tools, called a few at a time."""

MAX_STEP_TOOL_CALL_CHARS = 1024 * 1024
"""Most characters of tool-call names and arguments one response may stream (they are gathered
until the response ends: nothing else bounds them); past it the step fails
``generation_failed``."""

MAX_STOP_SEQUENCES = 4
"""Stop sequences a request carries (OpenAI's API takes at most four)."""


@dataclass(frozen=True, slots=True)
class WireOptions:
    """What the server accepts, beyond plain chat completions."""

    model: str
    json_mode: JsonMode = "json_schema"
    sampling_extensions: bool = False
    """Send llama.cpp's ``top_k`` (strict servers reject unknown members)."""
    include_usage: bool = True
    """Ask for a final usage chunk (``stream_options.include_usage``)."""
    max_output_tokens: int | None = None
    """The server's own output limit (spec option ``max_output``): no step asks for more."""
    output_cap_field: str = "max_tokens"
    """The member the output cap goes in: ``max_completion_tokens`` once a server refused
    ``max_tokens`` (``oamd.backends.openai.refusals``)."""
    omitted: frozenset[str] = frozenset()
    """Sampling members the server refused, left out of every request since."""


# ---- requests ---------------------------------------------------------------------------------


def _message(message: ChatMessage) -> dict[str, Any]:
    # Content is always a string: chat templates concatenate it, and None breaks them.
    out: dict[str, Any] = {"role": message.role, "content": message.content or ""}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id or f"call_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": dumps_text(call.arguments)},
            }
            for index, call in enumerate(message.tool_calls)
        ]
    if message.role == "tool":
        if message.tool_call_id is not None:
            out["tool_call_id"] = message.tool_call_id
        if message.tool_name is not None:
            out["name"] = message.tool_name
    return out


def _tool_choice(request: GenerationRequest) -> Any:
    mode = request.tool_mode
    if mode == "allowed":
        return "auto"
    if mode == "required":
        if len(request.tools) == 1:  # the same demand, in the form every server understands
            return {"type": "function", "function": {"name": request.tools[0].name}}
        return "required"
    return {"type": "function", "function": {"name": mode}}


def _response_format(schema: dict[str, Any], mode: JsonMode) -> dict[str, Any] | None:
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": schema, "strict": False},
        }
    return None


def output_cap(request: GenerationRequest, server_limit: int | None = None) -> int:
    """``max_tokens`` for one step: the turn's own cap (``sampling.max_tokens``) when it sets
    one, else the cap of the step's ``kind`` (an unknown kind counts as a reply); a ``decide`` or
    ``toolArguments`` step never exceeds its kind's cap, and no step exceeds ``server_limit``."""
    cap = _STEP_CAPS.get(request.kind, REPLY_MAX_TOKENS)
    asked = request.sampling.max_tokens
    if asked is not None and asked > 0:
        cap = min(asked, cap) if request.kind in _FIXED_CAP_KINDS else asked
    if server_limit is not None:
        cap = min(cap, server_limit)
    return cap


def chat_body(request: GenerationRequest, options: WireOptions, *, stream: bool) -> dict[str, Any]:
    """The ``POST /chat/completions`` body for one model step."""
    body: dict[str, Any] = {
        "model": options.model,
        "messages": [_message(m) for m in request.messages],
        "stream": stream,
    }
    if stream and options.include_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools and request.tool_mode != "none":
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            }
            for tool in request.tools
        ]
        body["tool_choice"] = _tool_choice(request)
    if request.schema is not None:
        response_format = _response_format(request.schema, options.json_mode)
        if response_format is not None:
            body["response_format"] = response_format
    if request.stop:
        body["stop"] = list(request.stop[:MAX_STOP_SEQUENCES])
    return sampled(body, request, options)


def sampled(
    body: dict[str, Any], request: GenerationRequest, options: WireOptions
) -> dict[str, Any]:
    """``body`` with the step's sampling members and output cap, less those the server refused
    (``options.omitted``): the same for a chat completion and a plain completion."""
    sampling = request.sampling
    if sampling.greedy:
        body["temperature"] = 0.0
        if options.sampling_extensions:
            body["top_k"] = 1
    else:
        if sampling.temperature is not None:
            body["temperature"] = sampling.temperature
        if sampling.top_k is not None and options.sampling_extensions:
            body["top_k"] = sampling.top_k
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.repetition_penalty is not None and options.sampling_extensions:
        body["repeat_penalty"] = sampling.repetition_penalty  # llama.cpp's server
    body[options.output_cap_field] = output_cap(request, options.max_output_tokens)
    for member in options.omitted:
        body.pop(member, None)
    return body


# ---- responses --------------------------------------------------------------------------------


@dataclass
class _PendingCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamDecoder:
    """Turns response chunks (SSE ``data:`` payloads, or one whole response) into events.

    Text streams as it comes; tool calls arrive in fragments and are yielded whole by ``finish``,
    followed by the usage (the server's, or estimated from ``prompt_text`` and the output). A
    chunk of another shape, or a stream that stops before a ``finish_reason`` (a whole response
    is complete: ``end``), fails ``generation_failed``: what arrived is a fragment, never an
    answer. ``[DONE]`` alone does not count: llama-cpp-python sends it when it cuts a stream
    short for another request. A ``content`` that is ``null`` or absent is no text (a role-only
    or tool-call delta); one that is not a string (a number, an object) fails the step naming
    it, rather than be dropped or guessed at. Tool calls are bounded while they gather
    (``MAX_STEP_TOOL_CALLS``, ``MAX_STEP_TOOL_CALL_CHARS``); the text is the agent's to bound,
    as it reads it. A leading ``<think>…</think>`` block is not text (``ReasoningFilter``); its
    tokens still count in the estimated usage.
    """

    prompt_text: str = ""
    _calls: dict[int, _PendingCall] = field(default_factory=dict)
    _text: list[str] = field(default_factory=list)
    _usage: Usage | None = None
    _call_chars: int = 0
    _fed: bool = False
    _complete: bool = False
    _reasoning: ReasoningFilter = field(default_factory=ReasoningFilter)
    """A thinking model's ``<think>`` block, held back from the text (``_reasoning``)."""

    @property
    def started(self) -> bool:
        """Whether any chunk was fed."""
        return self._fed

    def end(self) -> None:
        """The response is whole: one complete JSON body (not streamed)."""
        self._complete = True

    def feed(self, chunk: Mapping[str, Any]) -> Iterator[GenerationEvent]:
        """The events of one chunk. Raises ``ModelError`` for an in-band error or refusal, and
        ``generation_failed`` for a chunk that is not a chat completion's."""
        self._fed = True
        if "error" in chunk:
            raise error_from_body(status_of(chunk["error"]), {}, chunk)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = _usage(usage) or self._usage
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise _unexpected("'choices' is not an array")
        for choice in choices:
            if not isinstance(choice, dict):
                raise _unexpected("a choice is not an object")
            delta = choice.get("delta") or choice.get("message") or {}
            if not isinstance(delta, dict):
                raise _unexpected("a choice's 'delta' or 'message' is not an object")
            if "text" in choice and not delta:  # a plain completion's (``/completions``)
                delta = {"content": choice["text"]}
            if delta.get("refusal"):
                raise ModelError("refusal", f"The model refused: {clip(str(delta['refusal']))}")
            text = delta.get("content")
            if isinstance(text, str):
                if text:
                    self._text.append(text)
                    if shown := self._reasoning.feed(text):
                        yield TextDelta(shown)
            elif text is not None:
                raise _unexpected(f"a choice's 'content' is {_kind(text)}, not a string")
            self._gather_calls(delta.get("tool_calls") or [])
            finish_reason = choice.get("finish_reason")
            if finish_reason == "content_filter":
                raise ModelError("guardrail_violation", "The server's content filter stopped it.")
            if finish_reason is not None:
                self._complete = True

    def _gather_calls(self, fragments: Any) -> None:
        if not isinstance(fragments, list):
            raise _unexpected("'tool_calls' is not an array")
        for position, fragment in enumerate(fragments):
            function = (fragment.get("function") or {}) if isinstance(fragment, dict) else None
            if not isinstance(function, dict):
                raise _unexpected("a tool call or its 'function' is not an object")
            index = fragment.get("index", position)
            key = index if type(index) is int else position
            pending = self._calls.get(key)
            if pending is None:
                if len(self._calls) >= MAX_STEP_TOOL_CALLS:
                    raise _unexpected(f"more than {MAX_STEP_TOOL_CALLS} tool calls")
                pending = self._calls[key] = _PendingCall()
            call_id = fragment.get("id")
            pending.id = pending.id or (call_id if isinstance(call_id, str) and call_id else None)
            name = function.get("name") or ""
            if not isinstance(name, str):
                raise _unexpected("a tool call's name is not a string")
            if name and name != pending.name:  # some servers repeat the name in each part
                pending.name += name
                self._count_call_chars(len(name))
            arguments = function.get("arguments")
            if isinstance(arguments, dict):
                arguments = dumps_text(arguments)
            if isinstance(arguments, str):
                self._count_call_chars(len(arguments))
                pending.arguments.append(arguments)

    def _count_call_chars(self, added: int) -> None:
        self._call_chars += added
        if self._call_chars > MAX_STEP_TOOL_CALL_CHARS:
            raise _unexpected(f"tool calls longer than {MAX_STEP_TOOL_CALL_CHARS} characters")

    def finish(self) -> Iterator[GenerationEvent]:
        """The tool calls gathered, then the usage. Raises ``ModelError`` (``generation_failed``:
        a retry may fix it) for a response that ended early or a call whose arguments are not a
        JSON object."""
        if not self._complete:
            raise ModelError(
                "generation_failed",
                "The model server's stream ended before the answer was complete (no "
                "finish_reason): it was cut short.",
            )
        if rest := self._reasoning.finish():
            yield TextDelta(rest)
        for index in sorted(self._calls):
            pending = self._calls[index]
            raw = "".join(pending.arguments).strip() or "{}"
            try:
                arguments = loads_embedded(raw)  # the one JSON rule, as for any model output
            except JsonTextError:
                arguments = None
            if not isinstance(arguments, dict) or not pending.name:
                raise ModelError(
                    "generation_failed",
                    f"The model's call of '{pending.name}' has arguments that are not a JSON "
                    f"object: {clip(raw)}",
                )
            yield ToolCallRequest(pending.name, arguments, pending.id)
        if self._usage is not None:
            yield self._usage
        else:
            output = "".join(self._text) + "".join(
                "".join(p.arguments) for p in self._calls.values()
            )
            yield Usage(estimate_tokens(self.prompt_text), 0, estimate_tokens(output))


def _unexpected(problem: str) -> ModelError:
    return ModelError(
        "generation_failed",
        f"The model server sent a chunk that is not a chat completion's: {problem}.",
    )


def _kind(value: Any) -> str:
    """What a JSON value is, for a message: ``a number``, ``an object``…"""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "an object" if isinstance(value, dict) else "an array"


def _count(value: Any) -> int | None:
    """A token count as servers report it (absent: 0); ``None`` for anything else."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if 0 <= value < 2**53 else None  # NaN fails both comparisons


def _usage(raw: Mapping[str, Any]) -> Usage | None:
    """The server's usage; ``None`` when a count is not a count (then the usage is estimated)."""
    details = raw.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    counts = (
        _count(raw.get("prompt_tokens")),
        _count(cached),
        _count(raw.get("completion_tokens")),
    )
    if None in counts:
        return None
    prompt, cached_prompt, output = counts
    return Usage(input_tokens=prompt, cached_input_tokens=cached_prompt, output_tokens=output)

"""The scripted model (§10): a deterministic script instead of a model, for engine development and CI.

Each model inference plays the next step; a tool round takes one step and the answer another.
When the steps run out, ``fallback`` (default ``{"text": "(script exhausted)"}``) plays. Steps:
``text`` (+ ``chunks``, streamed in about that many pieces, at most ``MAX_SCRIPT_CHUNKS``, letting
other tasks run between two), ``toolCalls``, ``json``, ``template``
(``{prompt}``, ``{toolOutputs}``, ``{toolOutput}`` substituted in that order), ``error`` (any model
``data.code``), and the oamd extension ``raw`` (+ ``chunks``: text played verbatim, whatever the
step asks for); any step may wait ``delayMs`` first. Templates read the request's turn snapshot
when it has one, else its messages, so a script behaves the same on every tool loop.

``"style": "envelope"`` makes a text-only model (``native_tools`` off; ``"constrained": true``
turns ``constrained_json`` on), which the agent drives with the envelope loop. It plays the same
steps the way open-android-models' scripted model does: a ``toolCalls`` step answers successive
decide steps with one envelope per call (``{"action": name, "arguments": {…}}``; a toolArguments
step gets just the arguments), and is used up with its last call; an answer step (``text``,
``template``, ``json``) answers a decide step with ``{"action": "respond"}`` without being used
up, then plays on the respond or structured step; calls still left when a reply is asked for are
skipped. ``raw`` and ``error`` steps are used up by whichever model call meets them.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from anyio.lowlevel import checkpoint

from oamd.backends.base import (
    Availability,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    TextDelta,
    ToolCallRequest,
    Usage,
    estimate_tokens,
)
from oamd.errors import MODEL_ERROR_NAMES, InvalidParams, ModelError
from oamd.jsonvalue import dumps_text
from oamd.limits import MAX_SCRIPT_CHUNKS

__all__ = ["Script", "ScriptStep", "ScriptedModel", "parse_script", "split_chunks"]

_ERROR_CODES = (
    "model_unavailable, guardrail_violation, refusal, context_size_exceeded, rate_limited, "
    "unsupported_language, invalid_schema, tool_failed, cancelled, busy, invalid_request, "
    "generation_failed"
)
_DEFAULT_CHUNKS = 3
_STYLES = ("native", "envelope")
_CONTEXT_SIZE = 8192
_REPLY_KINDS = ("text", "template", "json")
_RESPOND_ENVELOPE = '{"action":"respond","arguments":{}}'


@dataclass(frozen=True, slots=True)
class ScriptStep:
    kind: str
    """``text``, ``toolCalls``, ``json``, ``template``, ``error`` or ``raw``."""
    value: Any
    chunks: int = _DEFAULT_CHUNKS
    delay_ms: int = 0
    message: str | None = None


FALLBACK = ScriptStep("text", "(script exhausted)")


class Script(list[ScriptStep]):
    """The steps of a script, carrying the model's ``style`` and ``constrained`` members, so a
    ``ScriptedModel(steps, fallback)`` built from ``parse_script`` takes them on."""

    style: str = "native"
    constrained: bool = True


MAX_DELAY_MS = 86_400_000
"""Longest ``delayMs`` of a step (a day, like the longest timeout): sleeps stay in the loop's range."""


def _shown(value: Any) -> str:
    text = dumps_text(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _parse_step(raw: Any, path: str) -> ScriptStep:
    if not isinstance(raw, dict):
        raise InvalidParams(f"'{path}' must be an object.")
    delay = raw.get("delayMs")
    if delay is None:
        delay = 0
    elif (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or not 0 <= delay <= MAX_DELAY_MS  # also refuses nan
    ):
        raise InvalidParams(
            f"Parameter '{path}.delayMs' must be a number of milliseconds from 0 to "
            f"{MAX_DELAY_MS}; got {_shown(delay)}."
        )
    delay = int(delay)
    for kind in ("text", "raw"):
        if kind in raw and raw[kind] is not None:
            text = raw[kind]
            if not isinstance(text, str):
                raise InvalidParams(
                    f"Parameter '{path}.{kind}' must be a string; got {_shown(text)}."
                )
            chunks = raw.get("chunks")
            if chunks is None:
                chunks = _DEFAULT_CHUNKS
            elif (
                isinstance(chunks, bool)
                or not isinstance(chunks, int)
                or not 1 <= chunks <= MAX_SCRIPT_CHUNKS
            ):
                raise InvalidParams(
                    f"Parameter '{path}.chunks' must be a whole number from 1 to "
                    f"{MAX_SCRIPT_CHUNKS}; got {_shown(chunks)}."
                )
            return ScriptStep(kind, text, chunks, delay)
    if "toolCalls" in raw and raw["toolCalls"] is not None:
        calls = raw["toolCalls"]
        if not isinstance(calls, list):
            raise InvalidParams(
                f"Parameter '{path}.toolCalls' must be an array; got {_shown(calls)}."
            )
        if not calls:
            raise InvalidParams(f"'{path}.toolCalls' must not be empty.")
        parsed = []
        for j, call in enumerate(calls):
            cpath = f"{path}.toolCalls[{j}]"
            if not isinstance(call, dict):
                raise InvalidParams(f"'{cpath}' must be an object.")
            name = call.get("name")
            if name is None:
                raise InvalidParams(f"Missing required parameter '{cpath}.name'.")
            if not isinstance(name, str):
                raise InvalidParams(
                    f"Parameter '{cpath}.name' must be a string; got {_shown(name)}."
                )
            arguments = call.get("arguments")
            if arguments is None:
                arguments = {}
            elif not isinstance(arguments, dict):
                raise InvalidParams(
                    f"Parameter '{cpath}.arguments' must be an object; got {_shown(arguments)}."
                )
            call_id = call.get("id")
            if call_id is not None and not isinstance(call_id, str):
                raise InvalidParams(
                    f"Parameter '{cpath}.id' must be a string; got {_shown(call_id)}."
                )
            parsed.append(ToolCallRequest(name, arguments, call_id))
        return ScriptStep("toolCalls", tuple(parsed), delay_ms=delay)
    if "json" in raw:
        return ScriptStep("json", raw["json"], delay_ms=delay)
    if "template" in raw and raw["template"] is not None:
        template = raw["template"]
        if not isinstance(template, str):
            raise InvalidParams(
                f"Parameter '{path}.template' must be a string; got {_shown(template)}."
            )
        return ScriptStep("template", template, _DEFAULT_CHUNKS, delay)
    if "error" in raw and raw["error"] is not None:
        code = raw["error"]
        if code not in MODEL_ERROR_NAMES:
            raise InvalidParams(f"'{path}.error' must be one of: {_ERROR_CODES}; got '{code}'.")
        message = raw.get("message")
        if message is not None and not isinstance(message, str):
            raise InvalidParams(
                f"Parameter '{path}.message' must be a string; got {_shown(message)}."
            )
        return ScriptStep("error", code, delay_ms=delay, message=message)
    raise InvalidParams(
        f"'{path}' must contain one of 'text', 'toolCalls', 'json', 'template' or 'error'."
    )


def parse_script(spec: dict[str, Any], path: str = "model") -> tuple[Script, ScriptStep]:
    """``{"type": "scripted", "steps": [...], "fallback"?: step, "style"?: "native" | "envelope",
    "constrained"?: bool}`` → steps (a ``Script``, with style and constrained) and fallback.

    Raises:
        InvalidParams: a step or member is malformed; the message names ``model.steps[i]``.
    """
    steps_raw = spec.get("steps")
    if steps_raw is None:
        steps_raw = []
    if not isinstance(steps_raw, list):
        raise InvalidParams(f"Parameter '{path}.steps' must be an array; got {_shown(steps_raw)}.")
    steps = Script(_parse_step(raw, f"{path}.steps[{i}]") for i, raw in enumerate(steps_raw))
    style = spec.get("style")
    if style is not None:
        if style not in _STYLES:
            raise InvalidParams(
                f'\'{path}.style\' must be "native" or "envelope"; got {_shown(style)}.'
            )
        steps.style = style
    constrained = spec.get("constrained")
    if constrained is not None and not isinstance(constrained, bool):
        raise InvalidParams(
            f"Parameter '{path}.constrained' must be a boolean; got {_shown(constrained)}."
        )
    steps.constrained = steps.style == "native" if constrained is None else constrained
    fallback_raw = spec.get("fallback")
    fallback = FALLBACK if fallback_raw is None else _parse_step(fallback_raw, f"{path}.fallback")
    return steps, fallback


def split_chunks(text: str, chunks: int) -> list[str]:
    """Pieces of about ``len(text)/chunks`` characters; one piece when ``len(text) <= chunks``."""
    if not text:
        return []
    if chunks <= 1 or len(text) <= chunks:
        return [text]
    size = math.ceil(len(text) / chunks)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _tool_outputs_of_turn(request: GenerationRequest) -> list[str]:
    outputs: list[str] = []
    for message in request.messages:
        if message.role == "user":
            outputs = []
        elif message.role == "tool":
            outputs.append(message.content)
    return outputs


def _last_prompt(request: GenerationRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content
    return ""


def render_template(template: str, request: GenerationRequest) -> str:
    if request.turn is not None:
        outputs, prompt = list(request.turn.tool_outputs), request.turn.prompt
    else:
        outputs, prompt = _tool_outputs_of_turn(request), _last_prompt(request)
    text = template.replace("{prompt}", prompt)
    text = text.replace("{toolOutputs}", "\n".join(outputs))
    return text.replace("{toolOutput}", outputs[-1] if outputs else "")


def _compact(value: Any) -> str:
    return orjson.dumps(value).decode()


def _envelope(call: ToolCallRequest) -> str:
    return _compact({"action": call.name, "arguments": call.arguments})


@dataclass
class ScriptedModel(LanguageModel):
    """One script, played step by step; a session owns its own instance."""

    steps: list[ScriptStep] = field(default_factory=list)
    fallback: ScriptStep = FALLBACK
    name: str = "scripted"
    capabilities: ModelCapabilities = ModelCapabilities(
        native_tools=True, constrained_json=True, context_size=_CONTEXT_SIZE
    )
    record: bool = False
    """Keep every request in ``requests`` (``--test-methods`` only: each holds a whole prompt)."""
    requests: list[GenerationRequest] = field(default_factory=list)
    """Every request received while ``record`` is on, for tests that assert on prompts."""
    style: str = "native"
    """``native`` (tool calls through the API) or ``envelope`` (text only)."""
    _next: int = 0
    _call: int = 0
    """Envelope style: the next call of the current ``toolCalls`` step."""

    def __post_init__(self) -> None:
        if isinstance(self.steps, Script):
            self.style = self.steps.style
            self.capabilities = ModelCapabilities(
                native_tools=self.style == "native",
                constrained_json=self.steps.constrained,
                context_size=_CONTEXT_SIZE,
            )

    @property
    def played(self) -> int:
        return self._next

    def _peek(self) -> ScriptStep:
        return self.steps[self._next] if self._next < len(self.steps) else self.fallback

    def _take(self) -> ScriptStep:
        step = self._peek()
        if self._next < len(self.steps):
            self._next += 1
        self._call = 0
        return step

    async def availability(self) -> Availability:
        return self.cached_availability()

    def cached_availability(self) -> Availability:
        return Availability(available=True, context_size=_CONTEXT_SIZE, variant="scripted")

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        if self.record:
            self.requests.append(request)
        if self.style == "envelope":
            step, text, delays = self._envelope_step(request)
        else:
            step, text, delays = self._take(), None, True
        if step.delay_ms and delays:
            await anyio.sleep(step.delay_ms / 1000)
        input_tokens = request.estimated_input_tokens
        if input_tokens is None:
            input_tokens = sum(estimate_tokens(m.content) for m in request.messages)
        if step.kind == "error":
            raise ModelError(step.value, step.message or f"Scripted {step.value}.")
        if text is not None:
            yield TextDelta(text)
            yield Usage(input_tokens, 0, estimate_tokens(text))
            return
        if step.kind == "toolCalls":
            for call in step.value:
                yield call
            yield Usage(input_tokens, 0, 4 * len(step.value))
            return
        if step.kind == "json":
            yield TextDelta(orjson.dumps(step.value).decode())
            yield Usage(input_tokens, 0, 8)
            return
        text = step.value if step.kind in ("text", "raw") else render_template(step.value, request)
        output_tokens = 0
        for index, piece in enumerate(split_chunks(text, step.chunks)):
            if index:
                await checkpoint()  # a model between two tokens: the loop serves others
            output_tokens += max(1, len(piece) // 4)
            yield TextDelta(piece)
        yield Usage(input_tokens, 0, output_tokens)

    def _envelope_step(self, request: GenerationRequest) -> tuple[ScriptStep, str | None, bool]:
        """The step an envelope-style request meets, the text it answers with when that is not
        the step's own (an envelope, a call's arguments, a reply played unconsumed), and whether
        the step's delay applies (once per step: on its first call, or when it plays)."""
        step = self._peek()
        if request.kind in ("decide", "toolArguments"):
            if step.kind == "toolCalls":
                index = self._call
                call = step.value[index]
                if index + 1 >= len(step.value):
                    self._take()
                else:
                    self._call = index + 1
                text = _envelope(call) if request.kind == "decide" else _compact(call.arguments)
                return step, text, index == 0
            if step.kind in _REPLY_KINDS:  # the reply comes later: not used up here
                if request.kind == "decide":
                    return step, _RESPOND_ENVELOPE, False
                return step, self._reply_text(step, request), False
            return self._take(), None, True
        while step.kind == "toolCalls" and self._next < len(self.steps):
            self._take()  # calls the loop no longer asks for
            step = self._peek()
        if step.kind == "toolCalls":  # the fallback itself: it can only call
            return self._take(), _envelope(step.value[0]), True
        return self._take(), None, True

    @staticmethod
    def _reply_text(step: ScriptStep, request: GenerationRequest) -> str:
        if step.kind == "json":
            return _compact(step.value)
        return step.value if step.kind == "text" else render_template(step.value, request)

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

``score`` (a likelihood choice, on a script whose ``capabilities`` say ``scoresText``) plays the
next step too: a ``scores`` step answers it, an ``error`` step fails it, any other step fails it
``generation_failed`` naming the step, as ``generate`` does when it meets a ``scores`` step. A
step's ``usage`` replaces the chars/4 estimate, so a recording's counts play back exactly. The
grammar itself is ``oamd.backends.scripted.grammar``'s.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
from anyio.lowlevel import checkpoint

from oamd.backends.base import (
    Availability,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    ScoredText,
    Scores,
    TextDelta,
    ToolCallRequest,
    Usage,
    estimate_tokens,
)
from oamd.backends.scripted.grammar import FALLBACK, Script, ScriptStep, parse_script
from oamd.backends.scripted.turn_snapshot import CURRENT_TURN, TurnSnapshot
from oamd.errors import ModelError
from oamd.jsonvalue import dumps_text

__all__ = [
    "FALLBACK",
    "Script",
    "ScriptStep",
    "ScriptedModel",
    "parse_script",
    "split_chunks",
]

_CONTEXT_SIZE = 8192
_REPLY_KINDS = ("text", "template", "json")
_RESPOND_ENVELOPE = '{"action":"respond","arguments":{}}'


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
    turn = CURRENT_TURN.get()
    if turn is not None:
        outputs, prompt = list(turn.tool_outputs), turn.prompt
    else:
        outputs, prompt = _tool_outputs_of_turn(request), _last_prompt(request)
    text = template.replace("{prompt}", prompt)
    text = text.replace("{toolOutputs}", "\n".join(outputs))
    return text.replace("{toolOutput}", outputs[-1] if outputs else "")


def _envelope(call: ToolCallRequest) -> str:
    return dumps_text({"action": call.name, "arguments": call.arguments})


def _scripted_error(step: ScriptStep) -> ModelError:
    return ModelError(
        step.value, step.message or f"Scripted {step.value}.", retry_after=step.retry_after
    )


def _scoring_usage(candidates: list[ScoredText]) -> Usage:
    """The chars/4 estimate of a likelihood choice: the first candidate whole, then what each
    other one adds (candidates share their beginning, and its cost)."""
    if not candidates:
        return Usage()
    first = sum(estimate_tokens(m.content) for m in candidates[0].messages)
    return Usage(first + sum(estimate_tokens(c.scored) for c in candidates[1:]), 0, 0)


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
    turns: list[TurnSnapshot | None] = field(default_factory=list)
    """The turn each of ``requests`` belonged to (``backends.scripted.turn_snapshot``)."""
    scored: list[list[ScoredText]] = field(default_factory=list)
    """Every likelihood choice's candidates while ``record`` is on."""
    style: str = "native"
    """``native`` (tool calls through the API) or ``envelope`` (text only)."""
    _next: int = 0
    _call: int = 0
    """Envelope style: the next call of the current ``toolCalls`` step."""
    _taken: str = "fallback"
    """Where the step last played sits (``steps[2]``, ``fallback``), for error messages."""

    def __post_init__(self) -> None:
        if isinstance(self.steps, Script):
            self.style = self.steps.style
            fields = {"context_size": _CONTEXT_SIZE, **self.steps.capabilities}
            self.capabilities = ModelCapabilities(
                native_tools=self.style == "native",
                constrained_json=self.steps.constrained,
                **fields,
            )

    def _peek(self) -> ScriptStep:
        return self.steps[self._next] if self._next < len(self.steps) else self.fallback

    def _take(self) -> ScriptStep:
        step = self._peek()
        if self._next < len(self.steps):
            self._next += 1
            self._taken = f"steps[{self._next - 1}]"
        else:
            self._taken = "fallback"
        self._call = 0
        return step

    async def availability(self) -> Availability:
        return self.cached_availability()

    def cached_availability(self) -> Availability:
        return Availability(
            available=True, context_size=self.capabilities.context_size, variant="scripted"
        )

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        if self.record:
            self.requests.append(request)
            self.turns.append(CURRENT_TURN.get())
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
            raise _scripted_error(step)
        if text is not None:
            yield TextDelta(text)
            yield Usage(input_tokens, 0, estimate_tokens(text))
            return
        if step.kind == "scores":
            raise ModelError(
                "generation_failed",
                f"The script's {self._taken} is a 'scores' step, which only a likelihood "
                "choice plays; this model call generates text.",
            )
        if step.usage is not None:
            yield step.usage  # first: a reader that stops early still counts all of it
        if step.kind == "toolCalls":
            for call in step.value:
                yield call
            if step.usage is None:
                yield Usage(input_tokens, 0, 4 * len(step.value))
            return
        if step.kind == "json":
            yield TextDelta(dumps_text(step.value))
            if step.usage is None:
                yield Usage(input_tokens, 0, 8)
            return
        text = step.value if step.kind in ("text", "raw") else render_template(step.value, request)
        output_tokens = 0
        for index, piece in enumerate(split_chunks(text, step.chunks)):
            if index:
                await checkpoint()  # a model between two tokens: the loop serves others
            output_tokens += max(1, len(piece) // 4)
            yield TextDelta(piece)
        if step.usage is None:
            yield Usage(input_tokens, 0, output_tokens)

    async def score(self, candidates: list[ScoredText]) -> Scores:
        """Plays the next step as a likelihood choice: a ``scores`` step's numbers, one per
        candidate in order.

        Raises:
            ModelError: an ``error`` step's; ``generation_failed`` when the step is not a
                ``scores`` step or holds another number of scores than there are candidates.
        """
        if self.record:
            self.scored.append(candidates)
        step = self._take()
        if step.delay_ms:
            await anyio.sleep(step.delay_ms / 1000)
        if step.kind == "error":
            raise _scripted_error(step)
        if step.kind != "scores":
            raise ModelError(
                "generation_failed",
                f"The script's {self._taken} is a '{step.kind}' step; a likelihood choice "
                "needs a 'scores' step.",
            )
        if len(step.value) != len(candidates):
            raise ModelError(
                "generation_failed",
                f"The script's {self._taken} has {len(step.value)} scores for "
                f"{len(candidates)} candidates.",
            )
        tokens = step.tokens or (1,) * len(candidates)
        return Scores(step.value, tokens, step.usage or _scoring_usage(candidates))

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
                text = _envelope(call) if request.kind == "decide" else dumps_text(call.arguments)
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
            return dumps_text(step.value)
        return step.value if step.kind == "text" else render_template(step.value, request)

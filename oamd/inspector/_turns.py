"""One recorded turn: what the inspector keeps of it as it runs, and its JSON when a page asks.

Recording costs a few references per step: a step's ``StepFigures`` (the request exactly as the
backend got it, its raw text) is kept as it is — the daemon never changes a request it has sent,
and the messages in it are the history's own — and is turned into JSON, cut to the
``INSPECT_*`` sizes, only when a page asks for the turn (``turn_detail``). A turn's summary
(``turn_summary``: its prompt and answer cut, its figures, one line per step) is what listings
and live events carry. Encoding a 400-message prompt costs about half a millisecond: done at
every step, it made a turn half again as slow; done on request, it costs nothing until a page
opens that turn.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from oamd.agent.events import TurnFailed
from oamd.agent.trace import StepFigures
from oamd.inspector._preview import clip, preview
from oamd.limits import (
    INSPECT_MESSAGE_CHARS,
    INSPECT_OUTPUT_CHARS,
    INSPECT_PROMPT_CHARS,
    INSPECT_STEPS_KEPT,
)
from oamd.log import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable

    from oamd.agent.events import ToolRecord, TurnResult
    from oamd.backends.base import ChatMessage

__all__ = ["TurnRecord", "cache_share", "turn_detail", "turn_event", "turn_summary"]

log = get_logger("oamd.inspector")


def now_ms() -> int:
    return int(time.time() * 1000)


class TurnRecord:
    """A turn as it runs and after (``TurnTrace``): its steps' figures, then its outcome."""

    __slots__ = (
        "_publish",
        "_started",
        "backend",
        "connection",
        "duration_ms",
        "error",
        "id",
        "kind",
        "method",
        "prompt",
        "request_id",
        "started_at",
        "status",
        "steps",
        "steps_omitted",
        "subject",
        "text",
        "tools",
        "usage",
    )

    def __init__(
        self,
        turn_id: str,
        connection: str,
        subject: tuple[str, str],
        request: tuple[str, Any],
        backend: str,
        prompt: str,
        publish: Callable[[str, Callable[[], dict[str, Any]]], None],
    ) -> None:
        self.id = turn_id
        self.connection = connection
        self.kind, self.subject = subject
        self.method, self.request_id = request
        self.backend = backend
        self.prompt = prompt
        self.started_at = now_ms()
        self._started = time.perf_counter()
        self._publish = publish
        self.status = "running"
        self.duration_ms: float | None = None
        self.steps: list[StepFigures] = []
        self.steps_omitted = 0
        self.text: str | None = None
        self.error: dict[str, str] | None = None
        self.tools: Sequence[ToolRecord] = ()
        self.usage: tuple[int, int, int] | None = None

    def step(self, figures: StepFigures) -> None:
        try:
            index = len(self.steps) + self.steps_omitted
            if len(self.steps) >= INSPECT_STEPS_KEPT:
                self.steps_omitted += 1
            else:
                self.steps.append(figures)
            self._publish(
                "step", lambda: {"turn": self.id, **_subject(self), **step_summary(index, figures)}
            )
        except Exception:
            log.exception("inspector_step_failed")

    def finished(self, result: TurnResult | None, error: BaseException | None) -> None:
        try:
            self.duration_ms = round((time.perf_counter() - self._started) * 1000, 1)
            if result is not None:
                self.status = "done"
                self.text = result.text
                self.tools = result.records
                usage = result.usage
                self.usage = (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens)
            else:
                cancelled = isinstance(error, anyio.get_cancelled_exc_class()) or (
                    getattr(error, "name", None) == "cancelled"
                )
                self.status = "cancelled" if cancelled else "failed"
                message, _ = clip(str(error), INSPECT_MESSAGE_CHARS)
                self.error = {
                    "name": getattr(error, "name", type(error).__name__),
                    "message": message,
                }
                self.tools = error.records if isinstance(error, TurnFailed) else ()
                self.usage = (
                    sum(s.prompt_tokens for s in self.steps),
                    sum(s.cached_tokens for s in self.steps),
                    sum(s.output_tokens for s in self.steps),
                )
            self._publish("turn", lambda: turn_event(self))
        except Exception:
            log.exception("inspector_turn_failed")


def _subject(turn: TurnRecord) -> dict[str, Any]:
    return {"connection": turn.connection, "subject": {"kind": turn.kind, "id": turn.subject}}


def turn_event(turn: TurnRecord) -> dict[str, Any]:
    """What a live ``turn`` event carries: the summary without its step lines."""
    out = turn_summary(turn)
    del out["steps"]
    return out


def turn_summary(turn: TurnRecord) -> dict[str, Any]:
    """The turn with its prompt and answer cut, its figures and one line per step."""
    prompt, prompt_cut = clip(turn.prompt, INSPECT_MESSAGE_CHARS)
    out: dict[str, Any] = {
        "id": turn.id,
        **_subject(turn),
        "method": turn.method,
        "requestId": turn.request_id,
        "backend": turn.backend,
        "prompt": prompt,
        "promptCut": prompt_cut,
        "startedAt": turn.started_at,
        "status": turn.status,
        "durationMs": turn.duration_ms,
        "stepCount": len(turn.steps) + turn.steps_omitted,
        "stepsOmitted": turn.steps_omitted,
        "toolCount": len(turn.tools),
        "steps": [step_summary(i, f) for i, f in enumerate(turn.steps)],
    }
    if turn.text is not None:
        out["text"], out["textCut"] = clip(turn.text, INSPECT_OUTPUT_CHARS)
    if turn.error is not None:
        out["error"] = turn.error
    if turn.usage is not None:
        out["usage"] = usage_of(*turn.usage)
    return out


def turn_detail(turn: TurnRecord) -> dict[str, Any]:
    """The summary, each step with its prompt messages and raw output, and the tool calls."""
    out = turn_summary(turn)
    out["steps"] = [encode_step(i, f) for i, f in enumerate(turn.steps)]
    out["tools"] = [encode_tool(r) for r in turn.tools]
    return out


def usage_of(prompt: int, cached: int, output: int) -> dict[str, Any]:
    return {
        "promptTokens": prompt,
        "cachedTokens": cached,
        "outputTokens": output,
        "cacheShare": cache_share(prompt, cached),
    }


def cache_share(prompt: int, cached: int) -> float | None:
    """The share of the prompt served from the backend's KV cache (``None``: nothing counted)."""
    return round(cached / prompt, 3) if prompt > 0 else None


def step_summary(index: int, figures: StepFigures) -> dict[str, Any]:
    request = figures.request
    if request is None:  # a likelihood choice: what was asked is its candidates
        first = figures.candidates[0].messages if figures.candidates else []
        kind, tool_mode, tools, constrained, count = "score", None, [], False, len(first)
    else:
        kind, tool_mode, constrained = request.kind, request.tool_mode, request.schema is not None
        tools, count = [t.name for t in request.tools], len(request.messages)
    return {
        "index": index,
        "backend": figures.backend,
        "kind": kind,
        "toolMode": tool_mode,
        "tools": tools,
        "constrained": constrained,
        "messageCount": count,
        "toolCallCount": len(figures.tool_calls),
        "promptTokens": figures.prompt_tokens,
        "cachedTokens": figures.cached_tokens,
        "outputTokens": figures.output_tokens,
        "cacheShare": cache_share(figures.prompt_tokens, figures.cached_tokens),
        "firstTokenMs": figures.first_token_ms,
        "decodeMs": figures.decode_ms,
        "totalMs": figures.total_ms,
        "outcome": figures.outcome,
    }


def encode_step(index: int, figures: StepFigures) -> dict[str, Any]:
    request = figures.request
    out = step_summary(index, figures)
    if request is None:
        # the conversation the candidates share (the first one's but its last message), then
        # each candidate's last message, the text scored in it and the log-probability it got
        first = figures.candidates[0].messages if figures.candidates else []
        out["messages"], out["messagesOmitted"] = encode_messages(first[:-1])
        out["replyPrefix"], out["stop"] = "", []
        out["candidates"] = [
            {
                "message": encode_message(c.messages[-1]) if c.messages else None,
                "scored": clip(c.scored, INSPECT_MESSAGE_CHARS)[0],
                "logprob": figures.scores[i] if i < len(figures.scores) else None,
            }
            for i, c in enumerate(figures.candidates)
        ]
    else:
        out["messages"], out["messagesOmitted"] = encode_messages(request.messages)
        out["replyPrefix"], _ = clip(request.reply_prefix, INSPECT_MESSAGE_CHARS)
        out["stop"] = list(request.stop)
    out["output"], out["outputCut"] = clip(figures.text, INSPECT_OUTPUT_CHARS)
    out["toolCalls"] = [
        {"id": c.id, "name": c.name, "arguments": preview(c.arguments)} for c in figures.tool_calls
    ]
    return out


def encode_messages(messages: Sequence[ChatMessage]) -> tuple[list[dict[str, Any]], int]:
    """The first message (the system text) and the last ones within ``INSPECT_PROMPT_CHARS``,
    each cut to ``INSPECT_MESSAGE_CHARS``, and how many between them were left out."""
    if not messages:
        return [], 0
    first = encode_message(messages[0])
    budget = INSPECT_PROMPT_CHARS - len(first["content"])
    tail: list[dict[str, Any]] = []
    for message in reversed(messages[1:]):
        if budget <= 0:
            break
        encoded = encode_message(message)
        budget -= len(encoded["content"])
        tail.append(encoded)
    tail.reverse()
    return [first, *tail], len(messages) - 1 - len(tail)


def encode_message(message: ChatMessage) -> dict[str, Any]:
    content, cut = clip(message.content, INSPECT_MESSAGE_CHARS)
    out: dict[str, Any] = {"role": message.role, "content": content, "cut": cut}
    if message.tool_calls:
        out["toolCalls"] = [
            {"id": c.id, "name": c.name, "arguments": preview(c.arguments)}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["toolCallId"] = message.tool_call_id
    if message.tool_name is not None:
        out["toolName"] = message.tool_name
    return out


def encode_tool(record: ToolRecord) -> dict[str, Any]:
    duration = record.duration
    return {
        "id": record.call.id,
        "name": record.call.name,
        "arguments": preview(record.call.arguments),
        "outputKind": record.output.kind,
        "output": preview(record.output.value),
        "durationMs": round(duration * 1000, 1) if math.isfinite(duration) else None,
    }

"""``run_turn`` on a text-only model, below the protocol: step retries and their backoff in
virtual time (android-design §1.14, bounded by the turn's ``max_attempts`` as the native loop
is), and the tokenizer consulted only for large prompts (§3.7)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from oamd.agent.events import StepStarted, TextUpdated, ToolCall, TurnEvent
from oamd.agent.history import History
from oamd.agent.policy import ToolPolicy
from oamd.agent.ports import TurnPeer
from oamd.agent.run_turn import run_turn
from oamd.agent.tools import ToolChoice, ToolDefinition, ToolOutput
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.backends.base import (
    Availability,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    TextDelta,
    estimate_tokens,
)
from oamd.backends.scripted.model import ScriptedModel, parse_script
from oamd.bridge.tool_params import parse_tools
from oamd.errors import ModelError

pytestmark = pytest.mark.anyio

TEXT_ONLY = ModelCapabilities(native_tools=False, constrained_json=False)
(MENU_TOOL,), _ = parse_tools(
    [{"name": "check_menu", "description": "The menu.", "parameters": {"type": "object"}}]
)
Outcome = list[str | ModelError]
"""What one model call does: stream these pieces, raising an error where one stands."""


class FlakyModel(LanguageModel):
    """A text-only model playing outcomes, one per call."""

    capabilities = TEXT_ONLY

    def __init__(self, *outcomes: Outcome) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def availability(self) -> Availability:
        return Availability(available=True)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        self.calls += 1
        for piece in self.outcomes.pop(0):
            if isinstance(piece, ModelError):
                raise piece
            yield TextDelta(piece)


class CountingModel(ScriptedModel):
    """A scripted text-only model whose tokenizer counts four times the estimate."""

    counted: list[str]

    async def count_tokens(self, text: str) -> int:
        self.counted.append(text)
        return 4 * estimate_tokens(text)


class Clock:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


class Engine:
    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    async def __call__(self, call: ToolCall, tool: ToolDefinition) -> tuple[ToolOutput, None]:
        self.calls.append(call)
        return ToolOutput.json({"stew": 3}), None


def spec(model: LanguageModel, **extra: Any) -> TurnSpec:
    fields: dict[str, Any] = {
        "model": model,
        "instructions": "You keep an inn.",
        "tools": [],
        "policy": ToolPolicy(),
        "prompt": "Hello.",
    }
    knobs = {f.name for f in dataclasses.fields(TurnSettings)}
    settings = {k: v for k, v in extra.items() if k in knobs}
    fields.update({k: v for k, v in extra.items() if k not in knobs})
    return TurnSpec(**fields, settings=TurnSettings(**settings))


async def turn(model: LanguageModel, clock: Clock, events: list[TurnEvent] | None = None, **extra):
    collected = [] if events is None else events
    with anyio.fail_after(5):
        return await run_turn(
            spec(model, **extra), TurnPeer(collected.append, Engine()), clock.sleep
        )


def busy(retry_after: float | None = None) -> ModelError:
    return ModelError("busy", retry_after=retry_after)


async def test_transient_failures_retry_the_step_after_300_then_600_ms():
    clock = Clock()
    model = FlakyModel([busy()], [ModelError("generation_failed")], ["Welcome!"])
    result = await turn(model, clock, max_attempts=3)
    assert result.text == "Welcome!"
    assert clock.waits == [0.3, 0.6]
    assert len(result.steps) == 1  # retries are the same step


@pytest.mark.parametrize(("max_attempts", "waits"), [(1, []), (2, [0.3]), (3, [0.3, 0.6])])
async def test_max_attempts_bounds_the_calls_of_one_step(max_attempts, waits):
    clock = Clock()
    model = FlakyModel(*([busy()] for _ in range(max_attempts)), ["Too late."])
    with pytest.raises(ModelError) as info:
        await turn(model, clock, max_attempts=max_attempts)
    assert info.value.name == "busy"
    assert model.calls == max_attempts
    assert clock.waits == waits


@pytest.mark.parametrize(("retry_after", "wait"), [(None, 0.3), (0.1, 0.3), (2.0, 2.0), (5.0, 5.0)])
async def test_rate_limits_wait_the_longer_of_the_backoff_and_retry_after(retry_after, wait):
    clock = Clock()
    limited = ModelError("rate_limited", retry_after=retry_after)
    result = await turn(FlakyModel([limited], ["Hi."]), clock)
    assert result.text == "Hi."
    assert clock.waits == [wait]


@pytest.mark.parametrize("name", ["rate_limited", "busy"])
async def test_a_failure_asking_more_than_five_seconds_is_not_retried(name):
    clock = Clock()
    with pytest.raises(ModelError) as info:
        await turn(FlakyModel([ModelError(name, retry_after=10.0)], ["Hi."]), clock)
    assert info.value.name == name
    assert clock.waits == []


@pytest.mark.parametrize("name", ["refusal", "guardrail_violation", "context_size_exceeded"])
async def test_other_failures_are_not_retried(name):
    clock = Clock()
    with pytest.raises(ModelError):
        await turn(FlakyModel([ModelError(name)], ["Hi."]), clock)
    assert clock.waits == []


async def test_guardrail_violations_are_retried_when_asked():
    clock = Clock()
    model = FlakyModel([ModelError("guardrail_violation")], ["Hi."])
    result = await turn(model, clock, retry_guardrail_violations=True)
    assert result.text == "Hi."
    assert clock.waits == [0.3]


async def test_a_retry_never_runs_a_tool_twice():
    clock = Clock()
    engine = Engine()
    model = FlakyModel(['{"action": "check_menu"}'], ["respond"], [busy()], ["Stew."])
    with anyio.fail_after(5):
        result = await run_turn(
            spec(model, tools=[MENU_TOOL]), TurnPeer([].append, engine), clock.sleep
        )
    assert len(engine.calls) == 1 and len(result.records) == 1
    assert clock.waits == [0.3]
    assert [s.kind for s in result.steps] == ["decide", "decide", "respond"]


async def test_a_reply_retried_after_text_was_shown_starts_over_with_a_reset():
    events: list[TurnEvent] = []
    model = FlakyModel(["Hel", busy()], ["Hello ", "there."])
    result = await turn(model, Clock(), events)
    texts = [e for e in events if isinstance(e, TextUpdated)]
    assert texts == [
        TextUpdated("Hel", "Hel"),
        TextUpdated("Hello ", "Hello ", is_reset=True),
        TextUpdated("there.", "Hello there."),
    ]
    assert result.text == "Hello there."
    assert sum(isinstance(e, StepStarted) for e in events) == 1


def counting_model(*steps: dict[str, Any]) -> CountingModel:
    script, fallback = parse_script({"style": "envelope", "steps": list(steps)})
    model = CountingModel(script, fallback, record=True)
    model.counted = []
    return model


async def test_small_prompts_never_ask_the_tokenizer():
    model = counting_model({"text": "Yes."})
    history = [{"kind": "prompt", "text": "Hi."}, {"kind": "response", "text": "Hello."}]
    result = await turn(model, Clock(), history=History(history))
    assert model.counted == []
    assert result.steps[0].trimmed_entries == 0


async def test_large_prompts_are_trimmed_by_the_backends_own_count():
    """By the estimate both history turns fit (about 150 of 200 tokens, past the 60 % mark); by
    the tokenizer, four times larger, they do not: the oldest goes, the last always stays."""
    model = counting_model({"text": "Yes."})
    history = []
    for n in range(2):
        history += [
            {"kind": "prompt", "text": f"Turn {n}: " + "word " * 40},
            {"kind": "response", "text": "Yes."},
        ]
    context = model.capabilities.context_size
    result = await turn(
        model,
        Clock(),
        history=History(history),
        reserved_response_tokens=context - 200,
        policy=ToolPolicy(choice=ToolChoice("none")),
    )
    assert model.counted  # the tokenizer was asked
    assert result.steps[0].trimmed_entries == 2
    shown = model.requests[0].messages[-1].content
    assert "Turn 0" not in shown and "Turn 1" in shown

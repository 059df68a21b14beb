"""A prefill is a model step like a generation or a scoring (``oamd.agent.step.prefill_step``):
timed and logged as a ``model_step`` of kind ``prefill``, handed to the turn's trace when one is
current — and every prefill the agent and the game ask for (a session's or NPC's system text, a
small model's next turn) goes through it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import orjson
import pytest
from conftest import memory_daemon

from oamd.agent.step import PREFILL, prefill_step
from oamd.agent.trace import TURN_TRACER, StepFigures, TurnScope
from oamd.agent.turn_spec import TurnSpec
from oamd.backends.base import (
    Availability,
    ChatMessage,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    ScoredText,
    Scores,
    TextDelta,
    Usage,
)
from oamd.daemon import default_config
from oamd.errors import ModelError
from oamd.log import configure_logging

pytestmark = pytest.mark.anyio

SYSTEM = [ChatMessage("system", "You keep an inn.")]


class CachingModel(LanguageModel):
    """A small text-only model with a prefix cache: it records what it is asked to prefill and
    says so once it has prefilled ``expected`` times; its lines are scripted by step kind."""

    name = "caching"

    def __init__(self, *, fail: bool = False, expected: int = 1) -> None:
        self.capabilities = ModelCapabilities(
            constrained_json=True, scores_text=True, compact_prompts=True, prefix_cache=True
        )
        self.fail = fail
        self.expected = expected
        self.prefilled: list[list[ChatMessage]] = []
        self.done = anyio.Event()
        self.replies: dict[str, list[str]] = {}

    async def availability(self) -> Availability:
        return Availability(available=True)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Any]:
        queue = self.replies.get(request.kind) or []
        text = queue.pop(0) if queue else ""
        yield Usage(100, 40, 0)
        for piece in re.findall(r"\s*\S+\s*", text):
            yield TextDelta(piece)

    async def score(self, candidates: list[ScoredText]) -> Scores:
        return Scores(tuple(0.0 for _ in candidates), tuple(1 for _ in candidates), Usage(10, 0, 0))

    async def prefill(self, messages: list[ChatMessage]) -> None:
        if self.fail:
            raise ModelError("model_unavailable", "Not loaded.")
        self.prefilled.append(messages)
        if len(self.prefilled) >= self.expected:
            self.done.set()


@pytest.fixture
def debug_log() -> Iterator[None]:
    configure_logging("debug")
    try:
        yield
    finally:
        configure_logging("warning")


def model_steps(stderr: str) -> list[dict[str, Any]]:
    out = []
    for raw in stderr.splitlines():
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("event") == "model_step":
            out.append(record)
    return out


async def test_a_prefill_is_logged_as_a_model_step(debug_log, capsys):
    model = CachingModel()
    await prefill_step(model, SYSTEM)
    assert model.prefilled == [SYSTEM]
    (step,) = model_steps(capsys.readouterr().err)
    assert (step["kind"], step["backend"], step["outcome"]) == ("prefill", "caching", "done")
    assert step["output_tokens"] == 0 and step["total_ms"] >= 0


async def test_a_failed_prefill_is_logged_as_failed_and_raises(debug_log, capsys):
    with pytest.raises(ModelError):
        await prefill_step(CachingModel(fail=True), SYSTEM)
    (step,) = model_steps(capsys.readouterr().err)
    assert (step["kind"], step["outcome"]) == ("prefill", "failed")


class Trace:
    def __init__(self) -> None:
        self.steps: list[StepFigures] = []

    def step(self, figures: StepFigures) -> None:
        self.steps.append(figures)

    def finished(self, result: Any, error: BaseException | None) -> None:
        pass


class Tracer:
    def __init__(self) -> None:
        self.trace = Trace()

    def begin(self, spec: TurnSpec) -> Trace:
        return self.trace


async def test_a_prefill_inside_a_traced_turn_is_a_step_of_its_trace():
    model, tracer = CachingModel(), Tracer()
    token = TURN_TRACER.set(tracer)
    try:
        with TurnScope(TurnSpec(model, "You keep an inn.", "Hi.")):
            await prefill_step(model, SYSTEM)
    finally:
        TURN_TRACER.reset(token)
    (figures,) = tracer.trace.steps
    assert figures.request is not None and figures.request.kind == PREFILL
    assert figures.request.messages == SYSTEM
    assert (figures.text, figures.outcome, figures.backend) == ("", "done", "caching")


async def test_an_npcs_prefills_on_a_small_model_are_model_steps(debug_log, capsys):
    # npc/create prefills the system text (agent/envelope), npc/talk the next turn's beginning
    # (game/npc/turns): both through agent/step, so both are logged
    model = CachingModel(expected=2)
    model.replies = {"respond": ["Evening, traveller!"]}
    persona = {"name": "Mira", "role": "the innkeeper"}
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request(
                "npc/create",
                {"npc": "mira", "persona": persona, "options": {"playerOptionCount": 0}},
            )
            await client.request("npc/talk", {"npc": "mira", "line": "Hello!"})
            await model.done.wait()
    first, following = model.prefilled
    assert [m.role for m in first] == ["system"]
    assert [m.role for m in following][-2:] == ["user", "assistant"]
    prefills = [s for s in model_steps(capsys.readouterr().err) if s["kind"] == "prefill"]
    assert [(s["backend"], s["outcome"]) for s in prefills] == [("caching", "done")] * 2

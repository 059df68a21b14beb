"""The envelope loop's append-only step layout (``capabilities.append_only_steps``, asked for by
LiteRT-LM): each step after the first sends the last step's messages, the model's raw reply and
one new user message; a layout that no longer fits is laid out afresh."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import anyio
import pytest

from oamd.agent.envelope._loop import APPEND_ONLY_CHATTER_CHARS
from oamd.agent.events import ToolCall
from oamd.agent.policy import ToolPolicy
from oamd.agent.ports import TurnPeer
from oamd.agent.run_turn import run_turn
from oamd.agent.tools import ToolDefinition, ToolOutput
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.backends.base import (
    Availability,
    ChatMessage,
    GenerationEvent,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    Sampling,
    TextDelta,
)
from oamd.bridge.tool_params import parse_tools

pytestmark = pytest.mark.anyio

(MENU_TOOL,), _ = parse_tools(
    [{"name": "check_menu", "description": "The menu.", "parameters": {"type": "object"}}]
)
DECIDE = '{"action": "check_menu", "arguments": {}} and some chatter after it'
RESPOND = '{"action": "respond", "arguments": {}}'


class RecordingModel(LanguageModel):
    """A text-only model replying with scripted texts (in two pieces) and keeping each request."""

    def __init__(self, *replies: str, context_size: int = 8192) -> None:
        self.capabilities = ModelCapabilities(append_only_steps=True, context_size=context_size)
        self.replies = list(replies)
        self.requests: list[GenerationRequest] = []

    async def availability(self) -> Availability:
        return Availability(available=True)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        self.requests.append(request)
        reply = self.replies.pop(0)
        for piece in (reply[:5], reply[5:]):
            yield TextDelta(piece)


async def engine(call: ToolCall, tool: ToolDefinition) -> tuple[ToolOutput, None]:
    return ToolOutput.json({"stew": 3}), None


async def turn(model: RecordingModel, **settings):
    spec = TurnSpec(
        model=model,
        instructions="You keep an inn.",
        tools=[MENU_TOOL],
        policy=ToolPolicy(),
        prompt="What's on?",
        settings=TurnSettings(sampling=Sampling(temperature=0.7, max_tokens=99), **settings),
    )

    async def sleep(_: float) -> None:
        return None

    with anyio.fail_after(5):
        return await run_turn(spec, TurnPeer.quiet(engine), sleep)


def assert_each_step_extends_the_last(model: RecordingModel, replies: list[str]) -> None:
    sent = [r.messages for r in model.requests]
    for before, reply, after in zip(sent, replies, sent[1:], strict=False):
        assert after[:-1] == [*before, ChatMessage("assistant", reply)]
        assert after[-1].role == "user"


async def test_each_step_sends_the_last_steps_messages_its_raw_reply_and_one_new_user_message():
    replies = [DECIDE, RESPOND, "Stew today."]
    model = RecordingModel(*replies)
    result = await turn(model)
    assert result.text == "Stew today."
    assert_each_step_extends_the_last(model, replies)
    first, second, third = (r.messages for r in model.requests)
    assert [m.role for m in first] == ["system", "user"]
    assert "User: What's on?" in first[1].content
    # the raw reply, chatter included, exactly as streamed; then the tool result and the task
    assert second[2].content == DECIDE
    assert second[3].content.startswith('[check_menu → {"stew":3}]\n\nTools Assistant can use')
    assert third[-1].content.startswith("Write Assistant's reply")
    assert "[check_menu" not in third[-1].content  # already read: not repeated
    # one conversation fixes its sampling: every step uses the turn's
    assert {r.sampling for r in model.requests} == {Sampling(temperature=0.7, max_tokens=99)}


async def test_a_repair_step_continues_with_the_invalid_answer_and_the_repair_note():
    replies = ["I think check_menu?", DECIDE, RESPOND, "Stew today."]
    model = RecordingModel(*replies)
    result = await turn(model)
    assert [s.is_repair for s in result.steps] == [False, True, False, False]
    assert_each_step_extends_the_last(model, replies)
    repair = model.requests[1].messages
    assert repair[2].content == "I think check_menu?"
    assert "Your previous answer was invalid" in repair[3].content


async def test_a_step_that_would_not_fit_the_budget_is_laid_out_afresh():
    long_menu = "x" * 16000
    replies = [DECIDE, RESPOND, "Stew today."]
    model = RecordingModel(*replies, context_size=4096)
    model.replies[1] = RESPOND + " " + long_menu  # past the budget with it
    result = await turn(model, reserved_response_tokens=1024)
    assert result.text == "Stew today."
    _, second, third = (r.messages for r in model.requests)
    assert len(second) == 4
    # the third step would carry the long reply: it starts over as system + one user message
    assert [m.role for m in third] == ["system", "user"]
    assert "[check_menu" in third[1].content


async def test_models_without_the_capability_get_the_rerendered_layout():
    model = RecordingModel(DECIDE, RESPOND, "Stew today.")
    model.capabilities = dataclasses.replace(model.capabilities, append_only_steps=False)
    await turn(model)
    assert [len(r.messages) for r in model.requests] == [2, 2, 2]
    assert model.requests[0].sampling.temperature == 0.0


class TalkativeModel(RecordingModel):
    """Streams its replies ten characters at a time, counting what was read of each."""

    def __init__(self, *replies: str) -> None:
        super().__init__(*replies)
        self.read: list[int] = []

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        self.requests.append(request)
        reply = self.replies.pop(0)
        self.read.append(0)
        for at in range(0, len(reply), 10):
            self.read[-1] = at + 10
            yield TextDelta(reply[at : at + 10])


async def test_a_model_that_talks_on_after_its_answer_is_cut_not_read_to_its_limit():
    decide = '{"action": "check_menu", "arguments": {}}'
    talked = decide + " and so on" * 500  # 5,000 characters of chatter
    closing = RESPOND + " That's all."  # ends by itself, soon after its answer
    model = TalkativeModel(talked, closing, "Stew today.")
    result = await turn(model)
    assert result.text == "Stew today."
    cut_at = len(decide) + APPEND_ONLY_CHATTER_CHARS
    assert cut_at <= model.read[0] < cut_at + 20  # read past the answer by the allowance only
    assert model.read[1] >= len(closing)  # a short remark is read to its end
    # the cut reply is what the next step shows, in the same layout
    assert model.requests[1].messages[2].content == talked[: model.read[0]]

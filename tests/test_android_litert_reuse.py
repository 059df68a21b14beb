"""LiteRtModel keeps one LiteRT-LM conversation across generations (``_litert_conversation`` and
``LiteRtBackend.converse``), on the desktop JVM against the stubs' fake engine, which refuses a
second live conversation and records every message each conversation prefills: a request that
only adds a user turn continues the live conversation; anything else opens a fresh one with the
whole transcript and closes the old one once, never inside its callback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from android.jvm_support import engine, java_classes, jvm, litert_backend  # noqa: F401 (fixtures)

from oamd.backends.android.litert import LiteRtModel
from oamd.backends.base import ChatMessage, GenerationRequest, Sampling
from oamd.errors import ModelError

pytestmark = pytest.mark.anyio

SYSTEM = "Be Gorm."
REPLY = "Hello there"
"""The fake engine's default reply, as LiteRtModel gets it back."""


@pytest.fixture
def native(jvm, engine, tmp_path: Path) -> Any:  # noqa: F811
    backend = litert_backend(jvm, tmp_path / "c")
    yield backend
    jvm.run_blocking(backend.close)


def request(messages: list[ChatMessage], system: str = SYSTEM) -> GenerationRequest:
    return GenerationRequest([ChatMessage("system", system), *messages], sampling=Sampling())


def tool_loop(steps: int) -> list[list[ChatMessage]]:
    """The messages of each step of a tool loop: a user line, then per step the model's raw
    reply and a tool result."""
    history = [ChatMessage("user", "Iron swords?")]
    each = [list(history)]
    for i in range(1, steps):
        history += [
            ChatMessage("assistant", REPLY),
            ChatMessage("tool", f"stock {i}", tool_name="check_inventory"),
        ]
        each.append(list(history))
    return each


async def run(model: LiteRtModel, req: GenerationRequest) -> str:
    with anyio.fail_after(5):
        return "".join([getattr(e, "text", "") async for e in model.generate(req)])


async def counts(jvm, engine) -> tuple[int, int, int]:  # noqa: F811
    """(conversations created, messages prefilled, characters prefilled) so far."""
    return (
        jvm.run_blocking(engine.createdConversations),
        jvm.run_blocking(engine.prefilledMessages),
        jvm.run_blocking(engine.prefilledChars),
    )


async def settled(jvm, engine, closed: int) -> None:  # noqa: F811
    """``closed`` conversations were closed, none inside a callback or under a decode, and
    never were two alive at once (the fake records a violation for each)."""
    assert await jvm.call(engine.awaitClosed, closed, 5000)
    assert jvm.run_blocking(engine.closedConversations) == closed
    assert list(jvm.run_blocking(engine.violations)) == []


def transcript(jvm, engine, n: int) -> list[str]:  # noqa: F811
    return list(jvm.run_blocking(engine.transcript, n))


async def test_a_tool_loop_and_a_second_turn_continue_one_conversation_prefilling_flat_steps(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    native,
):
    model = LiteRtModel(native, jvm)
    per_step: list[tuple[int, int]] = []
    for messages in tool_loop(20):
        before = await counts(jvm, engine)
        assert await run(model, request(messages)) == REPLY
        after = await counts(jvm, engine)
        per_step.append((after[1] - before[1], after[2] - before[2]))
    # a second turn of the same session: a new user line after the last reply
    second = [*tool_loop(20)[-1], ChatMessage("assistant", REPLY), ChatMessage("user", "Buy.")]
    await run(model, request(second))
    created, _, _ = await counts(jvm, engine)
    assert created == 1
    # step 1 prefills the system text and the question; every later step one message
    assert per_step[0] == (2, len(SYSTEM) + len("Iron swords?"))
    assert {n for n, _ in per_step[1:]} == {1}
    tool_line = "Tool result (check_inventory): stock {}"
    assert [c for _, c in per_step[1:]] == [len(tool_line.format(i)) for i in range(1, 20)]
    history = transcript(jvm, engine, 0)
    assert history[:4] == [
        f"system: {SYSTEM}",
        "user: Iron swords?",
        f"model: {REPLY}",
        "user: Tool result (check_inventory): stock 1",
    ]
    assert history[-2:] == ["user: Buy.", f"model: {REPLY}"]
    await settled(jvm, engine, 0)


async def test_fresh_conversations_prefill_the_whole_history_every_step(jvm, engine, native):  # noqa: F811
    """The cost reuse saves: each step on its own model (no live conversation) starts over."""
    chars: list[int] = []
    for messages in tool_loop(20):
        before = await counts(jvm, engine)
        await run(LiteRtModel(native, jvm), request(messages))
        chars.append((await counts(jvm, engine))[2] - before[2])
    assert chars == sorted(chars) and chars[-1] > 10 * chars[0]
    await settled(jvm, engine, 19)


def _changed_system(steps: list[list[ChatMessage]]) -> GenerationRequest:
    return request(steps[2], system="Be Brana.")


def _rewritten_history(steps: list[list[ChatMessage]]) -> GenerationRequest:
    return request([ChatMessage("user", "Steel swords?"), *steps[2][1:]])


def _edited_reply(steps: list[list[ChatMessage]]) -> GenerationRequest:
    edited = list(steps[2])
    edited[-2] = ChatMessage("assistant", REPLY.upper())  # oamd changed the reply it got back
    return request(edited)


@pytest.mark.parametrize("change", [_changed_system, _rewritten_history, _edited_reply])
async def test_a_request_that_does_not_extend_what_was_seen_opens_a_fresh_conversation(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    native,
    change,
):
    model = LiteRtModel(native, jvm)
    steps = tool_loop(3)
    await run(model, request(steps[0]))
    await run(model, request(steps[1]))
    changed = change(steps)
    await run(model, changed)
    assert (await counts(jvm, engine))[0] == 2
    await settled(jvm, engine, 1)
    fresh = transcript(jvm, engine, 1)
    # the whole transcript, in order: system, the history as initial messages, the new turn
    assert fresh[0] == f"system: {changed.messages[0].content}"
    assert len(fresh) == 1 + 5 + 1  # system; user, model, user, model, user; the reply
    assert fresh[1] == f"user: {changed.messages[1].content}"
    assert fresh[-1] == f"model: {REPLY}"


async def test_after_a_cancel_or_an_error_the_next_step_starts_over_with_the_full_transcript(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    native,
):
    model = LiteRtModel(native, jvm)
    steps = tool_loop(4)
    await run(model, request(steps[0]))
    # cancelled mid-stream: the partial turn stays in LiteRT-LM's state, so it cannot continue
    jvm.run_blocking(engine.setReply, [f"w{i} " for i in range(50)], 10)
    with anyio.fail_after(5), anyio.CancelScope() as scope:
        async for _ in model.generate(request(steps[1])):
            scope.cancel()
    jvm.run_blocking(engine.setReply, ["Hello", " there"], 1)
    await run(model, request(steps[1]))
    # a native error: the same
    jvm.run_blocking(engine.failNext, "Status Code: 13. Message: boom")
    with pytest.raises(ModelError):
        await run(model, request(steps[2]))
    await run(model, request(steps[2]))
    await run(model, request(steps[3]))  # and a clean finish is continued again
    assert (await counts(jvm, engine))[0] == 3
    await settled(jvm, engine, 2)
    assert jvm.run_blocking(engine.cancels) == 1
    last = transcript(jvm, engine, 2)
    assert last[:2] == [f"system: {SYSTEM}", "user: Iron swords?"]
    assert not any("w0" in line for line in last)  # the cancelled partial reply is not in it
    assert last[-2:] == ["user: Tool result (check_inventory): stock 3", f"model: {REPLY}"]


async def test_two_interleaved_sessions_each_start_over_and_never_see_each_other(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    native,
):
    model = LiteRtModel(native, jvm)
    gorm = tool_loop(3)
    brana = [[ChatMessage("user", "Any news, Brana?"), *m[1:]] for m in tool_loop(3)]
    for a, b in zip(gorm, brana, strict=True):
        await run(model, request(a))
        await run(model, request(b, system="Be Brana."))
    created = (await counts(jvm, engine))[0]
    assert created == 6  # each switch starts over: one engine holds one conversation
    await settled(jvm, engine, 5)
    for n in range(created):
        lines = transcript(jvm, engine, n)
        mine = "Gorm" if lines[0] == f"system: {SYSTEM}" else "Brana"
        assert not any(("Brana" if mine == "Gorm" else "Iron") in line for line in lines[1:])


async def test_concurrent_generations_never_hold_two_conversations_and_both_finish(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    native,
):
    model = LiteRtModel(native, jvm)
    results: list[str] = []

    async def one(text: str) -> None:
        results.append(await run(model, request([ChatMessage("user", text)])))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for i in range(4):
                tg.start_soon(one, f"q{i}")
    assert results == [REPLY] * 4
    assert (await counts(jvm, engine))[0] == 4
    await settled(jvm, engine, 3)


async def test_two_models_on_one_backend_never_continue_each_others_conversation(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    native,
):
    """Conversation keys name a conversation of the Java backend, not of one model: a model whose
    conversation another model replaced fails its continuing step (generation_failed, Java says
    it is not live), and its next step starts over with its own transcript."""
    gorm, brana = LiteRtModel(native, jvm), LiteRtModel(native, jvm)
    steps = tool_loop(2)
    await run(gorm, request(steps[0]))
    await run(brana, request([ChatMessage("user", "Any news, Brana?")], system="Be Brana."))
    with pytest.raises(ModelError) as caught:
        await run(gorm, request(steps[1]))  # planned as a continuation of gorm's conversation
    assert caught.value.name == "generation_failed"
    assert "not live" in caught.value.message
    assert await run(gorm, request(steps[1])) == REPLY
    assert (await counts(jvm, engine))[0] == 3
    await settled(jvm, engine, 2)
    last = transcript(jvm, engine, 2)
    assert last[0] == f"system: {SYSTEM}"
    assert not any("Brana" in line for line in last)

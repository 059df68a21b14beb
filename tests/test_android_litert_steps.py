"""Session turns through the daemon on LiteRtModel over the fake LiteRT-LM engine: LiteRtModel
asks the envelope loop for append-only steps, so a turn's steps continue one conversation and
each later step prefills only its new message; a turn after a cancelled one starts afresh."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import orjson
import pytest
from android.jvm_support import engine, java_classes, jvm, litert_backend  # noqa: F401 (fixtures)
from conftest import memory_daemon

from oamd.backends.android.litert import LiteRtModel
from oamd.daemon import default_config

pytestmark = pytest.mark.anyio

STOCK = {
    "name": "check_inventory",
    "description": "Look up stock of an item.",
    "parameters": {
        "type": "object",
        "properties": {"item": {"type": "string"}},
        "required": ["item"],
    },
}
ROUNDS = 8
"""Tool rounds of the long turn: with the respond decision and the reply, ten steps."""


class RerenderingLiteRtModel(LiteRtModel):
    """LiteRtModel without the append-only layout: how the envelope loop drove it before."""

    def _set_capabilities(self, context_size: int) -> None:
        super()._set_capabilities(context_size)
        self.capabilities = replace(self.capabilities, append_only_steps=False)


@pytest.fixture
def native(jvm, engine, tmp_path) -> Any:  # noqa: F811
    backend = litert_backend(jvm, tmp_path)
    yield backend
    jvm.run_blocking(backend.close)


def enqueue(jvm, engine, *replies: Any) -> None:  # noqa: F811
    for reply in replies:
        text = reply if isinstance(reply, str) else orjson.dumps(reply).decode()
        jvm.run_blocking(engine.enqueueReply, [text[i : i + 7] for i in range(0, len(text), 7)])


def check(item: str) -> dict[str, Any]:
    return {"action": "check_inventory", "arguments": {"item": item}}


async def stock(params: dict[str, Any]) -> dict[str, Any]:
    return {"output": {"item": params["call"]["arguments"]["item"], "stock": 3}}


async def ten_step_turn(jvm, engine, model) -> dict[str, Any]:  # noqa: F811
    enqueue(jvm, engine, *[check(f"item {i}") for i in range(ROUNDS)], {"action": "respond"})
    enqueue(jvm, engine, "Plenty of everything.")
    async with memory_daemon(default_config(system_model=model)) as client:
        client.tool_handler = stock
        with anyio.fail_after(10):
            await client.request(
                "session/create",
                {
                    "session": "s",
                    "model": "system",
                    "tools": [STOCK],
                    "options": {"maxToolRounds": ROUNDS + 1},
                },
            )
            return await client.request("session/respond", {"session": "s", "prompt": "Stock?"})


def prefills(jvm, engine) -> list[tuple[int, int]]:  # noqa: F811
    """(messages, characters) each step prefilled, read from the conversations' transcripts."""
    out: list[tuple[int, int]] = []
    for n in range(jvm.run_blocking(engine.createdConversations)):
        fresh = chars = 0
        for line in jvm.run_blocking(engine.transcript, n):
            role, text = line.split(": ", 1)
            if role == "model":
                out.append((fresh, chars))
                fresh = chars = 0
            else:
                fresh, chars = fresh + 1, chars + len(text)
    return out


async def test_a_ten_step_tool_loop_runs_on_one_conversation_with_flat_prefill(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    native,
):
    result = await ten_step_turn(jvm, engine, LiteRtModel(native, jvm))
    assert len(result["steps"]) == ROUNDS + 2 and result["text"] == "Plenty of everything."
    assert jvm.run_blocking(engine.createdConversations) == 1
    steps = prefills(jvm, engine)
    assert [n for n, _ in steps] == [2] + [1] * (ROUNDS + 1)
    later = [c for _, c in steps[1:]]
    # flat: each decide step reads one tool line and its task, never the turn so far
    assert len(set(later[:-1])) == 1 and later[-1] < later[0]


async def test_without_append_only_steps_each_step_reprefills_everything(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    native,
):
    await ten_step_turn(jvm, engine, RerenderingLiteRtModel(native, jvm))
    assert jvm.run_blocking(engine.createdConversations) == ROUNDS + 2
    steps = prefills(jvm, engine)
    assert [n for n, _ in steps] == [2] * (ROUNDS + 2)
    chars = [c for _, c in steps]
    assert chars[:-1] == sorted(chars[:-1]) and chars[-2] > chars[0] + ROUNDS * 50


async def test_a_repair_step_continues_the_conversation(jvm, engine, native):  # noqa: F811
    enqueue(jvm, engine, "check_inventory, I think", check("sword"), {"action": "respond"})
    enqueue(jvm, engine, "Three swords.")
    async with memory_daemon(default_config(system_model=LiteRtModel(native, jvm))) as client:
        client.tool_handler = stock
        with anyio.fail_after(10):
            await client.request(
                "session/create", {"session": "s", "model": "system", "tools": [STOCK]}
            )
            result = await client.request("session/respond", {"session": "s", "prompt": "Swords?"})
    assert [s["isRepair"] for s in result["steps"]] == [False, True, False, False]
    assert jvm.run_blocking(engine.createdConversations) == 1
    lines = list(jvm.run_blocking(engine.transcript, 0))
    assert lines[2] == "model: check_inventory, I think"
    assert "Your previous answer was invalid" in lines[3]


async def test_a_turn_after_a_cancelled_one_starts_a_fresh_conversation(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    native,
):
    enqueue(jvm, engine, check("sword"), {"action": "respond"}, "Three swords.")
    in_tool = anyio.Event()

    async def stuck(params: dict[str, Any]) -> dict[str, Any]:
        in_tool.set()
        await anyio.sleep_forever()
        raise AssertionError

    async with memory_daemon(default_config(system_model=LiteRtModel(native, jvm))) as client:
        client.tool_handler = stuck
        with anyio.fail_after(10):
            await client.request(
                "session/create", {"session": "s", "model": "system", "tools": [STOCK]}
            )
            first = await client.start("session/respond", {"session": "s", "prompt": "Swords?"})
            await in_tool.wait()  # step 1 answered: its conversation is live
            await client.request("session/cancel", {"session": "s"})
            assert "error" in await client.wait(first)
            client.tool_handler = stock
            result = await client.request("session/respond", {"session": "s", "prompt": "Swords?"})
    assert result["text"] == "Three swords."
    assert jvm.run_blocking(engine.createdConversations) == 2
    second = list(jvm.run_blocking(engine.transcript, 1))
    assert second[1].startswith("user: Conversation:")

"""Full protocol turns through oamd with ``"model": "system"`` on MlKitModel over pyjnius and the
FakeBackend: the envelope loop drives a text-only on-device model, client tool included."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from android.jvm_support import fake, java_classes, jvm, litert_backend  # noqa: F401 (fixtures)
from conftest import memory_daemon

from oamd.backends.android.mlkit import MlKitModel
from oamd.daemon import default_config

pytestmark = pytest.mark.anyio

GORM = {"name": "Gorm", "role": "the village blacksmith", "personality": "Gruff but fair."}
CHECK_INVENTORY = {
    "name": "check_inventory",
    "description": "Look up stock and price of an item.",
    "parameters": {
        "type": "object",
        "properties": {"item": {"type": "string"}},
        "required": ["item"],
    },
}
REPLY = {
    "emotion": "proud",
    "line": "Three iron swords, forty-five gold each.",
    "player_options": ["Buy one.", "Too dear.", "Goodbye."],
    "ends_conversation": False,
}


def chunked(value: Any, size: int = 7) -> list[str]:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return [text[i : i + size] for i in range(0, len(text), size)]


async def test_an_npc_turn_with_a_client_tool_runs_on_the_fake_backend(jvm, fake):  # noqa: F811
    decide = {"action": "check_inventory", "arguments": {"item": "iron sword"}}
    jvm.run_blocking(fake.enqueueReply, chunked(decide), 0)
    jvm.run_blocking(fake.enqueueReply, chunked({"action": "respond"}), 0)
    jvm.run_blocking(fake.enqueueReply, chunked(REPLY), 0)
    jvm.run_blocking(fake.setDefaultReply, orjson.dumps(REPLY).decode())
    calls: list[dict[str, Any]] = []

    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params["call"])
        return {"output": {"item": params["call"]["arguments"]["item"], "stock": 3}}

    model = MlKitModel(fake, jvm)
    async with memory_daemon(default_config(system_model=model)) as client:
        client.tool_handler = handler
        with anyio.fail_after(10):
            await client.request(
                "npc/create",
                {"npc": "gorm", "persona": GORM, "model": "system", "tools": [CHECK_INVENTORY]},
            )
            request = await client.start(
                "npc/talk", {"npc": "gorm", "line": "Iron swords?", "stream": True}
            )
            result = (await client.wait(request))["result"]
    assert result["line"] == REPLY["line"]
    assert result["emotion"] == "proud"
    assert result["isFallback"] is False
    (record,) = result["toolCalls"]
    assert record["call"]["name"] == "check_inventory"
    assert record["call"]["arguments"] == {"item": "iron sword"}
    assert record["output"] == {"item": "iron sword", "stock": 3}
    assert [c["name"] for c in calls] == ["check_inventory"]
    prompts = list(jvm.run_blocking(fake.prompts))
    assert any("Iron swords?" in p for p in prompts)
    assert any('"stock":3' in p or "stock" in p for p in prompts[1:])
    # the loop may stop reading a step once its JSON is complete; Java still ends every call
    assert await jvm.call(fake.awaitIdle, 5000)
    assert jvm.registered() == 0


async def test_an_npc_turn_runs_on_litert_with_one_live_conversation_at_a_time(
    jvm,  # noqa: F811
    tmp_path,
):
    """The same turn on LiteRtModel over the fake LiteRT-LM engine. LiteRtModel asks for
    append-only steps, so each step after the first sends only the model's reply and one new
    user message (the tool result, the next task): the turn's three steps run on one
    conversation, each later step prefilling only its new message."""
    from oamd.backends.android.litert import LiteRtModel

    engine = jvm.autoclass("com.google.ai.edge.litertlm.FakeLiteRtLm")
    jvm.run_blocking(engine.reset)
    decide = {"action": "check_inventory", "arguments": {"item": "iron sword"}}
    for reply in (decide, {"action": "respond"}, REPLY):
        jvm.run_blocking(engine.enqueueReply, chunked(reply))
    native = litert_backend(jvm, tmp_path)
    model = LiteRtModel(native, jvm)

    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": {"item": params["call"]["arguments"]["item"], "stock": 3}}

    async with memory_daemon(default_config(system_model=model)) as client:
        client.tool_handler = handler
        with anyio.fail_after(10):
            await client.request(
                "npc/create",
                {"npc": "gorm", "persona": GORM, "model": "system", "tools": [CHECK_INVENTORY]},
            )
            request = await client.start("npc/talk", {"npc": "gorm", "line": "Iron swords?"})
            result = (await client.wait(request))["result"]
    assert result["line"] == REPLY["line"] and result["isFallback"] is False
    assert jvm.run_blocking(engine.createdConversations) == 1
    # the first step's system text and user message, then one new user message per step
    assert jvm.run_blocking(engine.prefilledMessages) == 4
    jvm.run_blocking(native.close)
    assert await jvm.call(engine.awaitClosed, 1, 5000)
    assert list(jvm.run_blocking(engine.violations)) == []
    assert jvm.registered() == 0

"""Warming a prefix cache: creating a session or an NPC on a text-only model with a prefix cache
has the model evaluate the exact system text the first turn will send, in the background; other
models are left alone."""

from __future__ import annotations

from dataclasses import replace

import anyio
import pytest
from conftest import memory_daemon

from oamd.backends.base import ChatMessage
from oamd.backends.scripted.model import ScriptedModel, parse_script
from oamd.daemon import default_config

pytestmark = pytest.mark.anyio

MENU_TOOL = {
    "name": "check_menu",
    "description": "Tonight's menu.",
    "parameters": {"type": "object", "properties": {}},
}


class CachingModel(ScriptedModel):
    """A text-only scripted model that claims a prefix cache and records what it prefilled."""

    prefilled: list[list[ChatMessage]]
    warmed: anyio.Event

    async def prefill(self, messages: list[ChatMessage]) -> None:
        self.prefilled.append(messages)
        self.warmed.set()


def caching_model(*, prefix_cache: bool = True) -> CachingModel:
    script, fallback = parse_script(
        {"style": "envelope", "steps": [{"text": "Welcome!"}, {"text": "Stew."}]}
    )
    model = CachingModel(script, fallback, record=True)
    model.capabilities = replace(model.capabilities, prefix_cache=prefix_cache)
    model.prefilled, model.warmed = [], anyio.Event()
    return model


async def test_a_session_warms_the_system_text_its_first_step_sends():
    model = caching_model()
    async with memory_daemon(default_config(model, test_methods=True)) as client:
        with anyio.fail_after(5):
            await client.request(
                "session/create",
                {
                    "session": "inn",
                    "instructions": "You keep an inn.",
                    "tools": [MENU_TOOL],
                    "options": {"assistantLabel": "Mira"},
                },
            )
            await model.warmed.wait()
            await client.request("session/respond", {"session": "inn", "prompt": "Hi!"})
    (warmed,) = model.prefilled
    assert [m.role for m in warmed] == ["system"]
    first_system = model.requests[0].messages[0]
    assert first_system.role == "system" and warmed[0].content == first_system.content
    assert "Mira can use these tools:" in warmed[0].content


async def test_an_npc_warms_the_system_text_its_first_line_sends():
    model = caching_model()
    async with memory_daemon(default_config(model, test_methods=True)) as client:
        with anyio.fail_after(5):
            await client.request(
                "npc/create",
                {
                    "npc": "mira",
                    "persona": {"name": "Mira"},
                    "tools": [MENU_TOOL],
                    "options": {"replyFormat": "text"},
                },
            )
            await model.warmed.wait()
            await client.request("npc/talk", {"npc": "mira", "line": "Evening!"})
    (warmed,) = model.prefilled
    assert warmed[0].content == model.requests[0].messages[0].content
    assert warmed[0].content.startswith("You play Mira")


async def test_models_without_a_prefix_cache_are_not_warmed():
    model = caching_model(prefix_cache=False)
    async with memory_daemon(default_config(model, test_methods=True)) as client:
        with anyio.fail_after(5):
            await client.request("session/create", {"session": "inn", "tools": [MENU_TOOL]})
            await client.request("npc/create", {"npc": "mira", "persona": {"name": "Mira"}})
            await client.request("session/respond", {"session": "inn", "prompt": "Hi!"})
    assert model.prefilled == []


async def test_an_updated_npc_warms_its_new_system_text():
    model = caching_model()
    async with memory_daemon(default_config(model, test_methods=True)) as client:
        with anyio.fail_after(5):
            params = {
                "npc": "mira",
                "persona": {"name": "Mira"},
                "options": {"replyFormat": "text"},
            }
            await client.request("npc/create", params)
            await model.warmed.wait()
            model.warmed = anyio.Event()
            await client.request(
                "npc/update", {"npc": "mira", "persona": {"role": "the innkeeper of the Goose"}}
            )
            await model.warmed.wait()
            await client.request("npc/talk", {"npc": "mira", "line": "Evening!"})
    first, after_update = model.prefilled
    assert "the innkeeper of the Goose" not in first[0].content
    assert after_update[0].content == model.requests[0].messages[0].content
    assert "the innkeeper of the Goose" in after_update[0].content


async def test_a_restored_small_model_npc_warms_its_history_too():
    model = caching_model()
    model.capabilities = replace(model.capabilities, compact_prompts=True)
    async with memory_daemon(default_config(model, test_methods=True)) as client:
        with anyio.fail_after(5):
            params = {
                "npc": "mira",
                "persona": {"name": "Mira"},
                "options": {"playerOptionCount": 0},
            }
            await client.request("npc/create", params)
            await client.request("npc/talk", {"npc": "mira", "line": "Is there a room free?"})
            saved = (await client.request("npc/state", {"npc": "mira"}))["state"]
            await client.request("npc/delete", {"npc": "mira"})
            while model.prefilled:  # what the talk's own follow-up warmed
                await anyio.sleep(0.05)
                if model.prefilled:
                    model.prefilled.clear()
                    await anyio.sleep(0.1)
            await client.request("npc/restore", {"state": saved})
            while not any(len(m) > 1 for m in model.prefilled):
                await anyio.sleep(0.01)
    warmed = next(m for m in model.prefilled if len(m) > 1)
    said = [m.content for m in warmed]
    assert any("Is there a room free?" in text for text in said), said

"""The typed calls of the methods the typed API first lacked, against a daemon with scripted
models: validation, listings, context notes and compaction, NPC update / save / restore,
``decide_many`` with a failing decision, and world subscriptions; each returns its model."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from oamd.client import (
    Bridge,
    DecideManyResult,
    Decision,
    DecisionFailure,
    DecisionRequest,
    NpcSummary,
    SessionSummary,
    ValidatedTool,
)

pytestmark = pytest.mark.anyio

GATE = {"type": "object", "properties": {"gate": {"type": "string"}}, "required": ["gate"]}
GORM = {"name": "Gorm", "role": "the village blacksmith"}


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


def choice(option: str) -> dict[str, Any]:
    return {"json": {"reasoning": "Because.", "choice": option, "confidence": 70}}


@pytest.fixture
async def bridge(client) -> Bridge:
    bridge = Bridge(client)
    with anyio.fail_after(5):
        await bridge.initialize("tests")
    return bridge


async def test_validate_schema_returns_the_schema_the_model_is_constrained_by(bridge):
    with anyio.fail_after(5):
        checked = await bridge.validate_schema(GATE, name="Gate")
    assert checked.warnings == []
    assert checked.generation_schema["properties"] == {"gate": {"type": "string"}}


async def test_validate_tools_reads_every_registered_tool_and_warns_about_a_missing_description(
    bridge,
):
    @bridge.tool("open_gate", "", GATE)
    def open_gate(args: dict[str, Any]) -> str:
        return "Opened."

    with anyio.fail_after(5):
        checked = await bridge.validate_tools()
    [tool] = checked.tools
    assert isinstance(tool, ValidatedTool) and tool.name == "open_gate"
    assert checked.warnings == [
        "open_gate: no description; the model may not know when to call it."
    ]


async def test_list_sessions_lists_them_in_creation_order_with_their_state(bridge):
    with anyio.fail_after(5):
        await bridge.create_session(session="north", model=scripted({"text": "Hm."}))
        south = await bridge.create_session(session="south", instructions="Guard the south.")
        await (
            await bridge.create_session(session="east", model=scripted({"text": "Hm."}))
        ).respond("Hello.")
        await south.delete()
        listed = await bridge.list_sessions()
    assert all(isinstance(s, SessionSummary) for s in listed.sessions)
    assert [(s.session, s.entries, s.busy) for s in listed.sessions] == [
        ("north", 0, False),
        ("east", 2, False),
    ]


async def test_a_context_note_is_set_and_compaction_folds_older_turns_into_a_summary(bridge):
    summary = "The player greeted the guard three times."
    model = scripted({"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": summary})
    with anyio.fail_after(5):
        guard = await bridge.create_session(session="g", model=model)
        noted = await guard.set_context_note("It is night.")
        for prompt in ("one", "two", "three"):
            await guard.respond(prompt)
        compacted = await guard.compact(keep_recent_turns=1, summary_instructions="One line.")
        again = await guard.compact(keep_recent_turns=5)
        [listed] = (await bridge.list_sessions()).sessions
    assert noted.session == "g"
    assert (compacted.session, compacted.summary) == ("g", summary)
    assert again.summary is None
    assert listed.entries == 2


async def test_an_npc_is_updated_saved_and_restored_and_listed(bridge):
    with anyio.fail_after(5):
        gorm = await bridge.create_npc(GORM, npc="gorm", model="scripted")
        updated = await gorm.update(persona={"role": "the village baker"})
        saved = await gorm.state()
        await gorm.delete()
        restored = await bridge.restore_npc(saved, model="scripted")
        listed = await bridge.list_npcs()
    assert (updated.npc, updated.warnings) == ("gorm", [])
    assert saved["persona"]["role"] == "the village baker"
    assert restored.id == "gorm"
    [summary] = listed.npcs
    assert isinstance(summary, NpcSummary)
    assert (summary.npc, summary.name, summary.role) == ("gorm", "Gorm", "the village baker")


async def test_decide_many_keeps_order_and_a_failed_decision_is_a_decision_failure(bridge):
    guardrail = {"error": "guardrail_violation"}
    with anyio.fail_after(5):
        result = await bridge.decide_many(
            [
                DecisionRequest(situation="A noise.", options=["look", "hide"]),
                {"situation": "Blood.", "options": ["look", "hide"]},  # the wire form passes too
                DecisionRequest(situation="Alone.", options=["look", "hide"]),
            ],
            max_concurrency=1,
            model=scripted(choice("look"), guardrail, choice("hide")),
        )
    assert isinstance(result, DecideManyResult)
    first, second, third = result.results
    assert isinstance(first, Decision) and first.option_id == "look"
    assert isinstance(second, DecisionFailure)
    assert (second.error.data.code, second.error.code) == ("guardrail_violation", -32002)
    assert isinstance(third, Decision) and third.option_id == "hide"


async def test_a_world_subscription_is_listed_until_it_is_unsubscribed(bridge):
    with anyio.fail_after(5):
        village = await bridge.create_world({"player": {"gold": 60}}, world="village")
        subscription = await village.subscribe("player")
        [listed] = (await bridge.list_worlds()).worlds
        ended = await subscription.unsubscribe()
        [after] = (await bridge.list_worlds()).worlds
    assert (subscription.world, subscription.path) == ("village", "player")
    assert [s.subscription for s in listed.subscriptions] == [subscription.id]
    assert (listed.world, listed.npcs) == ("village", 0)
    assert (ended.subscription, ended.unsubscribed) == (subscription.id, True)
    assert after.subscriptions == []

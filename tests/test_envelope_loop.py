"""The envelope loop's turn (android-design §1): tool choices, budgets, the dedupe rule, events,
records and history entries, reply cleaning, and the scripted model's envelope style."""

from __future__ import annotations

import pytest
from envelope_support import (
    CHECK_MENU,
    ORDER_PLACED,
    ROLL_DIE,
    TAKE_ORDER,
    calls,
    create,
    kinds,
    made_calls,
    raw,
    requests_of,
    respond,
    streamed,
    system_texts,
    user_text,
)

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

STEW = ("take_order", {"item": "stew", "quantity": 1})
ALE = ("take_order", {"item": "ale", "quantity": 1})
MENU_CALL = ("check_menu", {})
SIX = ("roll_die", {"sides": 6})


def modes(result):
    return [s["toolCallingMode"] for s in result["steps"]]


# ---- tool choices ------------------------------------------------------------------------------


@pytest.mark.parametrize("choice", ["auto", "explicit"])
async def test_auto_and_explicit_offer_every_tool_and_respond_on_the_first_step(client, choice):
    await create(client, "inn", calls(MENU_CALL), {"text": "Stew."}, options={"toolChoice": choice})
    result = await respond(client, "inn", "What's on?")
    assert modes(result) == ["allowed", "allowed", "disallowed"]
    assert result["steps"][0]["enabledTools"] == ["take_order", "check_menu"]
    assert "can also respond" in user_text((await requests_of(client, "inn"))[0])


async def test_required_asks_for_a_tool_first_then_decides_freely(client):
    await create(
        client, "inn", calls(MENU_CALL), {"text": "Stew."}, options={"toolChoice": "required"}
    )
    result = await respond(client, "inn", "Hi.")
    assert kinds(result) == ["decide", "decide", "respond"]
    assert modes(result) == ["required", "allowed", "disallowed"]
    first, second = (user_text(r) for r in (await requests_of(client, "inn"))[:2])
    assert "must use one of the tools now" in first and "can also respond" not in first
    assert "can also respond" in second


async def test_required_with_one_enabled_tool_asks_for_its_arguments_directly(client):
    await create(
        client,
        "inn",
        calls(STEW),
        {"text": "One stew."},
        options={"toolChoice": "required", "enabledTools": ["take_order"]},
    )
    result = await respond(client, "inn", "Stew.")
    assert kinds(result) == ["toolArguments", "decide", "respond"]
    assert result["steps"][0]["enabledTools"] == ["take_order"]
    assert made_calls(result) == [STEW]
    first = (await requests_of(client, "inn"))[0]
    assert first["kind"] == "toolArguments"
    assert "calls the tool take_order (Place an order for the guest)." in user_text(first)


async def test_a_forced_tool_gets_an_arguments_step_then_the_model_decides_freely(client):
    await create(
        client,
        "inn",
        calls(ALE, MENU_CALL),
        {"text": "Ale and menu."},
        options={"toolChoice": {"tool": "take_order"}},
    )
    result = await respond(client, "inn", "Ale.")
    assert kinds(result) == ["toolArguments", "decide", "decide", "respond"]
    assert modes(result) == ["required", "allowed", "allowed", "disallowed"]
    assert made_calls(result) == [ALE, MENU_CALL]


async def test_a_forced_parameterless_tool_runs_without_a_model_step(client):
    await create(
        client, "inn", {"text": "Stew tonight."}, options={"toolChoice": {"tool": "check_menu"}}
    )
    result = await respond(client, "inn", "Menu?")
    assert made_calls(result) == [MENU_CALL]
    assert kinds(result) == ["decide", "respond"]
    assert result["steps"][0]["completedToolRounds"] == 1


async def test_a_per_turn_tool_choice_overrides_the_session_for_one_turn(client):
    await create(client, "inn", {"text": "Hi."}, {"text": "Stew."})
    await respond(client, "inn", "Hi.", toolChoice="none")
    result = await respond(client, "inn", "Menu?", toolChoice={"tool": "check_menu"})
    assert made_calls(result) == [MENU_CALL]


async def test_none_replies_without_offering_tools(client):
    await create(client, "inn", {"text": "Evening."}, options={"toolChoice": "none"})
    result = await respond(client, "inn", "Hi.")
    assert kinds(result) == ["respond"]
    assert result["steps"][0]["enabledTools"] == []
    assert "can use these tools" not in user_text((await requests_of(client, "inn"))[0])


async def test_enabled_tools_narrow_the_catalog(client):
    await create(client, "inn", {"text": "Hi."}, options={"enabledTools": ["check_menu"]})
    result = await respond(client, "inn", "Hi.")
    assert result["steps"][0]["enabledTools"] == ["check_menu"]
    request = (await requests_of(client, "inn"))[0]
    text = user_text(request)
    assert "Tools Assistant can use now: check_menu." in text and "take_order" not in text
    # the catalog in the system text stays whole, so its bytes do not change with the offer
    assert "- take_order:" in system_texts(request)[0]


async def test_a_session_without_tools_goes_straight_to_the_reply(client):
    await create(client, "inn", {"text": "Hi."}, tools=[])
    assert kinds(await respond(client, "inn", "Hi.")) == ["respond"]


# ---- budgets ----------------------------------------------------------------------------------


async def test_the_round_budget_forces_the_reply(client):
    await create(
        client,
        "inn",
        calls(STEW, ALE, MENU_CALL),
        {"text": "That's enough."},
        options={"maxToolRounds": 2},
    )
    result = await respond(client, "inn", "Everything!")
    assert made_calls(result) == [STEW, ALE]
    assert kinds(result) == ["decide", "decide", "respond"]
    assert result["text"] == "That's enough."  # the leftover call was skipped


async def test_the_call_budget_forces_the_reply(client):
    await create(client, "inn", calls(STEW, ALE), {"text": "One."}, options={"maxToolCalls": 1})
    result = await respond(client, "inn", "Two.")
    assert made_calls(result) == [STEW]


async def test_zero_rounds_means_no_decide_step(client):
    await create(client, "inn", {"text": "Hi."}, options={"maxToolRounds": 0})
    assert kinds(await respond(client, "inn", "Hi.")) == ["respond"]


# ---- the dedupe rule ---------------------------------------------------------------------------


async def test_a_repeated_identical_call_means_reply_now(client):
    await create(client, "dice", calls(SIX), calls(SIX), {"text": "A four."}, tools=[ROLL_DIE])
    result = await respond(client, "dice", "Roll.")
    assert made_calls(result) == [SIX]
    assert kinds(result) == ["decide", "decide", "respond"]
    assert result["text"] == "A four."


async def test_dedupe_can_be_turned_off_for_tools_meant_to_repeat(client):
    await create(
        client,
        "dice",
        calls(SIX),
        calls(SIX),
        {"text": "Two fours."},
        tools=[ROLL_DIE],
        options={"dedupeToolCalls": False},
    )
    result = await respond(client, "dice", "Roll twice.")
    assert made_calls(result) == [SIX, SIX]


async def test_a_call_that_failed_may_be_made_again(client):
    fail = {**CHECK_MENU, "name": "fail"}
    again = ("fail", {})
    await create(client, "inn", calls(again), calls(again), {"text": "Closed."}, tools=[fail])
    result = await respond(client, "inn", "Try twice.")
    assert made_calls(result) == [again, again]
    assert all(r["isError"] for r in result["toolCalls"])


async def test_a_call_with_other_arguments_is_not_a_repeat(client):
    eight = ("roll_die", {"sides": 8})
    await create(client, "dice", calls(SIX), calls(eight), {"text": "Ok."}, tools=[ROLL_DIE])
    assert made_calls(await respond(client, "dice", "Roll.")) == [SIX, eight]


async def test_dedupe_option_must_be_a_boolean(client):
    with pytest.raises(RpcError) as info:
        await create(client, "inn", options={"dedupeToolCalls": "yes"})
    assert info.value.code == -32602


# ---- events, records and entries ---------------------------------------------------------------


async def test_events_come_in_the_native_loops_order_and_shapes(client):
    await create(client, "inn", calls(MENU_CALL), {"text": "We have stew.", "chunks": 3})
    result, events = await streamed(client, "inn", "Menu?")
    types = [e["type"] for e in events]
    assert types[:4] == ["modelStep", "toolCallStarted", "toolCallCompleted", "modelStep"]
    assert types[4] == "modelStep" and set(types[5:]) == {"text"}
    assert [e["step"]["kind"] for e in events if e["type"] == "modelStep"] == kinds(result)
    started = events[1]
    assert started["call"] == result["toolCalls"][0]["call"] and started["execution"] == "client"
    assert events[2]["record"] == result["toolCalls"][0]
    assert events[-1]["text"] == result["text"] == "We have stew."
    assert "".join(e["delta"] for e in events if e["type"] == "text") == "We have stew."


async def test_the_turn_commits_prompt_calls_outputs_and_response_entries(client):
    await create(client, "inn", calls(STEW), {"text": "Coming up."})
    result = await respond(client, "inn", "Stew.")
    saved = await client.request("session/transcript", {"session": "inn"})
    entries = saved["transcript"]["transcript"]["entries"]
    assert [e["kind"] for e in entries] == ["prompt", "toolCalls", "toolOutput", "response"]
    call = result["toolCalls"][0]["call"]
    assert entries[1]["calls"] == [call]
    assert entries[2]["callId"] == call["id"] and entries[2]["output"] == ORDER_PLACED
    assert entries[3]["text"] == "Coming up."


async def test_structured_partials_stream_and_end_with_the_ordered_value(client):
    schema = {
        "type": "object",
        "properties": {"line": {"type": "string"}, "mood": {"type": "string"}},
        "required": ["line", "mood"],
    }
    await create(client, "npc", raw('{"mood": "calm", "line": "Welcome in."}', chunks=4), tools=[])
    result, events = await streamed(client, "npc", "Hi.", schema=schema)
    partials = [e["value"] for e in events if e["type"] == "partial"]
    assert partials[-1] == result["structured"] == {"line": "Welcome in.", "mood": "calm"}
    assert list(partials[-1]) == ["line", "mood"]
    assert len(partials) >= 2


async def test_tool_outputs_are_shown_to_the_model_in_later_steps(client):
    await create(client, "inn", calls(MENU_CALL), {"template": "{toolOutput}"})
    result = await respond(client, "inn", "Menu?")
    assert result["text"] == '{"stew":3,"ale":2}'
    later = user_text((await requests_of(client, "inn"))[1])
    assert '[check_menu → {"stew":3,"ale":2}]' in later


# ---- reply cleaning ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, cleaned",
    [
        ("Assistant: Welcome in!", "Welcome in!"),
        ("**Mira:** Welcome in!", "Welcome in!"),
        ('"Welcome in!"', "Welcome in!"),
        ('[check_menu → {"stew":3}] We have   stew.', "We have stew."),
    ],
)
async def test_the_reply_loses_labels_echoed_tool_lines_and_wrapping_quotes(client, reply, cleaned):
    await create(client, "inn", {"text": reply, "chunks": 4}, options={"assistantLabel": "Mira"})
    result, events = await streamed(client, "inn", "Hi.")
    assert result["text"] == cleaned
    texts = [e["text"] for e in events if e["type"] == "text"]
    assert texts[-1] == cleaned
    assert not any(t.lower().startswith(("mira", "assistant", "**")) for t in texts)


# ---- the scripted model's envelope style -------------------------------------------------------


async def test_raw_steps_are_used_up_one_per_model_call_whatever_the_kind(client):
    await create(
        client,
        "inn",
        raw('{"action": "respond"}'),
        raw("Evening!"),
        raw("never played"),
        tools=[TAKE_ORDER],
    )
    result = await respond(client, "inn", "Hi.")
    assert result["text"] == "Evening!"
    assert (await respond(client, "inn", "Hi again."))["text"] == "(script exhausted)"


async def test_an_envelope_style_request_carries_no_tools_and_a_text_kind(client):
    await create(client, "inn", calls(MENU_CALL), {"text": "Ok."})
    await respond(client, "inn", "Menu?")
    for request in await requests_of(client, "inn"):
        assert request["tools"] == [] and request["tool_mode"] == "none"
        assert request["kind"] in ("decide", "respond")
        # no instructions given: the system text is the tool catalog alone
        assert [m["role"] for m in request["messages"]] == ["system", "user"]
        assert request["messages"][0]["content"].startswith("Assistant can use these tools:\n")


async def test_an_unknown_style_is_rejected_naming_the_parameter(client):
    with pytest.raises(RpcError) as info:
        await create(client, "inn", model={"type": "scripted", "style": "telepathy"})
    assert info.value.code == -32602 and "model.style" in info.value.message


async def test_error_steps_fail_an_envelope_turn_like_a_native_one(client):
    await create(client, "inn", {"error": "refusal"})
    with pytest.raises(RpcError) as info:
        await respond(client, "inn", "Hi.")
    assert info.value.data["code"] == "refusal"

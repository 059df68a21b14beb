"""Arguments coerced against the tool's schema (android-design §2.4–2.5), and the one repair per
step (§1.11–1.12): what it quotes, and what happens when the answer stays invalid."""

from __future__ import annotations

import json
from typing import Any

import pytest
from envelope_support import (
    TAKE_ORDER,
    calls,
    create,
    kinds,
    made_calls,
    raw,
    repairs,
    requests_of,
    respond,
    streamed,
    user_text,
)

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

ALARM = {
    "name": "sound_alarm",
    "description": "Ring the town bell.",
    "parameters": {
        "type": "object",
        "properties": {
            "level": {"type": "string", "enum": ["raise_alarm", "stand_down"]},
            "gates": {"type": "array", "items": {"type": "string"}},
            "note": {"type": "string"},
        },
        "required": ["level"],
    },
}
MARKER = "Your previous answer was invalid: "
TOO_MANY = "the arguments for take_order are invalid: $.quantity: must be at most 10; got 12"
TOO_MANY_ANSWER = '{"action": "take_order", "arguments": {"item": "stew", "quantity": 12}}'
CHOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "choice": {"type": "string", "enum": ["haggle", "accept", "refuse"]},
    },
    "required": ["reasoning", "choice"],
}

COERCIONS = {
    "numbers from strings": (
        TAKE_ORDER,
        {"action": "take_order", "arguments": {"item": "stew", "quantity": " 2 "}},
        {"item": "stew", "quantity": 2},
    ),
    "enum values ignoring case": (
        TAKE_ORDER,
        {"action": "take_order", "arguments": {"item": "Stew", "quantity": 2}},
        {"item": "stew", "quantity": 2},
    ),
    "enum values ignoring separators": (
        ALARM,
        {"action": "sound_alarm", "arguments": {"level": "Raise Alarm"}},
        {"level": "raise_alarm"},
    ),
    "a single value wrapped into an array": (
        ALARM,
        {"action": "sound_alarm", "arguments": {"level": "stand_down", "gates": "north"}},
        {"level": "stand_down", "gates": ["north"]},
    ),
    "near-miss keys renamed": (
        TAKE_ORDER,
        {"action": "take_order", "arguments": {"Item": "ale", "QUANTITY": 1}},
        {"item": "ale", "quantity": 1},
    ),
    "undeclared keys dropped once the required ones are there": (
        TAKE_ORDER,
        {"action": "take_order", "arguments": {"item": "ale", "quantity": 1, "mood": "glum"}},
        {"item": "ale", "quantity": 1},
    ),
    "null for an optional property dropped": (
        ALARM,
        {"action": "sound_alarm", "arguments": {"level": "stand_down", "note": None}},
        {"level": "stand_down"},
    ),
}


@pytest.mark.parametrize("tool, answer, arguments", COERCIONS.values(), ids=COERCIONS.keys())
async def test_near_miss_arguments_are_coerced_without_a_repair(client, tool, answer, arguments):
    await create(client, "inn", raw(json.dumps(answer)), {"text": "Done."}, tools=[tool])
    result = await respond(client, "inn", "Go ahead.")
    assert made_calls(result) == [(tool["name"], arguments)]
    assert not any(repairs(result))


async def test_coerced_arguments_come_in_schema_order(client):
    answer = '{"action": "take_order", "arguments": {"quantity": 1, "item": "ale"}}'
    await create(client, "inn", raw(answer), {"text": "Done."})
    result = await respond(client, "inn", "An ale.")
    assert list(result["toolCalls"][0]["call"]["arguments"]) == ["item", "quantity"]


# ---- the repair --------------------------------------------------------------------------------


async def test_an_invalid_call_is_repaired_once_and_the_repaired_call_runs(client):
    valid = '{"action": "take_order", "arguments": {"item": "stew", "quantity": 2}}'
    await create(client, "inn", raw(TOO_MANY_ANSWER), raw(valid), {"text": "Two stews."})
    result = await respond(client, "inn", "Twelve stews!")
    assert made_calls(result) == [("take_order", {"item": "stew", "quantity": 2})]
    assert kinds(result) == ["decide", "decide", "decide", "respond"]
    assert repairs(result) == [False, True, False, False]
    repair = user_text((await requests_of(client, "inn"))[1])
    assert f"\n{MARKER}{TOO_MANY}.\nPrevious answer: {TOO_MANY_ANSWER}\n" in repair


async def test_a_call_still_invalid_after_the_repair_is_recorded_as_not_made(client):
    await create(client, "inn", raw(TOO_MANY_ANSWER), raw(TOO_MANY_ANSWER), {"text": "Sorry."})
    result, events = await streamed(client, "inn", "Twelve stews!")
    (record,) = result["toolCalls"]
    assert record["call"]["arguments"] == {"item": "stew", "quantity": 12}
    assert record["isError"] is True
    assert record["output"] == f"The call was not made: {TOO_MANY}."
    assert client.recorder.tool_calls == []  # never sent to the engine
    types = [e["type"] for e in events]
    assert "toolCallStarted" not in types and "toolCallCompleted" in types
    assert kinds(result) == ["decide", "decide", "respond"]
    reply = user_text((await requests_of(client, "inn"))[-1])
    assert f"→ Error: The call was not made: {TOO_MANY}.]" in reply


async def test_an_unknown_action_is_repaired_with_the_actions_on_offer(client):
    await create(client, "inn", raw('{"action": "dance"}'), raw("check_menu"), {"text": "Ok."})
    result = await respond(client, "inn", "Dance for me.")
    assert made_calls(result) == [("check_menu", {})]
    repair = user_text((await requests_of(client, "inn"))[1])
    expected = '"dance" is not an available action; use one of: take_order, check_menu, respond.'
    assert MARKER + expected in repair


@pytest.mark.parametrize(
    "answer, problem",
    [
        ("I think I will just chat.", "the answer was not a JSON object."),
        ('{"item": "stew", "amount": 2}', 'the JSON object has no "action".'),
    ],
)
async def test_an_unusable_answer_is_repaired_quoting_the_problem(client, answer, problem):
    await create(client, "inn", raw(answer), raw("respond"), {"text": "Hello!"})
    result = await respond(client, "inn", "Hi.")
    assert result["toolCalls"] == []
    assert repairs(result) == [False, True, False]
    assert MARKER + problem in user_text((await requests_of(client, "inn"))[1])


async def test_an_envelope_unusable_after_the_repair_ends_the_loop_without_a_record(client):
    await create(client, "inn", raw("hmm"), raw("hmm?"), {"text": "Welcome."})
    result = await respond(client, "inn", "Hi.")
    assert result["toolCalls"] == []
    assert kinds(result) == ["decide", "decide", "respond"]
    assert result["text"] == "Welcome."


async def test_the_repair_echo_is_collapsed_and_cut(client):
    long_answer = "words   and\n\nmore " * 40
    await create(client, "inn", raw(long_answer), raw("respond"), {"text": "Hi."})
    await respond(client, "inn", "Hi.")
    repair = user_text((await requests_of(client, "inn"))[1])
    echo = repair.split("Previous answer: ", 1)[1].split("\n", 1)[0]
    assert echo == " ".join(long_answer.split())[:240] + "…"


async def test_a_toolarguments_answer_without_json_is_recorded_for_the_forced_tool(client):
    await create(
        client,
        "inn",
        raw("stew please"),
        raw("two stews"),
        {"text": "Hm."},
        options={"toolChoice": {"tool": "take_order"}},
    )
    result = await respond(client, "inn", "Food!")
    assert kinds(result) == ["toolArguments", "toolArguments", "respond"]
    (record,) = result["toolCalls"]
    assert record["call"]["arguments"] == {}
    assert record["output"] == "The call was not made: the answer was not a JSON object."


async def test_required_rejects_respond_on_the_first_step_and_says_so(client):
    await create(
        client,
        "inn",
        raw("respond"),
        calls(("check_menu", {})),
        {"text": "Menu."},
        options={"toolChoice": "required"},
    )
    result = await respond(client, "inn", "Hi.")
    assert made_calls(result) == [("check_menu", {})]
    problem = (
        '"respond" is not allowed now; you must call one of the tools: take_order, check_menu.'
    )
    assert MARKER + problem in user_text((await requests_of(client, "inn"))[1])


# ---- structured answers ------------------------------------------------------------------------


async def structured_turn(client, *steps: dict[str, Any]) -> Any:
    await create(client, "merchant", *steps, tools=[])
    return await respond(client, "merchant", "Ten gold for the sword?", schema=CHOICE_SCHEMA)


async def test_a_structured_answer_is_coerced_ordered_and_kept(client):
    answer = "```json\n{'choice': 'Haggle', 'reasoning': 'Too dear',}\n```"
    result = await structured_turn(client, raw(answer))
    assert result["structured"] == {"reasoning": "Too dear", "choice": "haggle"}
    assert result["text"] == '{"reasoning":"Too dear","choice":"haggle"}'
    assert kinds(result) == ["structured"]


async def test_a_structured_answer_is_repaired_once(client):
    result = await structured_turn(
        client, raw('{"choice": "steal"}'), {"json": {"reasoning": "Fair", "choice": "accept"}}
    )
    assert result["structured"] == {"reasoning": "Fair", "choice": "accept"}
    assert repairs(result) == [False, True]
    repair = user_text((await requests_of(client, "merchant"))[1])
    assert MARKER + "the JSON does not match the required form: " in repair


async def test_a_structured_answer_still_invalid_after_the_repair_fails_generation(client):
    with pytest.raises(RpcError) as info:
        await structured_turn(client, raw("No."), raw('{"choice": "steal"}'))
    assert info.value.code == -32012
    assert info.value.data["code"] == "generation_failed"
    assert "after a repair attempt" in info.value.message
    sessions = (await client.request("session/list"))["sessions"]
    assert sessions[0]["entries"] == 0  # a failed turn leaves no trace

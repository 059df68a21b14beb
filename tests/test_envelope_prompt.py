"""What a text-only model is shown (android-design §3–§4): a byte-stable system text, the
conversation as labelled lines, the task last, trimming to the input budget, per-step sampling,
and the schemas sent when the backend constrains decoding."""

from __future__ import annotations

import jsonschema
import pytest
from envelope_support import (
    TAKE_ORDER,
    calls,
    create,
    raw,
    requests_of,
    respond,
    scripted,
    system_texts,
    user_text,
)

pytestmark = pytest.mark.anyio

INSTRUCTIONS = "You are Mira, who keeps the Sleepy Fox inn."
STEW = ("take_order", {"item": "stew", "quantity": 1})
MENU_CALL = ("check_menu", {})
CHOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "choice": {"type": "string", "enum": ["haggle", "accept", "refuse"]},
    },
    "required": ["reasoning", "choice"],
}
SCRIPTED_CONTEXT = 8192
"""The scripted model's context size, from which a test's reserve leaves a small budget."""


# ---- layout ------------------------------------------------------------------------------------


async def test_the_system_text_is_byte_identical_across_steps_and_turns(client):
    await create(
        client,
        "inn",
        calls(MENU_CALL),
        {"text": "Stew."},
        raw("not json"),
        raw("respond"),
        {"text": "Bye."},
        instructions=INSTRUCTIONS,
    )
    await respond(client, "inn", "What's cooking?")
    await respond(client, "inn", "Thanks, goodbye.")
    seen = [system_texts(r) for r in await requests_of(client, "inn")]
    assert len(seen) == 6  # two decides and a reply, then a decide, its repair and a reply
    assert all(s == seen[0] for s in seen)
    assert seen[0][0].startswith(INSTRUCTIONS + "\n\nAssistant can use these tools:\n")


async def test_the_system_text_changes_only_with_a_set_call(client):
    await create(
        client,
        "inn",
        *[{"text": "Ok."}] * 4,
        instructions=INSTRUCTIONS,
        options={"toolChoice": "none"},
    )
    await respond(client, "inn", "One.")
    await respond(client, "inn", "Two.")
    await client.request("session/setContextNote", {"session": "inn", "note": "It rains."})
    await respond(client, "inn", "Three.")
    await client.request("session/setTools", {"session": "inn", "tools": [TAKE_ORDER]})
    await respond(client, "inn", "Four.")
    one, two, three, four = (system_texts(r)[0] for r in await requests_of(client, "inn"))
    assert one == two
    assert three == two.replace(INSTRUCTIONS, INSTRUCTIONS + "\n\nIt rains.")
    assert "- check_menu:" in three and "- check_menu:" not in four and "- take_order:" in four


async def test_the_tool_catalog_is_in_the_system_text_and_the_task_names_the_offer(client):
    await create(client, "inn", calls(STEW), {"text": "Ok."}, instructions=INSTRUCTIONS)
    await respond(client, "inn", "A stew, please.")
    decide = (await requests_of(client, "inn"))[0]
    system = system_texts(decide)[0]
    assert (
        '- take_order: Place an order for the guest. Arguments: {"item": one of "ale", "stew", '
        '"bread" (menu item), "quantity": integer 1-10}'
    ) in system
    assert "- check_menu: List what the kitchen has today. Arguments: {}" in system
    assert "Use a tool only if User's last message needs its information" in system
    text = user_text(decide)
    # the task stays short (tool names, the message, the question): the rules are cached above
    assert "Arguments:" not in text and "Use a tool only if" not in text
    assert text.index("User: A stew, please.") < text.index(
        "Tools Assistant can use now: take_order, check_menu."
    )
    assert text.endswith(
        'like {"action": "take_order", "arguments": {"item": …, "quantity": …}} '
        'or {"action": "respond", "arguments": {}}.'
    )


async def test_a_plain_first_request_is_sent_as_the_prompt_alone(client):
    await create(client, "inn", {"text": "Evening!"}, tools=[], instructions=INSTRUCTIONS)
    await respond(client, "inn", "  Good evening.  ")
    (request,) = await requests_of(client, "inn")
    assert request["kind"] == "respond"
    assert user_text(request) == "Good evening."


async def test_a_plain_structured_request_is_the_prompt_then_the_keyed_task(client):
    await create(client, "m", {"json": {"reasoning": "Fair", "choice": "accept"}}, tools=[])
    await respond(client, "m", "Ten gold?", schema=CHOICE_SCHEMA)
    (request,) = await requests_of(client, "m")
    assert user_text(request) == (
        "Ten gold?\n\nAnswer with one JSON object with these keys:\n"
        '- "reasoning": string\n'
        '- "choice": one of "haggle", "accept", "refuse"\n'
        "Answer with the JSON object only."
    )


@pytest.mark.parametrize("labels", [("Guest", "Mira"), ("  Guest ", "\tMira\n")], ids=str)
async def test_history_is_shown_as_lines_with_the_sessions_labels_trimmed(client, labels):
    user, assistant = labels
    await create(
        client,
        "inn",
        calls(MENU_CALL),
        {"text": "Stew tonight."},
        raw("respond"),
        {"text": "3."},
        options={"userLabel": user, "assistantLabel": assistant},
    )
    await respond(client, "inn", "What's cooking?")
    await respond(client, "inn", "How much?")
    later = user_text((await requests_of(client, "inn"))[-1])
    assert later.startswith(
        "Conversation:\n"
        "Guest: What's cooking?\n"
        '[check_menu → {"stew":3,"ale":2}]\n'
        "Mira: Stew tonight.\n"
        "Guest: How much?\n\n"
        "Write Mira's reply to Guest's last message."
    )


async def test_structured_replies_in_history_are_shown_as_key_value_pairs(client):
    await create(
        client,
        "m",
        {"json": {"reasoning": "Fair", "choice": "accept"}},
        {"text": "Deal."},
        tools=[],
    )
    await respond(client, "m", "Ten gold?", schema=CHOICE_SCHEMA)
    await respond(client, "m", "Deal?")
    assert "Assistant: reasoning: Fair; choice: accept\n" in user_text(
        (await requests_of(client, "m"))[-1]
    )


async def test_decide_steps_sample_greedily_and_replies_use_the_sessions_sampling(client):
    await create(
        client,
        "inn",
        calls(MENU_CALL),
        {"text": "Ok."},
        options={"temperature": 0.7, "maxResponseTokens": 300},
    )
    await respond(client, "inn", "Menu?")
    decide, _, reply = await requests_of(client, "inn")
    assert decide["sampling"]["temperature"] == 0.0 and decide["sampling"]["max_tokens"] == 256
    assert reply["sampling"]["temperature"] == 0.7 and reply["sampling"]["max_tokens"] == 300


async def test_the_turn_snapshot_carries_the_prompt_and_this_turns_outputs(client):
    await create(client, "inn", calls(MENU_CALL), {"template": "{prompt} / {toolOutput}"})
    result = await respond(client, "inn", "Menu?")
    assert result["text"] == 'Menu? / {"stew":3,"ale":2}'
    reply = (await requests_of(client, "inn"))[-1]
    assert reply["turn"] == {"prompt": "Menu?", "tool_outputs": ['{"stew":3,"ale":2}']}


# ---- trimming ----------------------------------------------------------------------------------


async def trimmed_session(client, **options) -> list[dict]:
    """Three long turns (about 80 tokens each) in a budget of 150 tokens, then a short one."""
    long = "word " * 60
    await create(
        client,
        "inn",
        *[{"text": "Yes."}] * 4,
        tools=[],
        options={"reservedResponseTokens": SCRIPTED_CONTEXT - 150, **options},
    )
    for n in range(3):
        await respond(client, "inn", f"Turn {n}: {long}")
    return (await respond(client, "inn", "Last."))["steps"]


async def test_the_oldest_turns_are_trimmed_to_fit_and_reported(client):
    steps = await trimmed_session(client)
    assert steps[0]["trimmedEntries"] == 4  # two turns of prompt + response
    text = user_text((await requests_of(client, "inn"))[-1])
    assert "Turn 0" not in text and "Turn 1" not in text and "Turn 2" in text
    sessions = (await client.request("session/list"))["sessions"]
    assert sessions[0]["entries"] == 8  # the transcript itself keeps everything


async def test_trimming_can_be_turned_off(client):
    steps = await trimmed_session(client, trimHistory=False)
    assert steps[0]["trimmedEntries"] == 0
    assert "Turn 0" in user_text((await requests_of(client, "inn"))[-1])


async def test_small_conversations_are_not_trimmed(client):
    await create(client, "inn", {"text": "Yes."}, {"text": "Yes."}, tools=[])
    await respond(client, "inn", "One.")
    steps = (await respond(client, "inn", "Two."))["steps"]
    assert steps[0]["trimmedEntries"] == 0


# ---- constrained decoding ----------------------------------------------------------------------


def constrained(*steps):
    return scripted(*steps, constrained=True)


async def test_without_constrained_decoding_no_schema_is_sent(client):
    await create(client, "inn", calls(STEW), {"text": "Ok."})
    await respond(client, "inn", "Stew.")
    assert all(r["schema"] is None for r in await requests_of(client, "inn"))


async def test_a_constrained_decide_step_sends_one_branch_per_action(client):
    await create(client, "inn", model=constrained(calls(STEW), {"text": "Ok."}))
    result = await respond(client, "inn", "Stew.")
    assert not any(s["isRepair"] for s in result["steps"])
    schema = (await requests_of(client, "inn"))[0]["schema"]
    branches = schema["anyOf"]
    actions = [b["properties"]["action"]["enum"] for b in branches]
    assert actions == [["take_order"], ["check_menu"], ["respond"]]
    item = branches[0]["properties"]["arguments"]["properties"]["item"]
    assert item["enum"] == ["ale", "stew", "bread"]
    good = {"action": "take_order", "arguments": {"item": "stew", "quantity": 2}}
    jsonschema.validate(good, schema)
    jsonschema.validate({"action": "respond", "arguments": {}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"action": "take_order", "arguments": {"item": "soup"}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"action": "dance", "arguments": {}}, schema)


async def test_a_required_constrained_decide_step_has_no_respond_branch(client):
    await create(
        client,
        "inn",
        model=constrained(calls(MENU_CALL), {"text": "Ok."}),
        options={"toolChoice": "required"},
    )
    await respond(client, "inn", "Hi.")
    first, second, _ = await requests_of(client, "inn")
    assert [b["properties"]["action"]["enum"] for b in first["schema"]["anyOf"]] == [
        ["take_order"],
        ["check_menu"],
    ]
    assert len(second["schema"]["anyOf"]) == 3


async def test_tool_definitions_are_hoisted_so_the_decide_schema_resolves(client):
    tool = {
        "name": "give",
        "description": "Give an item.",
        "parameters": {
            "type": "object",
            "properties": {"item": {"$ref": "#/$defs/Item"}},
            "required": ["item"],
            "$defs": {
                "Item": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
                    "required": ["name", "count"],
                }
            },
        },
    }
    give = ("give", {"item": {"name": "key", "count": 1}})
    await create(client, "inn", tools=[tool], model=constrained(calls(give), {"text": "Here."}))
    result = await respond(client, "inn", "The key?")
    assert result["toolCalls"][0]["call"]["arguments"] == give[1]
    schema = (await requests_of(client, "inn"))[0]["schema"]
    assert schema["$defs"]
    jsonschema.validate({"action": "give", "arguments": give[1]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"action": "give", "arguments": {"item": {"name": "key"}}}, schema)


async def test_constrained_arguments_and_structured_steps_send_their_own_schemas(client):
    await create(
        client,
        "inn",
        model=constrained(calls(STEW), {"json": {"reasoning": "r", "choice": "accept"}}),
        options={"toolChoice": {"tool": "take_order"}},
    )
    result = await respond(client, "inn", "Stew.", schema=CHOICE_SCHEMA)
    assert not any(s["isRepair"] for s in result["steps"])
    arguments, decide, structured = await requests_of(client, "inn")
    assert arguments["kind"] == "toolArguments"
    assert (
        arguments["schema"]["properties"]["item"]["enum"]
        == TAKE_ORDER["parameters"]["properties"]["item"]["enum"]
    )
    assert decide["kind"] == "decide" and "anyOf" in decide["schema"]
    assert structured["kind"] == "structured"
    assert structured["schema"]["properties"]["choice"]["enum"] == ["haggle", "accept", "refuse"]

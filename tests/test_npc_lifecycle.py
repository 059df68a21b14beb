"""npc/bark, npc/state, npc/restore, npc/update, npc/reset, npc/cancel, npc/delete and
background compaction."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

GORM = {
    "name": "Gorm",
    "role": "the village blacksmith",
    "personality": "Gruff but fair.",
    "speakingStyle": "Short, blunt sentences.",
}
CHECK_INVENTORY = {
    "name": "check_inventory",
    "description": "Look up stock and price of an item.",
    "parameters": {
        "type": "object",
        "properties": {"item": {"type": "string"}},
        "required": ["item"],
    },
}
GUARDRAIL = {"error": "guardrail_violation"}
STATE_KEYS = ["version", "persona", "memory", "transcript", "npc", "options", "tools", "world"]
PERSONA_KEYS = [
    "name",
    "role",
    "personality",
    "speakingStyle",
    "backstory",
    "goals",
    "secrets",
    "knowledge",
    "defaultEmotion",
    "maxSentences",
]
EMOTIONS = [
    "neutral", "happy", "sad", "angry", "afraid", "surprised", "suspicious", "amused",
    "disgusted", "excited", "curious", "confused", "worried", "grateful", "annoyed", "proud",
]  # fmt: skip
DEFAULT_OPTIONS = {
    "toolChoice": "explicit",
    "maxToolRounds": 2,
    "maxToolCalls": 6,
    "worldReadable": [""],
    "worldWritable": [],
    "worldContextPaths": [],
    "memoryTools": [],
    "maxFacts": 12,
    "maxRelationshipChange": 10,
    "secretsUnlockAtRelationship": 50,
    "replyFormat": "automatic",
    "emotions": EMOTIONS,
    "playerOptionCount": 3,
    "canEndConversation": True,
    "compactAfterTurns": 8,
    "keepRecentTurns": 2,
    "fallbackOnGuardrail": True,
    "fallbackLines": [],
    "barkMaximumTokens": 48,
    "toolTimeoutSeconds": 120,
}


def reply(
    line: str,
    emotion: str = "neutral",
    options: tuple[str, ...] = ("Buy one.", "Goodbye.", "Tell me more."),
    **extra: Any,
) -> dict[str, Any]:
    return {
        "json": {
            "emotion": emotion,
            "line": line,
            "player_options": list(options),
            "ends_conversation": False,
        },
        **extra,
    }


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


async def create(client, *steps: dict[str, Any], npc: str = "gorm", **params: Any) -> dict:
    params.setdefault("persona", GORM)
    return await client.request("npc/create", {"npc": npc, "model": scripted(*steps), **params})


async def talk(client, line: str = "Hello", npc: str = "gorm", **params: Any) -> dict[str, Any]:
    return await client.request("npc/talk", {"npc": npc, "line": line, **params})


async def entry(client, npc: str = "gorm") -> dict[str, Any]:
    npcs = (await client.request("npc/list"))["npcs"]
    return next(n for n in npcs if n["npc"] == npc)


async def state_of(client, npc: str = "gorm", **params: Any) -> dict[str, Any]:
    return (await client.request("npc/state", {"npc": npc, **params}))["state"]


def is_response_to(request_id: Any):
    return lambda m: m.get("id") == request_id and "method" not in m


def index_of(client, predicate) -> int:
    return next(i for i, m in enumerate(client.recorder.received) if predicate(m))


def replying(result: dict[str, Any]):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return result

    return handler


# ---- bark ------------------------------------------------------------------------------------


async def test_bark_answers_exactly_the_npc_and_line_and_leaves_turn_count(client):
    with anyio.fail_after(5):
        await create(client, {"text": "Rain again. Good for quenching."})
        bark = await client.request("npc/bark", {"npc": "gorm", "situation": "It starts to rain."})
        listed = await entry(client)
    assert bark == {"npc": "gorm", "line": "Rain again. Good for quenching."}
    assert list(bark) == ["npc", "line"]
    assert listed["turnCount"] == 0


async def test_bark_consumes_one_scripted_step(client):
    with anyio.fail_after(5):
        await create(client, {"text": "Rain again."}, reply("Welcome."))
        await client.request("npc/bark", {"npc": "gorm"})
        result = await talk(client)
    assert result["line"] == "Welcome."


async def test_bark_keeps_the_first_spoken_line(client):
    with anyio.fail_after(5):
        await create(
            client, {"text": '\n Gorm: "Fine steel, fresh from the forge!"\nAnd more text.'}
        )
        bark = await client.request(
            "npc/bark", {"npc": "gorm", "situation": "A customer walks past."}
        )
    assert bark["line"] == "Fine steel, fresh from the forge!"


async def test_bark_prompt_starts_with_the_situation(client):
    with anyio.fail_after(5):
        await create(client, {"template": "{prompt}"}, {"template": "{prompt}"})
        given = await client.request(
            "npc/bark", {"npc": "gorm", "situation": " A customer walks past the stall. "}
        )
        default = await client.request("npc/bark", {"npc": "gorm"})
    assert given["line"] == "Situation: A customer walks past the stall."
    assert default["line"] == "Situation: An ordinary moment."


async def test_bark_errors_pass_through(client):
    with anyio.fail_after(5):
        await create(client, GUARDRAIL, npc="blocked")
        response = await client.call("npc/bark", {"npc": "blocked", "situation": "A fight."})
    assert response["error"]["code"] == -32002
    assert response["error"]["data"]["code"] == "guardrail_violation"


async def test_an_empty_bark_is_generation_failed(client):
    with anyio.fail_after(5):
        await create(client, {"text": "  \n "}, {"text": " "})
        response = await client.call("npc/bark", {"npc": "gorm"})
    assert response["error"]["code"] == -32012
    assert response["error"]["message"] == "The model produced an empty bark."


async def test_bark_on_a_missing_npc_is_npc_not_found(client):
    with anyio.fail_after(5):
        response = await client.call("npc/bark", {"npc": "ghost"})
    assert response["error"]["code"] == -32050


# ---- state -----------------------------------------------------------------------------------


async def test_state_keys_are_in_order_with_version_1(client):
    with anyio.fail_after(5):
        await create(client)
        saved = await client.request("npc/state", {"npc": "gorm"})
    assert list(saved) == ["npc", "state"]
    assert saved["npc"] == "gorm"
    state = saved["state"]
    assert list(state) == STATE_KEYS
    assert state["version"] == 1
    assert state["npc"] == "gorm"
    assert isinstance(state["transcript"], dict)
    assert (state["tools"], state["world"]) == ([], None)


async def test_state_saves_every_persona_field_and_the_memory(client):
    with anyio.fail_after(5):
        await create(client, memory={"facts": ["Aria likes axes."], "relationship": 25})
        state = await state_of(client)
    assert list(state["persona"]) == PERSONA_KEYS
    assert state["persona"] == {
        **GORM,
        "backstory": "",
        "goals": [],
        "secrets": [],
        "knowledge": [],
        "defaultEmotion": "neutral",
        "maxSentences": 2,
    }
    assert state["memory"] == {"facts": ["Aria likes axes."], "relationship": 25}


async def test_state_memory_has_the_summary_when_there_is_one(client):
    with anyio.fail_after(5):
        await create(client, memory={"facts": [], "relationship": 0, "summary": "They met."})
        state = await state_of(client)
    assert state["memory"] == {"facts": [], "relationship": 0, "summary": "They met."}


async def test_state_options_have_every_default(client):
    with anyio.fail_after(5):
        await create(client)
        state = await state_of(client)
    assert state["options"] == DEFAULT_OPTIONS
    assert list(state["options"]) == list(DEFAULT_OPTIONS)


async def test_state_options_hold_the_given_values(client):
    with anyio.fail_after(5):
        await create(
            client,
            options={
                "memoryTools": ["rememberFact"],
                "playerOptionCount": 2,
                "toolTimeoutSeconds": 30,
            },
        )
        options = (await state_of(client))["options"]
    assert options["memoryTools"] == ["rememberFact"]
    assert options["playerOptionCount"] == 2
    assert options["toolTimeoutSeconds"] == 30
    assert options["secretsUnlockAtRelationship"] == 50


async def test_an_unset_secrets_threshold_is_saved_as_null(client):
    with anyio.fail_after(5):
        await create(client, options={"secretsUnlockAtRelationship": None})
        options = (await state_of(client))["options"]
    assert options["secretsUnlockAtRelationship"] is None
    assert list(options)[-2:] == ["secretsUnlockAtRelationship", "toolTimeoutSeconds"]


async def test_state_saves_the_tools_exactly_as_sent_and_the_world(client):
    tool = {**CHECK_INVENTORY, "timeoutSeconds": 5}
    with anyio.fail_after(5):
        await client.request("world/create", {"world": "village"})
        await create(client, tools=[tool], world="village")
        state = await state_of(client)
    assert (state["tools"], state["world"]) == ([tool], "village")


async def test_settled_state_waits_for_the_earlier_turn(client):
    with anyio.fail_after(5):
        await create(client, reply("Hm.", delayMs=100))
        turn = await client.start("npc/talk", {"npc": "gorm", "line": "Hi"})
        saved = await client.start("npc/state", {"npc": "gorm"})
        await client.wait(saved)
    assert index_of(client, is_response_to(turn)) < index_of(client, is_response_to(saved))


async def test_unsettled_state_answers_at_once_without_the_running_turn(client):
    with anyio.fail_after(5):
        await create(client, reply("Hm.", delayMs=300))
        turn = await client.start("npc/talk", {"npc": "gorm", "line": "Hi"})
        saved = await client.start("npc/state", {"npc": "gorm", "settle": False})
        unsettled = (await client.wait(saved))["result"]["state"]
        answered_first = not any(m.get("id") == turn for m in client.recorder.received)
        await client.wait(turn)
        settled = await state_of(client)
    assert answered_first
    assert unsettled["transcript"] != settled["transcript"]


# ---- restore ---------------------------------------------------------------------------------


async def saved_gorm(client) -> dict[str, Any]:
    """The reference's round trip setup: an NPC with a tool, memory tools and a world, one turn
    in, memory updated; returns the whole npc/state result and deletes the NPC."""
    await client.request(
        "world/create", {"world": "village", "state": {"player": {"name": "Aria"}}}
    )
    client.tool_handler = replying({"output": "3 in stock"})
    await create(
        client,
        reply("Welcome, Aria.", options=("Buy one.", "Goodbye.")),
        tools=[CHECK_INVENTORY],
        options={"memoryTools": ["rememberFact"], "playerOptionCount": 2, "toolTimeoutSeconds": 30},
        world="village",
    )
    await talk(client, "Hello!")
    await client.request(
        "npc/update", {"npc": "gorm", "memory": {"relationship": 25, "facts": ["Aria likes axes."]}}
    )
    saved = await client.request("npc/state", {"npc": "gorm"})
    await client.request("npc/delete", {"npc": "gorm"})
    return saved


async def test_state_before_restore_holds_the_reference_values(client):
    with anyio.fail_after(5):
        state = (await saved_gorm(client))["state"]
    assert state["version"] == 1
    assert state["npc"] == "gorm"
    assert state["persona"]["name"] == "Gorm"
    assert state["memory"] == {"facts": ["Aria likes axes."], "relationship": 25}
    assert state["tools"] == [CHECK_INVENTORY]
    assert state["world"] == "village"
    assert state["options"]["memoryTools"] == ["rememberFact"]
    assert state["options"]["playerOptionCount"] == 2
    assert state["options"]["toolTimeoutSeconds"] == 30
    assert state["options"]["secretsUnlockAtRelationship"] == 50


async def test_restore_rebuilds_the_npc_from_the_save_alone(client):
    with anyio.fail_after(5):
        state = (await saved_gorm(client))["state"]
        restored = await client.request(
            "npc/restore",
            {
                "state": state,
                "model": scripted(
                    {"toolCalls": [{"name": "check_inventory", "arguments": {"item": "axe"}}]},
                    reply("Axes, you said? Three.", options=("Buy one.", "Goodbye.")),
                ),
            },
        )
        listed = await entry(client)
        turn = await talk(client, "Axes?")
    assert restored == {
        "npc": "gorm",
        "tools": ["check_inventory", "read_world_state", "remember_fact"],
        "warnings": [],
    }
    assert list(restored) == ["npc", "tools", "warnings"]
    assert (listed["turnCount"], listed["relationship"], listed["world"]) == (1, 25, "village")
    assert listed["tools"] == ["check_inventory"]
    assert turn["line"] == "Axes, you said? Three."
    assert turn["toolCalls"][0]["output"] == "3 in stock"
    assert turn["relationship"] == 25


async def test_restore_accepts_the_whole_state_result(client):
    with anyio.fail_after(5):
        saved = await saved_gorm(client)
        restored = await client.request("npc/restore", {"state": saved, "model": "scripted"})
    assert restored["npc"] == "gorm"


async def test_restoring_into_a_taken_id_is_npc_exists(client):
    with anyio.fail_after(5):
        state = (await saved_gorm(client))["state"]
        await client.request("npc/restore", {"state": state, "model": "scripted"})
        response = await client.call("npc/restore", {"state": state, "model": "scripted"})
    assert response["error"]["code"] == -32051
    assert response["error"]["data"]["code"] == "npc_exists"


async def test_present_null_world_and_empty_tools_override_the_save(client):
    with anyio.fail_after(5):
        saved = await saved_gorm(client)
        copy = await client.request(
            "npc/restore",
            {"state": saved, "npc": "gorm2", "world": None, "tools": [], "model": "scripted"},
        )
        listed = await entry(client, "gorm2")
    assert copy["tools"] == ["remember_fact"]
    assert (listed["world"], listed["tools"]) == (None, [])


async def test_a_saved_world_that_is_gone_restores_without_it_and_warns(client):
    with anyio.fail_after(5):
        state = (await saved_gorm(client))["state"]
        await client.request("world/delete", {"world": "village"})
        orphan = await client.request(
            "npc/restore", {"state": state, "npc": "gorm3", "model": "scripted"}
        )
        listed = await entry(client, "gorm3")
    assert orphan["warnings"] == [
        "The saved world 'village' does not exist; the NPC was restored without a world. "
        "Pass 'world' to attach one."
    ]
    assert "read_world_state" not in orphan["tools"]
    assert listed["world"] is None


async def test_restore_warns_about_memory_and_unknown_keys(client):
    with anyio.fail_after(5):
        state = (await saved_gorm(client))["state"]
        restored = await client.request(
            "npc/restore", {"state": state, "memory": {}, "model": "scripted"}
        )
    assert restored["warnings"] == ["Unknown parameter 'memory' was ignored."]


@pytest.mark.parametrize(
    "state",
    [
        {"persona": {"role": "no name"}},
        {"version": 1, "persona": {"role": "no name"}},
        {"version": 1, "persona": {"name": ""}},
        "not a state",
    ],
)
async def test_an_invalid_state_is_invalid_params(client, state):
    with anyio.fail_after(5):
        response = await client.call("npc/restore", {"state": state})
        npcs = (await client.request("npc/list"))["npcs"]
    assert response["error"]["code"] == -32602
    assert npcs == []


async def test_an_empty_persona_name_in_the_state_names_the_state_path(client):
    with anyio.fail_after(5):
        response = await client.call(
            "npc/restore", {"state": {"version": 1, "persona": {"name": ""}}, "model": "scripted"}
        )
    assert response["error"]["message"] == "'state.persona.name' must not be empty."


async def test_restore_keeps_the_npc_state_round_trip(client):
    with anyio.fail_after(5):
        state = (await saved_gorm(client))["state"]
        await client.request("npc/restore", {"state": state, "model": "scripted"})
        again = await state_of(client)
    assert again == state


# ---- update ----------------------------------------------------------------------------------


async def test_a_pipelined_update_applies_between_talks(client):
    with anyio.fail_after(5):
        await create(client, reply("First."), {"text": "[angry] Second."})
        first = await client.start("npc/talk", {"npc": "gorm", "line": "One"})
        update = await client.start(
            "npc/update",
            {
                "npc": "gorm",
                "persona": {"personality": "Furious today.", "goals": ["Close early"]},
                "options": {"replyFormat": "text", "fallbackLines": ["Go away."]},
                "memory": {"relationship": -30},
            },
        )
        second = await client.start("npc/talk", {"npc": "gorm", "line": "Two"})
        state = await client.start("npc/state", {"npc": "gorm"})
        first_result = (await client.wait(first))["result"]
        update_result = (await client.wait(update))["result"]
        second_result = (await client.wait(second))["result"]
        saved = (await client.wait(state))["result"]["state"]
    assert first_result["line"] == "First."
    assert update_result == {"npc": "gorm", "warnings": []}
    assert (second_result["line"], second_result["emotion"]) == ("Second.", "angry")
    assert second_result["relationship"] == -30
    assert saved["persona"]["personality"] == "Furious today."
    assert saved["persona"]["goals"] == ["Close early"]
    assert (saved["persona"]["name"], saved["persona"]["role"]) == (
        "Gorm",
        "the village blacksmith",
    )
    assert saved["options"]["replyFormat"] == "text"
    assert saved["options"]["fallbackLines"] == ["Go away."]
    assert saved["memory"]["relationship"] == -30


async def test_tools_and_a_grounding_tool_change_together(client):
    with anyio.fail_after(5):
        await create(client)
        both = await client.request(
            "npc/update",
            {
                "npc": "gorm",
                "tools": [CHECK_INVENTORY],
                "options": {"groundingTool": "check_inventory"},
            },
        )
        listed = await entry(client)
    assert both == {"npc": "gorm", "warnings": []}
    assert listed["tools"] == ["check_inventory"]


async def test_an_invalid_update_changes_nothing(client):
    with anyio.fail_after(5):
        await create(client, tools=[CHECK_INVENTORY], options={"groundingTool": "check_inventory"})
        before = await state_of(client, settle=False)
        unknown_tool = await client.call(
            "npc/update",
            {
                "npc": "gorm",
                "tools": [],
                "options": {"groundingTool": "nope"},
                "memory": {"relationship": 40},
            },
        )
        bad_name = await client.call(
            "npc/update", {"npc": "gorm", "persona": {"name": ""}, "memory": {"relationship": 40}}
        )
        after = await state_of(client, settle=False)
    assert unknown_tool["error"]["code"] == -32602
    assert bad_name["error"]["code"] == -32602
    assert bad_name["error"]["message"] == "'persona.name' must not be empty."
    assert after == before


async def test_update_merge_patch_null_resets_a_field_to_its_default(client):
    with anyio.fail_after(5):
        await create(
            client,
            persona={**GORM, "backstory": "From the north."},
            options={"secretsUnlockAtRelationship": 10, "maxFacts": 3},
        )
        await client.request(
            "npc/update",
            {
                "npc": "gorm",
                "persona": {"backstory": None},
                "options": {"secretsUnlockAtRelationship": None, "maxFacts": None},
            },
        )
        state = await state_of(client)
    assert state["persona"]["backstory"] == ""
    assert state["persona"]["personality"] == "Gruff but fair."
    assert state["options"]["secretsUnlockAtRelationship"] == 50
    assert state["options"]["maxFacts"] == 12


async def test_update_null_tool_timeout_resets_to_the_engine_default(client):
    with anyio.fail_after(5):
        await create(client, options={"toolTimeoutSeconds": 30})
        await client.request("npc/update", {"npc": "gorm", "options": {"toolTimeoutSeconds": None}})
        options = (await state_of(client))["options"]
    assert options["toolTimeoutSeconds"] == 120


async def test_update_keeps_the_tool_timeout_unless_named(client):
    with anyio.fail_after(5):
        await create(client, options={"toolTimeoutSeconds": 30})
        await client.request("npc/update", {"npc": "gorm", "options": {"maxFacts": 4}})
        options = (await state_of(client))["options"]
    assert (options["toolTimeoutSeconds"], options["maxFacts"]) == (30, 4)


async def test_update_arrays_replace(client):
    with anyio.fail_after(5):
        await create(client, memory={"facts": ["A.", "B."], "relationship": 5})
        await client.request("npc/update", {"npc": "gorm", "memory": {"facts": ["C."]}})
        memory = (await state_of(client))["memory"]
    assert memory == {"facts": ["C."], "relationship": 5}


async def test_update_warns_about_unknown_keys(client):
    with anyio.fail_after(5):
        await create(client)
        result = await client.request("npc/update", {"npc": "gorm", "mood": "grim"})
    assert result == {"npc": "gorm", "warnings": ["Unknown parameter 'mood' was ignored."]}


async def test_update_of_a_missing_npc_is_npc_not_found(client):
    with anyio.fail_after(5):
        response = await client.call("npc/update", {"npc": "ghost"})
    assert response["error"]["code"] == -32050


# ---- reset -----------------------------------------------------------------------------------


async def test_reset_clears_the_conversation_and_keeps_memory(client):
    with anyio.fail_after(5):
        await create(client, reply("Hm."), memory={"facts": ["A."], "relationship": -30})
        await talk(client)
        reset = await client.request("npc/reset", {"npc": "gorm"})
        listed = await entry(client)
        memory = (await state_of(client))["memory"]
    assert reset == {"npc": "gorm"}
    assert (listed["turnCount"], listed["relationship"]) == (0, -30)
    assert memory == {"facts": ["A."], "relationship": -30}


async def test_reset_with_clear_memory_clears_the_memory_too(client):
    with anyio.fail_after(5):
        await create(
            client, reply("Hm."), memory={"facts": ["A."], "relationship": -30, "summary": "Met."}
        )
        await talk(client)
        await client.request("npc/reset", {"npc": "gorm", "clearMemory": True})
        listed = await entry(client)
        memory = (await state_of(client))["memory"]
    assert (listed["turnCount"], listed["relationship"]) == (0, 0)
    assert memory == {"facts": [], "relationship": 0}


async def test_reset_keeps_the_fallback_rotation(client):
    with anyio.fail_after(5):
        await create(client, GUARDRAIL, GUARDRAIL, options={"replyFormat": "structured"})
        first = await talk(client)
        await client.request("npc/reset", {"npc": "gorm", "clearMemory": True})
        second = await talk(client)
    assert (first["line"], second["line"]) == (
        "Let's talk about something else.",
        "I'd rather not speak of that.",
    )


# ---- cancel and delete -----------------------------------------------------------------------


async def test_cancel_stops_the_running_and_the_queued_turn(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [{"name": "check_inventory", "arguments": {"item": "shield"}}]},
            reply("Never mind."),
            tools=[CHECK_INVENTORY],
            options={"toolTimeoutSeconds": 0},
        )
        running = await client.start("npc/talk", {"npc": "gorm", "line": "Shields?"})
        queued = await client.start("npc/talk", {"npc": "gorm", "line": "And helmets?"})
        tool_call = await client.next_message(lambda m: m.get("method") == "tool/call")
        cancelled = await client.request("npc/cancel", {"npc": "gorm"})
        first = await client.wait(running)
        second = await client.wait(queued)
        cancel = await client.next_message(lambda m: m.get("method") == "tool/cancel")
        listed = await entry(client)
    assert cancelled == {"npc": "gorm", "cancelled": 2}
    for response in (first, second):
        assert response["error"]["code"] == -32009
        assert response["error"]["data"]["code"] == "cancelled"
    params = cancel["params"]
    assert (params["npc"], params["requestId"]) == ("gorm", running)
    assert (params["id"], params["callId"]) == (tool_call["id"], tool_call["params"]["call"]["id"])
    assert index_of(client, lambda m: m.get("method") == "tool/cancel") < index_of(
        client, is_response_to(running)
    )
    assert (listed["turnCount"], listed["busy"], listed["pendingOperations"]) == (0, False, 0)


async def test_cancel_with_nothing_running_cancels_nothing(client):
    with anyio.fail_after(5):
        await create(client)
        assert await client.request("npc/cancel", {"npc": "gorm"}) == {
            "npc": "gorm",
            "cancelled": 0,
        }


async def test_a_busy_npc_is_listed_busy(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [{"name": "check_inventory", "arguments": {"item": "shield"}}]},
            tools=[CHECK_INVENTORY],
        )
        await client.start("npc/talk", {"npc": "gorm", "line": "Shields?"})
        await client.start("npc/talk", {"npc": "gorm", "line": "Helmets?"})
        await client.next_message(lambda m: m.get("method") == "tool/call")
        listed = await entry(client)
        await client.request("npc/cancel", {"npc": "gorm"})
    assert (listed["busy"], listed["pendingOperations"]) == (True, 2)


async def test_the_npc_works_after_a_cancel(client):
    with anyio.fail_after(5):
        await create(client, reply("Slow.", delayMs=10000), reply("Back again."))
        running = await client.start("npc/talk", {"npc": "gorm", "line": "Hi"})
        await client.request("npc/cancel", {"npc": "gorm"})
        await client.wait(running)
        result = await talk(client, "Hi again")
    assert result["line"] == "Back again."


async def test_delete_cancels_the_running_turn_and_its_tool_call(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [{"name": "check_inventory", "arguments": {"item": "shield"}}]},
            tools=[CHECK_INVENTORY],
        )
        running = await client.start("npc/talk", {"npc": "gorm", "line": "Shields?"})
        tool_call = await client.next_message(lambda m: m.get("method") == "tool/call")
        deleted = await client.request("npc/delete", {"npc": "gorm"})
        response = await client.wait(running)
        cancel = await client.next_message(lambda m: m.get("method") == "tool/cancel")
    assert deleted == {"npc": "gorm", "deleted": True}
    assert response["error"]["code"] == -32009
    assert cancel["params"]["id"] == tool_call["id"]


# ---- compaction ------------------------------------------------------------------------------


async def test_compaction_folds_older_turns_into_the_summary(client):
    with anyio.fail_after(5):
        await create(
            client,
            reply("One."),
            reply("Two."),
            {"text": "Gorm met the player twice."},
            reply("Three."),
            options={"compactAfterTurns": 2, "keepRecentTurns": 1},
        )
        await talk(client, "A")
        await talk(client, "B")
        state = await state_of(client)
        listed = await entry(client)
        third = await talk(client, "C")
    assert state["memory"]["summary"] == "Gorm met the player twice."
    assert listed["turnCount"] == 1
    assert third["line"] == "Three."


async def test_compaction_does_not_run_before_the_threshold(client):
    with anyio.fail_after(5):
        await create(
            client,
            reply("One."),
            reply("Two."),
            options={"compactAfterTurns": 3, "keepRecentTurns": 1},
        )
        await talk(client, "A")
        second = await talk(client, "B")
        state = await state_of(client)
        listed = await entry(client)
    assert second["line"] == "Two."
    assert "summary" not in state["memory"]
    assert listed["turnCount"] == 2


async def test_compaction_prompt_folds_the_older_conversation(client):
    with anyio.fail_after(5):
        await create(
            client,
            reply("One."),
            reply("Two."),
            {"template": "{prompt}"},
            options={"compactAfterTurns": 2, "keepRecentTurns": 1},
        )
        await talk(client, "A")
        await talk(client, "B")
        summary = (await state_of(client))["memory"]["summary"]
    assert summary.startswith("Conversation to fold into the summary:\n")
    assert "Player: A" in summary
    assert "Player: B" not in summary


async def test_a_blocked_turn_does_not_count_toward_compaction(client):
    with anyio.fail_after(5):
        await create(
            client,
            reply("One."),
            GUARDRAIL,
            reply("Two."),
            options={"compactAfterTurns": 3, "keepRecentTurns": 1, "replyFormat": "structured"},
        )
        await talk(client, "A")
        blocked = await talk(client, "B")
        await talk(client, "C")
        listed = await entry(client)
    assert blocked["isFallback"] is True
    assert listed["turnCount"] == 2


async def test_compaction_can_be_disabled(client):
    with anyio.fail_after(5):
        await create(
            client,
            reply("One."),
            reply("Two."),
            reply("Three."),
            options={"compactAfterTurns": 0, "keepRecentTurns": 1},
        )
        lines = [(await talk(client, x))["line"] for x in "ABC"]
        listed = await entry(client)
    assert lines == ["One.", "Two.", "Three."]
    assert listed["turnCount"] == 3


async def test_errors_raise_rpc_error_for_bad_state_requests(client):
    with anyio.fail_after(5), pytest.raises(RpcError) as info:
        await client.request("npc/state", {"npc": "ghost"})
    assert info.value.code == -32050


async def test_invalid_saved_options_name_the_state_path(client):
    with anyio.fail_after(5):
        await create(client)
        state = await state_of(client)
        state["options"]["replyFormat"] = "json"
        response = await client.call(
            "npc/restore", {"state": state, "npc": "copy", "model": "scripted"}
        )
    assert response["error"]["code"] == -32602
    assert "'state.options.replyFormat'" in response["error"]["message"]


async def test_invalid_saved_tools_name_the_state_path(client):
    with anyio.fail_after(5):
        await create(client)
        state = await state_of(client)
        state["tools"] = [{"name": "bad name!"}]
        response = await client.call(
            "npc/restore", {"state": state, "npc": "copy", "model": "scripted"}
        )
    assert response["error"]["code"] == -32602
    assert "'state.tools[0].name'" in response["error"]["message"]


async def test_given_options_on_restore_replace_the_saved_ones(client):
    with anyio.fail_after(5):
        await create(client, options={"maxFacts": 3})
        state = await state_of(client)
        await client.request(
            "npc/restore",
            {"state": state, "npc": "copy", "options": {"maxFacts": 5}, "model": "scripted"},
        )
        options = (await state_of(client, "copy"))["options"]
    assert options["maxFacts"] == 5


async def test_a_null_persona_patch_is_absent(client):
    with anyio.fail_after(5):
        await create(client)
        result = await client.request("npc/update", {"npc": "gorm", "persona": None})
        persona = (await state_of(client))["persona"]
    assert result == {"npc": "gorm", "warnings": []}
    assert persona["name"] == "Gorm"

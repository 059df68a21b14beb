"""npc/talk: the dialogue turn, npc/event streaming, client tools, reply formats and fallbacks."""

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
RESULT_KEYS = [
    "npc",
    "line",
    "emotion",
    "playerOptions",
    "endsConversation",
    "toolCalls",
    "relationship",
    "isFallback",
    "usage",
]
ZERO_USAGE = {"inputTokens": 0, "cachedInputTokens": 0, "outputTokens": 0, "totalTokens": 0}
DEFAULT_FALLBACKS = [
    "Let's talk about something else.",
    "I'd rather not speak of that.",
    "Hmm. Ask me something else.",
]
GUARDRAIL = {"error": "guardrail_violation"}


def reply(
    line: str,
    emotion: str = "neutral",
    options: tuple[str, ...] = ("Buy one.", "Goodbye.", "Tell me more."),
    ends: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "json": {
            "emotion": emotion,
            "line": line,
            "player_options": list(options),
            "ends_conversation": ends,
        },
        **extra,
    }


def inventory(item: str = "iron sword", **extra: Any) -> dict[str, Any]:
    return {"toolCalls": [{"name": "check_inventory", "arguments": {"item": item}, **extra}]}


async def create(client, *steps: dict[str, Any], npc: str = "gorm", **params: Any) -> dict:
    params.setdefault("persona", GORM)
    return await client.request(
        "npc/create", {"npc": npc, "model": {"type": "scripted", "steps": list(steps)}, **params}
    )


async def talk(client, line: str = "Hello", npc: str = "gorm", **params: Any) -> dict[str, Any]:
    return await client.request("npc/talk", {"npc": npc, "line": line, **params})


async def turn_count(client, npc: str = "gorm") -> int:
    npcs = (await client.request("npc/list"))["npcs"]
    return next(n["turnCount"] for n in npcs if n["npc"] == npc)


def replying(result: dict[str, Any]):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return result

    return handler


def shown_line(events: list[dict[str, Any]]) -> str:
    shown = ""
    for event in events:
        if event["type"] == "lineDelta":
            shown += event["delta"]
        elif event["type"] == "lineReset":
            shown = event["line"]
    return shown


def index_of(client, predicate) -> int:
    return next(i for i, m in enumerate(client.recorder.received) if predicate(m))


def is_response_to(request_id: Any):
    return lambda m: m.get("id") == request_id and "method" not in m


def assert_usage(usage: dict[str, Any]) -> None:
    assert list(usage) == ["inputTokens", "cachedInputTokens", "outputTokens", "totalTokens"]
    assert all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in usage.values())
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


# ---- the result ------------------------------------------------------------------------------


async def test_talk_returns_a_dialogue_turn_with_keys_in_order(client):
    with anyio.fail_after(5):
        await create(client, reply("Three swords, lad. Forty-five gold.", emotion="proud"))
        result = await talk(client, "Got any swords?", context="The player just walked in.")
        count = await turn_count(client)
    assert list(result) == RESULT_KEYS
    assert {k: v for k, v in result.items() if k != "usage"} == {
        "npc": "gorm",
        "line": "Three swords, lad. Forty-five gold.",
        "emotion": "proud",
        "playerOptions": ["Buy one.", "Goodbye.", "Tell me more."],
        "endsConversation": False,
        "toolCalls": [],
        "relationship": 0,
        "isFallback": False,
    }
    assert_usage(result["usage"])
    assert count == 1


async def test_a_reply_with_fewer_player_options_than_the_count_is_accepted(client):
    """The reference fixture answers two options under the default count of 3 (NPCMethodTests)."""
    with anyio.fail_after(5):
        await create(client, reply("Hm.", options=("Buy one.", "Goodbye.")))
        result = await talk(client, "Swords?")
    assert result["playerOptions"] == ["Buy one.", "Goodbye."]


async def test_ends_conversation_is_reported(client):
    with anyio.fail_after(5):
        await create(client, reply("Off with you.", ends=True))
        result = await talk(client)
    assert result["endsConversation"] is True


async def test_unknown_keys_add_warnings_last(client):
    with anyio.fail_after(5):
        await create(client, reply("Hm."))
        result = await talk(client, mood="grim")
    assert list(result) == [*RESULT_KEYS, "warnings"]
    assert result["warnings"] == ["Unknown parameter 'mood' was ignored."]


async def test_a_missing_line_is_invalid(client):
    with anyio.fail_after(5):
        await create(client)
        response = await client.call("npc/talk", {"npc": "gorm"})
    assert response["error"]["code"] == -32602
    assert response["error"]["message"] == "Missing required parameter 'line'."


async def test_a_plain_text_step_for_a_structured_reply_names_the_shape_it_wants(client):
    with anyio.fail_after(5):
        await create(client, {"text": "Hello there."})
        response = await client.call("npc/talk", {"npc": "gorm", "line": "Hi"})
    assert response["error"]["data"] == {"code": "generation_failed"}
    message = response["error"]["message"]
    assert message.startswith("The model's answer is not valid JSON; the turn asks for")
    assert "'emotion', 'line', 'player_options'" in message and "'json' step" in message


async def test_talking_to_a_missing_npc_is_npc_not_found(client):
    with anyio.fail_after(5):
        response = await client.call("npc/talk", {"npc": "ghost", "line": "Boo"})
    assert response["error"]["code"] == -32050
    assert response["error"]["data"] == {"code": "npc_not_found", "npc": "ghost"}


async def test_each_turn_plays_the_next_step(client):
    with anyio.fail_after(5):
        await create(client, reply("One."), reply("Two."))
        first = await talk(client, "A")
        second = await talk(client, "B")
        count = await turn_count(client)
    assert (first["line"], second["line"], count) == ("One.", "Two.", 2)


# ---- streaming -------------------------------------------------------------------------------


async def test_streamed_events_precede_the_result_and_add_up_to_the_line(client):
    with anyio.fail_after(5):
        await create(client, reply("Steel is patient, lad.", emotion="amused"))
        request = await client.start("npc/talk", {"npc": "gorm", "line": "Wisdom?", "stream": True})
        response = await client.wait(request)
    notifications = [m for m in client.recorder.received if m.get("method") == "npc/event"]
    events = client.recorder.events_for(request)
    assert notifications
    assert all(set(n["params"]) == {"npc", "requestId", "event"} for n in notifications)
    assert all(n["params"]["npc"] == "gorm" for n in notifications)
    assert all(n["params"]["requestId"] == request for n in notifications)
    last_event = max(
        i for i, m in enumerate(client.recorder.received) if m.get("method") == "npc/event"
    )
    assert last_event < index_of(client, is_response_to(request))
    assert events[0] == {"type": "emotion", "emotion": "amused"}
    assert {e["type"] for e in events[1:]} <= {"lineDelta", "lineReset"}
    assert shown_line(events) == "Steel is patient, lad." == response["result"]["line"]


async def test_without_stream_there_are_no_events(client):
    with anyio.fail_after(5):
        await create(client, reply("Hm."), npc="quiet")
        request = await client.start("npc/talk", {"npc": "quiet", "line": "Hi"})
        await client.wait(request)
    assert not [m for m in client.recorder.received if m.get("method") == "npc/event"]


async def test_a_streamed_text_reply_sends_its_emotion_then_the_line(client):
    with anyio.fail_after(5):
        await create(
            client, {"text": "[happy] Welcome to the forge!"}, options={"replyFormat": "text"}
        )
        request = await client.start("npc/talk", {"npc": "gorm", "line": "Hi", "stream": True})
        response = await client.wait(request)
    events = client.recorder.events_for(request)
    assert events[0] == {"type": "emotion", "emotion": "happy"}
    assert [e["type"] for e in events[1:]] == ["lineDelta"] * (len(events) - 1)
    assert len(events) >= 2
    assert shown_line(events) == "Welcome to the forge!" == response["result"]["line"]


async def test_a_line_wrapped_in_quotes_streams_without_them_and_needs_no_reset(client):
    with anyio.fail_after(5):
        await create(
            client, {"text": '"Fine steel, friend."', "chunks": 3}, options={"replyFormat": "text"}
        )
        request = await client.start("npc/talk", {"npc": "gorm", "line": "Hi", "stream": True})
        response = await client.wait(request)
    events = client.recorder.events_for(request)
    lines = [e for e in events if e["type"] in ("lineDelta", "lineReset")]
    assert {e["type"] for e in lines} == {"lineDelta"}
    assert shown_line(events) == "Fine steel, friend." == response["result"]["line"]


async def test_a_streamed_unknown_tag_sends_the_default_emotion_at_the_end(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"text": "[sighs] Fine, then.", "chunks": 1},
            options={"replyFormat": "text"},
            persona={**GORM, "defaultEmotion": "annoyed"},
        )
        request = await client.start("npc/talk", {"npc": "gorm", "line": "Hi", "stream": True})
        response = await client.wait(request)
    events = client.recorder.events_for(request)
    assert [e for e in events if e["type"] == "emotion"] == [
        {"type": "emotion", "emotion": "annoyed"}
    ]
    assert response["result"]["emotion"] == "annoyed"
    assert shown_line(events) == "Fine, then." == response["result"]["line"]


async def test_a_streamed_fallback_sends_the_default_emotion_and_the_fallback_as_a_delta(client):
    with anyio.fail_after(5):
        await create(
            client,
            GUARDRAIL,
            options={"replyFormat": "structured", "fallbackLines": ["Not now, lad."]},
        )
        request = await client.start("npc/talk", {"npc": "gorm", "line": "War?", "stream": True})
        await client.wait(request)
    assert client.recorder.events_for(request) == [
        {"type": "emotion", "emotion": "neutral"},
        {"type": "lineDelta", "delta": "Not now, lad."},
    ]


async def test_a_streamed_automatic_retry_adds_up_to_the_retried_line(client):
    with anyio.fail_after(5):
        await create(client, GUARDRAIL, {"text": "[worried] Let's not speak of it."})
        request = await client.start("npc/talk", {"npc": "gorm", "line": "War?", "stream": True})
        response = await client.wait(request)
    events = client.recorder.events_for(request)
    assert {"type": "emotion", "emotion": "worried"} in events
    assert shown_line(events) == "Let's not speak of it." == response["result"]["line"]


# ---- client tools ----------------------------------------------------------------------------


async def grounded_gorm(client, *steps: dict[str, Any], **params: Any) -> None:
    await create(
        client,
        *steps,
        tools=[CHECK_INVENTORY],
        options={"groundingTool": "check_inventory"},
        **params,
    )


async def test_a_client_tool_round_trip(client):
    seen: list[dict[str, Any]] = []

    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        item = params["call"]["arguments"].get("item")
        return {"output": {"item": item, "stock": 3, "price_gold": 45}}

    client.tool_handler = handler
    with anyio.fail_after(5):
        created = await create(
            client,
            inventory(),
            reply("Three iron swords, forty-five gold each."),
            tools=[CHECK_INVENTORY],
            options={"groundingTool": "check_inventory"},
        )
        request = await client.start(
            "npc/talk", {"npc": "gorm", "line": "Iron swords?", "stream": True}
        )
        result = (await client.wait(request))["result"]
    assert created["tools"] == ["check_inventory"]
    assert result["line"] == "Three iron swords, forty-five gold each."
    (record,) = result["toolCalls"]
    assert list(record) == ["call", "output", "isError", "durationSeconds"]
    assert record["call"]["name"] == "check_inventory"
    assert record["call"]["arguments"] == {"item": "iron sword"}
    assert record["output"] == {"item": "iron sword", "stock": 3, "price_gold": 45}
    assert record["isError"] is False
    (params,) = seen
    assert set(params) == {"npc", "requestId", "call"}
    assert params["npc"] == "gorm"
    assert params["requestId"] == request
    assert params["call"]["id"] == record["call"]["id"]
    assert params["call"]["id"].startswith("call_")


async def test_tool_events_come_in_order_with_the_started_event_before_the_tool_call(client):
    client.tool_handler = replying({"output": "3 in stock"})
    with anyio.fail_after(5):
        await grounded_gorm(client, inventory(), reply("Three.", emotion="proud"))
        request = await client.start("npc/talk", {"npc": "gorm", "line": "Swords?", "stream": True})
        await client.wait(request)
    events = client.recorder.events_for(request)
    assert [e["type"] for e in events[:3]] == ["toolCallStarted", "toolCallCompleted", "emotion"]
    assert events[0]["execution"] == "client"
    assert events[0]["call"]["name"] == "check_inventory"
    assert events[1]["record"]["output"] == "3 in stock"
    assert events[1]["record"]["call"] == events[0]["call"]
    started = index_of(
        client,
        lambda m: (
            m.get("method") == "npc/event" and m["params"]["event"]["type"] == "toolCallStarted"
        ),
    )
    tool_call = index_of(client, lambda m: m.get("method") == "tool/call")
    assert started < tool_call < index_of(client, is_response_to(request))


async def test_a_scripted_call_id_becomes_the_call_id(client):
    client.tool_handler = replying({"output": "3 in stock"})
    with anyio.fail_after(5):
        await grounded_gorm(client, inventory(id="inv-1"), reply("Three."))
        result = await talk(client, "Swords?")
    assert client.recorder.tool_calls[0]["params"]["call"]["id"] == "inv-1"
    assert result["toolCalls"][0]["call"]["id"] == "inv-1"


async def test_a_json_rpc_error_reply_is_an_error_record(client):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        raise RpcError(-32000, "The shop is closed.")

    client.tool_handler = handler
    with anyio.fail_after(5):
        await create(
            client, inventory("axe"), reply("Shop's closed, lad."), tools=[CHECK_INVENTORY]
        )
        result = await talk(client, "Axes?")
    (record,) = result["toolCalls"]
    assert (record["isError"], record["output"]) == (True, "The shop is closed.")
    assert result["line"] == "Shop's closed, lad."


async def test_a_tool_timeout_sends_tool_cancel_with_the_npc(client):
    tool = {**CHECK_INVENTORY, "timeoutSeconds": 0.05}
    with anyio.fail_after(5):
        await create(client, inventory("bow"), reply("My ledger is slow today."), tools=[tool])
        request = await client.start("npc/talk", {"npc": "gorm", "line": "Bows?"})
        result = (await client.wait(request))["result"]
        cancel = await client.next_message(lambda m: m.get("method") == "tool/cancel")
    assert result["line"] == "My ledger is slow today."
    (record,) = result["toolCalls"]
    assert record["isError"] is True
    assert record["output"] == "Tool 'check_inventory' timed out after 50ms."
    (call,) = client.recorder.tool_calls
    params = cancel["params"]
    assert set(params) == {"npc", "requestId", "id", "callId", "reason"}
    assert params["npc"] == "gorm"
    assert params["requestId"] == request
    assert params["id"] == call["id"]
    assert params["callId"] == call["params"]["call"]["id"]
    assert params["reason"] == "Error: Tool 'check_inventory' timed out after 50ms."


async def test_the_npc_tool_timeout_option_applies(client):
    with anyio.fail_after(5):
        await create(
            client,
            inventory(),
            reply("Slow."),
            tools=[CHECK_INVENTORY],
            options={"toolTimeoutSeconds": 0.05},
        )
        result = await talk(client, "Swords?")
    assert result["toolCalls"][0]["isError"] is True


# ---- context and the prompt ------------------------------------------------------------------


async def echo_npc(client, steps: int = 1, **params: Any) -> None:
    """A text-format NPC whose line is the prompt it was given."""
    options = {"replyFormat": "text", **params.pop("options", {})}
    await create(client, *[{"template": "{prompt}"}] * steps, options=options, **params)


async def test_the_prompt_is_the_player_line(client):
    with anyio.fail_after(5):
        await echo_npc(client)
        result = await talk(client, "  Got any swords? ")
    assert result["line"] == "Player: Got any swords?"


async def test_a_blank_line_means_the_player_says_nothing(client):
    with anyio.fail_after(5):
        await echo_npc(client)
        result = await talk(client, " ")
    assert result["line"] == "Player: (The player says nothing.)"


async def test_context_is_a_situation_for_this_turn_only(client):
    with anyio.fail_after(5):
        await echo_npc(client, steps=2)
        first = await talk(client, "Hi", context="The player just paid 45 gold.")
        second = await talk(client, "Again")
    assert first["line"] == "Situation: The player just paid 45 gold.\nPlayer: Hi"
    assert second["line"] == "Player: Again"


async def test_json_context_is_compact_text(client):
    with anyio.fail_after(5):
        await echo_npc(client)
        result = await talk(client, "Hi", context={"gold": 45, "time": "night"})
    assert result["line"] == 'Situation: {"gold":45,"time":"night"}\nPlayer: Hi'


async def test_world_context_paths_add_the_game_state(client):
    with anyio.fail_after(5):
        await client.request(
            "world/create", {"world": "village", "state": {"player": {"name": "Aria", "gold": 60}}}
        )
        await echo_npc(client, world="village", options={"worldContextPaths": ["player.gold"]})
        result = await talk(client, "Hi")
    assert result["line"] == "Game state:\nplayer.gold: 60\nPlayer: Hi"


# ---- per-turn tool choice --------------------------------------------------------------------


async def test_a_per_turn_tool_the_npc_lacks_is_invalid_request(client):
    with anyio.fail_after(5):
        await create(client, reply("Hm."), tools=[CHECK_INVENTORY])
        response = await client.call(
            "npc/talk", {"npc": "gorm", "line": "hi", "toolChoice": {"tool": "nope"}}
        )
        count = await turn_count(client)
    assert response["error"]["code"] == -32011
    assert response["error"]["data"]["code"] == "invalid_request"
    assert response["error"]["message"] == "Tool 'nope' is not available to Gorm."
    assert count == 0


async def test_a_per_turn_tool_on_a_tool_less_npc_is_ignored(client):
    with anyio.fail_after(5):
        await create(client, reply("Hm."))
        result = await talk(client, "hi", toolChoice={"tool": "nope"})
    assert result["line"] == "Hm."


async def test_an_invalid_per_turn_tool_choice_is_invalid_params(client):
    with anyio.fail_after(5):
        await create(client, reply("Hm."))
        response = await client.call(
            "npc/talk", {"npc": "gorm", "line": "hi", "toolChoice": "sometimes"}
        )
    assert response["error"]["code"] == -32602


# ---- reply formats and fallbacks -------------------------------------------------------------


async def test_a_blocked_structured_turn_answers_a_fallback_line(client):
    with anyio.fail_after(5):
        await create(
            client,
            GUARDRAIL,
            options={"replyFormat": "structured", "fallbackLines": ["Not now, lad."]},
            persona={**GORM, "defaultEmotion": "suspicious"},
        )
        result = await talk(client, "Tell me about the war.")
        count = await turn_count(client)
    assert list(result) == RESULT_KEYS
    assert result == {
        "npc": "gorm",
        "line": "Not now, lad.",
        "emotion": "suspicious",
        "playerOptions": [],
        "endsConversation": False,
        "toolCalls": [],
        "relationship": 0,
        "isFallback": True,
        "usage": ZERO_USAGE,
    }
    assert count == 0


async def test_structured_never_retries(client):
    with anyio.fail_after(5):
        await create(client, GUARDRAIL, reply("Second."), options={"replyFormat": "structured"})
        blocked = await talk(client, "War?")
        after = await talk(client, "Hi")
    assert blocked["isFallback"] is True
    assert after["line"] == "Second."


async def test_text_format_parses_the_emotion_tag(client):
    with anyio.fail_after(5):
        await create(
            client, {"text": "[happy] Welcome to the forge!"}, options={"replyFormat": "text"}
        )
        result = await talk(client)
    assert (result["line"], result["emotion"]) == ("Welcome to the forge!", "happy")
    assert (result["playerOptions"], result["endsConversation"]) == ([], False)


async def test_text_format_never_retries(client):
    with anyio.fail_after(5):
        await create(client, GUARDRAIL, {"text": "[happy] Later."}, options={"replyFormat": "text"})
        blocked = await talk(client, "War?")
        after = await talk(client, "Hi")
    assert blocked["isFallback"] is True
    assert after["line"] == "Later."


async def test_automatic_retries_a_blocked_turn_once_as_text(client):
    with anyio.fail_after(5):
        await create(client, GUARDRAIL, {"text": "[worried] Let's not speak of it."})
        result = await talk(client, "Tell me about the war.")
        count = await turn_count(client)
    assert result["isFallback"] is False
    assert (result["line"], result["emotion"]) == ("Let's not speak of it.", "worried")
    assert (result["playerOptions"], result["endsConversation"]) == ([], False)
    assert count == 1


async def test_automatic_retries_a_refusal_too(client):
    with anyio.fail_after(5):
        await create(client, {"error": "refusal"}, {"text": "[sad] I won't."})
        result = await talk(client, "Tell me.")
    assert (result["line"], result["isFallback"]) == ("I won't.", False)


async def test_the_retry_keeps_the_tool_records_and_does_not_call_tools_again(client):
    client.tool_handler = replying({"output": "3 in stock"})
    with anyio.fail_after(5):
        await grounded_gorm(client, inventory(), GUARDRAIL, {"text": "[proud] Three, lad."})
        result = await talk(client, "Swords?")
    assert len(client.recorder.tool_calls) == 1
    assert [r["output"] for r in result["toolCalls"]] == ["3 in stock"]
    assert (result["line"], result["emotion"], result["isFallback"]) == (
        "Three, lad.",
        "proud",
        False,
    )


async def test_the_retry_prompt_carries_the_facts_and_the_tag_rule(client):
    client.tool_handler = replying({"output": "3 in stock"})
    with anyio.fail_after(5):
        await grounded_gorm(client, inventory(), GUARDRAIL, {"template": "[proud] {prompt}"})
        result = await talk(client, "Swords?")
    assert result["line"] == (
        "Player: Swords?\n"
        "Facts you just looked up:\n"
        '- check_inventory {"item":"iron sword"} \u2192 3 in stock\n'
        "Reply in character with a short spoken line. Begin with your emotion in square "
        "brackets, such as [happy] or [angry]."
    )


async def test_a_retry_that_is_blocked_too_falls_back(client):
    with anyio.fail_after(5):
        await create(client, GUARDRAIL, GUARDRAIL, reply("Later."))
        blocked = await talk(client, "War?")
        count = await turn_count(client)
        after = await talk(client, "Hi")
    assert (blocked["isFallback"], blocked["line"]) == (True, DEFAULT_FALLBACKS[0])
    assert count == 0
    assert after["line"] == "Later."


async def test_default_fallback_lines_rotate(client):
    with anyio.fail_after(5):
        await create(client, *[GUARDRAIL] * 4, options={"replyFormat": "structured"})
        lines = [(await talk(client, "War?"))["line"] for _ in range(4)]
    assert lines == [*DEFAULT_FALLBACKS, DEFAULT_FALLBACKS[0]]


async def test_given_fallback_lines_rotate_trimmed_without_blanks(client):
    with anyio.fail_after(5):
        await create(
            client,
            *[GUARDRAIL] * 3,
            options={"replyFormat": "structured", "fallbackLines": [" Go away. ", "  ", "Later."]},
        )
        lines = [(await talk(client, "War?"))["line"] for _ in range(3)]
    assert lines == ["Go away.", "Later.", "Go away."]


async def test_without_the_fallback_a_blocked_turn_is_guardrail_violation(client):
    with anyio.fail_after(5):
        await create(
            client,
            GUARDRAIL,
            options={"replyFormat": "structured", "fallbackOnGuardrail": False},
        )
        response = await client.call("npc/talk", {"npc": "gorm", "line": "War?"})
        count = await turn_count(client)
    assert response["error"]["code"] == -32002
    assert response["error"]["data"]["code"] == "guardrail_violation"
    assert response["error"]["message"] == "Scripted guardrail_violation."
    assert count == 0


async def test_without_the_fallback_a_refusal_is_refusal(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"error": "refusal"},
            options={"replyFormat": "text", "fallbackOnGuardrail": False},
        )
        response = await client.call("npc/talk", {"npc": "gorm", "line": "War?"})
    assert response["error"]["code"] == -32003


async def test_without_the_fallback_automatic_still_retries_first(client):
    with anyio.fail_after(5):
        await create(
            client, GUARDRAIL, {"text": "[sad] Fine."}, options={"fallbackOnGuardrail": False}
        )
        result = await talk(client, "War?")
    assert (result["line"], result["isFallback"]) == ("Fine.", False)


async def test_other_errors_are_not_masked_by_the_fallback(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"error": "context_size_exceeded"},
            options={"replyFormat": "structured", "fallbackLines": ["Hm."]},
        )
        response = await client.call("npc/talk", {"npc": "gorm", "line": "War?"})
    assert response["error"]["code"] == -32004


async def test_an_empty_line_gets_a_fallback_line_but_keeps_the_turn(client):
    with anyio.fail_after(5):
        await create(client, reply("   ", emotion="happy"))
        result = await talk(client, "Hi")
        count = await turn_count(client)
    assert (result["line"], result["isFallback"]) == (DEFAULT_FALLBACKS[0], True)
    assert count == 1
    assert_usage(result["usage"])


async def test_fallback_rotation_is_shared_by_empty_lines_and_blocks(client):
    with anyio.fail_after(5):
        await create(client, reply(""), GUARDRAIL, options={"replyFormat": "structured"})
        first = await talk(client, "Hi")
        second = await talk(client, "War?")
    assert [first["line"], second["line"]] == DEFAULT_FALLBACKS[:2]


# ---- memory tools ----------------------------------------------------------------------------


def remember(fact: str) -> dict[str, Any]:
    return {"name": "remember_fact", "arguments": {"fact": fact}}


def change(delta: int, reason: str = "She was kind.") -> dict[str, Any]:
    return {"name": "change_relationship", "arguments": {"reason": reason, "delta": delta}}


async def saved_memory(client, npc: str = "gorm") -> dict[str, Any]:
    return (await client.request("npc/state", {"npc": npc}))["state"]["memory"]


async def test_remember_fact_runs_locally_and_commits_the_fact(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [remember("The player's name is Aria.")]},
            reply("Welcome, Aria."),
            options={"memoryTools": "all"},
        )
        request = await client.start(
            "npc/talk", {"npc": "gorm", "line": "I'm Aria.", "stream": True}
        )
        result = (await client.wait(request))["result"]
        memory = await saved_memory(client)
    (record,) = result["toolCalls"]
    assert (record["call"]["name"], record["output"], record["isError"]) == (
        "remember_fact",
        "Remembered.",
        False,
    )
    assert client.recorder.tool_calls == []
    started = [e for e in client.recorder.events_for(request) if e["type"] == "toolCallStarted"]
    assert [e["execution"] for e in started] == ["local"]
    assert memory["facts"] == ["The player's name is Aria."]


async def test_change_relationship_shows_in_the_result(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [change(5)]},
            reply("Thank you."),
            options={"memoryTools": ["changeRelationship"]},
        )
        result = await talk(client, "Here, a gift.")
        listed = (await client.request("npc/list"))["npcs"][0]
    assert result["relationship"] == 5
    assert result["toolCalls"][0]["output"] == "You now feel neutral toward the player (5)."
    assert listed["relationship"] == 5


async def test_a_change_beyond_the_limit_is_clamped(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [change(50)]},
            reply("Wonderful."),
            options={"memoryTools": "all", "maxRelationshipChange": 10},
        )
        result = await talk(client, "Here, a gift.")
    assert result["relationship"] == 10


async def test_staged_memory_is_discarded_on_a_fallback(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [change(5), remember("Aria is rude.")]},
            GUARDRAIL,
            options={"memoryTools": "all", "replyFormat": "structured"},
        )
        result = await talk(client, "Insult.")
        memory = await saved_memory(client)
    assert result["isFallback"] is True
    assert result["relationship"] == 0
    assert sorted(r["call"]["name"] for r in result["toolCalls"]) == [
        "change_relationship",
        "remember_fact",
    ]
    assert memory == {"facts": [], "relationship": 0}


async def test_staged_memory_is_discarded_on_an_error(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [change(5)]},
            GUARDRAIL,
            options={
                "memoryTools": "all",
                "replyFormat": "structured",
                "fallbackOnGuardrail": False,
            },
        )
        response = await client.call("npc/talk", {"npc": "gorm", "line": "Hi"})
        memory = await saved_memory(client)
    assert response["error"]["code"] == -32002
    assert memory["relationship"] == 0


async def test_memory_staged_before_an_automatic_retry_is_committed(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [change(5)]},
            GUARDRAIL,
            {"text": "[happy] Thanks."},
            options={"memoryTools": "all"},
        )
        result = await talk(client, "A gift.")
    assert (result["isFallback"], result["relationship"]) == (False, 5)
    assert len(result["toolCalls"]) == 1


async def test_memory_committed_by_an_empty_line_fallback(client):
    with anyio.fail_after(5):
        await create(
            client,
            {"toolCalls": [change(5)]},
            reply(""),
            options={"memoryTools": "all"},
        )
        result = await talk(client, "A gift.")
    assert (result["isFallback"], result["relationship"]) == (True, 5)


# ---- world tools -----------------------------------------------------------------------------


async def test_world_tools_run_locally_and_notify_before_the_response(client):
    with anyio.fail_after(5):
        await client.request(
            "world/create", {"world": "village", "state": {"player": {"name": "Aria", "gold": 60}}}
        )
        subscription = await client.request(
            "world/subscribe", {"world": "village", "path": "quests"}
        )
        await create(
            client,
            {"toolCalls": [{"name": "read_world_state", "arguments": {"path": "player.gold"}}]},
            {
                "toolCalls": [
                    {
                        "name": "update_world_state",
                        "arguments": {"path": "quests.ring", "value": "started"},
                    }
                ]
            },
            reply("Sixty gold, Aria. Find my ring."),
            world="village",
            options={
                "groundingTool": "read_world_state",
                "worldWritable": ["quests"],
                "maxToolRounds": 3,
            },
        )
        request = await client.start(
            "npc/talk", {"npc": "gorm", "line": "What can I afford?", "stream": True}
        )
        result = (await client.wait(request))["result"]
        got = await client.request("world/get", {"world": "village", "path": "quests.ring"})
    assert result["line"] == "Sixty gold, Aria. Find my ring."
    assert result["toolCalls"][0]["output"] == 60
    assert result["toolCalls"][1]["call"]["name"] == "update_world_state"
    assert result["toolCalls"][1]["isError"] is False
    assert got["value"] == "started"
    change_msg = next(m for m in client.recorder.received if m.get("method") == "world/changed")
    assert change_msg["params"] == {
        "world": "village",
        "subscription": subscription["subscription"],
        "path": "quests.ring",
        "newValue": "started",
    }
    assert index_of(client, lambda m: m.get("method") == "world/changed") < index_of(
        client, is_response_to(request)
    )
    started = [e for e in client.recorder.events_for(request) if e["type"] == "toolCallStarted"]
    assert [e["execution"] for e in started] == ["local", "local"]
    assert client.recorder.tool_calls == []


async def test_world_writes_stay_after_a_fallback(client):
    with anyio.fail_after(5):
        await client.request("world/create", {"world": "village"})
        await create(
            client,
            {
                "toolCalls": [
                    {
                        "name": "update_world_state",
                        "arguments": {"path": "quests.ring", "value": "lost"},
                    }
                ]
            },
            GUARDRAIL,
            world="village",
            options={"worldWritable": ["quests"], "replyFormat": "structured"},
        )
        result = await talk(client, "Hi")
        got = await client.request("world/get", {"world": "village", "path": "quests.ring"})
    assert result["isFallback"] is True
    assert got["value"] == "lost"


# ---- concurrency -----------------------------------------------------------------------------


async def test_fifty_npcs_talk_concurrently_without_cross_talk(client):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": f"{params['npc']} has {params['call']['arguments']['item']}"}

    client.tool_handler = handler
    with anyio.fail_after(20):
        for i in range(50):
            await create(
                client,
                inventory(f"item{i}"),
                reply(f"I am number {i}.", delayMs=(i * 7) % 50),
                npc=f"n{i}",
                persona={"name": f"N{i}"},
                tools=[CHECK_INVENTORY],
            )
        requests = [
            await client.start("npc/talk", {"npc": f"n{i}", "line": "Who?", "stream": True})
            for i in range(50)
        ]
        responses = [await client.wait(r) for r in requests]
    for i, (request, response) in enumerate(zip(requests, responses, strict=True)):
        result = response["result"]
        assert result["npc"] == f"n{i}"
        assert result["line"] == f"I am number {i}."
        assert result["toolCalls"][0]["output"] == f"n{i} has item{i}"
        assert shown_line(client.recorder.events_for(request)) == result["line"]
        events = [
            m
            for m in client.recorder.received
            if m.get("method") == "npc/event" and m["params"]["requestId"] == request
        ]
        assert {m["params"]["npc"] for m in events} == {f"n{i}"}
    calls = {
        c["params"]["npc"]: c["params"]["call"]["arguments"]["item"]
        for c in client.recorder.tool_calls
    }
    assert calls == {f"n{i}": f"item{i}" for i in range(50)}


async def test_an_unavailable_model_is_not_masked_by_the_fallback(client):
    with anyio.fail_after(5):
        await client.request("npc/create", {"npc": "gorm", "persona": GORM})
        response = await client.call("npc/talk", {"npc": "gorm", "line": "Hi"})
    assert response["error"]["code"] == -32001
    assert response["error"]["data"]["code"] == "model_unavailable"


async def test_a_direct_reply_on_an_npc_with_tools_records_no_tool(client):
    with anyio.fail_after(5):
        await create(client, reply("Just a chat."), tools=[CHECK_INVENTORY])
        request = await client.start("npc/talk", {"npc": "gorm", "line": "Hi", "stream": True})
        result = (await client.wait(request))["result"]
    assert result["line"] == "Just a chat."
    assert result["toolCalls"] == []
    assert client.recorder.tool_calls == []
    assert not [e for e in client.recorder.events_for(request) if e["type"].startswith("toolCall")]

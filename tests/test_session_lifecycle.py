"""Session lifecycle (§5): create, list, delete, reset, transcript/history, settings, compact.

Black-box tests through the protocol, against the scripted model (§10). Facts come from
PROTOCOL.md and the reference bridge's own tests and sources.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import anyio
import pytest

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

LONG_MS = 10_000
"""A scripted delay that only ends by cancellation: no test waits for it to elapse."""

UNKNOWN_TOOL_COUNT = (
    "{n} tools: Apple recommends at most 3-5 tools per request on-device; "
    "narrow them per turn with 'enabledTools'."
)
NO_DESCRIPTION = "{name}: no description; the model may not know when to call it."
SYSTEM_UNAVAILABLE = (
    "The system model is unavailable (not_configured); "
    "turns will fail with model_unavailable until it is ready."
)


def scripted(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps), **extra}


def tool(name: str, description: str | None = "Does a thing.", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if description is not None:
        out["description"] = description
    out.update(extra)
    return out


async def create(client, **params: Any) -> dict[str, Any]:
    params.setdefault("model", "scripted")
    return await client.request("session/create", params)


async def respond(client, session: str, prompt: str = "Hello.", **params: Any) -> dict[str, Any]:
    return await client.request("session/respond", {"session": session, "prompt": prompt, **params})


async def rpc_error(client, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as info:
        await client.request(method, params)
    return info.value


async def listing(client) -> list[dict[str, Any]]:
    return (await client.request("session/list"))["sessions"]


async def entry(client, session: str) -> dict[str, Any]:
    return next(s for s in await listing(client) if s["session"] == session)


async def transcript_text(client, session: str) -> str:
    result = await client.request("session/transcript", {"session": session})
    return json.dumps(result["transcript"], ensure_ascii=False)


# ---- session/create: ids ---------------------------------------------------------------------


async def test_create_with_an_explicit_id_returns_it_and_no_warnings(client):
    with anyio.fail_after(5):
        result = await create(
            client, session="gorm", instructions="You are Gorm.", model=scripted({"text": "Hm."})
        )
    assert result == {"session": "gorm", "warnings": []}


async def test_create_without_an_id_generates_s1_then_s2(client):
    with anyio.fail_after(5):
        await create(client, session="gorm")
        first = await create(client)
        second = await create(client)
    assert (first["session"], second["session"]) == ("s1", "s2")


async def test_generated_ids_skip_ids_already_in_use(client):
    with anyio.fail_after(5):
        await create(client, session="s1")
        await create(client, session="s3")
        generated = [(await create(client))["session"] for _ in range(2)]
    assert generated == ["s2", "s4"]


async def test_null_members_of_create_count_as_absent(client):
    with anyio.fail_after(5):
        result = await client.request(
            "session/create",
            {
                "session": None,
                "instructions": None,
                "tools": None,
                "options": None,
                "history": None,
                "model": "scripted",
            },
        )
    assert result == {"session": "s1", "warnings": []}


async def test_an_empty_session_id_is_rejected_with_the_rule(client):
    with anyio.fail_after(5):
        err = await rpc_error(client, "session/create", {"session": "", "model": "scripted"})
    assert err.code == -32602 and err.name == "invalid_params"
    assert err.message == "'session' must be 1-128 printable characters; got ''."


@pytest.mark.parametrize(
    "session_id",
    ["x" * 129, "bad\nid", "bad\u0001id", "tab\there", "del\u007f"],
    ids=["129-chars", "newline", "control-1", "tab", "delete"],
)
async def test_session_ids_that_are_too_long_or_hold_control_characters_are_rejected(
    client, session_id
):
    with anyio.fail_after(5):
        err = await rpc_error(
            client, "session/create", {"session": session_id, "model": "scripted"}
        )
    assert err.code == -32602
    assert err.message.startswith("'session' must be 1-128 printable characters; got '")


async def test_a_session_id_of_128_characters_is_accepted(client):
    with anyio.fail_after(5):
        result = await create(client, session="é" * 128)
    assert result["session"] == "é" * 128


async def test_a_non_string_session_id_is_rejected(client):
    with anyio.fail_after(5):
        err = await rpc_error(client, "session/create", {"session": 5, "model": "scripted"})
    assert err.code == -32602
    assert err.message == "Parameter 'session' must be a string; got 5."


async def test_creating_a_taken_id_fails_with_session_exists(client):
    with anyio.fail_after(5):
        await create(client, session="gorm")
        err = await rpc_error(client, "session/create", {"session": "gorm", "model": "scripted"})
    assert err.code == -32021 and err.name == "session_exists"
    assert err.data["session"] == "gorm"
    assert err.message == "A session with id 'gorm' already exists."


async def test_the_65th_session_is_refused_with_session_limit(client):
    with anyio.fail_after(10):
        ids = [await client.start("session/create", {"model": "scripted"}) for _ in range(65)]
        replies = [await client.wait(i) for i in ids]
    assert all("result" in r for r in replies[:64])
    error = replies[64]["error"]
    assert error["code"] == -32022
    assert error["data"] == {"code": "session_limit", "limit": 64}
    assert error["message"] == "The session limit (64) is reached; delete a session first."


async def test_deleting_a_session_frees_a_slot_under_the_limit(client):
    with anyio.fail_after(10):
        ids = [await client.start("session/create", {"model": "scripted"}) for _ in range(64)]
        for i in ids:
            assert "result" in await client.wait(i)
        await client.request("session/delete", {"session": "s1"})
        result = await create(client, session="late")
    assert result["session"] == "late"


# ---- session/create: warnings ----------------------------------------------------------------


async def test_create_warns_about_unknown_top_level_and_option_keys(client):
    with anyio.fail_after(5):
        result = await create(client, session="w", instructionz="typo", options={"temprature": 0.5})
    assert result["warnings"] == [
        "Unknown parameter 'instructionz' was ignored.",
        "Unknown parameter 'options.temprature' was ignored.",
    ]


async def test_unknown_keys_are_warned_in_param_order_even_when_null(client):
    with anyio.fail_after(5):
        result = await client.request(
            "session/create", {"zeta": 1, "model": "scripted", "alpha": None}
        )
    assert result["warnings"] == [
        "Unknown parameter 'zeta' was ignored.",
        "Unknown parameter 'alpha' was ignored.",
    ]


@pytest.mark.parametrize("definition", [tool("wave", None), tool("wave", "")])
async def test_create_warns_about_a_tool_without_a_description(client, definition):
    with anyio.fail_after(5):
        result = await create(client, tools=[definition])
    assert result["warnings"] == [NO_DESCRIPTION.format(name="wave")]


async def test_create_warns_when_there_are_more_than_five_tools(client):
    with anyio.fail_after(5):
        result = await create(client, tools=[tool(f"t{i}") for i in range(6)])
    assert result["warnings"] == [UNKNOWN_TOOL_COUNT.format(n=6)]


async def test_five_tools_get_no_tool_count_warning(client):
    with anyio.fail_after(5):
        result = await create(client, tools=[tool(f"t{i}") for i in range(5)])
    assert result["warnings"] == []


async def test_create_on_the_unavailable_system_model_warns_with_the_reason(client):
    with anyio.fail_after(5):
        result = await client.request("session/create", {"session": "sys"})
    assert result == {"session": "sys", "warnings": [SYSTEM_UNAVAILABLE]}


async def test_create_warnings_come_in_documented_order(client):
    tools = [tool("t0", None)] + [tool(f"t{i}") for i in range(1, 6)]
    with anyio.fail_after(5):
        result = await client.request(
            "session/create",
            {"instructionz": "typo", "options": {"temprature": 0.5}, "tools": tools},
        )
    assert result["warnings"] == [
        "Unknown parameter 'instructionz' was ignored.",
        "Unknown parameter 'options.temprature' was ignored.",
        NO_DESCRIPTION.format(name="t0"),
        UNKNOWN_TOOL_COUNT.format(n=6),
        SYSTEM_UNAVAILABLE,
    ]


# ---- session/create: invalid params ----------------------------------------------------------

TOOL_NAME_RULE = "'tools[0].name' must be 1-64 characters of letters, digits, '_', '-' or '.'; got "


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"options": {"toolChoice": "sometimes"}},
            """'options.toolChoice' must be "auto", "none", "required", "explicit" or """
            """{"tool": "<name>"}; got "sometimes".""",
        ),
        (
            {"options": {"toolChoice": "wave"}, "tools": [tool("wave")]},
            """'options.toolChoice' must be "auto", "none", "required", "explicit" or """
            """{"tool": "<name>"}; got "wave".""",
        ),
        (
            {"options": {"toolChoice": {"tool": ""}}},
            """'options.toolChoice' object must be {"tool": "<name>"}.""",
        ),
        (
            {"options": {"toolChoice": {"pick": "wave"}}},
            """'options.toolChoice' object must be {"tool": "<name>"}.""",
        ),
        (
            {"options": {"toolChoice": {"tool": "ghost"}}, "tools": [tool("wave")]},
            "'options.toolChoice' names tool 'ghost', which is not in 'tools'.",
        ),
        ({"options": "fast"}, """Parameter 'options' must be an object; got "fast"."""),
        (
            {"options": {"maxToolRounds": -1}},
            "Parameter 'options.maxToolRounds' must be at least 0.",
        ),
        (
            {"options": {"maxToolRounds": 2.5}},
            "Parameter 'options.maxToolRounds' must be an integer; got 2.5.",
        ),
        (
            {"options": {"maxToolCalls": -1}},
            "Parameter 'options.maxToolCalls' must be at least 0.",
        ),
        (
            {"options": {"maxResponseTokens": 0}},
            "Parameter 'options.maxResponseTokens' must be at least 1.",
        ),
        ({"options": {"maxAttempts": 0}}, "Parameter 'options.maxAttempts' must be at least 1."),
        (
            {"options": {"trimHistory": "yes"}},
            """Parameter 'options.trimHistory' must be a boolean; got "yes".""",
        ),
        (
            {"options": {"enabledTools": ["a", 5]}},
            "Parameter 'options.enabledTools[1]' must be a string; got 5.",
        ),
        (
            {"options": {"sampling": "random"}},
            """'options.sampling' must be "greedy", {"topK": n} or {"topP": p}.""",
        ),
        (
            {"options": {"sampling": {"topP": 1.5}}},
            "'options.sampling.topP' must be between 0 and 1.",
        ),
        (
            {"options": {"sampling": {"seed": 1}}},
            "'options.sampling' must contain 'topK' or 'topP'.",
        ),
        ({"instructions": 5}, "Parameter 'instructions' must be a string; got 5."),
        ({"tools": {}}, "'tools' must be an array of tool definitions."),
        ({"tools": [5]}, "'tools[0]' must be an object."),
        ({"tools": [{"description": "x"}]}, "Missing required parameter 'tools[0].name'."),
        (
            {"tools": [tool("open gate")]},
            TOOL_NAME_RULE + "'open gate'.",
        ),
        (
            {"tools": [tool("a", execution="server")]},
            """'tools[0].execution' must be "client" (the engine executes the tool via """
            """tool/call); got 'server'.""",
        ),
        (
            {"tools": [tool("a", parameters=5)]},
            "'tools[0].parameters' must be a JSON Schema object.",
        ),
        ({"tools": [tool("wave"), tool("wave")]}, "Duplicate tool name 'wave'."),
    ],
    ids=lambda v: json.dumps(v)[:60] if isinstance(v, dict) else None,
)
async def test_invalid_create_params_fail_with_a_message_naming_the_parameter(
    client, params, message
):
    params = {"model": "scripted", **params}
    with anyio.fail_after(5):
        err = await rpc_error(client, "session/create", params)
    assert err.code == -32602 and err.name == "invalid_params"
    assert err.message == message


async def test_a_negative_temperature_is_rejected(client):
    with anyio.fail_after(5):
        err = await rpc_error(
            client, "session/create", {"model": "scripted", "options": {"temperature": -0.5}}
        )
    assert err.code == -32602
    assert err.message.startswith("Parameter 'options.temperature' must be at least 0")


async def test_the_openai_tool_wrapper_is_accepted(client):
    wrapped = {
        "type": "function",
        "function": {
            "name": "wave",
            "description": "Wave at the player.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    with anyio.fail_after(5):
        result = await create(client, session="w", tools=[wrapped])
        listed = await entry(client, "w")
    assert result["warnings"] == []
    assert listed["tools"] == ["wave"]


@pytest.mark.parametrize("name", ["a", "x" * 64, "open-gate.v2_1", "ABC_def-9"])
async def test_tool_names_of_letters_digits_underscore_dash_and_dot_are_accepted(client, name):
    with anyio.fail_after(5):
        result = await create(client, tools=[tool(name)])
    assert result["warnings"] == []


@pytest.mark.parametrize("name", ["", "x" * 65, "open gate", "héllo", "a/b", "call()"])
async def test_tool_names_outside_the_rule_are_rejected(client, name):
    with anyio.fail_after(5):
        err = await rpc_error(
            client, "session/create", {"model": "scripted", "tools": [tool(name)]}
        )
    assert err.code == -32602
    assert err.message == TOOL_NAME_RULE + f"'{name}'."


async def test_a_tool_choice_naming_a_present_tool_is_accepted(client):
    with anyio.fail_after(5):
        result = await create(
            client, tools=[tool("wave")], options={"toolChoice": {"tool": "wave"}}
        )
    assert result["warnings"] == []


# ---- session/create: timeouts ----------------------------------------------------------------


@pytest.mark.parametrize("seconds", [0, 0.2, 120, 86400])
async def test_tool_timeouts_from_0_to_86400_seconds_are_accepted(client, seconds):
    with anyio.fail_after(5):
        result = await create(
            client,
            options={"toolTimeoutSeconds": seconds},
            tools=[tool("wave", timeoutSeconds=seconds)],
        )
        assert result["warnings"] == []
        assert await client.request("ping") == {}


SECONDS_RULE = (
    "Parameter '{name}' must be a number of seconds from 0 to 86400 (0 means no limit); got "
)


@pytest.mark.parametrize("seconds", [1e19, -1, 86400.5])
async def test_out_of_range_session_tool_timeouts_are_rejected(client, seconds):
    with anyio.fail_after(5):
        err = await rpc_error(
            client,
            "session/create",
            {"model": "scripted", "options": {"toolTimeoutSeconds": seconds}},
        )
        assert await client.request("ping") == {}
    assert err.code == -32602
    assert err.message.startswith(SECONDS_RULE.format(name="options.toolTimeoutSeconds"))


async def test_a_negative_timeout_shows_the_value_it_got(client):
    with anyio.fail_after(5):
        err = await rpc_error(
            client, "session/create", {"model": "scripted", "options": {"toolTimeoutSeconds": -1}}
        )
    assert err.message == SECONDS_RULE.format(name="options.toolTimeoutSeconds") + "-1."


async def test_an_out_of_range_tool_timeout_is_rejected(client):
    with anyio.fail_after(5):
        err = await rpc_error(
            client,
            "session/create",
            {"model": "scripted", "tools": [tool("wave", timeoutSeconds=1e19)]},
        )
    assert err.code == -32602
    assert err.message.startswith(SECONDS_RULE.format(name="tools[0].timeoutSeconds"))


async def test_an_infinite_timeout_from_the_raw_line_is_rejected_and_serving_continues(client):
    line = (
        b'{"jsonrpc":"2.0","id":"inf","method":"session/create",'
        b'"params":{"options":{"toolTimeoutSeconds":1e999}}}\n'
    )
    with anyio.fail_after(5):
        await client.send_raw(line)
        reply = await client.next_message(lambda m: m.get("id") == "inf")
        assert await client.request("ping") == {}
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["code"] == "invalid_params"


# ---- session/delete --------------------------------------------------------------------------


async def test_delete_answers_deleted_and_the_session_is_gone(client):
    with anyio.fail_after(5):
        await create(client, session="gorm")
        deleted = await client.request("session/delete", {"session": "gorm"})
        after = await rpc_error(client, "session/respond", {"session": "gorm", "prompt": "hi"})
    assert deleted == {"session": "gorm", "deleted": True}
    assert after.code == -32020 and after.name == "session_not_found"
    assert after.data["session"] == "gorm"
    assert after.message == "No session with id 'gorm'."


async def test_deleting_twice_fails_with_session_not_found(client):
    with anyio.fail_after(5):
        await create(client, session="gorm")
        await client.request("session/delete", {"session": "gorm"})
        err = await rpc_error(client, "session/delete", {"session": "gorm"})
    assert err.code == -32020 and err.data["session"] == "gorm"


async def test_delete_cancels_the_running_and_queued_turns(client):
    slow = scripted({"text": "one", "delayMs": LONG_MS}, {"text": "two", "delayMs": LONG_MS})
    with anyio.fail_after(5):
        await create(client, session="gorm", model=slow)
        first = await client.start("session/respond", {"session": "gorm", "prompt": "a"})
        second = await client.start("session/respond", {"session": "gorm", "prompt": "b"})
        deleted = await client.request("session/delete", {"session": "gorm"})
        replies = [await client.wait(first), await client.wait(second)]
        remaining = await listing(client)
    assert deleted == {"session": "gorm", "deleted": True}
    for reply in replies:
        assert reply["error"]["code"] == -32009
        assert reply["error"]["data"]["code"] == "cancelled"
    assert remaining == []


async def test_delete_cancels_a_pending_compaction(client):
    model = scripted({"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "S", "delayMs": LONG_MS})
    with anyio.fail_after(5):
        await create(client, session="g", model=model)
        for prompt in ("one", "two", "three"):
            await respond(client, "g", prompt)
        compact = await client.start("session/compact", {"session": "g", "keepRecentTurns": 1})
        await client.request("session/delete", {"session": "g"})
        reply = await client.wait(compact)
    assert reply["error"]["code"] == -32009
    assert reply["error"]["data"]["code"] == "cancelled"


# ---- session/list ----------------------------------------------------------------------------

LIST_KEYS = [
    "session",
    "model",
    "instructions",
    "tools",
    "busy",
    "pendingOperations",
    "entries",
    "createdAt",
]


async def test_list_shows_sessions_in_creation_order(client):
    with anyio.fail_after(5):
        await create(client, session="gorm")
        await create(client)
        await create(client, session="aria")
        sessions = await listing(client)
    assert [s["session"] for s in sessions] == ["gorm", "s1", "aria"]


async def test_a_list_entry_has_the_documented_fields_in_order(client):
    with anyio.fail_after(5):
        await create(
            client,
            session="gorm",
            instructions="You are Gorm.",
            tools=[tool("wave"), tool("open_gate")],
        )
        (listed,) = await listing(client)
    assert list(listed) == LIST_KEYS
    assert listed["session"] == "gorm"
    assert listed["model"] == "scripted"
    assert listed["instructions"] == "You are Gorm."
    assert listed["tools"] == ["wave", "open_gate"]
    assert listed["busy"] is False
    assert listed["pendingOperations"] == 0
    assert listed["entries"] == 0
    datetime.fromisoformat(listed["createdAt"].replace("Z", "+00:00"))


async def test_list_omits_instructions_when_unset(client):
    with anyio.fail_after(5):
        await create(client, session="plain")
        (listed,) = await listing(client)
    assert "instructions" not in listed
    assert listed["tools"] == []


@pytest.mark.parametrize(
    ("model", "shown"),
    [
        (None, "system"),
        ("system", "system"),
        ({"type": "system"}, "system"),
        ("scripted", "scripted"),
        ({"type": "scripted", "steps": []}, "scripted"),
    ],
)
async def test_list_names_the_model_type(client, model, shown):
    with anyio.fail_after(5):
        await client.request("session/create", {"session": "m", "model": model})
        listed = await entry(client, "m")
    assert listed["model"] == shown


async def test_list_counts_two_entries_per_plain_turn_and_four_per_tool_turn(client):
    async def handler(params):
        return {"output": "Opened."}

    client.tool_handler = handler
    model = scripted(
        {"text": "Hello."},
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"template": "Gate: {toolOutput}"},
    )
    with anyio.fail_after(5):
        await create(client, session="g", tools=[tool("open_gate")], model=model)
        await respond(client, "g", "Hi")
        after_plain = (await entry(client, "g"))["entries"]
        await respond(client, "g", "Open the north gate.")
        after_tool = (await entry(client, "g"))["entries"]
    assert (after_plain, after_tool) == (2, 6)


async def test_list_shows_busy_and_pending_operations_while_turns_wait(client):
    slow = scripted({"text": "one", "delayMs": LONG_MS}, {"text": "two", "delayMs": LONG_MS})
    with anyio.fail_after(5):
        await create(client, session="g", model=slow)
        await client.start("session/respond", {"session": "g", "prompt": "a"})
        await client.start("session/respond", {"session": "g", "prompt": "b"})
        busy = await entry(client, "g")
        await client.request("session/cancel", {"session": "g"})
    assert busy["busy"] is True
    assert busy["pendingOperations"] == 2
    assert busy["entries"] == 0


# ---- session/reset ---------------------------------------------------------------------------


async def test_reset_clears_the_history_but_keeps_instructions_and_tools(client):
    with anyio.fail_after(5):
        await create(client, session="g", instructions="You are Gorm.", tools=[tool("wave")])
        await respond(client, "g", "one")
        await respond(client, "g", "two")
        before = (await entry(client, "g"))["entries"]
        result = await client.request("session/reset", {"session": "g"})
        after = await entry(client, "g")
    assert before == 4
    assert result == {"session": "g"}
    assert after["entries"] == 0
    assert after["instructions"] == "You are Gorm."
    assert after["tools"] == ["wave"]


async def test_reset_clears_the_context_note(client):
    note = "The gate key is under the mat."
    with anyio.fail_after(5):
        await create(client, session="g", instructions="You are Gorm.")
        await client.request("session/setContextNote", {"session": "g", "note": note})
        await respond(client, "g", "Where is the key?")
        before = await transcript_text(client, "g")
        await client.request("session/reset", {"session": "g"})
        after = await transcript_text(client, "g")
    assert note in before
    assert note not in after
    assert "You are Gorm." in after


async def test_reset_of_an_unknown_session_is_session_not_found(client):
    with anyio.fail_after(5):
        err = await rpc_error(client, "session/reset", {"session": "nobody"})
    assert err.code == -32020 and err.data["session"] == "nobody"


# ---- session/transcript and history ----------------------------------------------------------


async def test_transcript_is_an_oamd_transcript_holding_the_conversation(client):
    model = scripted({"text": "Welcome to the forge."})
    with anyio.fail_after(5):
        await create(client, session="g", instructions="You are Gorm.", model=model)
        await respond(client, "g", "Hello Gorm")
        result = await client.request("session/transcript", {"session": "g"})
    assert result["session"] == "g"
    transcript = result["transcript"]
    assert isinstance(transcript, dict)
    assert transcript["type"] == "oamd.Transcript"
    text = json.dumps(transcript, ensure_ascii=False)
    assert "Hello Gorm" in text
    assert "Welcome to the forge." in text
    assert "You are Gorm." in text


async def test_transcript_of_an_unknown_session_is_session_not_found(client):
    with anyio.fail_after(5):
        err = await rpc_error(client, "session/transcript", {"session": "nobody"})
    assert err.code == -32020 and err.data["session"] == "nobody"


async def saved_conversation(client, **create_params: Any) -> dict[str, Any]:
    """A one-turn conversation on session ``orig``, exported and re-parsed from text."""
    await create(client, session="orig", model=scripted({"text": "I am Gorm."}), **create_params)
    await respond(client, "orig", "Who are you?")
    result = await client.request("session/transcript", {"session": "orig"})
    return json.loads(json.dumps(result))


async def test_a_transcript_restored_as_history_continues_the_conversation(client):
    with anyio.fail_after(5):
        saved = await saved_conversation(client, instructions="You are Gorm.")
        await create(
            client,
            session="copy",
            history=saved["transcript"],
            instructions="You are Gorm.",
            model=scripted({"template": "Again: {prompt}"}),
        )
        restored_entries = (await entry(client, "copy"))["entries"]
        reply = await respond(client, "copy", "Still Gorm?")
        final_entries = (await entry(client, "copy"))["entries"]
    assert restored_entries == 2
    assert reply["text"] == "Again: Still Gorm?"
    assert final_entries == 4


async def test_the_whole_transcript_result_is_accepted_as_history(client):
    with anyio.fail_after(5):
        saved = await saved_conversation(client)
        result = await create(client, session="copy", history=saved)
        restored = await entry(client, "copy")
    assert result["session"] == "copy"
    assert restored["entries"] == 2


async def test_a_restored_transcript_keeps_the_old_conversation_text(client):
    with anyio.fail_after(5):
        saved = await saved_conversation(client)
        await create(client, session="copy", history=saved["transcript"])
        text = await transcript_text(client, "copy")
    assert "Who are you?" in text
    assert "I am Gorm." in text


async def test_a_history_object_that_is_not_a_transcript_is_rejected(client):
    with anyio.fail_after(5):
        err = await rpc_error(
            client, "session/create", {"history": {"entries": 5}, "model": "scripted"}
        )
    assert err.code == -32602
    assert "'history'" in err.message


async def test_a_history_that_is_not_an_object_is_rejected(client):
    with anyio.fail_after(5):
        err = await rpc_error(
            client, "session/create", {"history": "yesterday", "model": "scripted"}
        )
    assert err.code == -32602
    assert err.message == "'history' must be a transcript object from session/transcript."


async def test_instructions_are_restored_from_history_when_absent(client):
    with anyio.fail_after(5):
        saved = await saved_conversation(client, instructions="You are Gorm, the smith.")
        await create(client, session="copy", history=saved["transcript"])
        restored = await entry(client, "copy")
    assert restored["instructions"] == "You are Gorm, the smith."


async def test_present_null_instructions_win_over_the_history(client):
    with anyio.fail_after(5):
        saved = await saved_conversation(client, instructions="You are Gorm, the smith.")
        await create(client, session="copy", history=saved["transcript"], instructions=None)
        restored = await entry(client, "copy")
    assert "instructions" not in restored


async def test_tools_are_restored_from_history_when_absent(client):
    with anyio.fail_after(5):
        saved = await saved_conversation(client, tools=[tool("wave"), tool("open_gate")])
        await create(client, session="copy", history=saved["transcript"])
        restored = await entry(client, "copy")
    assert restored["tools"] == ["wave", "open_gate"]


async def test_present_empty_tools_win_over_the_history(client):
    with anyio.fail_after(5):
        saved = await saved_conversation(client, tools=[tool("wave")])
        await create(client, session="copy", history=saved["transcript"], tools=[])
        restored = await entry(client, "copy")
    assert restored["tools"] == []


# ---- settings: setInstructions / setContextNote / setTools -----------------------------------


async def test_set_instructions_answers_the_session_and_replaces_them(client):
    with anyio.fail_after(5):
        await create(client, session="g", instructions="You are Gorm.")
        result = await client.request(
            "session/setInstructions", {"session": "g", "instructions": "You are friendly."}
        )
        listed = await entry(client, "g")
    assert result == {"session": "g"}
    assert listed["instructions"] == "You are friendly."


async def test_set_instructions_to_null_clears_them(client):
    with anyio.fail_after(5):
        await create(client, session="g", instructions="You are Gorm.")
        await client.request("session/setInstructions", {"session": "g", "instructions": None})
        listed = await entry(client, "g")
    assert "instructions" not in listed


async def test_set_context_note_reaches_the_transcript_but_not_the_listed_instructions(client):
    note = "The player owes 40 gold."
    with anyio.fail_after(5):
        await create(client, session="g", instructions="You are Gorm.")
        result = await client.request("session/setContextNote", {"session": "g", "note": note})
        await respond(client, "g", "Hi")
        text = await transcript_text(client, "g")
        listed = await entry(client, "g")
    assert result == {"session": "g"}
    assert note in text
    assert listed["instructions"] == "You are Gorm."


async def test_set_tools_replaces_the_tools_and_answers_with_warnings(client):
    with anyio.fail_after(5):
        await create(client, session="g", tools=[tool("open_gate")])
        result = await client.request("session/setTools", {"session": "g", "tools": [tool("wave")]})
        listed = await entry(client, "g")
    assert result == {"session": "g", "warnings": []}
    assert listed["tools"] == ["wave"]


async def test_set_tools_warns_about_missing_descriptions_and_the_tool_count(client):
    tools = [tool("t0", None)] + [tool(f"t{i}") for i in range(1, 6)]
    with anyio.fail_after(5):
        await create(client, session="g")
        result = await client.request("session/setTools", {"session": "g", "tools": tools})
    assert result["warnings"] == [NO_DESCRIPTION.format(name="t0"), UNKNOWN_TOOL_COUNT.format(n=6)]


@pytest.mark.parametrize(
    "tools",
    [[tool("wave", timeoutSeconds=1e19)], [tool("wave"), tool("wave")], [tool("a b")]],
    ids=["timeout", "duplicate", "bad-name"],
)
async def test_set_tools_rejects_invalid_definitions_and_keeps_the_old_tools(client, tools):
    with anyio.fail_after(5):
        await create(client, session="g", tools=[tool("open_gate")])
        err = await rpc_error(client, "session/setTools", {"session": "g", "tools": tools})
        listed = await entry(client, "g")
    assert err.code == -32602
    assert listed["tools"] == ["open_gate"]


async def test_set_tools_with_an_unusable_schema_fails_with_invalid_schema(client):
    with anyio.fail_after(5):
        await create(client, session="g")
        err = await rpc_error(
            client,
            "session/setTools",
            {"session": "g", "tools": [tool("wave", parameters={"type": "wat"})]},
        )
    assert err.code == -32007 and err.name == "invalid_schema"
    assert err.data["path"] == "tools[0].parameters"


async def test_settings_wait_behind_a_running_turn(client):
    model = scripted({"text": "Done.", "delayMs": 300})
    with anyio.fail_after(5):
        await create(client, session="g", instructions="Old.", model=model)
        turn = await client.start("session/respond", {"session": "g", "prompt": "hi"})
        setting = await client.start(
            "session/setInstructions", {"session": "g", "instructions": "New."}
        )
        meanwhile = await entry(client, "g")
        await client.wait(setting)
        await client.wait(turn)
    order = [m.get("id") for m in client.recorder.received]
    assert meanwhile["instructions"] == "Old."
    assert meanwhile["pendingOperations"] == 2
    assert order.index(turn) < order.index(setting)


# ---- session/compact -------------------------------------------------------------------------


async def test_compact_with_nothing_to_compact_returns_null_without_using_a_step(client):
    with anyio.fail_after(5):
        await create(client, session="g", model=scripted({"text": "first"}, {"text": "second"}))
        await respond(client, "g", "one")
        result = await client.request("session/compact", {"session": "g", "keepRecentTurns": 5})
        default = await client.request("session/compact", {"session": "g"})
        reply = await respond(client, "g", "two")
    assert result == {"session": "g", "summary": None}
    assert default == {"session": "g", "summary": None}
    assert reply["text"] == "second"


async def test_compact_folds_older_turns_into_a_summary_from_the_next_step(client):
    summary = "The player asked three things."
    model = scripted({"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": summary})
    with anyio.fail_after(5):
        await create(client, session="g", instructions="You are Gorm.", model=model)
        for prompt in ("one", "two", "three"):
            await respond(client, "g", prompt)
        result = await client.request("session/compact", {"session": "g", "keepRecentTurns": 1})
        listed = await entry(client, "g")
        text = await transcript_text(client, "g")
    assert result == {"session": "g", "summary": summary}
    assert listed["entries"] == 2
    assert listed["instructions"] == "You are Gorm."
    assert summary in text


async def test_cancelling_a_compaction_leaves_the_history_alone(client):
    summary = "SUMMARY-THAT-MUST-NOT-LAND"
    model = scripted({"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": summary, "delayMs": 400})
    with anyio.fail_after(5):
        await create(client, session="g", model=model)
        for prompt in ("one", "two", "three"):
            await respond(client, "g", prompt)
        compact = await client.start("session/compact", {"session": "g", "keepRecentTurns": 1})
        cancel = await client.request("session/cancel", {"session": "g"})
        reply = await client.wait(compact)
        listed = await entry(client, "g")
        # Let the cancelled 400 ms summary delay run out: nothing may land afterwards either.
        await client.request("test/sleep", {"ms": 500})
        later = await entry(client, "g")
        text = await transcript_text(client, "g")
    assert cancel == {"session": "g", "cancelled": 1}
    assert reply["error"]["code"] == -32009
    assert reply["error"]["data"]["code"] == "cancelled"
    assert (listed["entries"], listed["busy"]) == (6, False)
    assert later["entries"] == 6
    assert summary not in text


async def test_compact_rejects_a_negative_keep_recent_turns(client):
    with anyio.fail_after(5):
        await create(client, session="g")
        err = await rpc_error(client, "session/compact", {"session": "g", "keepRecentTurns": -1})
    assert err.code == -32602
    assert "'keepRecentTurns'" in err.message

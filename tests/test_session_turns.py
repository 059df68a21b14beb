"""session/respond (§5): results, steps per kind of turn, validation, pipelining, cancellation."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

LONG_MS = 10_000
"""A scripted delay that only ends by cancellation: no test waits for it to elapse."""

STEP_FIELDS = ("index", "completedToolRounds", "toolCallingMode", "enabledTools", "trimmedEntries")


def step(index: int, rounds: int, mode: str, tools: list[str]) -> dict[str, Any]:
    return {
        "index": index,
        "completedToolRounds": rounds,
        "toolCallingMode": mode,
        "enabledTools": tools,
        "trimmedEntries": 0,
    }


def apple_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The five Apple fields of each step (oamd may add ``kind`` and ``isRepair``)."""
    return [{key: s[key] for key in STEP_FIELDS} for s in steps]


def scripted(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps), **extra}


def tool(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"The {name} tool.",
        "parameters": {"type": "object", "properties": {"gate": {"type": "string"}}},
    }


def calls(*names: str) -> dict[str, Any]:
    return {"toolCalls": [{"name": n, "arguments": {}} for n in names]}


async def create(client, **params: Any) -> dict[str, Any]:
    params.setdefault("model", "scripted")
    return await client.request("session/create", params)


async def respond(client, session: str, prompt: str = "Hello.", **params: Any) -> dict[str, Any]:
    return await client.request("session/respond", {"session": session, "prompt": prompt, **params})


async def rpc_error(client, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as info:
        await client.request(method, params)
    return info.value


async def answer_ok(params: dict[str, Any]) -> dict[str, Any]:
    return {"output": "ok"}


async def entry(client, session: str) -> dict[str, Any]:
    sessions = (await client.request("session/list"))["sessions"]
    return next(s for s in sessions if s["session"] == session)


# ---- the result ------------------------------------------------------------------------------


async def test_a_plain_turn_returns_exactly_session_text_tool_calls_usage_steps(client):
    with anyio.fail_after(5):
        await create(client, session="g", model=scripted({"text": "Welcome to the forge."}))
        result = await respond(client, "g", "Hello")
    assert list(result) == ["session", "text", "toolCalls", "usage", "steps"]
    assert result["session"] == "g"
    assert result["text"] == "Welcome to the forge."
    assert result["toolCalls"] == []


async def test_usage_holds_non_negative_integers_that_add_up(client):
    with anyio.fail_after(5):
        await create(client, session="g", model=scripted({"text": "Welcome to the forge."}))
        usage = (await respond(client, "g"))["usage"]
    assert set(usage) == {"inputTokens", "cachedInputTokens", "outputTokens", "totalTokens"}
    for value in usage.values():
        assert isinstance(value, int) and not isinstance(value, bool) and value >= 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


async def test_a_turn_without_stream_sends_no_session_events(client):
    with anyio.fail_after(5):
        await create(client, session="g", model=scripted({"text": "Welcome to the forge."}))
        await respond(client, "g")
    assert [n for n in client.recorder.notifications if n["method"] == "session/event"] == []


async def test_an_empty_prompt_is_allowed(client):
    with anyio.fail_after(5):
        await create(client, session="g", model=scripted({"template": "[{prompt}]"}))
        result = await respond(client, "g", "")
    assert result["text"] == "[]"


async def test_unknown_respond_keys_are_reported_in_the_result_warnings(client):
    with anyio.fail_after(5):
        await create(client, session="g", model=scripted({"text": "Hm."}))
        result = await respond(client, "g", "Hi", temprature=0.5)
    assert result["text"] == "Hm."
    assert list(result)[-1] == "warnings"
    assert len(result["warnings"]) == 1
    assert "'temprature'" in result["warnings"][0]


# ---- steps per kind of turn ------------------------------------------------------------------


async def test_a_session_without_tools_has_one_disallowed_step(client):
    with anyio.fail_after(5):
        await create(client, session="g", model=scripted({"text": "Hm."}))
        result = await respond(client, "g")
    assert apple_steps(result["steps"]) == [step(0, 0, "disallowed", [])]


async def test_auto_with_tools_allows_every_tool(client):
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            tools=[tool("open_gate"), tool("wave")],
            model=scripted({"text": "Hm."}),
        )
        result = await respond(client, "g")
    assert apple_steps(result["steps"]) == [step(0, 0, "allowed", ["open_gate", "wave"])]


async def test_auto_with_one_tool_round_takes_two_allowed_steps(client):
    client.tool_handler = answer_ok
    model = scripted(calls("wave"), {"text": "Done."})
    with anyio.fail_after(5):
        await create(client, session="g", tools=[tool("open_gate"), tool("wave")], model=model)
        result = await respond(client, "g")
    assert apple_steps(result["steps"]) == [
        step(0, 0, "allowed", ["open_gate", "wave"]),
        step(1, 1, "allowed", ["open_gate", "wave"]),
    ]


async def test_required_forces_the_first_step_then_allows(client):
    client.tool_handler = answer_ok
    model = scripted(calls("open_gate"), {"text": "Done."})
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            tools=[tool("open_gate"), tool("wave")],
            options={"toolChoice": "required"},
            model=model,
        )
        result = await respond(client, "g")
    assert apple_steps(result["steps"]) == [
        step(0, 0, "required", ["open_gate", "wave"]),
        step(1, 1, "allowed", ["open_gate", "wave"]),
    ]


async def test_a_named_tool_choice_requires_only_that_tool_on_the_first_step(client):
    client.tool_handler = answer_ok
    model = scripted(calls("wave"), {"text": "Waved."})
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            tools=[tool("open_gate"), tool("wave")],
            options={"toolChoice": {"tool": "wave"}},
            model=model,
        )
        result = await respond(client, "g")
    assert apple_steps(result["steps"]) == [
        step(0, 0, "required", ["wave"]),
        step(1, 1, "allowed", ["open_gate", "wave"]),
    ]


async def test_a_per_turn_tool_choice_none_overrides_a_required_session(client):
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            tools=[tool("open_gate")],
            options={"toolChoice": "required"},
            model=scripted({"text": "No tools today."}),
        )
        result = await respond(client, "g", toolChoice="none")
    assert apple_steps(result["steps"]) == [step(0, 0, "disallowed", [])]
    assert result["toolCalls"] == []
    assert client.recorder.tool_calls == []


async def test_max_tool_rounds_zero_disallows_tools_from_the_first_step(client):
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            tools=[tool("open_gate")],
            options={"maxToolRounds": 0},
            model=scripted({"text": "Hm."}),
        )
        result = await respond(client, "g")
    assert apple_steps(result["steps"]) == [step(0, 0, "disallowed", [])]


async def test_max_tool_rounds_one_disallows_tools_after_one_round(client):
    client.tool_handler = answer_ok
    model = scripted(calls("open_gate"), {"text": "Done."})
    with anyio.fail_after(5):
        await create(client, session="g", tools=[tool("open_gate")], model=model)
        result = await respond(client, "g", maxToolRounds=1)
    assert apple_steps(result["steps"]) == [
        step(0, 0, "allowed", ["open_gate"]),
        step(1, 1, "disallowed", []),
    ]


async def test_per_turn_enabled_tools_keep_the_session_order(client):
    tools = [tool("open_gate"), tool("wave"), tool("ring_bell")]
    with anyio.fail_after(5):
        await create(client, session="g", tools=tools, model=scripted({"text": "Hm."}))
        result = await respond(client, "g", enabledTools=["ring_bell", "open_gate"])
    assert apple_steps(result["steps"]) == [step(0, 0, "allowed", ["open_gate", "ring_bell"])]


async def test_explicit_with_respond_directly_answers_without_a_visible_tool_call(client):
    model = scripted(calls("respond_directly"), {"text": "Hello there."})
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            tools=[tool("check_menu")],
            options={"toolChoice": "explicit"},
            model=model,
        )
        result = await respond(client, "g", "Hi!")
    assert result["text"] == "Hello there."
    assert result["toolCalls"] == []
    assert client.recorder.tool_calls == []
    assert apple_steps(result["steps"]) == [
        step(0, 0, "required", ["check_menu"]),
        step(1, 1, "disallowed", []),
    ]


async def test_respond_directly_stays_out_of_the_transcript_and_entry_count(client):
    model = scripted(calls("respond_directly"), {"text": "Hello there."})
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            tools=[tool("check_menu")],
            options={"toolChoice": "explicit"},
            model=model,
        )
        await respond(client, "g", "Hi!")
        transcript = await client.request("session/transcript", {"session": "g"})
        listed = await entry(client, "g")
    assert "respond_directly" not in json.dumps(transcript)
    assert listed["entries"] == 2


async def test_explicit_with_a_real_tool_call_then_answers_normally(client):
    client.tool_handler = answer_ok
    model = scripted(calls("check_menu"), {"text": "Stew today."})
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            tools=[tool("check_menu")],
            options={"toolChoice": "explicit"},
            model=model,
        )
        result = await respond(client, "g", "What's cooking?")
    assert [r["call"]["name"] for r in result["toolCalls"]] == ["check_menu"]
    assert apple_steps(result["steps"]) == [
        step(0, 0, "required", ["check_menu"]),
        step(1, 1, "allowed", ["check_menu"]),
    ]


async def test_other_tool_choices_never_expose_respond_directly(client):
    client.tool_handler = answer_ok
    model = scripted(calls("check_menu"), {"text": "Stew today."})
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            tools=[tool("check_menu")],
            options={"toolChoice": "required"},
            model=model,
        )
        result = await respond(client, "g", "What's cooking?")
        transcript = await client.request("session/transcript", {"session": "g"})
    for s in result["steps"]:
        assert "respond_directly" not in s["enabledTools"]
    assert "respond_directly" not in json.dumps(transcript)


# ---- validation ------------------------------------------------------------------------------


async def test_respond_to_an_unknown_session_is_session_not_found(client):
    with anyio.fail_after(5):
        err = await rpc_error(client, "session/respond", {"session": "nobody", "prompt": "hi"})
    assert err.code == -32020 and err.name == "session_not_found"
    assert err.data["session"] == "nobody"
    assert err.message == "No session with id 'nobody'."


async def test_a_missing_prompt_is_named(client):
    with anyio.fail_after(5):
        await create(client, session="g")
        err = await rpc_error(client, "session/respond", {"session": "g"})
    assert err.code == -32602
    assert err.message == "Missing required parameter 'prompt'."


async def test_a_non_string_prompt_is_invalid_params(client):
    with anyio.fail_after(5):
        await create(client, session="g")
        err = await rpc_error(client, "session/respond", {"session": "g", "prompt": 5})
    assert err.code == -32602
    assert err.message == "Parameter 'prompt' must be a string; got 5."


async def test_a_non_boolean_stream_is_invalid_params(client):
    with anyio.fail_after(5):
        await create(client, session="g")
        err = await rpc_error(
            client, "session/respond", {"session": "g", "prompt": "hi", "stream": "yes"}
        )
    assert err.code == -32602
    assert err.message == """Parameter 'stream' must be a boolean; got "yes"."""


async def test_an_invalid_per_turn_tool_choice_is_named(client):
    with anyio.fail_after(5):
        await create(client, session="g")
        err = await rpc_error(
            client, "session/respond", {"session": "g", "prompt": "hi", "toolChoice": "sometimes"}
        )
    assert err.code == -32602
    assert err.message == (
        """'toolChoice' must be "auto", "none", "required", "explicit" or {"tool": "<name>"}; """
        """got "sometimes"."""
    )


async def test_a_per_turn_tool_choice_naming_a_missing_tool_fails_when_the_turn_starts(client):
    with anyio.fail_after(5):
        await create(client, session="g", tools=[tool("wave")])
        err = await rpc_error(
            client,
            "session/respond",
            {"session": "g", "prompt": "hi", "toolChoice": {"tool": "ghost"}},
        )
    assert err.code == -32602
    assert err.message == "'toolChoice' names tool 'ghost', which session 'g' does not have."


async def test_a_pipelined_set_tools_before_the_turn_counts_for_its_tool_choice(client):
    client.tool_handler = answer_ok
    model = scripted(calls("wave"), {"text": "waved"})
    with anyio.fail_after(5):
        await create(client, session="g", model=model)
        set_tools = await client.start(
            "session/setTools", {"session": "g", "tools": [tool("wave")]}
        )
        turn = await client.start(
            "session/respond", {"session": "g", "prompt": "hi", "toolChoice": {"tool": "wave"}}
        )
        assert "result" in await client.wait(set_tools)
        reply = await client.wait(turn)
    assert reply["result"]["text"] == "waved"
    assert apple_steps(reply["result"]["steps"])[0] == step(0, 0, "required", ["wave"])


async def test_a_system_model_turn_fails_while_scripted_sessions_keep_working(client):
    with anyio.fail_after(5):
        await client.request("session/create", {"session": "sys"})
        await create(client, session="scr", model=scripted({"text": "Still here."}))
        err = await rpc_error(client, "session/respond", {"session": "sys", "prompt": "hi"})
        result = await respond(client, "scr")
    assert err.code == -32001 and err.name == "model_unavailable"
    assert result["text"] == "Still here."


# ---- pipelining and concurrency --------------------------------------------------------------


async def test_pipelined_requests_keep_their_order(client):
    model = scripted({"template": "A:{prompt}", "delayMs": 50}, {"template": "B:{prompt}"})
    with anyio.fail_after(5):
        created = await client.start("session/create", {"session": "pipe", "model": model})
        first = await client.start("session/respond", {"session": "pipe", "prompt": "first"})
        second = await client.start("session/respond", {"session": "pipe", "prompt": "second"})
        setting = await client.start(
            "session/setInstructions", {"session": "pipe", "instructions": "Be brief."}
        )
        replies = [await client.wait(i) for i in (created, first, second, setting)]
    assert replies[0]["result"]["session"] == "pipe"
    assert replies[1]["result"]["text"] == "A:first"
    assert replies[2]["result"]["text"] == "B:second"
    assert replies[3]["result"] == {"session": "pipe"}
    order = [m.get("id") for m in client.recorder.received if "method" not in m]
    assert order == [created, first, second, setting]


async def test_turns_on_two_sessions_run_in_parallel_while_other_requests_are_served(client):
    with anyio.fail_after(5):
        await create(client, session="a", model=scripted({"text": "A", "delayMs": 400}))
        await create(client, session="b", model=scripted({"text": "B", "delayMs": 400}))
        start = time.monotonic()
        turn_a = await client.start("session/respond", {"session": "a", "prompt": "hi"})
        turn_b = await client.start("session/respond", {"session": "b", "prompt": "hi"})
        created = await client.wait(
            await client.start("session/create", {"session": "c", "model": "scripted"})
        )
        answered_meanwhile = not any(
            m.get("id") in (turn_a, turn_b) for m in client.recorder.received
        )
        replies = [await client.wait(turn_a), await client.wait(turn_b)]
        elapsed = time.monotonic() - start
    assert created["result"]["session"] == "c"
    assert answered_meanwhile
    assert [r["result"]["text"] for r in replies] == ["A", "B"]
    assert elapsed < 0.75


async def test_a_turn_queued_behind_its_own_session_waits_for_it(client):
    model_a = scripted({"text": "a1", "delayMs": 300}, {"text": "a2", "delayMs": 300})
    with anyio.fail_after(5):
        await create(client, session="a", model=model_a)
        await create(client, session="b", model=scripted({"text": "b1", "delayMs": 300}))
        start = time.monotonic()
        a1 = await client.start("session/respond", {"session": "a", "prompt": "one"})
        b1 = await client.start("session/respond", {"session": "b", "prompt": "one"})
        a2 = await client.start("session/respond", {"session": "a", "prompt": "two"})
        reply = await client.wait(a2)
        elapsed = time.monotonic() - start
        await client.wait(a1)
        await client.wait(b1)
    order = [m.get("id") for m in client.recorder.received if "method" not in m]
    assert reply["result"]["text"] == "a2"
    assert order.index(a1) < order.index(a2)
    assert order.index(b1) < order.index(a2)
    assert elapsed >= 0.55


# ---- session/cancel --------------------------------------------------------------------------


async def test_cancel_counts_running_and_queued_turns_and_each_gets_cancelled(client):
    slow = scripted({"text": "one", "delayMs": LONG_MS}, {"text": "two", "delayMs": LONG_MS})
    with anyio.fail_after(5):
        await create(client, session="g", model=slow)
        first = await client.start("session/respond", {"session": "g", "prompt": "a"})
        second = await client.start("session/respond", {"session": "g", "prompt": "b"})
        cancelled = await client.request("session/cancel", {"session": "g"})
        replies = [await client.wait(first), await client.wait(second)]
        listed = await entry(client, "g")
    assert cancelled == {"session": "g", "cancelled": 2}
    for reply in replies:
        assert reply["error"]["code"] == -32009
        assert reply["error"]["data"]["code"] == "cancelled"
    assert (listed["entries"], listed["busy"], listed["pendingOperations"]) == (0, False, 0)


async def test_cancel_as_a_notification_cancels_the_turn(client):
    with anyio.fail_after(5):
        await create(client, session="g", model=scripted({"text": "late", "delayMs": LONG_MS}))
        turn = await client.start("session/respond", {"session": "g", "prompt": "a"})
        await client.notify("session/cancel", {"session": "g"})
        reply = await client.wait(turn)
        listed = await entry(client, "g")
    assert reply["error"]["code"] == -32009
    assert reply["error"]["data"]["code"] == "cancelled"
    assert listed["entries"] == 0


async def test_cancel_of_an_idle_session_counts_nothing(client):
    with anyio.fail_after(5):
        await create(client, session="g")
        result = await client.request("session/cancel", {"session": "g"})
    assert result == {"session": "g", "cancelled": 0}


async def test_cancel_does_not_count_a_turn_whose_response_is_out(client):
    with anyio.fail_after(5):
        await create(client, session="g", model=scripted({"text": "Done."}))
        reply = await respond(client, "g")
        result = await client.request("session/cancel", {"session": "g"})
        listed = await entry(client, "g")
    assert reply["text"] == "Done."
    assert result == {"session": "g", "cancelled": 0}
    assert listed["entries"] == 2


async def test_cancel_of_an_unknown_session_is_session_not_found(client):
    with anyio.fail_after(5):
        err = await rpc_error(client, "session/cancel", {"session": "nobody"})
    assert err.code == -32020 and err.data["session"] == "nobody"


async def test_a_cancelled_queued_setting_is_not_applied(client):
    with anyio.fail_after(5):
        await create(
            client,
            session="g",
            instructions="Old.",
            model=scripted({"text": "x", "delayMs": LONG_MS}),
        )
        turn = await client.start("session/respond", {"session": "g", "prompt": "a"})
        setting = await client.start(
            "session/setInstructions", {"session": "g", "instructions": "New."}
        )
        cancelled = await client.request("session/cancel", {"session": "g"})
        replies = [await client.wait(turn), await client.wait(setting)]
        listed = await entry(client, "g")
    assert cancelled["cancelled"] == 2
    assert [r["error"]["code"] for r in replies] == [-32009, -32009]
    assert listed["instructions"] == "Old."

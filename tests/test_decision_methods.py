"""decision/decide and decision/decideMany: results, validation, fallbacks, tools, concurrency."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from oamd.limits import MAX_DECISION_CONCURRENCY, MAX_DECISION_OPTIONS, MAX_DECISIONS

pytestmark = pytest.mark.anyio

GOBLIN_OPTIONS = [
    {"id": "attack", "description": "Keep fighting"},
    {"id": "flee", "description": "Run into the woods"},
    "beg",
]
RESULT_KEYS = ["optionID", "reasoning", "confidence", "toolCalls", "usage", "isFallback"]
ZERO_USAGE = {"inputTokens": 0, "cachedInputTokens": 0, "outputTokens": 0, "totalTokens": 0}
GUARDRAIL = {"error": "guardrail_violation"}
MEASURE = {
    "name": "measure",
    "description": "Distance to a target in meters.",
    "parameters": {"type": "object", "properties": {"target": {"type": "string"}}},
}
CANCEL_REASON = "The tool call timed out or its request was cancelled."


def scripted(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps), **extra}


def answer(choice: str, reasoning: str = "Because.", confidence: int = 70, **extra: Any) -> dict:
    return {"json": {"reasoning": reasoning, "choice": choice, "confidence": confidence}, **extra}


async def decide(client, **params: Any) -> dict[str, Any]:
    params.setdefault("situation", "The goblin has 3 HP left.")
    params.setdefault("options", GOBLIN_OPTIONS)
    return await client.request("decision/decide", params)


async def decide_error(client, **params: Any) -> dict[str, Any]:
    params.setdefault("model", "scripted")
    response = await client.call("decision/decide", params)
    return response["error"]


def assert_usage(usage: dict[str, Any]) -> None:
    assert list(usage) == ["inputTokens", "cachedInputTokens", "outputTokens", "totalTokens"]
    assert all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in usage.values())
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


def replying(result: dict[str, Any]):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return result

    return handler


# ---- decide ----------------------------------------------------------------------------------


async def test_decide_returns_the_choice_with_keys_in_order(client):
    with anyio.fail_after(5):
        result = await decide(
            client,
            actor={"name": "Snik", "personality": "Timid and greedy."},
            context={"hp": 3, "playerHp": 40},
            model=scripted(answer("flee", "Snik is timid.", 78)),
        )
    assert list(result) == RESULT_KEYS
    assert {k: v for k, v in result.items() if k != "usage"} == {
        "optionID": "flee",
        "reasoning": "Snik is timid.",
        "confidence": 78,
        "toolCalls": [],
        "isFallback": False,
    }
    assert_usage(result["usage"])


async def test_a_single_option_answers_at_once_without_the_model(client):
    with anyio.fail_after(5):
        result = await decide(
            client,
            situation="Cornered.",
            options=["fight"],
            model=scripted({"error": "generation_failed"}, fallback={"error": "generation_failed"}),
        )
    assert result == {
        "optionID": "fight",
        "reasoning": "It is the only option.",
        "confidence": 100,
        "toolCalls": [],
        "usage": ZERO_USAGE,
        "isFallback": False,
    }
    assert list(result) == RESULT_KEYS


async def test_the_choice_matches_case_insensitively(client):
    with anyio.fail_after(5):
        result = await decide(client, model=scripted(answer("FLEE")))
    assert result["optionID"] == "flee"


async def test_option_ids_are_trimmed(client):
    with anyio.fail_after(5):
        result = await decide(client, options=[" a ", "b"], model=scripted(answer("a")))
    assert result["optionID"] == "a"


async def test_unknown_keys_warn_at_the_end(client):
    with anyio.fail_after(5):
        result = await decide(client, mood="grim", model=scripted(answer("beg")))
    assert list(result) == [*RESULT_KEYS, "warnings"]
    assert result["warnings"] == ["Unknown parameter 'mood' was ignored."]


async def test_an_npc_actor_decides_as_that_npc(client):
    with anyio.fail_after(5):
        await client.request(
            "npc/create",
            {
                "npc": "snik",
                "persona": {"name": "Snik", "role": "a goblin scout"},
                "model": "scripted",
            },
        )
        result = await decide(client, actor="snik", model=scripted(answer("beg")))
    assert result["optionID"] == "beg"


# ---- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"situation": "x", "options": ["a", "a"]}, "Duplicate option id 'a' in 'options'."),
        (
            {"situation": "x", "options": []},
            """'options' must be a non-empty array of {"id", "description"} objects.""",
        ),
        (
            {"situation": "x", "options": ["a", 5]},
            """'options[1]' must be an object {"id", "description"} or an id string.""",
        ),
        (
            {"situation": "x", "options": [{"description": "no id"}, "b"]},
            "Missing required parameter 'options[0].id'.",
        ),
        ({"situation": "x", "options": ["a", " "]}, "'options[1].id' must not be empty."),
        (
            {"situation": "x", "options": ["a", "b"], "fallbackOptionID": "c"},
            "'fallbackOptionID' must be one of the option ids (a, b); got 'c'.",
        ),
        (
            {"situation": "x", "options": ["a", "b"], "toolChoice": {"tool": "scout"}},
            "'toolChoice' names tool 'scout', which is not in 'tools'.",
        ),
        ({"options": ["a", "b"]}, "Missing required parameter 'situation'."),
        ({"options": []}, "Missing required parameter 'situation'."),
    ],
    ids=[
        "duplicate",
        "empty",
        "element",
        "no-id",
        "blank-id",
        "fallback",
        "toolChoice",
        "no-situation",
        "situation-first",
    ],
)
async def test_invalid_decisions_fail_before_the_model(client, params, message):
    with anyio.fail_after(5):
        error = await decide_error(client, **params)
    assert error["code"] == -32602
    assert error["data"]["code"] == "invalid_params"
    assert error["message"] == message


async def test_an_unknown_npc_actor_is_npc_not_found(client):
    with anyio.fail_after(5):
        error = await decide_error(client, situation="x", options=["a", "b"], actor="nobody")
    assert error["code"] == -32050
    assert error["data"] == {"code": "npc_not_found", "npc": "nobody"}


async def test_a_fallback_option_id_is_trimmed(client):
    with anyio.fail_after(5):
        result = await decide(
            client, options=["a", "b"], fallbackOptionID=" b ", model=scripted(GUARDRAIL)
        )
    assert (result["optionID"], result["isFallback"]) == ("b", True)


# ---- guardrails ------------------------------------------------------------------------------


@pytest.mark.parametrize("error", ["guardrail_violation", "refusal"])
async def test_a_blocked_decision_uses_the_fallback_option(client, error):
    with anyio.fail_after(5):
        result = await decide(
            client,
            situation="The ogre swings its club.",
            fallbackOptionID="flee",
            model=scripted({"error": error}),
        )
    assert result == {
        "optionID": "flee",
        "reasoning": "",
        "confidence": 0,
        "toolCalls": [],
        "usage": ZERO_USAGE,
        "isFallback": True,
    }
    assert list(result) == RESULT_KEYS


async def test_a_blocked_decision_without_fallback_is_guardrail_violation(client):
    with anyio.fail_after(5):
        response = await client.call(
            "decision/decide",
            {
                "situation": "The ogre swings.",
                "options": GOBLIN_OPTIONS,
                "model": scripted(GUARDRAIL),
            },
        )
    assert response["error"]["code"] == -32002
    assert response["error"]["data"]["code"] == "guardrail_violation"


async def test_other_errors_are_not_masked_by_the_fallback(client):
    with anyio.fail_after(5):
        response = await client.call(
            "decision/decide",
            {
                "situation": "x",
                "options": GOBLIN_OPTIONS,
                "fallbackOptionID": "flee",
                "model": scripted({"error": "context_size_exceeded"}),
            },
        )
    assert response["error"]["code"] == -32004


# ---- tools -----------------------------------------------------------------------------------


async def test_client_tools_are_called_with_the_request_id(client):
    seen: list[dict[str, Any]] = []

    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"output": {"distance": 12, "target": params["call"]["arguments"].get("target")}}

    client.tool_handler = handler
    with anyio.fail_after(5):
        await client.request(
            "npc/create",
            {
                "npc": "snik",
                "persona": {"name": "Snik", "role": "a goblin scout"},
                "model": "scripted",
            },
        )
        request = await client.start(
            "decision/decide",
            {
                "situation": "An adventurer approaches.",
                "options": GOBLIN_OPTIONS,
                "actor": "snik",
                "tools": [MEASURE],
                "toolChoice": "required",
                "model": scripted(
                    {"toolCalls": [{"name": "measure", "arguments": {"target": "adventurer"}}]},
                    answer("flee", "Far enough to run.", 60),
                ),
            },
        )
        result = (await client.wait(request))["result"]
    assert result["optionID"] == "flee"
    (record,) = result["toolCalls"]
    assert record["call"]["name"] == "measure"
    assert record["output"]["distance"] == 12
    (params,) = seen
    assert list(params) == ["requestId", "call"]
    assert params["requestId"] == request
    assert params["call"]["arguments"] == {"target": "adventurer"}
    assert params["call"]["id"] == record["call"]["id"]


async def test_a_forwarded_tool_timeout_sends_tool_cancel(client):
    with anyio.fail_after(5):
        request = await client.start(
            "decision/decide",
            {
                "situation": "Night falls.",
                "options": ["camp", "march"],
                "tools": [{"name": "weather", "description": "Current weather."}],
                "toolTimeoutSeconds": 0.05,
                "model": scripted(
                    {"toolCalls": [{"name": "weather"}]},
                    answer("camp", "Unknown weather; rest.", 40),
                ),
            },
        )
        result = (await client.wait(request))["result"]
        cancel = await client.next_message(lambda m: m.get("method") == "tool/cancel")
    assert result["optionID"] == "camp"
    (record,) = result["toolCalls"]
    assert record["isError"] is True
    assert record["output"] == "Tool 'weather' timed out after 50ms."
    (call,) = client.recorder.tool_calls
    assert set(cancel["params"]) == {"requestId", "id", "callId", "reason"}
    assert cancel["params"]["requestId"] == request
    assert cancel["params"]["id"] == call["id"]
    assert cancel["params"]["callId"] == call["params"]["call"]["id"]
    assert cancel["params"]["reason"] == CANCEL_REASON


# ---- decideMany ------------------------------------------------------------------------------


async def test_decide_many_keeps_order_and_isolates_failures(client):
    with anyio.fail_after(5):
        result = await client.request(
            "decision/decideMany",
            {
                "maxConcurrency": 1,
                "requests": [
                    {"situation": "Guard A hears a noise.", "options": ["investigate", "ignore"]},
                    {"situation": "Guard B sees blood.", "options": ["investigate", "ignore"]},
                    {"situation": "Guard C is alone.", "options": ["wait"]},
                ],
                "model": scripted(answer("investigate", "Duty.", 90), GUARDRAIL),
            },
        )
    assert list(result) == ["results"]
    first, second, third = result["results"]
    assert first["optionID"] == "investigate"
    assert list(first) == RESULT_KEYS
    assert second == {
        "error": {
            "code": -32002,
            "message": "Scripted guardrail_violation.",
            "data": {"code": "guardrail_violation"},
        }
    }
    assert third == {
        "optionID": "wait",
        "reasoning": "It is the only option.",
        "confidence": 100,
        "toolCalls": [],
        "usage": ZERO_USAGE,
        "isFallback": False,
    }


async def test_decide_many_shares_one_script_across_requests(client):
    with anyio.fail_after(5):
        result = await client.request(
            "decision/decideMany",
            {
                "maxConcurrency": 1,
                "requests": [
                    {"situation": "A", "options": ["x", "y"]},
                    {"situation": "B", "options": ["x", "y"]},
                ],
                "model": scripted(answer("x"), answer("y")),
            },
        )
    assert [r["optionID"] for r in result["results"]] == ["x", "y"]


async def test_decide_many_tool_calls_carry_the_index_first(client):
    client.tool_handler = replying({"output": "clear"})
    tool = {"name": "weather", "description": "Current weather."}
    with anyio.fail_after(5):
        request = await client.start(
            "decision/decideMany",
            {
                "maxConcurrency": 1,
                "requests": [
                    {"situation": "A", "options": ["x", "y"], "tools": [tool]},
                    {"situation": "B", "options": ["x", "y"], "tools": [tool]},
                ],
                "model": scripted({"toolCalls": [{"name": "weather"}]}, fallback=answer("y")),
            },
        )
        result = (await client.wait(request))["result"]
    call = client.recorder.tool_calls[0]
    assert list(call["params"]) == ["index", "requestId", "call"]
    assert (call["params"]["index"], call["params"]["requestId"]) == (0, request)
    assert [r["optionID"] for r in result["results"]] == ["y", "y"]
    assert result["results"][0]["toolCalls"][0]["output"] == "clear"


async def test_decide_many_runs_at_most_max_concurrency_at_once(client):
    tool = {"name": "weather", "description": "Current weather."}
    with anyio.fail_after(5):
        request = await client.start(
            "decision/decideMany",
            {
                "maxConcurrency": 2,
                "requests": [
                    {"situation": f"S{i}", "options": ["x", "y"], "tools": [tool]} for i in range(3)
                ],
                "model": scripted(
                    *[{"toolCalls": [{"name": "weather"}]}] * 3,
                    fallback=answer("x"),
                ),
            },
        )
        await client.next_message(lambda m: len(client.recorder.tool_calls) >= 2)
        assert await client.request("ping") == {}
        outstanding = [c["params"]["index"] for c in client.recorder.tool_calls]
        client.tool_handler = replying({"output": "clear"})
        for call in list(client.recorder.tool_calls):
            await client.send({"jsonrpc": "2.0", "id": call["id"], "result": {"output": "clear"}})
        result = (await client.wait(request))["result"]
    assert sorted(outstanding) == [0, 1]
    assert [r["optionID"] for r in result["results"]] == ["x", "x", "x"]


async def test_decide_many_validation_fails_the_whole_call(client):
    with anyio.fail_after(5):
        response = await client.call(
            "decision/decideMany",
            {"requests": [{"situation": "x", "options": ["a"]}, {"situation": "y"}]},
        )
    assert response["error"]["code"] == -32602
    assert response["error"]["message"] == "Missing required parameter 'requests[1].options'."


@pytest.mark.parametrize("params", [{"requests": []}, {}])
async def test_decide_many_needs_requests(client, params):
    with anyio.fail_after(5):
        response = await client.call("decision/decideMany", params)
    assert response["error"]["code"] == -32602
    assert response["error"]["message"] == "'requests' must be a non-empty array of decisions."


async def test_decide_many_elements_must_be_objects(client):
    with anyio.fail_after(5):
        response = await client.call(
            "decision/decideMany", {"requests": [{"situation": "x", "options": ["a"]}, 3]}
        )
    assert response["error"]["message"] == "'requests[1]' must be an object."


async def test_decide_many_max_concurrency_must_be_at_least_one(client):
    with anyio.fail_after(5):
        response = await client.call(
            "decision/decideMany",
            {"maxConcurrency": 0, "requests": [{"situation": "x", "options": ["a"]}]},
        )
    assert response["error"]["code"] == -32602


@pytest.mark.parametrize("value", [0, -3, 1.5, "2", True])
async def test_decide_many_max_concurrency_must_be_an_integer_of_at_least_one(client, value):
    with anyio.fail_after(5):
        response = await client.call(
            "decision/decideMany",
            {"maxConcurrency": value, "requests": [{"situation": "x", "options": ["a"]}]},
        )
    assert response["error"]["code"] == -32602
    assert "'maxConcurrency'" in response["error"]["message"]


async def test_decide_many_takes_at_most_max_decisions_requests(client):
    one = {"situation": "x", "options": ["a"]}
    with anyio.fail_after(20):
        result = await client.request("decision/decideMany", {"requests": [one] * MAX_DECISIONS})
        response = await client.call(
            "decision/decideMany", {"requests": [one] * (MAX_DECISIONS + 1)}
        )
    assert len(result["results"]) == MAX_DECISIONS
    error = response["error"]
    assert (error["code"], error["data"]["code"]) == (-32055, "limit_reached")
    assert error["data"]["limit"] == MAX_DECISIONS
    assert f"at most {MAX_DECISIONS}" in error["message"]


async def test_too_many_decisions_are_refused_before_any_is_parsed(client):
    # 100,000 decisions in one line used to be parsed one by one first: seconds of a blocked
    # loop and hundreds of MiB
    with anyio.fail_after(20):
        response = await client.call("decision/decideMany", {"requests": [3] * 100_000})
        assert await client.request("ping") == {}
    assert response["error"]["data"] == {"code": "limit_reached", "limit": MAX_DECISIONS}


async def test_a_larger_max_concurrency_runs_at_most_max_decision_concurrency_at_once(client):
    tool = {"name": "weather", "description": "Current weather."}
    count = MAX_DECISION_CONCURRENCY + 4
    with anyio.fail_after(10):
        request = await client.start(
            "decision/decideMany",
            {
                "maxConcurrency": 1000,
                "requests": [
                    {"situation": f"S{i}", "options": ["x", "y"], "tools": [tool]}
                    for i in range(count)
                ],
                "model": scripted(
                    *[{"toolCalls": [{"name": "weather"}]}] * count,
                    fallback=answer("x"),
                ),
            },
        )
        await client.next_message(
            lambda m: len(client.recorder.tool_calls) >= MAX_DECISION_CONCURRENCY
        )
        assert await client.request("ping") == {}  # the decisions not started wait, not the loop
        outstanding = [c["params"]["index"] for c in client.recorder.tool_calls]
        client.tool_handler = replying({"output": "clear"})
        for call in list(client.recorder.tool_calls):
            await client.send({"jsonrpc": "2.0", "id": call["id"], "result": {"output": "clear"}})
        result = (await client.wait(request))["result"]
    assert sorted(outstanding) == list(range(MAX_DECISION_CONCURRENCY))
    assert [r["optionID"] for r in result["results"]] == ["x"] * count


async def test_decide_many_warns_about_unknown_keys_per_request(client):
    with anyio.fail_after(5):
        result = await client.request(
            "decision/decideMany",
            {
                "requests": [{"situation": "x", "options": ["a"], "mood": "grim"}],
                "model": "scripted",
            },
        )
    assert list(result) == ["results", "warnings"]
    assert result["warnings"] == ["Unknown parameter 'requests[0].mood' was ignored."]


async def test_decide_many_has_no_warnings_key_without_warnings(client):
    with anyio.fail_after(5):
        result = await client.request(
            "decision/decideMany", {"requests": [{"situation": "x", "options": ["a"]}]}
        )
    assert list(result) == ["results"]


async def test_decide_many_rejects_engine_settings_inside_a_request(client):
    with anyio.fail_after(5):
        result = await client.request(
            "decision/decideMany",
            {"requests": [{"situation": "x", "options": ["a"], "temperature": 0.5}]},
        )
    assert result["warnings"] == ["Unknown parameter 'requests[0].temperature' was ignored."]


# ---- concurrency -----------------------------------------------------------------------------


async def test_a_hundred_decisions_run_concurrently_without_mixing_answers(client):
    with anyio.fail_after(20):
        requests = []
        for i in range(100):
            options = [f"opt{i}", f"other{i}"]
            requests.append(
                await client.start(
                    "decision/decide",
                    {
                        "situation": f"Decision {i}",
                        "options": options,
                        "model": scripted(
                            answer(f"opt{i}", f"Reason {i}.", i, delayMs=(i * 13) % 100)
                        ),
                    },
                )
            )
        results = [(await client.wait(r))["result"] for r in requests]
    for i, result in enumerate(results):
        assert (result["optionID"], result["reasoning"], result["confidence"]) == (
            f"opt{i}",
            f"Reason {i}.",
            i,
        )


async def test_a_hundred_requests_in_one_decide_many(client):
    with anyio.fail_after(20):
        result = await client.request(
            "decision/decideMany",
            {
                "maxConcurrency": 100,
                "requests": [{"situation": f"S{i}", "options": ["x", "y"]} for i in range(100)],
                "model": scripted(fallback=answer("y")),
            },
        )
    assert [r["optionID"] for r in result["results"]] == ["y"] * 100


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temperature": -1}, "'temperature'"),
        ({"maxToolRounds": -1}, "'maxToolRounds'"),
    ],
)
async def test_engine_settings_are_validated(client, params, message):
    with anyio.fail_after(5):
        error = await decide_error(client, situation="x", options=["a", "b"], **params)
    assert error["code"] == -32602
    assert message in error["message"]


async def test_a_decision_takes_at_most_max_decision_options_options(client):
    options = [{"id": f"o{i}"} for i in range(MAX_DECISION_OPTIONS + 1)]
    with anyio.fail_after(5):
        error = await decide_error(
            client, situation="x", options=options, model={"type": "scripted"}
        )
        assert error["code"] == -32055 and error["data"]["limit"] == MAX_DECISION_OPTIONS
        assert "'options'" in error["message"]
        many = await client.call(
            "decision/decideMany",
            {
                "requests": [{"situation": "x", "options": options}],
                "model": {"type": "scripted"},
            },
        )
        assert many["error"]["code"] == -32055
        assert "'requests[0].options'" in many["error"]["message"]
        # the limit itself is fine
        await client.request(
            "decision/decide",
            {
                "situation": "x",
                "options": options[:MAX_DECISION_OPTIONS],
                "model": {"type": "scripted", "steps": [{"json": {"choice": "o3"}}]},
            },
        )

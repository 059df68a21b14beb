"""Client tools (§7): tool/call round trips, reply forms, budgets, timeouts and tool/cancel."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

RECORD_KEYS = {"call", "output", "isError", "durationSeconds"}
BUDGET_TEXT = (
    "The tool budget for this turn is used up. Answer with the information you already have."
)

OPEN_GATE = {
    "name": "open_gate",
    "description": "Ask the game engine to open a named gate. Returns whether it opened.",
    "parameters": {
        "type": "object",
        "properties": {"gate": {"type": "string"}},
        "required": ["gate"],
    },
}


def scripted(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps), **extra}


def open_gate(gate: str = "north", **extra: Any) -> dict[str, Any]:
    return {"name": "open_gate", "arguments": {"gate": gate}, **extra}


async def create_guard(client, *steps: dict[str, Any], tools=None, **params: Any) -> None:
    await client.request(
        "session/create",
        {
            "session": "guard",
            "tools": tools if tools is not None else [OPEN_GATE],
            "model": scripted(*steps),
            **params,
        },
    )


def replying(result: dict[str, Any]):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return result

    return handler


def is_tool_call(msg: dict[str, Any]) -> bool:
    return msg.get("method") == "tool/call"


def is_tool_cancel(msg: dict[str, Any]) -> bool:
    return msg.get("method") == "tool/cancel"


async def reply_to(client, tool_call: dict[str, Any], result: dict[str, Any]) -> None:
    await client.send({"jsonrpc": "2.0", "id": tool_call["id"], "result": result})


def index_of(client, predicate) -> int:
    return next(i for i, m in enumerate(client.recorder.received) if predicate(m))


# ---- the round trip --------------------------------------------------------------------------


async def test_tool_call_carries_session_request_id_and_the_call(client):
    client.tool_handler = replying({"output": {"opened": True}})
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate()]},
            {"template": "Gate result: {toolOutput}"},
            options={"toolChoice": "required"},
        )
        turn = await client.start(
            "session/respond", {"session": "guard", "prompt": "Open the north gate."}
        )
        await client.wait(turn)
    (request,) = client.recorder.tool_calls
    assert isinstance(request["id"], str) and request["id"].startswith("t-")
    params = request["params"]
    assert set(params) == {"session", "requestId", "call"}
    assert params["session"] == "guard"
    assert params["requestId"] == turn
    assert set(params["call"]) == {"id", "name", "arguments"}
    assert params["call"]["name"] == "open_gate"
    assert params["call"]["arguments"] == {"gate": "north"}
    assert params["call"]["id"].startswith("call_")


async def test_the_tool_output_reaches_the_model_and_the_record(client):
    client.tool_handler = replying({"output": {"opened": True}})
    with anyio.fail_after(5):
        await create_guard(
            client, {"toolCalls": [open_gate()]}, {"template": "Gate result: {toolOutput}"}
        )
        result = await client.request(
            "session/respond", {"session": "guard", "prompt": "Open the north gate."}
        )
    assert result["text"] == 'Gate result: {"opened":true}'
    (record,) = result["toolCalls"]
    assert set(record) == RECORD_KEYS
    assert record["call"] == client.recorder.tool_calls[0]["params"]["call"]
    assert record["output"] == {"opened": True}
    assert record["isError"] is False
    assert isinstance(record["durationSeconds"], int | float) and record["durationSeconds"] >= 0


async def test_a_scripted_call_id_becomes_the_call_id(client):
    client.tool_handler = replying({"output": "Opened."})
    with anyio.fail_after(5):
        await create_guard(client, {"toolCalls": [open_gate(id="gate-1")]}, {"text": "Done."})
        result = await client.request("session/respond", {"session": "guard", "prompt": "Open."})
    assert client.recorder.tool_calls[0]["params"]["call"]["id"] == "gate-1"
    assert result["toolCalls"][0]["call"]["id"] == "gate-1"


async def test_tool_call_ids_count_up_across_turns(client):
    client.tool_handler = replying({"output": "Opened."})
    model_steps = [{"toolCalls": [open_gate()]}, {"text": "Done."}] * 2
    with anyio.fail_after(5):
        await create_guard(client, *model_steps)
        await client.request("session/respond", {"session": "guard", "prompt": "Open."})
        await client.request("session/respond", {"session": "guard", "prompt": "Again."})
    assert [c["id"] for c in client.recorder.tool_calls] == ["t-1", "t-2"]


async def test_the_turn_waits_for_the_client_to_answer(client):
    with anyio.fail_after(5):
        await create_guard(client, {"toolCalls": [open_gate()]}, {"template": "{toolOutput}"})
        turn = await client.start("session/respond", {"session": "guard", "prompt": "Open."})
        tool_call = await client.next_message(is_tool_call)
        assert await client.request("ping") == {}
        answered_early = any(m.get("id") == turn for m in client.recorder.received)
        await reply_to(client, tool_call, {"output": "The gate opened."})
        reply = await client.wait(turn)
    assert not answered_early
    assert reply["result"]["text"] == "The gate opened."


# ---- reply forms -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "output", "is_error", "seen"),
    [
        ({"output": "The gate opened."}, "The gate opened.", False, "The gate opened."),
        ({"output": {"opened": True}}, {"opened": True}, False, '{"opened":true}'),
        (
            {"output": "The chain is jammed.", "isError": True},
            "The chain is jammed.",
            True,
            "Error: The chain is jammed.",
        ),
        ({"output": {"code": 7}, "isError": True}, '{"code":7}', True, 'Error: {"code":7}'),
        (
            RpcError(-32000, "Gate subsystem offline"),
            "Gate subsystem offline",
            True,
            "Error: Gate subsystem offline",
        ),
        ({"opened": False}, {"opened": False}, False, '{"opened":false}'),
    ],
    ids=["text", "json", "text-error", "json-error", "rpc-error", "lenient"],
)
async def test_each_reply_form_gives_its_record_and_what_the_model_sees(
    client, reply, output, is_error, seen
):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        if isinstance(reply, RpcError):
            raise reply
        return reply

    client.tool_handler = handler
    with anyio.fail_after(5):
        await create_guard(client, {"toolCalls": [open_gate()]}, {"template": "R:{toolOutput}"})
        result = await client.request("session/respond", {"session": "guard", "prompt": "Open."})
    (record,) = result["toolCalls"]
    assert record["output"] == output
    assert record["isError"] is is_error
    assert result["text"] == f"R:{seen}"


async def test_tool_outputs_joins_every_output_of_the_turn(client):
    answers = iter([{"output": "Opened."}, {"opened": False}])

    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return next(answers)

    client.tool_handler = handler
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate("north")]},
            {"toolCalls": [open_gate("south")]},
            {"template": "{toolOutputs}"},
        )
        result = await client.request("session/respond", {"session": "guard", "prompt": "Open."})
    assert [r["output"] for r in result["toolCalls"]] == ["Opened.", {"opened": False}]
    assert result["text"] == 'Opened.\n{"opened":false}'


async def test_several_calls_of_one_step_can_be_answered_out_of_order(client):
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate("north"), open_gate("south")]},
            {"template": "{toolOutputs}"},
        )
        turn = await client.start("session/respond", {"session": "guard", "prompt": "Open both."})
        await client.next_message(lambda m: len(client.recorder.tool_calls) >= 2)
        by_gate = {c["params"]["call"]["arguments"]["gate"]: c for c in client.recorder.tool_calls}
        north, south = by_gate["north"], by_gate["south"]
        await reply_to(client, south, {"output": "South opened."})
        await reply_to(client, north, {"output": "North opened."})
        reply = await client.wait(turn)
    result = reply["result"]
    gates = [r["call"]["arguments"]["gate"] for r in result["toolCalls"]]
    assert gates == ["south", "north"]
    assert sorted(result["text"].split("\n")) == ["North opened.", "South opened."]


async def test_calls_beyond_max_tool_calls_get_the_budget_error_without_a_tool_call(client):
    client.tool_handler = replying({"output": "Opened."})
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate("north"), open_gate("south")]},
            {"template": "{toolOutputs}"},
            options={"maxToolCalls": 1},
        )
        result = await client.request("session/respond", {"session": "guard", "prompt": "Open."})
    assert len(client.recorder.tool_calls) == 1
    assert len(result["toolCalls"]) == 2
    (over,) = [r for r in result["toolCalls"] if r["isError"]]
    assert over["output"] == BUDGET_TEXT
    assert over["durationSeconds"] == 0
    assert f"Error: {BUDGET_TEXT}" in result["text"].split("\n")
    assert result["steps"][1]["toolCallingMode"] == "disallowed"


async def test_an_over_budget_call_only_sends_a_completed_event(client):
    client.tool_handler = replying({"output": "Opened."})
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate("north"), open_gate("south")]},
            {"text": "Done."},
            options={"maxToolCalls": 1},
        )
        turn = await client.start(
            "session/respond", {"session": "guard", "prompt": "Open.", "stream": True}
        )
        await client.wait(turn)
    types = [e["type"] for e in client.recorder.events_for(turn)]
    assert types.count("toolCallStarted") == 1
    assert types.count("toolCallCompleted") == 2


# ---- timeouts --------------------------------------------------------------------------------


async def test_an_unanswered_call_times_out_into_an_error_record(client):
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate()]},
            {"template": "{toolOutput}"},
            tools=[{**OPEN_GATE, "timeoutSeconds": 0.2}],
        )
        result = await client.request("session/respond", {"session": "guard", "prompt": "Open."})
    (record,) = result["toolCalls"]
    assert record["isError"] is True
    assert record["output"] == "Tool 'open_gate' timed out after 200ms."
    assert "timed out" in result["text"]
    assert result["text"] == "Error: Tool 'open_gate' timed out after 200ms."


async def test_a_timed_out_call_gets_tool_cancel_before_the_response(client):
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate()]},
            {"template": "{toolOutput}"},
            tools=[{**OPEN_GATE, "timeoutSeconds": 0.2}],
        )
        turn = await client.start("session/respond", {"session": "guard", "prompt": "Open."})
        reply = await client.wait(turn)
    (tool_call,) = client.recorder.tool_calls
    cancel = next(m for m in client.recorder.received if is_tool_cancel(m))
    params = cancel["params"]
    assert set(params) == {"session", "requestId", "id", "callId", "reason"}
    assert params["id"] == tool_call["id"]
    assert params["callId"] == tool_call["params"]["call"]["id"]
    assert params["session"] == "guard"
    assert params["requestId"] == turn
    assert params["reason"].startswith("Error: Tool 'open_gate' timed out after ")
    assert params["reason"] == "Error: " + reply["result"]["toolCalls"][0]["output"]
    assert index_of(client, is_tool_cancel) < index_of(client, lambda m: m.get("id") == turn)


async def test_the_session_tool_timeout_applies_when_the_tool_has_none(client):
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate()]},
            {"template": "{toolOutput}"},
            options={"toolTimeoutSeconds": 0.2},
        )
        result = await client.request("session/respond", {"session": "guard", "prompt": "Open."})
    assert result["toolCalls"][0]["isError"] is True
    assert "timed out" in result["text"]


async def test_a_tool_timeout_overrides_the_session_timeout(client):
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate()]},
            {"template": "{toolOutput}"},
            tools=[{**OPEN_GATE, "timeoutSeconds": 0.2}],
            options={"toolTimeoutSeconds": 86400},
        )
        result = await client.request("session/respond", {"session": "guard", "prompt": "Open."})
    assert result["toolCalls"][0]["isError"] is True


async def test_a_late_reply_after_the_timeout_is_ignored_and_the_daemon_keeps_working(client):
    with anyio.fail_after(5):
        await create_guard(
            client,
            {"toolCalls": [open_gate()]},
            {"template": "{toolOutput}"},
            {"text": "Next turn."},
            tools=[{**OPEN_GATE, "timeoutSeconds": 0.2}],
        )
        await client.request("session/respond", {"session": "guard", "prompt": "Open."})
        (tool_call,) = client.recorder.tool_calls
        seen = len(client.recorder.received)
        await reply_to(client, tool_call, {"output": "Too late."})
        assert await client.request("ping") == {}
        after_ping = client.recorder.received[seen:]
        result = await client.request("session/respond", {"session": "guard", "prompt": "Again."})
    assert len(after_ping) == 1  # only the ping's response: the late reply got no answer
    assert result["text"] == "Next turn."


# ---- cancellation with an outstanding call ---------------------------------------------------


async def test_cancel_while_a_call_is_outstanding_sends_tool_cancel_and_cancels_the_turn(client):
    with anyio.fail_after(5):
        await create_guard(client, {"toolCalls": [open_gate()]}, {"text": "Done."})
        turn = await client.start("session/respond", {"session": "guard", "prompt": "Open."})
        tool_call = await client.next_message(is_tool_call)
        cancelled = await client.request("session/cancel", {"session": "guard"})
        reply = await client.wait(turn)
        cancel = await client.next_message(is_tool_cancel)
        listed = (await client.request("session/list"))["sessions"][0]
    assert cancelled == {"session": "guard", "cancelled": 1}
    assert reply["error"]["code"] == -32009
    assert reply["error"]["data"]["code"] == "cancelled"
    assert cancel["params"]["id"] == tool_call["id"]
    assert cancel["params"]["callId"] == tool_call["params"]["call"]["id"]
    assert cancel["params"]["session"] == "guard"
    assert cancel["params"]["requestId"] == turn
    assert isinstance(cancel["params"]["reason"], str)
    assert index_of(client, is_tool_cancel) < index_of(client, lambda m: m.get("id") == turn)
    assert (listed["entries"], listed["busy"]) == (0, False)


async def test_cancel_as_a_notification_while_a_call_is_outstanding_sends_tool_cancel(client):
    with anyio.fail_after(5):
        await create_guard(client, {"toolCalls": [open_gate()]}, {"text": "Done."})
        turn = await client.start("session/respond", {"session": "guard", "prompt": "Open."})
        tool_call = await client.next_message(is_tool_call)
        await client.notify("session/cancel", {"session": "guard"})
        reply = await client.wait(turn)
        cancel = await client.next_message(is_tool_cancel)
    assert reply["error"]["code"] == -32009
    assert cancel["params"]["id"] == tool_call["id"]


async def test_a_reply_after_cancellation_is_ignored(client):
    with anyio.fail_after(5):
        await create_guard(client, {"toolCalls": [open_gate()]}, {"text": "Done."})
        turn = await client.start("session/respond", {"session": "guard", "prompt": "Open."})
        tool_call = await client.next_message(is_tool_call)
        await client.request("session/cancel", {"session": "guard"})
        await client.wait(turn)
        await client.next_message(is_tool_cancel)
        seen = len(client.recorder.received)
        await reply_to(client, tool_call, {"output": "Opened anyway."})
        assert await client.request("ping") == {}
    assert len(client.recorder.received[seen:]) == 1


async def test_delete_while_a_call_is_outstanding_sends_tool_cancel(client):
    with anyio.fail_after(5):
        await create_guard(client, {"toolCalls": [open_gate()]}, {"text": "Done."})
        turn = await client.start("session/respond", {"session": "guard", "prompt": "Open."})
        tool_call = await client.next_message(is_tool_call)
        deleted = await client.request("session/delete", {"session": "guard"})
        reply = await client.wait(turn)
        cancel = await client.next_message(is_tool_cancel)
    assert deleted == {"session": "guard", "deleted": True}
    assert reply["error"]["code"] == -32009
    assert cancel["params"]["id"] == tool_call["id"]

"""The scripted model (§10): steps, fallback, error steps, validation, delays; and §3 replayed."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest
from conftest import memory_daemon

from oamd.backends.base import ChatMessage, GenerationRequest, TextDelta
from oamd.bridge.model_params import resolve_model
from oamd.client import RpcError
from oamd.daemon import default_config
from oamd.limits import MAX_SCRIPT_CHUNKS

pytestmark = pytest.mark.anyio

ERROR_CODES = {
    "model_unavailable": -32001,
    "guardrail_violation": -32002,
    "refusal": -32003,
    "context_size_exceeded": -32004,
    "rate_limited": -32005,
    "unsupported_language": -32006,
    "invalid_schema": -32007,
    "tool_failed": -32008,
    "cancelled": -32009,
    "busy": -32010,
    "invalid_request": -32011,
    "generation_failed": -32012,
}
STEP_FORMS = "must contain one of 'text', 'toolCalls', 'json', 'template' or 'error'."
STEP_FIELDS = ("index", "completedToolRounds", "toolCallingMode", "enabledTools", "trimmedEntries")


def scripted(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps), **extra}


async def create(client, session: str, model: Any, **params: Any) -> dict[str, Any]:
    return await client.request("session/create", {"session": session, "model": model, **params})


async def respond(client, session: str, prompt: str = "Hello.") -> dict[str, Any]:
    return await client.request("session/respond", {"session": session, "prompt": prompt})


async def rpc_error(client, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as info:
        await client.request(method, params)
    return info.value


async def entries(client, session: str) -> int:
    sessions = (await client.request("session/list"))["sessions"]
    return next(s for s in sessions if s["session"] == session)["entries"]


# ---- steps and fallback ----------------------------------------------------------------------


async def test_steps_play_in_order_then_the_default_fallback(client):
    with anyio.fail_after(5):
        await create(client, "g", scripted({"text": "One."}, {"text": "Two."}))
        texts = [(await respond(client, "g"))["text"] for _ in range(3)]
    assert texts == ["One.", "Two.", "(script exhausted)"]


async def test_the_scripted_shorthand_is_an_empty_script(client):
    with anyio.fail_after(5):
        await create(client, "g", "scripted")
        result = await respond(client, "g")
    assert result["text"] == "(script exhausted)"


async def test_a_custom_fallback_plays_every_time_the_steps_run_out(client):
    with anyio.fail_after(5):
        await create(client, "g", scripted({"text": "One."}, fallback={"text": "Hmph."}))
        texts = [(await respond(client, "g"))["text"] for _ in range(3)]
    assert texts == ["One.", "Hmph.", "Hmph."]


async def test_a_template_substitutes_the_prompt(client):
    with anyio.fail_after(5):
        await create(client, "g", scripted({"template": "You said: {prompt}"}))
        result = await respond(client, "g", "Hail, smith!")
    assert result["text"] == "You said: Hail, smith!"


async def test_a_template_without_tool_outputs_substitutes_empty_text(client):
    with anyio.fail_after(5):
        await create(client, "g", scripted({"template": "[{toolOutput}|{toolOutputs}]"}))
        result = await respond(client, "g")
    assert result["text"] == "[|]"


async def test_unknown_keys_in_a_step_are_ignored(client):
    with anyio.fail_after(5):
        created = await create(client, "g", scripted({"text": "Hi.", "color": "red"}))
        result = await respond(client, "g")
    assert created["warnings"] == []
    assert result["text"] == "Hi."


async def test_a_delayed_step_answers_after_its_delay(client):
    with anyio.fail_after(5):
        await create(client, "g", scripted({"text": "Late.", "delayMs": 200}))
        start = time.monotonic()
        result = await respond(client, "g")
        elapsed = time.monotonic() - start
    assert result["text"] == "Late."
    assert elapsed >= 0.19


# ---- error steps -----------------------------------------------------------------------------


@pytest.mark.parametrize(("code", "number"), list(ERROR_CODES.items()))
async def test_an_error_step_fails_the_turn_with_its_code(client, code, number):
    with anyio.fail_after(5):
        await create(client, "g", scripted({"error": code}), options={"maxAttempts": 1})
        err = await rpc_error(client, "session/respond", {"session": "g", "prompt": "hi"})
    assert err.code == number
    assert err.name == code


async def test_an_error_step_message_is_passed_through(client):
    step = {"error": "guardrail_violation", "message": "Unsafe content."}
    with anyio.fail_after(5):
        await create(client, "g", scripted(step))
        err = await rpc_error(client, "session/respond", {"session": "g", "prompt": "hi"})
    assert err.code == -32002 and err.name == "guardrail_violation"
    assert "Unsafe content." in err.message


async def test_an_error_step_without_a_message_gets_a_default_one(client):
    with anyio.fail_after(5):
        await create(client, "g", scripted({"error": "context_size_exceeded"}))
        err = await rpc_error(client, "session/respond", {"session": "g", "prompt": "hi"})
    assert err.code == -32004
    assert err.message == "Scripted context_size_exceeded."


async def test_a_guardrail_violation_is_not_retried(client):
    with anyio.fail_after(5):
        await create(client, "g", scripted({"error": "guardrail_violation"}, {"text": "ok"}))
        err = await rpc_error(client, "session/respond", {"session": "g", "prompt": "hi"})
    assert err.code == -32002


async def test_generation_failed_is_retried_once_by_default_and_then_succeeds(client):
    with anyio.fail_after(5):
        await create(client, "g", scripted({"error": "generation_failed"}, {"text": "ok"}))
        result = await respond(client, "g")
    assert result["text"] == "ok"


async def test_generation_failed_with_a_single_attempt_fails_the_turn(client):
    with anyio.fail_after(5):
        await create(
            client,
            "g",
            scripted({"error": "generation_failed"}, {"text": "ok"}),
            options={"maxAttempts": 1},
        )
        err = await rpc_error(client, "session/respond", {"session": "g", "prompt": "hi"})
    assert err.code == -32012 and err.name == "generation_failed"


async def test_a_failed_turn_leaves_no_history_and_the_next_turn_works(client):
    model = scripted(
        {"error": "guardrail_violation", "message": "Unsafe content."}, {"text": "Recovered."}
    )
    with anyio.fail_after(5):
        await create(client, "g", model)
        await rpc_error(client, "session/respond", {"session": "g", "prompt": "FORBIDDEN-WORDS"})
        after_failure = await entries(client, "g")
        transcript = await client.request("session/transcript", {"session": "g"})
        result = await respond(client, "g", "Let's talk.")
        after_success = await entries(client, "g")
    assert after_failure == 0
    assert "FORBIDDEN-WORDS" not in json.dumps(transcript)
    assert result["text"] == "Recovered."
    assert after_success == 2


async def test_an_error_after_a_tool_round_leaves_no_history(client):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": "Opened."}

    client.tool_handler = handler
    model = scripted(
        {"toolCalls": [{"name": "open_gate", "arguments": {}}]},
        {"error": "refusal"},
        {"text": "Fine."},
    )
    with anyio.fail_after(5):
        await create(
            client, "g", model, tools=[{"name": "open_gate", "description": "Open the gate."}]
        )
        err = await rpc_error(client, "session/respond", {"session": "g", "prompt": "Open."})
        after_failure = await entries(client, "g")
    assert err.code == -32003
    assert after_failure == 0


# ---- model and step validation ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ({"type": "scripted", "steps": [{"dance": True}]}, f"'model.steps[0]' {STEP_FORMS}"),
        (
            {"type": "scripted", "steps": [{"text": "ok"}, {"dance": True}]},
            f"'model.steps[1]' {STEP_FORMS}",
        ),
        (
            {"type": "scripted", "steps": [], "fallback": {"dance": True}},
            f"'model.fallback' {STEP_FORMS}",
        ),
        (
            {"type": "scripted", "steps": [{"error": "meltdown"}]},
            "'model.steps[0].error' must be one of: model_unavailable, guardrail_violation, "
            "refusal, context_size_exceeded, rate_limited, unsupported_language, invalid_schema, "
            "tool_failed, cancelled, busy, invalid_request, generation_failed; got 'meltdown'.",
        ),
        (
            {"type": "scripted", "steps": [{"toolCalls": []}]},
            "'model.steps[0].toolCalls' must not be empty.",
        ),
        (
            {"type": "scripted", "steps": [{"toolCalls": [5]}]},
            "'model.steps[0].toolCalls[0]' must be an object.",
        ),
        (
            {"type": "scripted", "steps": [{"toolCalls": [{"arguments": {}}]}]},
            "Missing required parameter 'model.steps[0].toolCalls[0].name'.",
        ),
        (
            {"type": "scripted", "steps": [{"text": "hi", "chunks": 0}]},
            f"Parameter 'model.steps[0].chunks' must be a whole number from 1 to "
            f"{MAX_SCRIPT_CHUNKS}; got 0.",
        ),
        (
            {"type": "scripted", "steps": [{"text": "hi", "chunks": MAX_SCRIPT_CHUNKS + 1}]},
            f"Parameter 'model.steps[0].chunks' must be a whole number from 1 to "
            f"{MAX_SCRIPT_CHUNKS}; got {MAX_SCRIPT_CHUNKS + 1}.",
        ),
        (
            {"type": "scripted", "steps": [{"text": 5}]},
            "Parameter 'model.steps[0].text' must be a string; got 5.",
        ),
        (
            {"type": "scripted", "steps": "nope"},
            """Parameter 'model.steps' must be an array; got "nope".""",
        ),
        (
            {"type": "quantum"},
            """Unknown model type 'quantum'. Supported: "system", "scripted".""",
        ),
        ("quantum", """Unknown model type 'quantum'. Supported: "system", "scripted"."""),
        ({"steps": []}, "Missing required parameter 'model.type'."),
        (5, """'model' must be "system" or an object with a 'type'."""),
    ],
    ids=[
        "unknown-step",
        "unknown-second-step",
        "bad-fallback",
        "unknown-error-code",
        "empty-tool-calls",
        "tool-call-not-object",
        "tool-call-without-name",
        "zero-chunks",
        "chunks-past-the-limit",
        "non-string-text",
        "steps-not-array",
        "unknown-type",
        "unknown-type-string",
        "no-type",
        "not-a-model",
    ],
)
async def test_an_invalid_model_is_rejected_with_a_message_naming_it(client, model, message):
    with anyio.fail_after(5):
        err = await rpc_error(client, "session/create", {"session": "g", "model": model})
        sessions = (await client.request("session/list"))["sessions"]
    assert err.code == -32602 and err.name == "invalid_params"
    assert err.message == message
    assert sessions == []


async def test_a_negative_delay_is_rejected(client):
    model = scripted({"text": "hi", "delayMs": -5})
    with anyio.fail_after(5):
        err = await rpc_error(client, "session/create", {"session": "g", "model": model})
    assert err.code == -32602
    assert "'model.steps[0].delayMs'" in err.message


# ---- scripted models disabled ----------------------------------------------------------------


async def test_with_scripted_models_disabled_only_the_system_model_is_offered():
    config = default_config(allow_scripted=False, test_methods=True)
    async with memory_daemon(config) as client:
        with anyio.fail_after(5):
            result = await client.request("initialize", {"protocolVersion": "1.0"})
    assert result["capabilities"]["models"] == ["system"]


@pytest.mark.parametrize("model", ["scripted", {"type": "scripted", "steps": [{"text": "hi"}]}])
async def test_with_scripted_models_disabled_a_scripted_session_is_refused(model):
    config = default_config(allow_scripted=False, test_methods=True)
    async with memory_daemon(config) as client:
        with anyio.fail_after(5):
            err = await rpc_error(client, "session/create", {"session": "g", "model": model})
    assert err.code == -32602
    assert err.message == "Scripted models are disabled on this bridge."


# ---- what a scripted model keeps ----------------------------------------------------------------


@pytest.mark.parametrize("test_methods", [False, True])
async def test_a_scripted_model_keeps_its_requests_only_for_test_methods(test_methods):
    """Each request holds a whole prompt: kept for ``test/modelRequests``, never otherwise."""
    models = default_config(test_methods=test_methods).models
    model, _ = resolve_model(models, scripted({"text": "Hi."}))
    request = GenerationRequest(messages=[ChatMessage("user", "Hello.")])
    with anyio.fail_after(5):
        played = [event async for event in model.generate(request)]
    assert played[0] == TextDelta("Hi.")
    assert model.requests == ([request] if test_methods else [])


# ---- §3 "A complete exchange", replayed ------------------------------------------------------

GUARD_INSTRUCTIONS = "You are a castle guard in a game. Use tools to act. Reply in one sentence."
GUARD_TOOL = {
    "name": "open_gate",
    "description": "Ask the game engine to open a named gate. Returns whether it opened.",
    "parameters": {
        "type": "object",
        "properties": {"gate": {"type": "string"}},
        "required": ["gate"],
    },
}
GUARD_ANSWER = "The north gate remains shut because the portcullis chain is jammed."
GATE_OUTPUT = {"opened": False, "reason": "the portcullis chain is jammed"}


async def test_the_complete_exchange_of_the_protocol_document_replays_field_by_field(client):
    model = scripted(
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"template": GUARD_ANSWER},
    )
    with anyio.fail_after(5):
        init = await client.wait(
            await client.start(
                "initialize",
                {"client": {"name": "MyGame", "version": "1.2"}, "protocolVersion": "1.0"},
            )
        )
        create_id = await client.start(
            "session/create",
            {
                "session": "guard",
                "instructions": GUARD_INSTRUCTIONS,
                "tools": [GUARD_TOOL],
                "options": {"toolChoice": "required"},
                "model": model,
            },
        )
        respond_id = await client.start(
            "session/respond",
            {"session": "guard", "prompt": "Please open the north gate.", "stream": True},
        )
        tool_call = await client.next_message(lambda m: m.get("method") == "tool/call")
        await client.send(
            {"jsonrpc": "2.0", "id": tool_call["id"], "result": {"output": GATE_OUTPUT}}
        )
        response = await client.wait(respond_id)

    # ← initialize
    assert (init["id"], create_id, respond_id) == (1, 2, 3)
    assert init["result"]["protocolVersion"] == "1.0"
    assert init["result"]["server"]["name"] == "oamd"

    # ← the create response, before anything the turn sends
    first_event_at = next(
        i for i, m in enumerate(client.recorder.received) if m.get("method") == "session/event"
    )
    create_at = next(i for i, m in enumerate(client.recorder.received) if m.get("id") == 2)
    assert create_at < first_event_at
    assert client.recorder.received[create_at]["result"] == {"session": "guard", "warnings": []}

    # The turn's messages, in order.
    turn_msgs = client.recorder.received[first_event_at:]
    events = [m["params"] for m in turn_msgs if m.get("method") == "session/event"]
    assert all(e["session"] == "guard" and e["requestId"] == 3 for e in events)
    kinds = [e["event"]["type"] for e in events]
    assert kinds[:5] == ["modelStep", "toolCallStarted", "toolCallCompleted", "modelStep", "text"]
    assert set(kinds[5:]) <= {"text"}

    step0, started, completed, step1 = (e["event"] for e in events[:4])
    assert {k: step0["step"][k] for k in STEP_FIELDS} == {
        "index": 0,
        "completedToolRounds": 0,
        "toolCallingMode": "required",
        "enabledTools": ["open_gate"],
        "trimmedEntries": 0,
    }
    assert started["execution"] == "client"
    assert started["call"]["name"] == "open_gate"
    assert started["call"]["arguments"] == {"gate": "north"}
    assert started["call"]["id"].startswith("call_")

    # ← tool/call, right after toolCallStarted
    assert tool_call["id"] == "t-1"
    assert tool_call["params"] == {"session": "guard", "requestId": 3, "call": started["call"]}
    started_at = next(
        i
        for i, m in enumerate(client.recorder.received)
        if m.get("method") == "session/event" and m["params"]["event"]["type"] == "toolCallStarted"
    )
    assert client.recorder.received[started_at + 1] is tool_call

    record = completed["record"]
    assert record["call"] == started["call"]
    assert record["output"] == GATE_OUTPUT
    assert record["isError"] is False
    assert isinstance(record["durationSeconds"], int | float)

    assert {k: step1["step"][k] for k in STEP_FIELDS} == {
        "index": 1,
        "completedToolRounds": 1,
        "toolCallingMode": "allowed",
        "enabledTools": ["open_gate"],
        "trimmedEntries": 0,
    }
    texts = [e["event"] for e in events[4:]]
    assert "".join(t["delta"] for t in texts) == GUARD_ANSWER
    assert texts[-1]["text"] == GUARD_ANSWER

    # ← the response, last
    assert client.recorder.received[-1] is response
    result = response["result"]
    assert list(result) == ["session", "text", "toolCalls", "usage", "steps"]
    assert result["session"] == "guard"
    assert result["text"] == GUARD_ANSWER
    assert result["toolCalls"] == [record]
    assert set(result["usage"]) == {
        "inputTokens",
        "cachedInputTokens",
        "outputTokens",
        "totalTokens",
    }
    assert [{k: s[k] for k in STEP_FIELDS} for s in result["steps"]] == [
        {k: step0["step"][k] for k in STEP_FIELDS},
        {k: step1["step"][k] for k in STEP_FIELDS},
    ]


STYLES = {"native": {}, "envelope": {"style": "envelope"}}
"""Scripted models playing a model with a tool-call API, and a text-only one (the envelope loop)."""


@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("code", ["generation_failed", "busy", "rate_limited"])
async def test_both_loops_retry_the_same_failures_within_max_attempts(client, style, code):
    steps = ({"error": code}, {"text": "ok"})
    with anyio.fail_after(5):
        await create(client, "once", scripted(*steps, **STYLES[style]), options={"maxAttempts": 1})
        err = await rpc_error(client, "session/respond", {"session": "once", "prompt": "hi"})
        await create(client, "twice", scripted(*steps, **STYLES[style]))
        result = await respond(client, "twice")
    assert err.name == code
    assert result["text"] == "ok"


@pytest.mark.parametrize("style", list(STYLES))
async def test_max_attempts_counts_every_call_of_a_failing_model_in_both_loops(client, style):
    steps = ({"error": "busy"}, {"error": "busy"}, {"text": "ok"})
    with anyio.fail_after(5):
        await create(client, "two", scripted(*steps, **STYLES[style]), options={"maxAttempts": 2})
        err = await rpc_error(client, "session/respond", {"session": "two", "prompt": "hi"})
        await create(client, "three", scripted(*steps, **STYLES[style]), options={"maxAttempts": 3})
        result = await respond(client, "three")
    assert err.name == "busy"
    assert result["text"] == "ok"

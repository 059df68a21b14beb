"""Streaming (§7 session/event): events precede the response, text chunks, tool-turn order."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from oamd.limits import MAX_STEP_TEXT_CHARS

pytestmark = pytest.mark.anyio

STEEL = "Steel is forged in fire and patience."
STEP_FIELDS = ("index", "completedToolRounds", "toolCallingMode", "enabledTools", "trimmedEntries")

OPEN_GATE = {
    "name": "open_gate",
    "description": "Ask the game engine to open a named gate.",
    "parameters": {
        "type": "object",
        "properties": {"gate": {"type": "string"}},
        "required": ["gate"],
    },
}


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


def apple(step: dict[str, Any]) -> dict[str, Any]:
    return {key: step[key] for key in STEP_FIELDS}


async def streamed_turn(client, model: dict[str, Any], *, request_id: Any = None, **create: Any):
    """Creates session ``g`` and runs one streamed turn; returns (request id, result)."""
    await client.request("session/create", {"session": "g", "model": model, **create})
    turn = await client.start(
        "session/respond", {"session": "g", "prompt": "Tell me.", "stream": True}, id=request_id
    )
    reply = await client.wait(turn)
    return turn, reply["result"]


def text_events(client, turn: Any) -> list[dict[str, Any]]:
    return [e for e in client.recorder.events_for(turn) if e["type"] == "text"]


async def test_streamed_events_all_precede_the_response_and_start_with_a_model_step(client):
    with anyio.fail_after(5):
        turn, result = await streamed_turn(client, scripted({"text": STEEL, "chunks": 5}))
    positions = [
        i for i, m in enumerate(client.recorder.received) if m.get("method") == "session/event"
    ]
    response_at = next(i for i, m in enumerate(client.recorder.received) if m.get("id") == turn)
    assert positions and max(positions) < response_at
    events = client.recorder.events_for(turn)
    assert events[0]["type"] == "modelStep"
    assert "text" in [e["type"] for e in events]
    assert all(
        n["params"]["session"] == "g"
        for n in client.recorder.notifications
        if n["method"] == "session/event"
    )
    assert result["text"] == STEEL


async def test_text_deltas_join_to_the_result_text(client):
    with anyio.fail_after(5):
        turn, result = await streamed_turn(client, scripted({"text": STEEL, "chunks": 5}))
    assert "".join(e["delta"] for e in text_events(client, turn)) == result["text"] == STEEL


async def test_each_text_event_carries_the_running_text_and_no_reset(client):
    with anyio.fail_after(5):
        turn, _ = await streamed_turn(client, scripted({"text": STEEL, "chunks": 5}))
    so_far = ""
    for event in text_events(client, turn):
        so_far += event["delta"]
        assert event["text"] == so_far
        assert event["isReset"] is False


@pytest.mark.parametrize(
    ("text", "chunks", "deltas"),
    [
        (STEEL, 5, ["Steel is", " forged ", "in fire ", "and pati", "ence."]),
        ("Hmm", 3, ["Hmm"]),
        ("abcdefghij", 6, ["ab", "cd", "ef", "gh", "ij"]),
        ("abcdefghij", 1, ["abcdefghij"]),
        ("abcdefghij", None, ["abcd", "efgh", "ij"]),
    ],
    ids=["37-in-5", "3-in-3", "10-in-6", "one-chunk", "default-3"],
)
async def test_scripted_text_streams_in_ceil_sized_pieces(client, text, chunks, deltas):
    step: dict[str, Any] = {"text": text}
    if chunks is not None:
        step["chunks"] = chunks
    with anyio.fail_after(5):
        turn, _ = await streamed_turn(client, scripted(step))
    assert [e["delta"] for e in text_events(client, turn)] == deltas


async def test_a_template_answer_streams_in_three_pieces_by_default(client):
    with anyio.fail_after(5):
        turn, result = await streamed_turn(client, scripted({"template": "ab{prompt}"}))
    assert result["text"] == "abTell me."
    assert [e["delta"] for e in text_events(client, turn)] == ["abTe", "ll m", "e."]


async def test_an_empty_text_sends_no_text_events(client):
    with anyio.fail_after(5):
        turn, result = await streamed_turn(client, scripted({"text": ""}))
    assert result["text"] == ""
    assert text_events(client, turn) == []


async def test_no_events_are_sent_without_stream(client):
    with anyio.fail_after(5):
        await client.request("session/create", {"session": "g", "model": scripted({"text": STEEL})})
        turn = await client.start("session/respond", {"session": "g", "prompt": "Tell me."})
        await client.wait(turn)
    assert client.recorder.events_for(turn) == []
    assert [n for n in client.recorder.notifications if n["method"] == "session/event"] == []


async def test_model_step_events_match_the_result_steps(client):
    with anyio.fail_after(5):
        turn, result = await streamed_turn(client, scripted({"text": STEEL}))
    steps = [e["step"] for e in client.recorder.events_for(turn) if e["type"] == "modelStep"]
    assert [apple(s) for s in steps] == [apple(s) for s in result["steps"]]


# ---- a streamed tool turn --------------------------------------------------------------------


def turn_sequence(client, turn: Any) -> list[str]:
    """What the daemon sent for ``turn``, in order, with consecutive text events merged."""
    out: list[str] = []
    for msg in client.recorder.received:
        params = msg.get("params", {})
        if msg.get("method") == "session/event" and params.get("requestId") == turn:
            label = params["event"]["type"]
        elif msg.get("method") == "tool/call" and params.get("requestId") == turn:
            label = "tool/call"
        elif "method" not in msg and msg.get("id") == turn:
            label = "response"
        else:
            continue
        if not (label == "text" and out and out[-1] == "text"):
            out.append(label)
    return out


async def tool_turn(client, *, request_id: Any = None) -> tuple[Any, dict[str, Any]]:
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": {"opened": False}}

    client.tool_handler = handler
    model = scripted(
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"template": "Gate: {toolOutput}"},
    )
    return await streamed_turn(
        client,
        model,
        request_id=request_id,
        tools=[OPEN_GATE],
        options={"toolChoice": "required"},
    )


async def test_a_streamed_tool_turn_sends_events_and_the_tool_call_in_order(client):
    with anyio.fail_after(5):
        turn, _ = await tool_turn(client)
    assert turn_sequence(client, turn) == [
        "modelStep",
        "toolCallStarted",
        "tool/call",
        "toolCallCompleted",
        "modelStep",
        "text",
        "response",
    ]


async def test_a_streamed_tool_turn_reports_steps_calls_and_records(client):
    with anyio.fail_after(5):
        turn, result = await tool_turn(client)
    events = client.recorder.events_for(turn)
    steps = [apple(e["step"]) for e in events if e["type"] == "modelStep"]
    assert steps == [
        {
            "index": 0,
            "completedToolRounds": 0,
            "toolCallingMode": "required",
            "enabledTools": ["open_gate"],
            "trimmedEntries": 0,
        },
        {
            "index": 1,
            "completedToolRounds": 1,
            "toolCallingMode": "allowed",
            "enabledTools": ["open_gate"],
            "trimmedEntries": 0,
        },
    ]
    (started,) = [e for e in events if e["type"] == "toolCallStarted"]
    (completed,) = [e for e in events if e["type"] == "toolCallCompleted"]
    assert started["execution"] == "client"
    assert started["call"] == client.recorder.tool_calls[0]["params"]["call"]
    assert completed["record"] == result["toolCalls"][0]
    assert completed["record"]["output"] == {"opened": False}
    assert "".join(e["delta"] for e in events if e["type"] == "text") == result["text"]
    assert result["text"] == 'Gate: {"opened":false}'


async def test_request_id_tags_keep_the_respond_ids_type(client):
    with anyio.fail_after(5):
        turn, _ = await tool_turn(client, request_id="turn-7")
    assert turn == "turn-7"
    tagged = [
        n["params"]["requestId"]
        for n in client.recorder.notifications
        if n["method"] == "session/event"
    ]
    assert tagged and set(tagged) == {"turn-7"}
    assert client.recorder.tool_calls[0]["params"]["requestId"] == "turn-7"


async def test_numeric_request_ids_are_echoed_as_numbers(client):
    with anyio.fail_after(5):
        turn, _ = await tool_turn(client, request_id=1234567890123456)
    tagged = [
        n["params"]["requestId"]
        for n in client.recorder.notifications
        if n["method"] == "session/event"
    ]
    assert tagged and all(t == 1234567890123456 and isinstance(t, int) for t in tagged)
    assert client.recorder.tool_calls[0]["params"]["requestId"] == turn


async def test_a_timed_out_call_sends_tool_cancel_after_its_completed_event(client):
    model = scripted(
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"template": "{toolOutput}"},
    )
    with anyio.fail_after(5):
        turn, _ = await streamed_turn(client, model, tools=[{**OPEN_GATE, "timeoutSeconds": 0.2}])
    completed_at = next(
        i
        for i, m in enumerate(client.recorder.received)
        if m.get("method") == "session/event"
        and m["params"]["event"]["type"] == "toolCallCompleted"
    )
    cancel_at = next(
        i for i, m in enumerate(client.recorder.received) if m.get("method") == "tool/cancel"
    )
    response_at = next(i for i, m in enumerate(client.recorder.received) if m.get("id") == turn)
    assert completed_at < cancel_at < response_at


# ---- long, fast streams --------------------------------------------------------------------


def answered(client, request_id: Any) -> bool:
    return any(m.get("id") == request_id and "method" not in m for m in client.recorder.received)


async def test_a_ping_and_another_sessions_turn_are_answered_while_a_long_fast_turn_runs(client):
    # a quarter of a million characters in two-character pieces, played as fast as the loop goes
    long = scripted({"text": "x" * 250_000, "chunks": 125_000})
    await client.request("session/create", {"session": "long", "model": long})
    await client.request("session/create", {"session": "quick", "model": scripted({"text": "Hi."})})
    with anyio.fail_after(10):  # the whole turn used to hold the event loop for seconds at once
        turn = await client.start("session/respond", {"session": "long", "prompt": "Talk."})
        while not (await client.request("test/modelRequests", {"session": "long"}))["requests"]:
            pass  # each look is a round trip; the model is asked once the turn runs
        assert await client.request("ping") == {}
        quick = await client.request("session/respond", {"session": "quick", "prompt": "Hello."})
        assert quick["text"] == "Hi."
        assert not answered(client, turn)  # both were answered while the long turn streamed
        await client.request("session/cancel", {"session": "long"})
        assert (await client.wait(turn))["error"]["data"]["code"] == "cancelled"


async def test_a_many_chunk_step_sends_few_text_events_and_the_last_holds_the_whole_text(client):
    many = {"text": "x" * 20_000, "chunks": 10_000}
    with anyio.fail_after(10):
        turn, result = await streamed_turn(client, scripted(many))
    texts = text_events(client, turn)
    assert 0 < len(texts) <= 2_000  # one per piece was 10,000 events, each with the text so far
    assert texts[-1]["text"] == result["text"] == many["text"]
    assert "".join(e["delta"] for e in texts) == result["text"]
    assert all(not e["isReset"] for e in texts)
    assert turn_sequence(client, turn) == ["modelStep", "text", "response"]


@pytest.mark.parametrize("style", ["native", "envelope"])
async def test_a_step_that_streams_past_the_text_limit_fails_generation_failed(client, style):
    too_long = {"text": "x" * (MAX_STEP_TEXT_CHARS + 1), "chunks": 64}
    model = {**scripted(too_long), "style": style}
    await client.request(
        "session/create", {"session": "g", "model": model, "options": {"maxAttempts": 1}}
    )
    with anyio.fail_after(20):
        turn = await client.start(
            "session/respond", {"session": "g", "prompt": "Talk.", "stream": True}
        )
        reply = await client.wait(turn)
    assert reply["error"]["data"]["code"] == "generation_failed"
    assert str(MAX_STEP_TEXT_CHARS) in reply["error"]["message"]
    shown = text_events(client, turn)[-1]["text"]  # what it said up to there was shown
    assert len(shown) > MAX_STEP_TEXT_CHARS

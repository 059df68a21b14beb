"""Record → replay (docs/RECORDING.md): a connection recorded on an OpenAI-compatible server plays
back on its recorded scripts with no model and no difference; a tampered recording does not, and
says where; a recorded use is a script that works by hand; the socket token is not written down;
a recording is bounded, and a truncated one is refused."""

from __future__ import annotations

import copy
from typing import Any

import anyio
import orjson
import pytest
from conftest import memory_daemon
from recording_support import (
    GATE_TOOL,
    ChatServer,
    keeper,
    only_recording,
    recorded_daemon,
    said,
)

from oamd.backends.scripted.model import ScriptedModel, parse_script
from oamd.recording import RecordingError, play, read_recording

pytestmark = pytest.mark.anyio

USAGE = {"inputTokens": 30, "cachedInputTokens": 0, "outputTokens": 9}
ITEM = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "price": {"type": "integer"}},
    "required": ["name", "price"],
}


async def converse(client) -> None:
    """A session with a client tool, streamed; a decision; content; the transcript."""
    with anyio.fail_after(10):
        await client.request("initialize", {"protocolVersion": "1.0"})
        await client.request(
            "session/create", {"session": "guard", "tools": [GATE_TOOL], "instructions": "Guard."}
        )
        await client.request(
            "session/respond",
            {"session": "guard", "prompt": "Open the north gate!", "stream": True},
        )
        await client.request(
            "decision/decide",
            {"situation": "Three knights ride in.", "options": ["attack", "flee"]},
        )
        await client.request("content/generate", {"prompt": "A sword for sale.", "schema": ITEM})
        await client.request("session/transcript", {"session": "guard"})


async def recorded(tmp_path, answer=keeper) -> dict[str, Any]:
    server = ChatServer(answer)
    async with recorded_daemon(server.model(), tmp_path) as client:
        await converse(client)
    return only_recording(tmp_path)


async def replayed(document: dict[str, Any]):
    with anyio.fail_after(30):
        return await play(document)


def daemon_lines(document: dict[str, Any]) -> list[Any]:
    return [e["line"] for e in document["lines"] if e["from"] == "daemon"]


async def test_a_connection_recorded_on_a_server_replays_on_its_scripts_with_no_difference(
    tmp_path,
):
    document = await recorded(tmp_path)
    outcome = await replayed(document)
    assert outcome.differences == [] and outcome.notes == []
    assert outcome.replayed_lines == outcome.recorded_lines > 10


async def test_each_use_of_the_model_is_recorded_as_the_steps_it_returned(tmp_path):
    document = await recorded(tmp_path)
    uses = {(u["use"]["method"], u.get("owner")): u["script"] for u in document["uses"]}
    session = uses[("session/create", "guard")]
    assert session["style"] == "native" and session["type"] == "scripted"
    tool_step, answer_step = session["steps"]
    assert tool_step["toolCalls"] == [
        {"name": "open_gate", "arguments": {"gate": "north"}, "id": "call_gate_1"}
    ]
    assert answer_step["text"] == "The north gate is open. Pass, friend."
    assert answer_step["usage"] == {"inputTokens": 102, "cachedInputTokens": 64, "outputTokens": 7}
    assert [s["text"] for s in uses[("decision/decide", None)]["steps"]] == [
        '{"reasoning":"Odds.","choice":"flee","confidence":70}'
    ]
    replies = [e for e in document["lines"] if e["from"] == "client" and "method" not in e["line"]]
    assert replies == [
        {
            **replies[0],
            "line": {
                "jsonrpc": "2.0",
                "id": "t-1",
                "result": {"output": "The north gate is open."},
            },
        }
    ]


async def test_a_tampered_line_makes_the_replay_report_where_it_differs(tmp_path):
    document = await recorded(tmp_path)
    tampered = copy.deepcopy(document)
    answer = next(
        line for line in daemon_lines(tampered) if "result" in line and "optionID" in line["result"]
    )
    answer["result"]["optionID"] = "attack"
    outcome = await replayed(tampered)
    (difference,) = outcome.differences
    assert difference.exchange == "request 4 (decision/decide)"
    assert difference.where == "line 1 of 1, at result.optionID"
    assert (difference.recorded, difference.replayed) == ("attack", "flee")


async def test_a_tampered_step_makes_the_replay_answer_otherwise(tmp_path):
    document = await recorded(tmp_path)
    tampered = copy.deepcopy(document)
    session = next(u for u in tampered["uses"] if u.get("owner") == "guard")
    session["script"]["steps"][1]["text"] = "Go away."
    outcome = await replayed(tampered)
    assert any(d.where.endswith("at result.text") for d in outcome.differences)
    assert {d.exchange for d in outcome.differences} == {
        "request 3 (session/respond)",
        "request 6 (session/transcript)",
    }


async def test_a_recorded_script_plays_the_same_answers_by_hand(tmp_path):
    document = await recorded(tmp_path)
    script = next(u for u in document["uses"] if u.get("owner") == "guard")["script"]
    recorded_answer = next(line["result"] for line in daemon_lines(document) if line.get("id") == 3)
    async with memory_daemon(
        tool_handler=lambda p: {"output": "The north gate is open."}
    ) as client:
        with anyio.fail_after(10):
            await client.request(
                "session/create",
                {
                    "session": "guard",
                    "tools": [GATE_TOOL],
                    "instructions": "Guard.",
                    "model": script,
                },
            )
            answer = await client.request(
                "session/respond", {"session": "guard", "prompt": "Open the north gate!"}
            )
    assert answer["text"] == recorded_answer["text"]
    assert answer["usage"] == recorded_answer["usage"]
    assert answer["toolCalls"][0]["call"] == recorded_answer["toolCalls"][0]["call"]


async def test_a_cancelled_turn_replays_as_cancelled(tmp_path):
    def slow(body: dict[str, Any]) -> dict[str, Any]:
        return {**said("Too late."), "hold": True}

    server = ChatServer(slow)
    async with recorded_daemon(server.model(), tmp_path) as client:
        await client.request("session/create", {"session": "s"})
        with anyio.fail_after(10):
            turn = await client.start("session/respond", {"session": "s", "prompt": "Hi."})
            while not server.bodies:  # the request is at the server: the step is under way
                await anyio.wait_all_tasks_blocked()
            await client.request("session/cancel", {"session": "s"})
            response = await client.wait(turn)
    assert response["error"]["data"]["code"] == "cancelled"
    document = only_recording(tmp_path)
    (step,) = next(u for u in document["uses"] if u.get("owner") == "s")["script"]["steps"]
    assert step["cancelled"] is True and step["delayMs"] == 86_400_000
    outcome = await replayed(document)
    assert outcome.differences == []


class StallsAfterItsText(ScriptedModel):
    """Streams its step's text, then never ends (a model cut off mid-answer)."""

    async def generate(self, request):
        async for event in super().generate(request):
            yield event
        await anyio.sleep_forever()


async def test_a_turn_cancelled_mid_stream_replays_its_streamed_text_before_the_wait(tmp_path):
    steps, fallback = parse_script(
        {"steps": [{"text": "Halt! Who goes there, stranger?", "chunks": 3, "usage": USAGE}]}
    )
    async with recorded_daemon(StallsAfterItsText(steps, fallback), tmp_path) as client:
        await client.request("session/create", {"session": "s"})
        with anyio.fail_after(10):
            turn = await client.start(
                "session/respond", {"session": "s", "prompt": "Hi.", "stream": True}
            )
            await client.next_message(
                lambda m: (
                    m.get("method") == "session/event"
                    and m["params"]["event"].get("type") == "text"
                    and "stranger" in m["params"]["event"].get("text", "")
                )
            )
            await client.request("session/cancel", {"session": "s"})
            response = await client.wait(turn)
    assert response["error"]["data"]["code"] == "cancelled"
    document = only_recording(tmp_path)
    (step,) = next(u for u in document["uses"] if u.get("owner") == "s")["script"]["steps"]
    assert step["cancelled"] is True and step["text"] == "Halt! Who goes there, stranger?"
    outcome = await replayed(document)
    assert outcome.notes == [] and outcome.differences == []


async def test_decisions_that_share_a_model_get_their_own_steps_in_any_order(tmp_path):
    requests = [
        {"situation": f"{who} ride in.", "options": ["attack", "flee"]}
        for who in ("Three knights", "Two peasants", "Five knights", "A goose")
    ]
    server = ChatServer(keeper)
    async with recorded_daemon(server.model(), tmp_path) as client:
        with anyio.fail_after(10):
            result = await client.request(
                "decision/decideMany", {"requests": requests, "maxConcurrency": 4}
            )
    assert [r["optionID"] for r in result["results"]] == ["flee", "attack", "flee", "attack"]
    document = only_recording(tmp_path)
    (use,) = document["uses"]
    use["script"]["steps"].reverse()  # as if the decisions had asked in the opposite order
    use["requestDigests"].reverse()
    outcome = await replayed(document)
    assert outcome.differences == []


async def test_the_socket_token_is_not_written_into_a_recording(tmp_path):
    server = ChatServer(keeper)
    async with recorded_daemon(server.model(), tmp_path) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0", "auth": "s3cret-t0ken"})
    text = next(tmp_path.glob("*.json")).read_text()
    assert "s3cret-t0ken" not in text and '"auth":"<redacted>"' in text


async def test_a_recording_past_its_limit_is_truncated_and_refused_for_replay(tmp_path):
    server = ChatServer(keeper)
    async with recorded_daemon(server.model(), tmp_path, limit=2000) as client:
        await converse(client)
    (path,) = tmp_path.glob("*.json")
    assert orjson.loads(path.read_bytes())["truncated"] is True
    with pytest.raises(RecordingError, match="truncated"):
        read_recording(path)


async def test_a_connection_that_said_nothing_leaves_no_file(tmp_path):
    server = ChatServer(keeper)
    (tmp_path / "none").mkdir()
    async with recorded_daemon(server.model(), tmp_path / "none"):
        pass
    assert list((tmp_path / "none").glob("*")) == []

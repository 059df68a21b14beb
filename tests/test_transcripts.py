"""Transcripts move across platforms: oamd reads Apple's and open-android-models' saves."""

from __future__ import annotations

import anyio
import pytest

pytestmark = pytest.mark.anyio

APPLE = {
    "type": "FoundationModels.Transcript",
    "version": "1.1",
    "transcript": {
        "entries": [
            {
                "id": "1",
                "role": "instructions",
                "contents": [{"type": "text", "id": "a", "text": "You are Gorm."}],
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "check_stock",
                            "description": "Stock of an item.",
                            "parameters": {
                                "type": "object",
                                "properties": {"item": {"type": "string"}},
                            },
                        },
                    }
                ],
            },
            {
                "id": "2",
                "role": "user",
                "contents": [{"type": "text", "id": "b", "text": "Any swords?"}],
            },
            {
                "id": "3",
                "role": "response",
                "toolCalls": [{"id": "c1", "name": "check_stock", "arguments": '{"item":"sword"}'}],
            },
            {
                "id": "4",
                "role": "tool",
                "toolName": "check_stock",
                "toolCallID": "c1",
                "contents": [{"type": "text", "id": "d", "text": "3"}],
            },
            {
                "id": "5",
                "role": "response",
                "contents": [{"type": "text", "id": "e", "text": "Three swords."}],
            },
        ]
    },
}

ANDROID = {
    "type": "open-android-models.Transcript",
    "version": "1.0",
    "transcript": {
        "instructions": "You are Mira.",
        "contextNote": "The player owes 5 gold.",
        "tools": [],
        "entries": [
            {"type": "prompt", "text": "Hello"},
            {
                "type": "toolUse",
                "call": {"id": "call_1", "name": "look", "arguments": {}},
                "output": {"type": "json", "value": {"ok": True}},
            },
            {"type": "response", "text": "Hi there."},
        ],
    },
}


async def test_an_apple_transcript_restores_instructions_tools_and_entries(client):
    script = {"type": "scripted", "steps": [{"template": "{prompt}!"}]}
    await client.request("session/create", {"session": "a", "history": APPLE, "model": script})
    listing = (await client.request("session/list"))["sessions"][0]
    assert listing["instructions"] == "You are Gorm."
    assert listing["tools"] == ["check_stock"]
    assert listing["entries"] == 4
    result = await client.request("session/respond", {"session": "a", "prompt": "More"})
    assert result["text"] == "More!"


async def test_an_android_transcript_restores_context_note_and_tool_uses(client):
    await client.request(
        "session/create", {"session": "m", "history": ANDROID, "model": "scripted"}
    )
    saved = (await client.request("session/transcript", {"session": "m"}))["transcript"]
    assert saved["type"] == "oamd.Transcript"
    inner = saved["transcript"]
    assert (
        inner["instructions"] == "You are Mira."
        and inner["contextNote"] == "The player owes 5 gold."
    )
    assert [e["kind"] for e in inner["entries"]] == [
        "prompt",
        "toolCalls",
        "toolOutput",
        "response",
    ]
    assert inner["entries"][2]["output"] == {"ok": True}


async def test_an_oamd_transcript_round_trips_exactly(client):
    script = {
        "type": "scripted",
        "steps": [{"toolCalls": [{"name": "t", "arguments": {"x": 1}}]}, {"text": "done"}],
    }

    async def tool(params):
        return {"output": "fine"}

    client.tool_handler = tool
    tools = [{"name": "t", "description": "d"}]
    await client.request("session/create", {"session": "o", "tools": tools, "model": script})
    await client.request("session/respond", {"session": "o", "prompt": "go"})
    first = (await client.request("session/transcript", {"session": "o"}))["transcript"]
    await client.request("session/create", {"session": "o2", "history": first, "model": "scripted"})
    second = (await client.request("session/transcript", {"session": "o2"}))["transcript"]
    assert second == first


async def test_reading_the_transcript_during_a_running_turn_shows_its_progress(client):
    script = {"type": "scripted", "steps": [{"toolCalls": [{"name": "t"}]}, {"text": "done"}]}
    await client.request(
        "session/create",
        {"session": "p", "tools": [{"name": "t", "description": "d"}], "model": script},
    )
    turn = await client.start("session/respond", {"session": "p", "prompt": "go"})
    with anyio.fail_after(5):
        call = await client.next_message(lambda m: m.get("method") == "tool/call")
        during = (await client.request("session/transcript", {"session": "p"}))["transcript"]
        assert [e["kind"] for e in during["transcript"]["entries"]] == ["prompt", "toolCalls"]
        await client.send({"jsonrpc": "2.0", "id": call["id"], "result": {"output": "ok"}})
        assert (await client.wait(turn))["result"]["text"] == "done"
        after = (await client.request("session/transcript", {"session": "p"}))["transcript"]
    kinds = [e["kind"] for e in after["transcript"]["entries"]]
    assert kinds == ["prompt", "toolCalls", "toolOutput", "response"]


async def test_a_cancelled_turn_leaves_no_progress_in_the_transcript(client):
    script = {"type": "scripted", "steps": [{"text": "slow", "delayMs": 10000}]}
    await client.request("session/create", {"session": "c", "model": script})
    turn = await client.start("session/respond", {"session": "c", "prompt": "go"})
    with anyio.fail_after(5):
        await client.request("session/cancel", {"session": "c"})
        assert (await client.wait(turn))["error"]["code"] == -32009
        after = (await client.request("session/transcript", {"session": "c"}))["transcript"]
    assert after["transcript"]["entries"] == []

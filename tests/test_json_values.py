"""The daemon's JSON rules (``oamd.jsonvalue``) end to end: values JSON allows but no encoder takes —
lone surrogate escapes, integers past 64 bits, numbers past the double range, invalid UTF-8 — in
every place client data flows (tool outputs, NPC context, bark situations, world values an NPC
reads, scripted steps, compaction) are carried under one rule, never an internal error, never a
lost turn."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import orjson
import pytest

from oamd.jsonvalue import JsonTextError, dumps, loads, number_from_text

pytestmark = pytest.mark.anyio

LONE = "~lone~"
HUGE = "~huge~"
TWO_64 = "~two64~"
HUGE_TEXT = b"1" + b"0" * 400
LARGEST = sys.float_info.max
GORM = {"name": "Gorm", "role": "the village blacksmith"}


def raw_line(message: dict[str, Any]) -> bytes:
    """``message`` as a line, with the markers replaced by what the Python client cannot send."""
    return (
        orjson.dumps(message)
        .replace(LONE.encode(), b"\\ud800")
        .replace(f'"{HUGE}"'.encode(), HUGE_TEXT)
        .replace(f'"{TWO_64}"'.encode(), b"18446744073709551616")
        + b"\n"
    )


async def raw_request(client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    msg_id = f"raw-{client.next_id()}"
    await client.send_raw(
        raw_line({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    )
    return await client.next_message(lambda m: m.get("id") == msg_id)


def no_internal_error(response: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in response, response["error"]
    return response["result"]


# ---- the rules themselves --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("18446744073709551615", 2**64 - 1),
        ("-9223372036854775808", -(2**63)),
        ("18446744073709551616", 1.8446744073709552e19),
        ("1" + "0" * 400, LARGEST),
        ("-1" + "0" * 5000, -LARGEST),  # past int()'s 4,300 digits: no ValueError
        ("1e400", LARGEST),
        ("1e-400", 0.0),
        ("2.5", 2.5),
    ],
)
def test_one_number_rule_for_every_parser(text, value):
    assert loads(text) == value
    assert loads(text.encode()) == value
    assert number_from_text(text) == value


def test_lone_surrogates_read_as_the_replacement_character():
    assert loads(b'{"a\\udc00": ["x\\ud800y", "\\ud83d\\ude00"]}') == {
        "a\ufffd": ["x\ufffdy", "😀"]
    }


def test_invalid_utf8_is_named_as_such():
    with pytest.raises(JsonTextError, match=r"byte 7 \(0xff\) is not valid UTF-8"):
        loads(b'{"a": "\xff"}')


def test_deep_text_is_refused_before_any_parser_recurses():
    with pytest.raises(JsonTextError, match="deeper than 3"):
        loads("[[[[1]]]]", limit=3)
    assert loads('["[[[[[["]', limit=1) == ["[[[[[["]


def test_dumps_brings_daemon_made_values_under_the_rules():
    assert dumps({"n": 10**400, "m": -(2**70), "s": "a\ud800"}) == orjson.dumps(
        {"n": LARGEST, "m": -float(2**70), "s": "a\ufffd"}
    )


# ---- through the protocol -----------------------------------------------------------------


async def test_a_tool_output_with_a_lone_surrogate_and_huge_numbers_completes_the_turn(client):
    tool = {"name": "open_gate", "description": "Opens a gate.", "parameters": {"type": "object"}}
    model = {
        "type": "scripted",
        "steps": [
            {"toolCalls": [{"name": "open_gate", "arguments": {}}]},
            {"template": "Result: {toolOutput}"},
        ],
    }
    with anyio.fail_after(5):
        await client.request("session/create", {"session": "s", "tools": [tool], "model": model})
        turn = await client.start("session/respond", {"session": "s", "prompt": "Open it."})
        call = await client.next_message(lambda m: m.get("method") == "tool/call")
        output = {"note": LONE, "big": HUGE, "two64": TWO_64}
        await client.send_raw(
            raw_line({"jsonrpc": "2.0", "id": call["id"], "result": {"output": output}})
        )
        result = no_internal_error(await client.wait(turn))
        transcript = await client.request("session/transcript", {"session": "s"})
        ping = await client.request("ping")
    carried = {"note": "\ufffd", "big": LARGEST, "two64": 1.8446744073709552e19}
    assert result["toolCalls"][0]["output"] == carried
    assert result["text"] == "Result: " + orjson.dumps(carried).decode()
    entries = transcript["transcript"]["transcript"]["entries"]
    kinds = [e["kind"] for e in entries]
    assert kinds == ["prompt", "toolCalls", "toolOutput", "response"]  # the turn is kept whole
    assert ping == {}


async def test_npc_context_bark_situation_and_world_values_carry_the_odd_values(client):
    with anyio.fail_after(5):
        world = {"world": "w", "state": {"odd": {"text": LONE, "n": HUGE}}}
        no_internal_error(await raw_request(client, "world/create", world))
        got = await client.request("world/get", {"world": "w", "path": "odd"})
        assert got["value"] == {"text": "\ufffd", "n": LARGEST}
        steps = [{"template": "{prompt}"}] * 3
        await client.request(
            "npc/create",
            {
                "npc": "gorm",
                "persona": GORM,
                "world": "w",
                "model": {"type": "scripted", "steps": steps},
                "options": {"replyFormat": "text", "worldContextPaths": ["odd"]},
            },
        )
        talked = no_internal_error(
            await raw_request(
                client,
                "npc/talk",
                {"npc": "gorm", "line": "hi" + LONE, "context": {"k": LONE, "n": HUGE}},
            )
        )
        await client.request(
            "npc/create",
            {"npc": "bard", "persona": GORM, "model": {"type": "scripted", "steps": steps}},
        )
        barked = no_internal_error(
            await raw_request(client, "npc/bark", {"npc": "bard", "situation": "rain" + LONE})
        )
    assert "\ufffd" in talked["line"] and "Player: hi\ufffd" in talked["line"]
    assert "1.7976931348623157e+308" in talked["line"]
    assert "rain\ufffd" in barked["line"]


async def test_scripted_steps_with_odd_values_play(client):
    model = {"type": "scripted", "steps": [{"text": "x" + LONE}, {"json": {"n": HUGE}}]}
    with anyio.fail_after(5):
        no_internal_error(
            await raw_request(client, "session/create", {"session": "s", "model": model})
        )
        first = await client.request("session/respond", {"session": "s", "prompt": "a"})
        schema = {"type": "object", "properties": {"n": {"type": "number"}}}
        second = await client.request(
            "session/respond", {"session": "s", "prompt": "b", "schema": schema}
        )
    assert first["text"] == "x\ufffd"
    assert second["structured"] == {"n": LARGEST}


async def test_compaction_of_turns_holding_odd_values(client):
    def reply(line: str) -> dict[str, Any]:
        return {
            "json": {
                "line": line,
                "emotion": "neutral",
                "player_options": ["a", "b"],
                "ends_conversation": False,
            }
        }

    steps = [reply("One" + LONE), reply("Two"), {"text": "Summary" + LONE}, reply("Three")]
    params = {
        "npc": "gorm",
        "persona": GORM,
        "model": {"type": "scripted", "steps": steps},
        "options": {"compactAfterTurns": 2, "keepRecentTurns": 1},
    }
    with anyio.fail_after(5):
        no_internal_error(await raw_request(client, "npc/create", params))
        no_internal_error(
            await raw_request(client, "npc/talk", {"npc": "gorm", "line": "A" + LONE})
        )
        no_internal_error(await raw_request(client, "npc/talk", {"npc": "gorm", "line": "B"}))
        state = await client.request("npc/state", {"npc": "gorm"})
        third = no_internal_error(
            await raw_request(client, "npc/talk", {"npc": "gorm", "line": "C"})
        )
    assert third["line"] == "Three"
    assert state["state"]["memory"]["summary"] == "Summary\ufffd"


@pytest.mark.parametrize("delay", [b"1e400", b"-1", b"1e12", HUGE_TEXT])
async def test_a_delay_out_of_range_names_delay_ms(client, delay):
    line = (
        b'{"jsonrpc":"2.0","id":"d","method":"session/create","params":{"session":"s",'
        b'"model":{"type":"scripted","steps":[{"text":"x","delayMs":' + delay + b"}]}}}\n"
    )
    with anyio.fail_after(5):
        await client.send_raw(line)
        response = await client.next_message(lambda m: m.get("id") == "d")
    assert response["error"]["code"] == -32602
    assert "steps[0].delayMs" in response["error"]["message"]


async def test_invalid_utf8_is_a_parse_error_that_says_so(client):
    with anyio.fail_after(5):
        await client.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\xff"}}\n')
        response = await client.next_message(lambda m: "error" in m)
    assert response["error"]["code"] == -32700
    assert "not valid UTF-8" in response["error"]["message"]
    assert "surrogates" not in response["error"]["message"]


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


async def test_model_text_nesting_past_the_embedded_limit_is_unreadable_not_fatal(client):
    """A text-only model's envelope whose arguments nest 100 deep (past MAX_EMBEDDED_JSON_DEPTH)
    is not a value: the turn ends with a model error, nothing too deep reaches the wire."""
    tool = {"name": "open_gate", "description": "Opens a gate.", "parameters": {"type": "object"}}
    deep = orjson.dumps({"action": "open_gate", "arguments": {"a": nested(100)}}).decode()
    model = {"type": "scripted", "style": "envelope", "steps": [{"raw": deep}] * 4}
    with anyio.fail_after(5):
        await client.request("session/create", {"session": "s", "tools": [tool], "model": model})
        response = await client.call("session/respond", {"session": "s", "prompt": "Open."})
        assert await client.request("ping") == {}
    assert client.recorder.tool_calls == []
    if "error" in response:
        assert response["error"]["data"]["code"] != "internal_error"


async def test_scripted_arguments_as_deep_as_a_line_allows_still_reach_the_engine(client):
    tool = {"name": "open_gate", "description": "Opens a gate.", "parameters": {"type": "object"}}
    steps = [
        {"toolCalls": [{"name": "open_gate", "arguments": {"a": nested(118)}}]},
        {"text": "ok"},
    ]
    client.tool_handler = _opened
    with anyio.fail_after(5):
        await client.request(
            "session/create",
            {"session": "s", "tools": [tool], "model": {"type": "scripted", "steps": steps}},
        )
        result = await client.request("session/respond", {"session": "s", "prompt": "Open."})
    assert result["text"] == "ok"
    assert client.recorder.tool_calls[0]["params"]["call"]["arguments"] == {"a": nested(118)}


async def _opened(params: dict[str, Any]) -> dict[str, Any]:
    return {"output": "opened"}

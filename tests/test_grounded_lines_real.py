"""The grounded-line rules of a small model's NPC turn (issue 34), one test each, on the real
packaged SmolLM2-135M through the protocol: the fact that answers the player's question opens the
line; a number a tool returned opens an amount's answer; the arguments come from the player's
words; a call missing an amount nobody said is not made; a lookup is not offered when a told fact
answers; only the standing line streams; no scaffolding, no secret; the persona's emotion stands.
The scripted small model of ``test_small_model_turns.py`` pins the same rules exactly; here they
hold on the model a game ships with (what every rule is for)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from backends.llama_server import missing_reason
from conftest import memory_daemon

from oamd.backends.llamacpp.model import LlamaCppModel
from oamd.client import Client
from oamd.daemon import default_config

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        missing_reason(server=False) is not None, reason=str(missing_reason(server=False))
    ),
]

MENU = {"mutton stew": 5, "ale": 3, "bread": 1}
CHECK_MENU = {
    "name": "check_menu",
    "description": "Look up tonight's dishes and drinks with their prices in gold.",
    "parameters": {"type": "object", "properties": {}},
}
PLACE_ORDER = {
    "name": "place_order",
    "description": "Place an order for food or drink the guest asks for.",
    "parameters": {
        "type": "object",
        "properties": {
            "item": {"type": "string", "enum": list(MENU)},
            "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["item", "quantity"],
    },
}
CHECK_STOCK = {
    "name": "check_stock",
    "description": "Look up an item in the stock book.",
    "parameters": {
        "type": "object",
        "properties": {"item": {"type": "string"}},
        "required": ["item"],
    },
}
HILDE = {
    "name": "Hilde",
    "role": "the innkeeper of the Grey Goose inn",
    "personality": "Warm, motherly and talkative.",
    "knowledge": ["A room costs 6 gold a night.", "The next market day is on Friday."],
    "secrets": ["You water down the ale to save money."],
    "defaultEmotion": "happy",
}
SCAFFOLDING = re.compile(
    r"[()\[\]{}<>]|\b(?:note|situation|game state|question|player|hilde)\s*:", re.IGNORECASE
)


async def engine(params: dict[str, Any]) -> dict[str, Any]:
    call = params["call"]
    if call["name"] == "check_menu":
        return {"output": dict(MENU)}
    if call["name"] == "place_order":
        arguments = call["arguments"]
        total = MENU.get(arguments.get("item"), 0) * int(arguments.get("quantity") or 0)
        return {"output": {**arguments, "totalGold": total}}
    return {"output": {"item": call["arguments"].get("item"), "inStock": 3}}


@pytest.fixture
async def hilde() -> AsyncIterator[Client]:
    model = LlamaCppModel()
    try:
        async with memory_daemon(default_config(model), tool_handler=engine) as client:
            with anyio.fail_after(60):
                await client.request("initialize", {"protocolVersion": "1.0"})
                await client.request(
                    "npc/create",
                    {
                        "npc": "hilde",
                        "persona": HILDE,
                        "tools": [CHECK_MENU, PLACE_ORDER, CHECK_STOCK],
                        "options": {"playerOptionCount": 0},
                    },
                )
            yield client
    finally:
        await model.aclose()


async def say(client: Client, line: str, **params: Any) -> dict[str, Any]:
    with anyio.fail_after(90):
        return await client.request("npc/talk", {"npc": "hilde", "line": line, **params})


def calls(result: dict[str, Any]) -> list[str]:
    return [c["call"]["name"] for c in result["toolCalls"]]


async def test_the_told_fact_that_answers_opens_the_line_and_no_lookup_is_made(hilde: Client):
    room = await say(hilde, "How much is a room for the night?")
    assert room["line"].startswith("A room costs 6 gold a night"), room["line"]
    market = await say(hilde, "When is the next market day?")
    assert "Friday" in market["line"] and "check_stock" not in calls(market), market


async def test_a_number_the_tool_returned_answers_the_amount_asked(hilde: Client):
    result = await say(hilde, "How much is the mutton stew?", toolChoice={"tool": "check_menu"})
    assert calls(result) == ["check_menu"]
    assert re.search(r"\b(?:5|five)\b", result["line"], re.IGNORECASE), result["line"]


async def test_the_order_takes_its_amount_from_the_players_words(hilde: Client):
    result = await say(
        hilde, "Two bowls of mutton stew, please.", toolChoice={"tool": "place_order"}
    )
    (call,) = [c["call"] for c in result["toolCalls"]]
    assert call["arguments"] == {"item": "mutton stew", "quantity": 2}


async def test_an_order_nobody_gave_an_amount_for_is_not_placed(hilde: Client):
    for line in ("How much is the mutton stew?", "Is the ale any good here?"):
        result = await say(hilde, line)
        assert "place_order" not in calls(result), (line, result["toolCalls"])


async def test_only_the_standing_line_streams_and_it_carries_no_scaffolding_or_secret(
    hilde: Client,
):
    before = len(hilde.recorder.notifications)
    result = await say(hilde, "Why does your ale taste so thin?", stream=True)
    events = [
        n["params"]["event"]
        for n in hilde.recorder.notifications[before:]
        if n["method"] == "npc/event"
    ]
    shown = [e for e in events if e["type"] in ("lineDelta", "lineReset")]
    assert [e["type"] for e in shown] == ["lineDelta"]
    assert shown[0]["delta"] == result["line"]
    assert not SCAFFOLDING.search(result["line"]), result["line"]
    assert not re.search(r"\bwater", result["line"], re.IGNORECASE), result["line"]


async def test_a_warm_innkeepers_greeting_keeps_her_emotion(hilde: Client):
    result = await say(hilde, "Good evening, Hilde! Lovely to see you again.")
    assert result["emotion"] == "happy", result

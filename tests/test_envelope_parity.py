"""One script, two loops: §10 scripts give the same ``session/respond`` results (text, structured
value, tool names, arguments and outputs) on the native loop and on the envelope loop."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from envelope_support import ROLL_DIE, TAVERN, create, respond

pytestmark = pytest.mark.anyio

FAIL = {"name": "fail", "description": "Always fails.", "parameters": {"type": "object"}}
CHOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "choice": {"type": "string", "enum": ["haggle", "accept", "refuse"]},
    },
    "required": ["reasoning", "choice"],
}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


SCRIPTS: dict[str, dict[str, Any]] = {
    "a plain answer": {"steps": [{"text": "Evening, traveller."}], "prompts": ["Hi."]},
    "one call then a template": {
        "steps": [
            {"toolCalls": [call("check_menu")]},
            {"template": "We have {toolOutput}."},
        ],
        "prompts": ["What's cooking?"],
    },
    "two calls in one step": {
        "steps": [
            {"toolCalls": [call("take_order", item="stew", quantity=2), call("check_menu")]},
            {"template": "Done: {toolOutputs}"},
        ],
        "prompts": ["Two stews and the menu."],
    },
    "calls across two turns": {
        "steps": [
            {"toolCalls": [call("check_menu")]},
            {"text": "Stew."},
            {"toolCalls": [call("take_order", item="stew", quantity=1)]},
            {"template": "{prompt} -> {toolOutput}"},
        ],
        "prompts": ["Menu?", "One stew."],
    },
    "a tool error output": {
        "steps": [{"toolCalls": [call("fail")]}, {"template": "Sorry: {toolOutput}"}],
        "prompts": ["Try it."],
        "tools": [FAIL],
    },
    "required choice": {
        "steps": [{"toolCalls": [call("roll_die", sides=6)]}, {"template": "Rolled {toolOutput}"}],
        "prompts": ["Roll."],
        "tools": [ROLL_DIE],
        "options": {"toolChoice": "required"},
    },
    "a structured answer": {
        "steps": [{"json": {"choice": "haggle", "reasoning": "Too dear."}}],
        "prompts": ["Ten gold?"],
        "tools": [],
        "schema": CHOICE_SCHEMA,
    },
    "a call then a structured answer": {
        "steps": [
            {"toolCalls": [call("check_menu")]},
            {"json": {"reasoning": "Menu seen.", "choice": "accept"}},
        ],
        "prompts": ["Deal?"],
        "schema": CHOICE_SCHEMA,
    },
}


def comparable(result: dict[str, Any]) -> dict[str, Any]:
    records = sorted(
        orjson.dumps(
            [r["call"]["name"], r["call"]["arguments"], r["output"], r["isError"]],
            option=orjson.OPT_SORT_KEYS,
        )
        for r in result["toolCalls"]
    )
    return {"text": result["text"], "structured": result.get("structured"), "calls": records}


async def play(client, style: str, script: dict[str, Any]) -> list[dict[str, Any]]:
    await create(
        client,
        style,
        *script["steps"],
        tools=script.get("tools", TAVERN),
        style=style,
        options=script.get("options", {}),
    )
    extra = {"schema": script["schema"]} if "schema" in script else {}
    return [comparable(await respond(client, style, p, **extra)) for p in script["prompts"]]


@pytest.mark.parametrize("script", SCRIPTS.values(), ids=SCRIPTS.keys())
async def test_a_script_gives_the_same_results_on_both_loops(client, script):
    native = await play(client, "native", script)
    envelope = await play(client, "envelope", script)
    assert envelope == native
    assert any(turn["text"] for turn in native)

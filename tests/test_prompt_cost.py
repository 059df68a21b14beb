"""A turn costs what it sends, not what was said: over hundreds of turns with trimming active, a
step converts only the entries it sends (each history turn once in its life), and the window of
history it sends moves in whole turns, rarely (hysteresis), so consecutive turns share their first
tokens. Counted, never timed."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import anyio
import pytest

import oamd.agent.envelope  # noqa: F401  (imported before any patch: it binds entry_lines)
import oamd.agent.envelope._prompt as envelope_prompt
import oamd.agent.native as native
import oamd.agent.prompt as prompt

pytestmark = pytest.mark.anyio

TURNS = 300
BUDGET = 400
"""Input tokens the turns get (the scripted model's 8192 minus the reserve): about ten turns."""
LOOK = {
    "name": "look",
    "description": "Looks at a shelf.",
    "parameters": {"type": "object", "properties": {"shelf": {"type": "integer"}}},
}


def counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Wraps ``module.name`` so each call adds the number of entries it converted."""
    counts: list[int] = []
    original: Callable[..., Any] = getattr(module, name)

    def wrapper(entries: Any, *args: Any) -> Any:
        counts.append(len(entries))
        return original(entries, *args)

    monkeypatch.setattr(module, name, wrapper)
    return counts


async def run_turns(client: Any, style: str) -> list[dict[str, Any]]:
    """``TURNS`` turns of one ``look`` call each; returns each turn's first step."""

    async def engine(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": {"jar": params["call"]["arguments"]}}

    client.tool_handler = engine
    steps = []
    for n in range(TURNS):
        steps.append({"toolCalls": [{"name": "look", "arguments": {"shelf": n}}]})
        steps.append({"text": f"Shelf {n} holds a jar of pickled turnips."})
    await client.request(
        "session/create",
        {
            "session": "shop",
            "instructions": "You run a small shop.",
            "tools": [LOOK],
            "model": {"type": "scripted", "style": style, "steps": steps},
            "options": {"reservedResponseTokens": 8192 - BUDGET},
        },
    )
    firsts = []
    for n in range(TURNS):
        with anyio.fail_after(5):
            result = await client.request(
                "session/respond", {"session": "shop", "prompt": f"What is on shelf {n}?"}
            )
        assert result["toolCalls"][0]["call"]["arguments"] == {"shelf": n}
        firsts.append(result["steps"][0])
    return firsts


def assert_hysteresis(trimmed: list[int], entries_per_turn: int) -> None:
    assert trimmed == sorted(trimmed)  # the window only moves forward
    assert all(t % entries_per_turn == 0 for t in trimmed)  # by whole turns
    moves = [n for n in range(1, len(trimmed)) if trimmed[n] != trimmed[n - 1]]
    assert len(moves) > 20  # trimming was at work all along
    assert all(b - a >= 2 for a, b in pairwise(moves))  # and rarely


async def test_native_steps_convert_only_the_entries_they_send(client, monkeypatch):
    history = counting(monkeypatch, prompt, "entries_to_messages")
    current = counting(monkeypatch, native, "entries_to_messages")
    firsts = await run_turns(client, "native")
    # each turn: its own entries at its two steps ([prompt], [prompt, toolCalls, toolOutput]) ...
    assert current == [1, 3] * TURNS
    # ... and the turn before it, converted once when first sent; never the rest of the history
    assert history == [4] * (TURNS - 1)
    assert_hysteresis([step["trimmedEntries"] for step in firsts], 4)


async def test_envelope_steps_render_each_history_turn_once(client, monkeypatch):
    rendered = counting(monkeypatch, envelope_prompt, "entry_lines")
    firsts = await run_turns(client, "envelope")
    assert rendered == [4] * (TURNS - 1)
    assert_hysteresis([step["trimmedEntries"] for step in firsts], 4)

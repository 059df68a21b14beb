"""``make demo MODEL=scripted``: the tavern and the gate guard, played on scripted models through a
real ``oamd stdio`` subprocess (instant; the embedded-model run is not tested here, it is slow)."""

from __future__ import annotations

import subprocess
import sys

DEMO_SECONDS = 60


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oamd.examples.tavern", *args],
        capture_output=True,
        text=True,
        timeout=DEMO_SECONDS,
        check=False,
    )


def test_scripted_demo_plays_the_tavern_and_the_guard_to_the_end():
    result = run_demo("--model", "scripted")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    expected = [
        "model: scripted",
        "player  Evening! What's on the menu tonight?",
        '[the game sets toolChoice {"tool": "check_menu"} for this line]',
        "engine  check_menu({}) → {'stew': 5, 'ale': 3, 'bread': 1, 'cider': 4}",
        "Mira    Tonight we have stew for 5 gold, ale for 3, bread for 1 and cider for 4.",
        "player  Two bowls of stew, please.",
        "engine  place_order({'item': 'stew', 'quantity': 2}) → "
        "{'ok': True, 'item': 'stew', 'quantity': 2, 'total': 10}",
        "Mira    Two bowls of stew coming up, that's 10 gold.",
        "player  Thank you! Any news from the road?",
        "Mira    Only that the north road is muddy after the rain.",
        "player  Please open the north gate.",
        "engine  open_gate({'gate': 'north'}) → the portcullis chain is jammed",
        "guard   The north gate stays shut: the portcullis chain is jammed",
        "2 model steps, 1 tool call",
        "session entries after the turn: 4",
        "demo finished in",
    ]
    position = 0
    for text in expected:  # in this order
        found = out.find(text, position)
        assert found >= 0, f"{text!r} missing after position {position}:\n{out}"
        position = found + len(text)
    assert "error" not in out


def test_the_tavern_streams_its_lines_and_reports_each_turn():
    out = run_demo("--model", "scripted").stdout
    assert out.count("1 tool call(s)") == 2
    assert out.count("0 tool call(s)") == 1
    assert "(fallback line)" not in out


def test_an_unknown_model_spec_fails_cleanly():
    result = run_demo("--model", "nonsense:thing")
    assert result.returncode != 0
    assert "unknown --model" in result.stderr + result.stdout

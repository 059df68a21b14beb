"""``agent.history``: turns rendered once in their life, windows that move forward only, and
trimming down to the low-water mark (hysteresis) that keeps exactly the newest turns that fit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from oamd.agent.history import LOW_WATER_SHARE, History

KEY = "test"


def turn(n: int, *, tokens: int = 10) -> list[dict[str, Any]]:
    """A turn of two entries whose rendering the tests size at ``tokens``."""
    return [
        {"kind": "prompt", "text": f"question {n}", "tokens": tokens},
        {"kind": "response", "text": f"answer {n}"},
    ]


class Renderer:
    """Renders a turn as its prompt text, sized by the prompt's ``tokens``; counts its calls."""

    def __init__(self) -> None:
        self.rendered: list[str] = []

    def __call__(self, entries: Sequence[dict[str, Any]]) -> tuple[tuple[str, ...], int]:
        self.rendered.append(entries[0]["text"])
        return (entries[0]["text"], entries[-1]["text"]), entries[0].get("tokens", 0)


def history_of(turns: int, *, tokens: int = 10) -> History:
    history = History()
    for n in range(turns):
        history.extend(turn(n, tokens=tokens))
    return history


def sent(history: History, render: Renderer) -> list[str]:
    return [t.value[0] for t in history.window(KEY, render).turns]


def test_entries_are_grouped_into_turns_and_kept_whole():
    history = History([{"kind": "response", "text": "before any prompt"}])
    history.extend(turn(0))
    history.extend(turn(1))
    assert len(history) == 5 and history.turn_count == 2
    assert [e["text"] for e in history.entries] == [
        "before any prompt",
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
    ]


def test_a_turn_is_rendered_once_in_its_life():
    history, render = History(), Renderer()
    for n in range(50):
        history.extend(turn(n))
        assert sent(history, render)[-1] == f"question {n}"
    assert render.rendered == [f"question {n}" for n in range(50)]


def test_a_window_within_the_budget_sends_everything_and_trims_nothing():
    history, render = history_of(5), Renderer()
    window = history.window(KEY, render)
    window.fit(fixed_tokens=10, budget=60)  # exactly full
    assert len(window.turns) == 5 and window.trimmed == 0


@pytest.mark.parametrize(("turns", "fixed", "budget"), [(20, 5, 100), (7, 0, 50), (30, 33, 200)])
def test_an_overflow_keeps_exactly_the_newest_turns_within_the_low_water_mark(turns, fixed, budget):
    history, render = history_of(turns), Renderer()
    window = history.window(KEY, render)
    window.fit(fixed, budget)
    kept = len(window.turns)
    low_water = LOW_WATER_SHARE * budget
    assert fixed + 10 * kept <= low_water < fixed + 10 * (kept + 1)  # one more would not fit
    assert [t.value[0] for t in window.turns] == [
        f"question {n}" for n in range(turns - kept, turns)
    ]
    assert window.tokens == 10 * kept
    assert window.trimmed == 2 * (turns - kept)


def test_after_a_trim_the_window_keeps_its_first_turn_until_the_next_overflow():
    """Hysteresis: the turns that follow a trim share its first turn (the cached prefix)."""
    history, render = History(), Renderer()
    firsts, trimmed = [], []
    for n in range(40):
        history.extend(turn(n))
        window = history.window(KEY, render)
        window.fit(fixed_tokens=0, budget=100)
        firsts.append(window.turns[0].value[0])
        trimmed.append(window.trimmed)
    assert trimmed == sorted(trimmed)  # the window only moves forward
    changes = [n for n in range(1, 40) if firsts[n] != firsts[n - 1]]
    assert changes == [10, 14, 18, 22, 26, 30, 34, 38]  # 11 turns overflow 100, 7 remain; +4
    assert all(t % 2 == 0 for t in trimmed)  # whole turns


def test_a_window_flattens_what_it_sends_and_releases_what_it_dropped():
    history, render = history_of(20), Renderer()
    window = history.window(KEY, render)
    window.fit(0, 100)
    assert window.items == [
        text for n in range(13, 20) for text in (f"question {n}", f"answer {n}")
    ]
    assert len(window.turns) == 7 and window.tokens == 70
    assert len(history.entries) == 40  # the transcript keeps every entry


def test_min_turns_stay_even_over_budget():
    history, render = history_of(3, tokens=100), Renderer()
    window = history.window(KEY, render)
    window.fit(fixed_tokens=50, budget=100, min_turns=1)
    assert [t.value[0] for t in window.turns] == ["question 2"] and window.trimmed == 4


def test_windows_of_two_renderings_move_independently():
    history, render = history_of(20), Renderer()
    history.window("a", render).fit(0, 100)
    assert len(history.window("b", render).turns) == 20
    assert len(history.window("a", render).turns) == 7


def test_a_history_after_a_cut_starts_a_fresh_window():
    history, render = history_of(20), Renderer()
    history.window(KEY, render).fit(0, 100)
    recent = history.after(30)
    assert len(recent) == 10 and recent.turn_count == 5
    assert sent(recent, render) == [f"question {n}" for n in range(15, 20)]


def test_a_turn_extended_after_it_was_rendered_is_rendered_again():
    history, render = History(turn(0)), Renderer()
    sent(history, render)
    history.extend([{"kind": "response", "text": "an afterthought"}])
    window = history.window(KEY, render)
    assert render.rendered == ["question 0", "question 0"]
    assert window.items == ["question 0", "an afterthought"] and window.tokens == 10


@pytest.mark.anyio
async def test_the_backends_count_replaces_each_estimate_once():
    history, render = history_of(3), Renderer()
    counted: list[str] = []

    async def count(text: str) -> int:
        counted.append(text)
        return 25

    window = history.window(KEY, render)
    await window.count_with(count)
    history.extend(turn(3))
    window = history.window(KEY, render)
    await window.count_with(count)
    assert counted == [f"question {n}\nanswer {n}" for n in range(4)]
    assert window.tokens == 100

"""A conversation's committed entries, kept as turns, and the window of them a model step sends.

Owns the grouping of entries into turns (a turn starts at a ``prompt``; entries before the first
prompt form a group of their own), a per-turn cache of each *rendering* a tool loop sends (chat
messages for the native loop, labelled lines for the envelope loop) with its token figure, and per
rendering a *window*: the oldest turn still sent. Guarantees:

- cost follows what is sent: a turn is rendered and estimated once, the first time a step sends
  it; a step walks only the turns from the window on (and those it drops), never the whole
  history, so turn 5,000 costs what turn 10 did;
- trimming has hysteresis: a window moves forward only, and when the prompt overflows the budget
  it drops whole oldest turns down to ``LOW_WATER_SHARE`` of the budget, not just below it, so the
  next turns send the same first tokens and a prefix cache keeps hitting;
- renderings of the turns a window left behind are released; the entries themselves are the
  transcript's (``session/transcript``, saves) and are kept whole.

A history is replaced, never edited in place, by restore, reset and compaction; its windows go
with it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

__all__ = ["LOW_WATER_SHARE", "History", "Rendered", "Window"]

LOW_WATER_SHARE = 0.7
"""Once a prompt overflows its input budget, trimming drops whole oldest turns until the prompt
is at most this share of the budget; the turns that follow grow into the rest before the next
trim, all of them sharing the same first tokens."""

Entry = dict[str, Any]


class Rendered:
    """One turn as a loop sends it, and its size in tokens: the chars/4 estimate until the
    backend's tokenizer counted it (``counted``)."""

    __slots__ = ("counted", "entries", "tokens", "value")

    def __init__(self, value: Any, tokens: int, entries: int) -> None:
        self.value = value
        self.tokens = tokens
        self.entries = entries
        """How many transcript entries the turn holds (what ``trimmedEntries`` counts)."""
        self.counted = False


Render = Callable[[Sequence[Entry]], tuple[Any, int]]
"""A turn's entries → what a loop sends for them and its estimated tokens."""


class _Turn:
    __slots__ = ("entries", "views")

    def __init__(self, first: Entry) -> None:
        self.entries: list[Entry] = [first]
        self.views: dict[Hashable, Rendered] = {}


class History:
    """The committed entries of a session or NPC, grouped into turns."""

    __slots__ = ("_entry_count", "_prompts", "_turns", "_windows")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._turns: list[_Turn] = []
        self._entry_count = 0
        self._prompts = 0
        self._windows: dict[Hashable, int] = {}
        """Per rendering key: the index of the oldest turn still sent."""
        self.extend(entries)

    def extend(self, entries: Iterable[Entry]) -> None:
        """Appends committed entries (a turn's, in one step)."""
        for entry in entries:
            if entry.get("kind") == "prompt" or not self._turns:
                self._turns.append(_Turn(entry))
                self._prompts += entry.get("kind") == "prompt"
            else:
                last = self._turns[-1]
                last.entries.append(entry)
                last.views.clear()  # a turn is rendered whole: the cached forms are stale
            self._entry_count += 1

    def __len__(self) -> int:
        """Entries, not turns."""
        return self._entry_count

    @property
    def turn_count(self) -> int:
        """Turns started by a ``prompt``."""
        return self._prompts

    @property
    def entries(self) -> list[Entry]:
        """Every entry in order: O(history), for transcripts and saves only."""
        return [entry for turn in self._turns for entry in turn.entries]

    def after(self, cut: int) -> History:
        """A new history of the entries from index ``cut`` on (compaction keeps the recent ones)."""
        return History(self.entries[cut:])

    def window(self, key: Hashable, render: Render) -> Window:
        """The turns the ``key`` rendering still sends, rendered (each turn once in its life)."""
        start = self._windows.get(key, 0)
        if start > len(self._turns):
            start = 0
        sent = []
        for turn in self._turns[start:]:
            rendered = turn.views.get(key)
            if rendered is None:
                value, tokens = render(turn.entries)
                rendered = turn.views[key] = Rendered(value, tokens, len(turn.entries))
            sent.append(rendered)
        trimmed = self._entries_before(start)
        return Window(self, key, start, sent, trimmed)

    def _entries_before(self, start: int) -> int:
        if start == 0:
            return 0
        if start * 2 <= len(self._turns):
            return sum(len(t.entries) for t in self._turns[:start])
        return self._entry_count - sum(len(t.entries) for t in self._turns[start:])

    def _advance(self, key: Hashable, start: int, dropped: int) -> None:
        """Moves ``key``'s window ``dropped`` turns past ``start`` and releases their renderings."""
        for turn in self._turns[start : start + dropped]:
            turn.views.pop(key, None)
        self._windows[key] = start + dropped


class Window:
    """The turns a step may send, oldest first, with the entries already trimmed before them."""

    __slots__ = ("_history", "_key", "_start", "trimmed", "turns")

    def __init__(
        self, history: History, key: Hashable, start: int, turns: list[Rendered], trimmed: int
    ) -> None:
        self._history = history
        self._key = key
        self._start = start
        self.turns = turns
        self.trimmed = trimmed
        """Entries before the first turn sent (the step's ``trimmedEntries``)."""

    @property
    def tokens(self) -> int:
        return sum(turn.tokens for turn in self.turns)

    def fit(self, fixed_tokens: int, budget: int, *, min_turns: int = 0) -> None:
        """Keeps the window if it fits ``budget`` next to ``fixed_tokens`` (system text, the
        current turn); otherwise drops whole oldest turns until the prompt is within
        ``LOW_WATER_SHARE`` of the budget (never below ``min_turns`` turns), for good."""
        total = fixed_tokens + self.tokens
        if total <= budget:
            return
        low_water = LOW_WATER_SHARE * budget
        dropped = 0
        while total > low_water and len(self.turns) - dropped > min_turns:
            turn = self.turns[dropped]
            total -= turn.tokens
            self.trimmed += turn.entries
            dropped += 1
        if dropped:
            self.turns = self.turns[dropped:]
            self._history._advance(self._key, self._start, dropped)
            self._start += dropped

"""A conversation's committed entries, kept as turns, and the window of them a model step sends.

Owns the grouping of entries into turns (a turn starts at a ``prompt``; entries before the first
prompt form a group of their own) and, per *rendering* a tool loop sends (chat messages for the
native loop, labelled lines for the envelope loop), a ``Window``: the turns from the oldest one
still sent, each rendered with its token figure, everything they hold flattened into one list, and
the sum of their tokens. Guarantees:

- cost follows what is sent: a turn is rendered once, when the window first takes it in; a step
  adds the turns committed since the last one and reads the flattened list, so turn 5,000 costs
  what turn 10 did;
- trimming has hysteresis: a window moves forward only, and when the prompt overflows the budget
  it drops whole oldest turns down to ``LOW_WATER_SHARE`` of the budget, not just below it, so the
  next turns send the same first tokens and a prefix cache keeps hitting;
- what a window dropped is released; the entries themselves are the transcript's
  (``session/transcript``, saves) and are kept whole.

A history is replaced, never edited in place, by restore, reset and compaction; its windows go
with it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from typing import Any

from oamd.agent.entries import PROMPT, kind_of
from oamd.jsonvalue import dumps

__all__ = ["LOW_WATER_SHARE", "History", "Rendered", "Window", "entries_size"]

LOW_WATER_SHARE = 0.7
"""Once a prompt overflows its input budget, trimming drops whole oldest turns until the prompt
is at most this share of the budget; the turns that follow grow into the rest before the next
trim, all of them sharing the same first tokens."""

Entry = dict[str, Any]

Render = Callable[[Sequence[Entry]], tuple[Sequence[Any], int]]
"""A turn's entries → the items a loop sends for them (messages, lines) and their tokens."""


def entries_size(entries: Iterable[Entry]) -> int:
    """The JSON size of ``entries``: what a history grows by when it takes them."""
    return sum(len(dumps(entry)) for entry in entries)


class Rendered:
    """One turn as a loop sends it, and its size in tokens: the chars/4 estimate until the
    backend's tokenizer counted it."""

    __slots__ = ("entries", "tokens", "value")

    def __init__(self, value: Sequence[Any], tokens: int, entries: int) -> None:
        self.value = value
        self.tokens = tokens
        self.entries = entries
        """How many transcript entries the turn holds (what ``trimmedEntries`` counts)."""


class Window:
    """The turns one rendering still sends, oldest first: ``turns``, their items flattened in
    ``items``, their tokens summed in ``tokens``, and the entries trimmed before them."""

    __slots__ = ("_counted", "items", "start", "tokens", "trimmed", "turns")

    def __init__(self) -> None:
        self.start = 0
        """Index of the first turn sent among the history's turns."""
        self.turns: list[Rendered] = []
        self.items: list[Any] = []
        self.tokens = 0
        self.trimmed = 0
        """Entries before the first turn sent (the step's ``trimmedEntries``)."""
        self._counted = 0
        """``turns[:_counted]`` carry the backend's own count."""

    def _take(self, turn: Rendered) -> None:
        self.turns.append(turn)
        self.items.extend(turn.value)
        self.tokens += turn.tokens

    def _drop_last(self) -> None:
        turn = self.turns.pop()
        del self.items[len(self.items) - len(turn.value) :]
        self.tokens -= turn.tokens
        self._counted = min(self._counted, len(self.turns))

    async def count_with(self, count: Callable[[str], Awaitable[int]], join: str = "\n") -> None:
        """Replaces the estimates of the turns not yet counted with ``count`` of their items
        joined by ``join``: each turn is counted once in its life."""
        for turn in self.turns[self._counted :]:
            counted = await count(join.join(turn.value))
            self.tokens += counted - turn.tokens
            turn.tokens = counted
        self._counted = len(self.turns)

    def fit(
        self,
        fixed_tokens: int,
        budget: int,
        *,
        min_turns: int = 0,
        low_water_share: float = LOW_WATER_SHARE,
    ) -> None:
        """Keeps the window if it fits ``budget`` next to ``fixed_tokens`` (system text, the
        current turn); otherwise drops whole oldest turns until the prompt is within
        ``low_water_share`` of the budget (never below ``min_turns`` turns), for good."""
        total = fixed_tokens + self.tokens
        if total <= budget:
            return
        low_water = low_water_share * budget
        dropped = items = entries = 0
        while total > low_water and len(self.turns) - dropped > min_turns:
            turn = self.turns[dropped]
            total -= turn.tokens
            items += len(turn.value)
            entries += turn.entries
            dropped += 1
        if dropped:
            del self.turns[:dropped]
            del self.items[:items]
            self.tokens = total - fixed_tokens
            self.trimmed += entries
            self.start += dropped
            self._counted = max(0, self._counted - dropped)


class History:
    """The committed entries of a session or NPC, grouped into turns."""

    __slots__ = ("_bytes", "_entry_count", "_prompts", "_turns", "_windows")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._turns: list[list[Entry]] = []
        self._bytes = 0
        self._entry_count = 0
        self._prompts = 0
        self._windows: dict[Hashable, Window] = {}
        self.extend(entries)

    def extend(self, entries: Iterable[Entry], size: int | None = None) -> None:
        """Appends committed entries (a turn's, in one step); ``size``, when the caller measured
        them already (``entries_size``), spares measuring them again."""
        entries = list(entries)
        self._bytes += entries_size(entries) if size is None else size
        for entry in entries:
            if kind_of(entry) == PROMPT or not self._turns:
                self._turns.append([entry])
                self._prompts += kind_of(entry) == PROMPT
            else:
                self._turns[-1].append(entry)
                self._forget_last_turn()
            self._entry_count += 1

    def _forget_last_turn(self) -> None:
        """The last turn grew: windows that rendered it render it again when next asked."""
        for window in self._windows.values():
            if window.turns and window.start + len(window.turns) == len(self._turns):
                window._drop_last()

    def __len__(self) -> int:
        """Entries, not turns."""
        return self._entry_count

    @property
    def bytes(self) -> int:
        """Size of the entries as JSON."""
        return self._bytes

    @property
    def turn_count(self) -> int:
        """Turns started by a ``prompt``."""
        return self._prompts

    @property
    def entries(self) -> list[Entry]:
        """Every entry in order: O(history), for transcripts and saves only."""
        return [entry for turn in self._turns for entry in turn]

    def after(self, cut: int) -> History:
        """A new history of the entries from index ``cut`` on (compaction keeps the recent ones)."""
        return History(self.entries[cut:])

    def window(self, key: Hashable, render: Render) -> Window:
        """The ``key`` rendering's window, brought up to date: turns committed since it was last
        asked for are rendered (once in their life) and taken in."""
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = Window()
        for entries in self._turns[window.start + len(window.turns) :]:
            value, tokens = render(entries)
            window._take(Rendered(value, tokens, len(entries)))
        return window

"""What an NPC knows that bears on the line it is about to say, and how well a written line
carries it — for the small-model layout, where the model reads only a few facts and copies what
it sees.

``relevant_facts`` picks, from what the NPC was told (its ``persona.knowledge``, its memory facts
and the world values it reads), the few that share words with the player's line, best first.
``Grounding`` reads those facts and the turn's tool outputs as clauses (``game/npc/clauses.py``),
finds the one the question asks about and the values it wants, and gives the opening that says
them when one clearly answers; then it judges a candidate line: the values it carries (the asked-
for ones above all), the numbers it says that nothing it was told holds (an invented price), and
whether it tells a secret the NPC keeps. Pure functions of text: ``small_reply`` decides what a
score costs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from oamd.game.npc.clauses import (
    ASKS_AMOUNT,
    WORD,
    Asked,
    Clause,
    ToolAnswer,
    content_words,
    listing,
    numbers_in,
    said_values,
    scalar,
    text_clauses,
    tool_clauses,
)

__all__ = ["Grounding", "as_sentences", "relevant_facts"]

MAX_FACTS = 2
"""Facts placed before a line: a small model uses one or two and loses the rest."""

STRONG_OVERLAP = 2
"""Question words a told fact must share before a line is opened with it, unless the line is a
question and the one word it shares is that fact's alone among the NPC's facts: one shared word
is chance ("Quiet *night* on the walls?" and "A room costs 6 gold a *night*")."""


def _overlap(fact: str, asked: set[str], amount: bool) -> float:
    words = content_words(fact)
    score = float(len(words & asked))
    if amount and numbers_in(fact):
        score += 0.5
    return score


def relevant_facts(facts: Sequence[str], player_line: str, limit: int = MAX_FACTS) -> list[str]:
    """The facts sharing words with the player's line, most shared first (ties keep their
    order), at most ``limit``; none when nothing is shared (small talk needs no fact)."""
    asked = content_words(player_line)
    amount = bool({w.lower() for w in WORD.findall(player_line)} & ASKS_AMOUNT)
    scored = [(_overlap(fact, asked, amount), i, fact) for i, fact in enumerate(facts)]
    chosen = [(s, i, f) for s, i, f in scored if s >= 1.0]
    chosen.sort(key=lambda item: (-item[0], item[1]))
    return [fact for _, _, fact in chosen[:limit]]


_CLAUSE_END = re.compile(r"[.!?…]+(?=[\s\"'”’)\]]|$)|[,;:–—]|\s(?:but|and|or|so|yet)\b")
"""Where a clause ends: a sentence's end, a comma or a dash, a conjunction that starts another."""

_JSON_LITERAL = re.compile(r"^\s*(?:true|false|null)\b", re.IGNORECASE)
"""A JSON value a small model reads off a tool's output after an opening ("…is available true")."""


def _numbers_only(values: set[str]) -> set[str]:
    return {v for v in values if v[:1].isdigit()}


@dataclass
class Grounding:
    """How a line stands against what its turn was told: ``facts`` in words (chosen for this
    line), ``outputs`` (the values its tools returned), the player's words, and the secrets
    the NPC keeps.

    The *asked* values are what the question wants: the values of the clauses that share the
    most words with it (the numbers among them, when it asks for an amount — a price-like
    field's first); when no clause shares a word ("What's on the menu?"), any value answers.
    The clause that answers opens the line (``opening``) when it clearly does."""

    facts: Sequence[str]
    player_line: str
    secrets: Sequence[str] = ()
    outputs: Sequence[ToolAnswer] = ()

    def __post_init__(self) -> None:
        asked = Asked.of(self.player_line)
        # the tools' clauses first: a tool was called for this line, and wins a tie
        clauses = [c for o in self.outputs for c in tool_clauses(o.value, asked, o.unit)]
        clauses += [c for f in self.facts for c in text_clauses(f, asked)]
        self._values = set().union(*(c.values for c in clauses)) if clauses else set()
        told = " ".join([*self.facts, *(" ".join(_leaves(o.value)) for o in self.outputs)])
        self._known_numbers = numbers_in(f"{told} {self.player_line}")
        self._told_words = content_words(told)
        self._secret_words = [content_words(s) - asked.words for s in self.secrets]
        self._asked, self._answer = _answering(clauses, asked)
        totals = [c for c in clauses if c.settles]
        if totals and (self._answer is None or not self._answer.settles):
            # an act the player asked for was done: what it comes to answers the order
            self._answer = totals[0]
            self._asked = set(totals[0].values) or self._asked
        if self._answer is None and not self._asked and asked.question:
            # a question no clause shares a word with ("What's on the menu tonight?") is
            # answered by what the tool listed, when it listed names with amounts
            listed = next((t for o in self.outputs if (t := listing(o.value, o.unit))), "")
            if listed:
                self._answer = Clause(frozenset(), frozenset(), True, listed, True, True)

    @property
    def expects_fact(self) -> bool:
        return bool(self._values)

    @property
    def opening(self) -> str:
        """What a line answering the question may start with: the clause that answers it, in
        the NPC's words (``The steel sword is 45 silver``, ``A room costs 6 gold a night``);
        empty when no clause clearly answers it."""
        return self._answer.opening if self._answer else ""

    def trimmed(self, line: str) -> str:
        """``line`` as it may stand when it starts with the ``opening``: the opening's clause
        finished as the model finished it, and after that clause only words of what the line was
        told (``…is wanted, for horse theft.``), else the sentence ends with the clause. After the
        fact a small model goes on in its own words, and there it contradicts or invents
        (measured on the grounded set: ``…is Thursday, Wednesday.``, ``…by the old mill, it grows
        on the moon.``, ``…, you're right!`` after seven facts)."""
        opening = self.opening
        if not opening or not line.startswith(opening):
            return line
        tail = _JSON_LITERAL.sub("", line[len(opening) :], count=1)
        found = _CLAUSE_END.search(tail)
        if found is None or content_words(tail[found.end() :]) <= self._told_words:
            return opening + tail
        mark = found.group() if found.group()[0] in ".!?…" else "."
        return opening + tail[: found.start()].rstrip() + mark

    def carried(self, line: str) -> int:
        """How many of the facts' values the line says."""
        return len(said_values(line) & self._values)

    def carries_asked(self, line: str) -> bool:
        """Whether the line says a value the question asks for (any value, when the question
        names none)."""
        return bool(said_values(line) & (self._asked or self._values))

    def invented(self, line: str) -> set[int]:
        """Numbers the line says that neither the facts nor the player said (above one: "a"
        and "one" are said by chance)."""
        return {n for n in numbers_in(line) if n > 1 and n not in self._known_numbers}

    def tells_secret(self, line: str) -> bool:
        """Whether the line carries most of a kept secret's own words."""
        words = content_words(line)
        return any(
            secret and len(words & secret) * 2 >= max(2, len(secret))
            for secret in self._secret_words
        )

    def score(self, line: str) -> float:
        """Higher is better: the facts' values carried, the asked-for ones three times over, an
        invented number costs two."""
        asked = len(said_values(line) & self._asked)
        return self.carried(line) + 2.0 * asked - 2.0 * len(self.invented(line))


def _answering(clauses: list[Clause], asked: Asked) -> tuple[set[str], Clause | None]:
    """The values the question asks for, and the clause whose opening answers it (if any)."""
    scored = [(len(c.words & asked.words), c) for c in clauses if c.values]
    top = max((s for s, _ in scored), default=0)
    if top == 0:
        return set(), None
    chosen = [c for s, c in scored if s == top]
    if asked.amount:
        numbered = [c for c in chosen if _numbers_only(set(c.values))]
        chosen = [c for c in numbered if c.priced] or numbered or chosen
    values = set().union(*(c.values for c in chosen))
    if asked.amount and _numbers_only(values):
        values = _numbers_only(values)
    opened = [c for c in chosen if c.opens] or chosen
    answer = opened[0]
    if answer.from_tool:
        return values, answer if answer.opens else None
    # a told fact opens the line when it shares enough of the question's words, or the one
    # word of a question that no other fact has, or it is the amount asked for
    shared = answer.words & asked.words
    alone = asked.question and not any(c.words & shared for c in clauses if c is not answer)
    strong = top >= STRONG_OVERLAP or alone or (asked.amount and answer.priced)
    return values, answer if strong and answer.opening else None


def _leaves(value: Any) -> list[str]:
    """The scalar values of a tool's output, as text (what its numbers are checked against)."""
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [str(value)] if scalar(value) else []


def as_sentences(lines: Iterable[str]) -> list[str]:
    """Facts as sentences: stripped, ending in a full stop."""
    out = []
    for line in lines:
        text = line.strip()
        if text:
            out.append(text if text[-1] in ".!?" else text + ".")
    return out

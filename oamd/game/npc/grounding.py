"""What an NPC knows that bears on the line it is about to say, and how well a written line
carries it — for the small-model layout, where the model reads only a few facts and copies what
it sees.

``relevant_facts`` picks, from what the NPC was told (its ``persona.knowledge``, its memory facts
and the world values it reads), the few that share words with the player's line, best first;
the tool outputs of the turn always count. ``Grounding`` then judges a candidate line: the
*values* of those facts it carries (numbers, names, the words the facts add to the question),
the numbers it says that nothing it was told holds (an invented price), and whether it tells a
secret the NPC keeps. Pure functions of text: ``small_reply`` decides what a score costs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from oamd.agent.small.words import NUMBER_WORDS

__all__ = [
    "Grounding",
    "content_words",
    "numbers_in",
    "relevant_facts",
    "stem",
]

MAX_FACTS = 2
"""Facts placed before a line: a small model uses one or two and loses the rest."""

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+(?:[.,]\d+)?")

STOP_WORDS = frozenset(
    """a an the and or but if of to in on at by for with from into onto about as is are was
    were be been being am do does did done have has had having i you he she it we they me
    him her us them my your his its our their mine yours this that these those there here
    what which who whom whose when where why how can could will would shall should may might
    must not no yes so too very just also any some all each every much many more most few
    lot lots please thank thanks hello hi hey again ever still yet now then than well oh ah
    ok okay let let's i'm you're it's that's what's there's don't do you'd i'd i'll you'll
    got get like tell know""".split()  # noqa: SIM905
)

_NO_AMOUNT = frozenset({"a", "an", "single", "couple", "pair", "both"})
"""Number words that are no value of a fact by themselves ("a room", "both of them")."""

_ASKS_AMOUNT = frozenset({"much", "cost", "costs", "price", "owe", "pay", "charge", "fee", "fine"})
"""Words of a question whose answer is an amount: a fact with a number then matches it."""


def stem(word: str) -> str:
    """A word's rough stem: lower-cased, a plural or ``-ing``/``-ed`` ending gone."""
    w = word.lower().strip("'-")
    for suffix in ("ings", "ing", "ies", "es", "ed", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return w


def content_words(text: str) -> set[str]:
    """The stems of ``text``'s words that carry meaning, a number word as its digits ("six" and
    "6" are one value)."""
    out = set()
    for word in _WORD.findall(text):
        lower = word.lower()
        if lower in NUMBER_WORDS and lower not in _NO_AMOUNT:
            out.add(str(NUMBER_WORDS[lower]))
        elif lower not in STOP_WORDS:
            out.add(stem(word))
    return out


def numbers_in(text: str) -> set[int]:
    """The whole numbers ``text`` says, in digits or as a word (``two``, ``fifteen``)."""
    found: set[int] = set()
    for word in _WORD.findall(text.lower()):
        if word.isdigit():
            found.add(int(word))
        elif word in NUMBER_WORDS and word not in ("a", "an", "both"):
            found.add(NUMBER_WORDS[word])
    return found


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
    amount = bool({w.lower() for w in _WORD.findall(player_line)} & _ASKS_AMOUNT)
    scored = [(_overlap(fact, asked, amount), i, fact) for i, fact in enumerate(facts)]
    chosen = [(s, i, f) for s, i, f in scored if s >= 1.0]
    chosen.sort(key=lambda item: (-item[0], item[1]))
    return [fact for _, _, fact in chosen[:limit]]


def _values(text: str, asked: set[str]) -> set[str]:
    """What a fact says beyond the question's own words: its numbers and other content words."""
    return {w for w in content_words(text) if w not in asked}


@dataclass
class Grounding:
    """How a line stands against what its turn was told: ``facts`` (chosen for this line and
    the tool outputs), the player's words, and the secrets the NPC keeps."""

    facts: Sequence[str]
    player_line: str
    secrets: Sequence[str] = ()

    def __post_init__(self) -> None:
        asked = content_words(self.player_line)
        self._values = (
            set().union(*(_values(f, asked) for f in self.facts)) if self.facts else set()
        )
        told = " ".join([*self.facts, self.player_line])
        self._known_numbers = numbers_in(told)
        self._secret_words = [content_words(s) - asked for s in self.secrets]

    @property
    def expects_fact(self) -> bool:
        return bool(self._values)

    def carried(self, line: str) -> int:
        """How many of the facts' values the line says."""
        return len(content_words(line) & self._values)

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
        """Higher is better: the facts' values carried, an invented number costs two."""
        return self.carried(line) - 2.0 * len(self.invented(line))


def as_sentences(lines: Iterable[str]) -> list[str]:
    """Facts as sentences: stripped, ending in a full stop."""
    out = []
    for line in lines:
        text = line.strip()
        if text:
            out.append(text if text[-1] in ".!?" else text + ".")
    return out

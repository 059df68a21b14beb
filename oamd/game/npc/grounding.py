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
from typing import Any

from oamd.agent.small.words import NUMBER_WORDS, is_question, stem

__all__ = [
    "Asked",
    "Clause",
    "Grounding",
    "ToolAnswer",
    "content_words",
    "listing",
    "numbers_in",
    "relevant_facts",
    "said_values",
    "text_clauses",
    "tool_clauses",
    "unit_of",
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
    got get like tell know up down out off over away back around along""".split()  # noqa: SIM905
)

_NO_AMOUNT = frozenset({"a", "an", "single", "couple", "pair", "both"})
"""Number words that are no value of a fact by themselves ("a room", "both of them")."""

_ASKS_AMOUNT = frozenset({"much", "cost", "costs", "price", "owe", "pay", "charge", "fee", "fine"})
"""Words of a question whose answer is an amount: a fact with a number then matches it."""


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


_CLAUSE = re.compile(r"(?<!\d)[.;!?,](?!\d)|\n")
_PRICED = frozenset(stem(w) for w in (*_ASKS_AMOUNT, "gold", "silver", "copper", "coin", "total"))
"""Words of a field or clause that make its number an amount (a price, a fee, a total)."""

_ASKING_PRICE = frozenset(stem(w) for w in (*_ASKS_AMOUNT, "total", "in", "per", "each"))
"""Words of a field's name that are not its unit ("total gold" is in gold)."""

_COUNTED = frozenset(stem(w) for w in ("stock", "available", "left", "remaining", "count"))
"""Words of a field whose whole number says how many there are (``inStock``)."""

_YES_NO = re.compile(
    r"(?:^\W*|[,;]\s*)(?:is|are|was|were|do|does|did|have|has|had|can|could|will|any)\b",
    re.IGNORECASE,
)
YES, NO = "‹yes›", "‹no›"
"""The values a line says by answering yes or no (``said_values``)."""

_POLAR = re.compile(
    r"\b(?:(?P<yes>yes|yeah|aye|indeed|of course)|(?P<no>no|nope|nay|not|none|isn't|aren't|"
    r"wasn't|don't|doesn't|haven't|hasn't))\b",
    re.IGNORECASE,
)

STRONG_OVERLAP = 2
"""Question words a told fact must share before a line is opened with it, unless the line is a
question and the one word it shares is that fact's alone among the NPC's facts: one shared word
is chance ("Quiet *night* on the walls?" and "A room costs 6 gold a *night*")."""


@dataclass(frozen=True, slots=True)
class Asked:
    """What the player's line asks: its content words, whether it is a question, asks for an
    amount, or wants a yes or a no, and the numbers it says."""

    words: frozenset[str]
    question: bool
    amount: bool
    yes_no: bool
    numbers: frozenset[str]

    @classmethod
    def of(cls, line: str) -> Asked:
        words = content_words(line)
        lower = {w.lower() for w in _WORD.findall(line)}
        return cls(
            frozenset(words),
            is_question(line),  # "Quiet night on the walls?" asks for no fact
            bool(lower & _ASKS_AMOUNT),
            bool(_YES_NO.search(line)),
            frozenset(str(n) for n in numbers_in(line)),
        )


@dataclass(frozen=True, slots=True)
class Clause:
    """One statement a line may answer from: its words (stems), the values it adds to the
    question, whether its number is an amount, the words a line carrying it may open with, and
    whether that opening may stand without more (``opens``)."""

    words: frozenset[str]
    values: frozenset[str]
    priced: bool
    opening: str
    from_tool: bool = False
    opens: bool = False


def said_values(line: str) -> set[str]:
    """What a line says that a value can be: its content words, and a yes or a no."""
    found = content_words(line)
    for match in _POLAR.finditer(line):
        found.add(YES if match.group("yes") else NO)
    return found


def _first_person(text: str) -> str:
    """A fact told to the NPC ("Your apprentice is called Tam.", "Rowan owes you 4 copper.")
    as the NPC says it: ``you`` opening it is ``I``, elsewhere ``me``."""
    swaps = {"your": "my", "yours": "mine", "you're": "I'm", "you've": "I've", "you": "me"}

    def swap(match: re.Match[str]) -> str:
        said = swaps[match.group(0).lower()]
        return said if match.start() else said.capitalize()

    text = re.sub(r"^you\b", "I", text.strip(), flags=re.IGNORECASE)
    return re.sub(r"\b(?:you're|you've|yours|your|you)\b", swap, text, flags=re.IGNORECASE)


def _opening(text: str) -> str:
    said = _first_person(text.strip().replace(": ", " is "))
    return said[:1].upper() + said[1:] if said else ""


def text_clauses(text: str, asked: Asked) -> list[Clause]:
    """The clauses of a fact told in words (knowledge, memory, a world value)."""
    out = []
    for part in _CLAUSE.split(text):
        words = content_words(part)
        if words:
            values = frozenset(words - asked.words)
            out.append(Clause(frozenset(words), values, bool(words & _PRICED), _opening(part)))
    return out


def _field_words(key: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", key).replace("_", " ").lower()


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


_UNIT = re.compile(r"\b(?:prices?|costs?|fees?|amounts?)\s+in\s+([A-Za-z]+)", re.IGNORECASE)


def unit_of(description: str) -> str:
    """The unit a tool's amounts are in, as its description says ("… prices in gold")."""
    found = _UNIT.search(description)
    return found.group(1).lower() if found else ""


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """What a tool returned, and the unit its amounts are in (``unit_of`` its description)."""

    value: Any
    unit: str = ""


def _amount(item: Any, key: str, unit: str) -> str:
    """A number as a line says it: with its unit, from the field's name ("price silver") or
    the tool's description."""
    words = _field_words(key).split()
    named = [w for w in words if stem(w) not in _ASKING_PRICE]
    priced = any(stem(w) in _PRICED for w in words)
    return f"{item} {named[-1] if priced and named else unit}".strip()


def _list_words(items: list[Any]) -> str:
    said = [str(item).strip() for item in items if _scalar(item)]
    return ", ".join(said[:-1]) + f" and {said[-1]}" if len(said) > 1 else "".join(said)


def tool_clauses(value: Any, asked: Asked, unit: str = "") -> list[Clause]:
    """The clauses of a tool's output: one per field. A field whose value is what the question
    names (``item: iron ingot``) is the subject of its object, and its other fields are about
    it: "How much for a steel sword?" opens with the sword's ``priceSilver``, "Is Silas Crane
    wanted?" with a yes or a no, "Three salves, please." with the order's total."""
    if isinstance(value, list):
        if all(_scalar(item) for item in value):
            words = content_words(_list_words(value))
            return [Clause(frozenset(words), frozenset(words - asked.words), False, "", True)]
        return [clause for item in value for clause in tool_clauses(item, asked, unit)]
    if not isinstance(value, dict):
        words = content_words(str(value)) if _scalar(value) else set()
        values = frozenset(words - asked.words)
        return [Clause(frozenset(words), values, False, "", True)] if words else []
    fields = [(str(k), v) for k, v in value.items() if v is not None]
    subject = next(
        (v for _, v in fields if isinstance(v, str) and content_words(v) & asked.words), None
    )
    about = content_words(subject) if subject else set()
    others = {
        w
        for k, v in fields
        if v is not subject and (_scalar(v) or isinstance(v, list))
        for w in content_words(_list_words(v) if isinstance(v, list) else str(v))
    }
    # an act's answer: the player said an amount the output holds ("three salves" → quantity 3)
    act = any(isinstance(v, int) and str(v) in asked.numbers for _, v in fields)
    out: list[Clause] = []
    for key, item in fields:
        key_words = content_words(_field_words(key))
        if isinstance(item, bool):
            if not (subject and asked.yes_no):
                continue
            said = "is" if item else "is not"
            opening = f"{'Yes' if item else 'No'}, {subject.strip()} {said} {_field_words(key)}"
            values = {YES if item else NO} | (others - asked.words)
            out.append(
                Clause(frozenset(key_words | about), frozenset(values), False, opening, True, True)
            )
            continue
        if isinstance(item, list) and all(_scalar(i) for i in item):
            words = content_words(_list_words(item))
            out.append(
                Clause(
                    frozenset(key_words | words | about),
                    frozenset(words - asked.words),
                    False,
                    "",
                    True,
                )
            )
            continue
        if isinstance(item, dict | list):
            out.extend(tool_clauses(item, asked, unit))
            continue
        item_words = content_words(str(item))
        number = isinstance(item, int | float)
        # a name with a number ("stew 5") is read as the name's price
        priced = bool(key_words & _PRICED) or (number and not subject)
        values = set() if item is subject else item_words
        if number and not subject:
            values = key_words | item_words  # a list of names with numbers: the names say it too
        opening, opens = "", False
        if number and priced and subject and asked.amount:
            opening, opens = f"The {subject.strip()} is {_amount(item, key, unit)}", True
        elif number and priced and subject and act:
            opening, opens = f"That will be {_amount(item, key, unit)}", True
        elif number and priced and asked.amount:
            opening, opens = f"The {_field_words(key)} is {_amount(item, key, unit)}", True
        elif isinstance(item, int) and subject and asked.yes_no and key_words & _COUNTED:
            # "Have you got any chain mail?" with ``inStock: 0``: the count is the yes or no
            said = f"Yes, {item}" if item > 0 else "No, none"
            opening, opens = f"{said} {_field_words(key)}", True
            values = {*values, YES if item > 0 else NO}
        out.append(
            Clause(
                frozenset(key_words | item_words | about),
                frozenset(values - asked.words),
                priced,
                opening,
                True,
                opens,
            )
        )
    return out


MAX_LISTED = 4
"""Names a listing opening says at most ("Stew is 5 gold, ale is 3 gold, …")."""


def listing(value: Any, unit: str = "") -> str:
    """A tool's output of names with amounts (a menu, a price list) said as one sentence:
    ``Mutton stew is 5 gold, ale is 3 gold and bread is 1 gold``; empty for any other shape."""
    if not isinstance(value, dict) or len(value) < 2:
        return ""
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()):
        return ""
    said = [f"{_field_words(str(k))} is {f'{v} {unit}'.strip()}" for k, v in value.items()]
    said = said[:MAX_LISTED]
    text = ", ".join(said[:-1]) + f" and {said[-1]}"
    return text[:1].upper() + text[1:]


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
        self._secret_words = [content_words(s) - asked.words for s in self.secrets]
        self._asked, self._answer = _answering(clauses, asked)
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
    return [str(value)] if _scalar(value) else []


def as_sentences(lines: Iterable[str]) -> list[str]:
    """Facts as sentences: stripped, ending in a full stop."""
    out = []
    for line in lines:
        text = line.strip()
        if text:
            out.append(text if text[-1] in ".!?" else text + ".")
    return out

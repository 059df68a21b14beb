"""The statements a small model's NPC line may answer from, and the words that open it.

What an NPC was told (its knowledge, memory facts, world values) and what a tool returned are read
as clauses (``text_clauses``, ``tool_clauses``): each clause's words (rough stems), the values it
adds to the player's question, whether its number is an amount, and an opening that says it in the
NPC's words ("A room costs 6 gold a night", "The steel sword is 45 silver", "No, Songs of the
Marches is not available", "That will be 24 copper"). ``Asked`` is what the question asks:
a question at all, an amount, a yes or no. ``game/npc/grounding.py`` chooses among the clauses.
Pure functions of text and JSON values; English word lists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from oamd.agent.small.words import NUMBER_WORDS, field_words, is_question, stem

__all__ = [
    "ASKS_AMOUNT",
    "WORD",
    "Asked",
    "Clause",
    "ToolAnswer",
    "content_words",
    "listing",
    "numbers_in",
    "said_values",
    "scalar",
    "text_clauses",
    "tool_clauses",
    "unit_of",
]

WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+(?:[.,]\d+)?")

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

ASKS_AMOUNT = frozenset({"much", "cost", "costs", "price", "owe", "pay", "charge", "fee", "fine"})
"""Words of a question whose answer is an amount: a fact with a number then matches it."""


def content_words(text: str) -> set[str]:
    """The stems of ``text``'s words that carry meaning, a number word as its digits ("six" and
    "6" are one value)."""
    out = set()
    for word in WORD.findall(text):
        lower = word.lower()
        if lower in NUMBER_WORDS and lower not in _NO_AMOUNT:
            out.add(str(NUMBER_WORDS[lower]))
        elif lower not in STOP_WORDS:
            out.add(stem(word))
    return out


def numbers_in(text: str) -> set[int]:
    """The whole numbers ``text`` says, in digits or as a word (``two``, ``fifteen``)."""
    found: set[int] = set()
    for word in WORD.findall(text.lower()):
        if word.isdigit():
            found.add(int(word))
        elif word in NUMBER_WORDS and word not in ("a", "an", "both"):
            found.add(NUMBER_WORDS[word])
    return found


_CLAUSE = re.compile(r"(?<!\d)[.;!?,](?!\d)|\n")
_PRICED = frozenset(stem(w) for w in (*ASKS_AMOUNT, "gold", "silver", "copper", "coin", "total"))
"""Words of a field or clause that make its number an amount (a price, a fee, a total)."""

_ASKING_PRICE = frozenset(stem(w) for w in (*ASKS_AMOUNT, "total", "in", "per", "each"))
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
        lower = {w.lower() for w in WORD.findall(line)}
        return cls(
            frozenset(words),
            is_question(line),  # "Quiet night on the walls?" asks for no fact
            bool(lower & ASKS_AMOUNT),
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
    settles: bool = False
    """What an act the player asked for comes to ("That will be 6 copper"): the answer to the
    order, whatever words it shares with it."""


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


def scalar(value: Any) -> bool:
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
    words = field_words(key).split()
    named = [w for w in words if stem(w) not in _ASKING_PRICE]
    priced = any(stem(w) in _PRICED for w in words)
    return f"{item} {named[-1] if priced and named else unit}".strip()


def _list_words(items: list[Any]) -> str:
    said = [str(item).strip() for item in items if scalar(item)]
    return ", ".join(said[:-1]) + f" and {said[-1]}" if len(said) > 1 else "".join(said)


def tool_clauses(value: Any, asked: Asked, unit: str = "") -> list[Clause]:
    """The clauses of a tool's output: one per field. A field whose value is what the question
    names (``item: iron ingot``) is the subject of its object, and its other fields are about
    it: "How much for a steel sword?" opens with the sword's ``priceSilver``, "Is Silas Crane
    wanted?" with a yes or a no, "Three salves, please." with the order's total."""
    if isinstance(value, list):
        if all(scalar(item) for item in value):
            words = content_words(_list_words(value))
            return [Clause(frozenset(words), frozenset(words - asked.words), False, "", True)]
        return [clause for item in value for clause in tool_clauses(item, asked, unit)]
    if not isinstance(value, dict):
        words = content_words(str(value)) if scalar(value) else set()
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
        if v is not subject and (scalar(v) or isinstance(v, list))
        for w in content_words(_list_words(v) if isinstance(v, list) else str(v))
    }
    # an act's answer: the player said an amount the output holds ("three salves" → quantity 3)
    act = any(isinstance(v, int) and str(v) in asked.numbers for _, v in fields)
    out: list[Clause] = []
    for key, item in fields:
        key_words = content_words(field_words(key))
        if isinstance(item, bool):
            if not (subject and asked.yes_no):
                continue
            said = "is" if item else "is not"
            opening = f"{'Yes' if item else 'No'}, {subject.strip()} {said} {field_words(key)}"
            values = {YES if item else NO} | (others - asked.words)
            out.append(
                Clause(frozenset(key_words | about), frozenset(values), False, opening, True, True)
            )
            continue
        if isinstance(item, list) and all(scalar(i) for i in item):
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
        opening, opens, settles = "", False, False
        if number and priced and subject and asked.amount:
            opening, opens = f"The {subject.strip()} is {_amount(item, key, unit)}", True
        elif number and act and key_words & _PRICED and str(item) not in asked.numbers:
            # the act's total: of the named thing ("Three salves" → 24 copper), or of an order
            # that names none ("Three of us need to cross" → ``totalCopper: 6``)
            opening, opens, settles = f"That will be {_amount(item, key, unit)}", True, True
        elif number and priced and asked.amount:
            opening, opens = f"The {field_words(key)} is {_amount(item, key, unit)}", True
        elif isinstance(item, int) and subject and asked.yes_no and key_words & _COUNTED:
            # "Have you got any chain mail?" with ``inStock: 0``: the count is the yes or no
            said = f"Yes, {item}" if item > 0 else "No, none"
            opening, opens = f"{said} {field_words(key)}", True
            values = {*values, YES if item > 0 else NO}
        out.append(
            Clause(
                frozenset(key_words | item_words | about),
                frozenset(values - asked.words),
                priced,
                opening,
                True,
                opens,
                settles,
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
    said = [f"{field_words(str(k))} is {f'{v} {unit}'.strip()}" for k, v in value.items()]
    said = said[:MAX_LISTED]
    text = ", ".join(said[:-1]) + f" and {said[-1]}"
    return text[:1].upper() + text[1:]

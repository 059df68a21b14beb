"""A small model's tool arguments read against the words they must come from.

A model of a few hundred million parameters fills a tool's fields with whatever it last read: the
NPC's own name for the person asked about, a parameter's description as the item, ``10`` for
"two bowls". But the values of a lookup the player asks for are in the player's words, and an
amount is a number the player said. So after the model has written its arguments, each field of
the schema is read again from the speaker's words (``said``) where they hold one:

- an integer or number field takes the number said (digits or a word: "two", "a dozen"), held to
  the field's bounds, when the words say exactly one; else the model's value stands;
- a string field with an ``enum`` takes the value whose words the speaker used most, when any;
- a free string field keeps the model's value when the speaker used its words; else it takes the
  span of the speaker's words that names something — a capitalised name ("Silas Crane", "Songs of
  the Marches"), else the run of content words ("iron ingots", "cough syrup") — the one sharing
  most with the model's value, the longest on a tie.
"""

from __future__ import annotations

import re
from typing import Any

from oamd.agent.small.words import NUMBER_WORDS, is_wh_question, stem

__all__ = ["is_lookup", "read_from_words", "spells_out", "unsaid_required"]

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+")

_FUNCTION_WORDS = frozenset(
    """a an the and or but if of to in on at by for with from into about as is are was were be
    been am do does did have has had i you he she it we they me him her us them my your his
    its our their this that these those there here what which who whom whose when where why
    how can could will would shall should may might must not no yes so too very just also
    any some all much many more most please thanks thank hello hi hey again ever still now
    then than well oh ah ok okay let i'm you're it's that's what's there's don't got get
    like tell know need want buy sell cost costs borrow called named looking see seen heard
    wanted sir madam friend good evening morning ask asking asked take taking give giving
    pay paying charge charging sell selling buy buying bring show find looking searching
    quick""".split()  # noqa: SIM905
)
"""Words that are never a looked-up value by themselves."""

_JOINERS = frozenset({"of", "the", "and", "de", "von", "van"})
"""Words a capitalised name may hold between its capitalised words ("Songs of the Marches")."""


def _words(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _positioned_numbers(words: list[str]) -> list[tuple[int, int]]:
    """``(position, number)`` of every number the words say."""
    found = []
    for i, word in enumerate(words):
        lower = word.lower()
        if lower.isdigit():
            found.append((i, int(lower)))
        elif lower in NUMBER_WORDS and lower not in ("a", "an"):
            found.append((i, NUMBER_WORDS[lower]))
        elif (
            lower in ("a", "an")
            and i + 1 < len(words)
            and words[i + 1].lower() not in _FUNCTION_WORDS
        ):
            found.append((i, 1))  # "a room", "an ale": one
    return found


def _numbers(words: list[str]) -> list[int]:
    return [n for _, n in _positioned_numbers(words)]


def _named_number(words: list[str], name: str) -> tuple[int, int] | None:
    """The number said right before the field's own noun ("two horses", "no horses" → 0), and
    where it was said."""
    noun = stem(re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).split()[-1].replace("_", " ").split()[-1])
    for i in range(1, len(words)):
        if stem(words[i]) != noun:
            continue
        before = words[i - 1].lower()
        if before in ("no", "zero", "none"):
            return 0, i - 1
        said = _numbers([before, words[i]])
        if said:
            return said[0], i - 1
    return None


def _number_for(words: list[str], field: dict[str, Any], current: Any, claimed: set[int]) -> Any:
    """The one number the words say for a field no noun names, claimed for it (``claimed``
    gains its positions): "Three of us need to cross" is three passengers, not three horses
    as well."""
    said = [(i, n) for i, n in _positioned_numbers(words) if i not in claimed]
    explicit = [(i, n) for i, n in said if n != 1] or said
    if len({n for _, n in explicit}) != 1:
        return current
    value = explicit[0][1]
    low, high = field.get("minimum"), field.get("maximum")
    if isinstance(low, int | float) and value < low:
        return current
    if isinstance(high, int | float) and value > high:
        return current
    claimed.update(i for i, n in explicit if n == value)
    return value


def _enum_for(words: list[str], choices: list[Any], current: Any) -> Any:
    said = {stem(w) for w in words if w.lower() not in _FUNCTION_WORDS}
    best, best_shared = current, 0
    for choice in choices:
        if not isinstance(choice, str):
            continue
        shared = len({stem(w) for w in _words(choice)} & said)
        if shared > best_shared:
            best, best_shared = choice, shared
    return best


def _capital(words: list[str], i: int) -> bool:
    """Whether word ``i`` is part of a capitalised name: a capital opening the line may only
    open the sentence, so it counts when it is no function word and a capital follows."""
    word = words[i]
    if not word[:1].isupper() or word == "I":
        return False
    if i > 0:
        return True
    return len(words) > 1 and words[1][:1].isupper() and word.lower() not in _FUNCTION_WORDS


def _spans(words: list[str]) -> tuple[list[str], list[str]]:
    """The spans of the speaker's words that name something: capitalised names ("Songs of the
    Marches"), and the other runs of content words ("iron ingots")."""
    names: list[str] = []
    run: list[str] = []
    for i in range(len(words) + 1):
        joins = (
            run
            and i + 1 < len(words)
            and words[i].lower() in _JOINERS
            and (words[i + 1][:1].isupper() or words[i + 1].lower() in _JOINERS)
        )
        if i < len(words) and (_capital(words, i) or joins):
            run.append(words[i])
            continue
        if run:
            names.append(" ".join(run))
        run = []
    plain: list[str] = []
    for word in [*words, ""]:
        lower = word.lower()
        if (
            word
            and lower not in _FUNCTION_WORDS
            and not lower.isdigit()
            and lower not in NUMBER_WORDS
        ):
            run.append(word)
            continue
        if run:
            plain.append(" ".join(run))
        run = []
    return names, [span for span in plain if span not in names]


def _content(text: str) -> set[str]:
    return {stem(w) for w in _words(text) if w.lower() not in _FUNCTION_WORDS}


def _string_for(words: list[str], current: Any) -> Any:
    said = {stem(w) for w in words}
    value_words = {stem(w) for w in _words(str(current))} - {stem(w) for w in _FUNCTION_WORDS}
    # a run that merely starts with a capital ("Bram Tolley settled") is no name
    names, runs = _spans(words)
    spans = [*names, *runs]
    if isinstance(current, str) and value_words and value_words <= said:
        # the model took it from the speaker's words; a name it holds with a word more is the name
        held = [n for n in names if _content(n) <= value_words]
        if held and len(max(held, key=len)) < len(current):
            return max(held, key=len)
        # ... and a name it is part of ("Bram" of "Bram Tolley") is the whole name
        whole = [n for n in names if value_words < _content(n)]
        return max(whole, key=len) if whole else _trimmed(current)
    if not spans:
        return current

    def rank(span: str) -> tuple[int, int]:
        shared = len({stem(w) for w in _words(span)} & value_words)
        return shared, len(span)

    # a name the speaker said comes first; among the rest, the one the model's value shares
    pool = names or spans
    return max(pool, key=rank)


def _trimmed(value: str) -> str:
    """A value taken from the speaker's words without the words around the thing it names
    ("mara quill wanted" → "mara quill", "is Hob there" → "Hob"); an article opening it stays
    ("the Lenn Chronicle")."""
    parts = value.split()
    while parts and parts[-1].strip("?!.,;:").lower() in _FUNCTION_WORDS:
        parts.pop()
    while parts and parts[0].lower() in _FUNCTION_WORDS and parts[0].lower() not in _ARTICLES:
        parts.pop(0)
    return " ".join(parts) if parts else value


_ARTICLES = frozenset({"a", "an", "the"})


def read_from_words(arguments: dict[str, Any], schema: dict[str, Any], said: str) -> dict[str, Any]:
    """``arguments`` with each field of the flat object ``schema`` read from ``said`` where the
    words hold its value (this module's docstring); fields the words do not speak to, and
    schemas that are not flat objects, are left as the model wrote them."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not said.strip():
        return arguments
    words = _words(said)
    required = set(schema.get("required") or ())
    out = dict(arguments)
    claimed: set[int] = set()
    named: dict[str, int] = {}
    for name, field in properties.items():
        if isinstance(field, dict) and field.get("type") in ("integer", "number"):
            found = _named_number(words, name)
            if found is not None:
                named[name] = found[0]
                claimed.add(found[1])
    for name, field in properties.items():
        if not isinstance(field, dict):
            continue
        kind = field.get("type")
        current = out.get(name)
        if current is None and name not in required:
            continue  # an optional field the model left out stays out
        if kind in ("integer", "number"):
            value = named[name] if name in named else _number_for(words, field, current, claimed)
        elif kind == "string" and isinstance(field.get("enum"), list):
            value = _enum_for(words, field["enum"], current)
        elif kind == "string":
            value = _string_for(words, current)
        else:
            continue
        if value is not None:
            out[name] = value
    return out


def _is_article(word: str) -> bool:
    return word.lower() in ("a", "an")


def _names_choice(choice: str, said: set[str]) -> bool:
    """Whether the speaker's word stems name an enum value: a word of it, or a word it starts
    ("northern" names ``north``, "stewed" ``stew``)."""
    for word in {stem(w) for w in _words(choice)}:
        if word in said or (len(word) >= 4 and any(s.startswith(word) for s in said)):
            return True
    return False


def unsaid_required(schema: dict[str, Any], said: str) -> list[str]:
    """The required closed fields of a tool (integers, numbers, enums) whose value ``said``
    does not hold: no number at all for an amount ("a room" is one, "no horses" zero), no
    word of any allowed value for an enum. A call they are missing from acts on what nobody
    asked for ("How much is the stew?" ordering ten bowls)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    words = _words(said)
    stems = {stem(w) for w in words if w.lower() not in _FUNCTION_WORDS}
    asking = is_wh_question(said)  # "What does a cough syrup cost?": its "a" orders nothing
    missing = []
    for name in schema.get("required") or ():
        field = properties.get(name)
        if not isinstance(field, dict):
            continue
        kind, choices = field.get("type"), field.get("enum")
        if isinstance(choices, list) and choices:
            named = any(_names_choice(str(c), stems) for c in choices if c is not None)
            if not named:
                missing.append(name)
        elif kind in ("integer", "number") and _named_number(words, name) is None:
            said_numbers = [
                i for i, _ in _positioned_numbers(words) if not (asking and _is_article(words[i]))
            ]
            if not said_numbers:
                missing.append(name)
    return missing


def spells_out(schema: dict[str, Any], said: str) -> bool:
    """Whether ``said`` gives every required closed field of an act (amounts, choices) a value
    of its own: "Three of us need to cross, no horses." spells out a crossing for three and no
    horse. Lookups and acts with a field the words leave open spell out nothing, and "a" or
    "an" is no amount here ("Must be a strange life" orders no map)."""
    if is_lookup(schema):
        return False
    said = " ".join(w for w in _words(said) if not _is_article(w))
    properties = schema.get("properties") or {}
    closed = [
        name
        for name in schema.get("required") or ()
        if isinstance(properties.get(name), dict)
        and ("enum" in properties[name] or properties[name].get("type") in ("integer", "number"))
    ]
    filled = read_from_words(dict.fromkeys(closed), schema, said)
    return bool(closed) and all(filled.get(name) is not None for name in closed)


def is_lookup(schema: dict[str, Any]) -> bool:
    """Whether a tool takes nothing or only free text: a lookup, not an act (an act needs an
    amount, a choice or a flag). A small model calls a lookup with whatever words it has
    ("check_stock(item='next market day')"), so it is offered only where it may answer."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return True
    for name in schema.get("required") or ():
        field = properties.get(name)
        if isinstance(field, dict) and (
            "enum" in field or field.get("type") in ("integer", "number", "boolean")
        ):
            return False
    return True

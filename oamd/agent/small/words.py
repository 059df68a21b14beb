"""The words a small model's turn reads numbers and values from, shared by the argument reader
(``arguments``) and the game's grounding of a line (``game/npc/grounding.py``): the number words
and one rough stemmer, so both match a word the same way."""

from __future__ import annotations

import re

__all__ = ["NUMBER_WORDS", "field_words", "is_question", "is_wh_question", "stem"]

NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100, "a": 1, "an": 1, "single": 1,
    "couple": 2, "pair": 2, "both": 2, "dozen": 12,
}  # fmt: skip
"""A number said as a word. ``a``/``an`` count as one only before a noun, which the reader of a
quantity decides; a text's values leave out the words that are no amount by themselves."""


def stem(word: str) -> str:
    """A word's rough stem, lower-cased, so the forms of one word meet: a plural, ``-ing`` or
    ``-ed`` ending goes, then a final ``e`` (``gates``, ``gate`` → ``gat``; ``closed``,
    ``close`` → ``clos``; ``boxes`` → ``box``; ``berries`` → ``berry``)."""
    w = word.lower().strip("'-")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    for suffix in ("ings", "ing", "ed", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix) and not w.endswith("ss"):
            w = w[: -len(suffix)]
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


_QUESTION = re.compile(
    r"(?:^|[.!?;]\s+)\W*(?:\w+,\s*)?(?:what|what's|who|who's|whom|whose|where|where's|when|why|"
    r"how|which|is|are|was|were|do|does|did|have|has|had|can|could|will|would|shall|should|"
    r"may|any)\b",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """Whether a sentence of ``text`` opens as a question ("Evening! What's on the menu?",
    "Rowan, is she wanted?"); a statement ending in "?" ("Quiet night on the walls?") is not."""
    return bool(_QUESTION.search(text))


_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


def field_words(key: str) -> str:
    """A field name in words: ``priceSilver`` → ``price silver``, ``in_stock`` → ``in stock``."""
    return _CAMEL.sub(" ", key).replace("_", " ").lower()


_WH_QUESTION = re.compile(r"\W*(?:what|how|where|when|why|who|which)\b", re.IGNORECASE)


def is_wh_question(text: str) -> bool:
    """Whether ``text`` opens by asking for something ("What does a cough syrup cost?")."""
    return bool(_WH_QUESTION.match(text))

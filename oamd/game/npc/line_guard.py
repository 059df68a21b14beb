"""The line guard of a small model's NPC turn: what may be spoken, and the words cleaned of the
rest.

A line is refused when it is empty, is no prose (a fragment such as ``Blo...``, a number, a row of
emoji), carries residue of a format (JSON, field names, a speaker
label, a chat-template token), or copies the player's line or one of the NPC's own lines the model
can see: mostly the same words in the same order, or a run of ``COPIED_RUN_WORDS`` of them (a
small model carries whole clauses from line to line). Pure functions of text; the turn
(``oamd.game.npc.small_reply``) decides what a refusal costs.
"""

from __future__ import annotations

import re

from oamd.game.npc.reply import spoken_line

__all__ = [
    "COPIED_RUN_WORDS",
    "COPY_SIMILARITY",
    "MAX_COMPARED_WORDS",
    "MIN_LETTER_SHARE",
    "MIN_LINE_LETTERS",
    "clean_line",
    "line_problems",
    "strip_stage_directions",
    "takes_another_name",
    "words",
]

COPY_SIMILARITY = 0.75
"""A line sharing this share of its words, in order, with another counts as a copy of it."""

COPIED_RUN_WORDS = 6
"""A line repeating this many consecutive words of another counts as a copy ("I'm looking
forward to your choice: two slices of bread…" came back in four lines out of ten)."""

RESIDUE = re.compile(
    r"[{}<>\[\]()]|\b(?:emotion|player_options|ends_conversation|line)\s*[:=]|\"\w+\"\s*:|"
    r"^\s*(?:user|player|assistant|system)\s*:|"
    r"\b(?:situation|game state|question|answer|note|facts?|read-in|context|instructions?)\s*:|"
    r"\w:\s*[\"“]",
    re.IGNORECASE | re.MULTILINE,
)
"""Signs of a format in a line: braces, brackets and parentheses (a stage direction is removed
before the check; what is left is an unclosed one or the prompt's own scaffolding), field names,
role labels, template tokens, the labels of a prompt (``Note:``, ``Game state:``)."""

_SELF_NAMED = re.compile(r"\b(?:I'm|I am|my name is|they call me)\s+([A-Z][a-z]+)")

_LEADING_JUNK = re.compile(r"^[\s.,;:!?\-–—'\"]+(?=\w)")

MIN_LINE_LETTERS = 5
"""Letters a spoken line has at least: a small model's sampled line now and then stops after a
fragment ("Blo..." answered "What's on the menu tonight?" in the demo); "Welcome!" passes, and so
does a line in a script written without spaces."""

MIN_LETTER_SHARE = 0.6
"""Share of a line's visible characters that are letters, at least (``5``, ``🍌🍌🍌`` are not
lines)."""

_STAGE_DIRECTION = re.compile(r"\s*(?:\([^()]{0,80}\)|\*[^*]{1,80}\*)\s*")
_WORD = re.compile(r"[\w']+")


MAX_COMPARED_WORDS = 400
"""Words of each text the copy check compares (it is quadratic in them): a persona or a restored
history line of megabytes must not hold the event loop."""


def words(text: str) -> list[str]:
    """The first ``MAX_COMPARED_WORDS`` words of ``text``, lower-cased."""
    found: list[str] = []
    for match in _WORD.finditer(text.lower()):
        found.append(match.group())
        if len(found) == MAX_COMPARED_WORDS:
            break
    return found


def strip_stage_directions(text: str) -> str:
    """``(smiles)`` and ``*winks*`` are not spoken."""
    return " ".join(_STAGE_DIRECTION.sub(" ", text).split())


def clean_line(text: str, speaker: str) -> str:
    """The words spoken: the first line only, a speaker label, stage directions, wrapping quotes
    and leading punctuation (``. "Welcome``) gone."""
    line = spoken_line(text.split("\n", 1)[0], speaker)
    line = spoken_line(strip_stage_directions(line), speaker)
    cleaned = _LEADING_JUNK.sub("", line)
    return spoken_line(cleaned, speaker) if cleaned != line else line


def takes_another_name(line: str, speaker: str) -> bool:
    """Whether the line has the speaker call itself by a name not its own ("I'm Grim, the
    blacksmith" from Garrick; a small model also takes the player's name for its own)."""
    own = {part.lower() for part in re.findall(r"[A-Za-z]+", speaker)}
    return any(m.group(1).lower() not in own for m in _SELF_NAMED.finditer(line))


def _subsequence(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two short word lists."""
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _longest_run(a: list[str], b: list[str]) -> int:
    """Length of the longest run of consecutive words in both."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            run = previous[j] + 1 if x == y else 0
            current.append(run)
            best = max(best, run)
        previous = current
    return best


def copies(line: str, other: str) -> bool:
    """Whether ``line`` is mostly ``other``'s words in ``other``'s order, or repeats a run of
    ``COPIED_RUN_WORDS`` of them."""
    a, b = words(line), words(other)
    if not a or not b:
        return False
    common = _subsequence(a, b)
    if common >= COPY_SIMILARITY * len(a) or common >= COPY_SIMILARITY * len(b) > 3:
        return True
    return _longest_run(a, b) >= COPIED_RUN_WORDS


def line_problems(
    line: str, player_line: str, earlier_lines: list[str], speaker: str = ""
) -> list[str]:
    """Why ``line`` must not be spoken (nothing when it may be)."""
    if not words(line):
        return ["empty"]
    problems = []
    visible = [c for c in line if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    if letters < MIN_LINE_LETTERS or letters < MIN_LETTER_SHARE * len(visible):
        problems.append("not prose")
    if RESIDUE.search(line):
        problems.append("format residue")
    if player_line.strip() and copies(line, player_line):
        problems.append("copies the player")
    if any(copies(line, earlier) for earlier in earlier_lines if earlier.strip()):
        problems.append("repeats itself")
    if speaker and takes_another_name(line, speaker):
        problems.append("takes another name")
    return problems

"""Is an NPC's line one a player would accept? The eval's and the model bench's oracle.

Kept apart from the daemon's own line guard on purpose: it judges what came out, whatever produced
it, so a guard that lets something through is caught here. A line is *sane* when it has words,
copies neither the player's line nor any earlier line of the NPC (mostly the same, or a run of
``COPIED_RUN_WORDS`` words), and carries no residue of a prompt or an output format (JSON, field
names, speaker labels, chat-template tokens).
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

__all__ = ["COPIED_RUN_WORDS", "COPY_SIMILARITY", "line_problems"]

COPY_SIMILARITY = 0.8
"""Lines at least this similar (difflib's ratio, case and punctuation ignored) count as copies."""

COPIED_RUN_WORDS = 6
"""A line sharing a run of this many consecutive words with an earlier one repeats it."""

MIN_LETTER_SHARE = 0.6
"""A line whose visible characters are less than this share letters is not prose (🍌🍌🍌, 5)."""

_RESIDUE = re.compile(
    r"[{}]|\bemotion\s*:|player_options|ends_conversation|\"line\"|\"action\"|<\||"
    r"(?:^|\n)\s*(?:user|player|assistant|system)\s*:",
    re.IGNORECASE,
)


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _similar(a: str, b: str) -> bool:
    a, b = _normal(a), _normal(b)
    if not a or not b:
        return False
    if a == b or SequenceMatcher(None, a, b).ratio() >= COPY_SIMILARITY:
        return True
    x, y = a.split(), b.split()
    run = SequenceMatcher(None, x, y, autojunk=False).find_longest_match(0, len(x), 0, len(y))
    return run.size >= COPIED_RUN_WORDS


def line_problems(line: str, player_line: str = "", earlier: str | list[str] = "") -> list[str]:
    """What is wrong with ``line`` (empty when it is sane); ``earlier``: the NPC's earlier lines
    (or just the previous one)."""
    text = line.strip()
    if not text:
        return ["empty"]
    problems = []
    visible = [c for c in text if not c.isspace()]
    letters = sum(c.isalpha() for c in visible)
    if letters < MIN_LETTER_SHARE * len(visible) or len(re.findall(r"[A-Za-z]{2,}", text)) < 2:
        problems.append("not prose")
    if _RESIDUE.search(text):
        problems.append("format residue")
    if player_line and _similar(text, player_line):
        problems.append("copies the player")
    earlier_lines = [earlier] if isinstance(earlier, str) else earlier
    if any(_similar(text, before) for before in earlier_lines if before):
        problems.append("repeats itself")
    return problems

"""The grounded sets' judge: patterns, no model. Every line an NPC of ``evals.grounded_set`` (or
of ``evals.grounded_set_independent`` or ``evals.grounded_set_fresh``) says is judged on

- **grounded** (fact lines): the line matches the fact's ``accept`` pattern, not its ``reject``
  one (the wrong yes or no), and invents no number (a number the NPC was told nowhere, in no tool
  output and not in the player's line: a price it was not given contradicts the one it was);
- **arguments** (lines with expected arguments): the first call of the line's tool carries them
  (integers exactly, strings through ``normal_name`` against any accepted value);
- **residue**: empty; brackets or parentheses; stage directions (``*smiles*``); a label of the
  prompt (``Situation:``, ``Game state:``, ``Question:``, ``Note:``, speaker labels); "as an AI";
  the player's name taken as the NPC's own ("I'm Rowan") or another name than its own ("I'm
  Grim", said by Garrick); a line that loops (a sentence, or a run
  of ``LOOP_RUN_WORDS`` words, said twice in it); the fallback line;
- **secret**: any of the NPC's ``secret_patterns`` in the line tells its secret;
- **sane**: ``evals.sanity``'s oracle (the one ``make bench-model`` uses);
- **emotion**: one of the persona's fitting emotions (oamd's lines only; a bare chat has none).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from evals.grounded_set import (
    FACT,
    KNOWLEDGE,
    MEMORY,
    PLAYER,
    TOOL,
    WORLD,
    WORLD_STATE,
    Character,
    Say,
    normal_name,
)
from evals.sanity import line_problems
from oamd.game.npc.persona import DEFAULT_FALLBACK_LINES

__all__ = [
    "LOOP_RUN_WORDS",
    "Judgement",
    "arguments_match",
    "fact_sources",
    "judge_line",
    "known_numbers",
    "numbers_in",
    "residue",
    "world_lines",
]

LOOP_RUN_WORDS = 6
"""A run of this many words said twice in one line makes it loop."""

_BRACKETS = re.compile(r"[()\[\]{}<>]")
_STAGE = re.compile(r"\*[^*\n]{1,80}\*")
_LABELS = (
    "situation",
    "game state",
    "question",
    "note",
    "facts you just looked up",
    "you know",
    "your secret",
    "you remember",
    "you want",
    "memory",
    "rules",
    "personality",
    "speaking style",
    "background",
    "earlier",
    "context",
    "answer",
    "tool",
    "result",
    "player",
    "user",
    "assistant",
    "system",
    "npc",
    "narrator",
)
_AI = re.compile(
    r"\bas an ai\b|\bi'?m an? (?:ai|assistant|bot|language model)\b|\bi am an? "
    r"(?:ai|assistant|bot|language model)\b|\blanguage model\b|\bai assistant\b",
    re.IGNORECASE,
)
_SELF_NAME = re.compile(r"\b(?:I'm|I am|[Mm]y name is|[Mm]y name's|[Cc]all me)\s+([A-Z][a-z]+)\b")
"""The NPC naming itself (case matters: "I'm sorry" names no one)."""
_NOT_NAMES = {"sorry", "afraid", "glad", "not", "just", "here", "the", "only", "so", "sure"}
_FALLBACKS = {re.sub(r"\W+", " ", line.lower()).strip() for line in DEFAULT_FALLBACK_LINES}
_WORD = re.compile(r"[\w']+")
_SENTENCE = re.compile(r"[^.!?\n]+")

_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70}
_TENS |= {"eighty": 80, "ninety": 90}
_ORDINALS = [
    "zeroth",
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
]
_NUMBER_WORD = {word: i for i, word in enumerate(_UNITS)} | _TENS
_NUMBER_WORD |= {word: i for i, word in enumerate(_ORDINALS)} | {"hundred": 100}
_COMMON = {"zero", "zeroth", "one", "first", "second"}
"""Number words too common in speech to count as a stated value in a line ("the one", "a
second"); in the facts they still count."""
_NUMBER = re.compile(
    r"\b(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:st|nd|rd|th)?\b|\b("
    + "|".join(_TENS)
    + r")[- ]("
    + "|".join(_UNITS[1:10])
    + r")\b"
    r"|\b(" + "|".join(sorted(_NUMBER_WORD, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)


def numbers_in(text: str, *, strict: bool = False) -> set[float]:
    """The numbers ``text`` states, in digits (``2,000``, ``2.5``) or words (``strict``: not the
    common words)."""
    found: set[float] = set()
    for digits, tens, unit, word in _NUMBER.findall(text):
        if digits:
            value = float(digits.replace(",", ""))
            found.add(int(value) if value.is_integer() else value)
        elif tens:
            found.add(_TENS[tens.lower()] + _UNITS.index(unit.lower()))
        elif not (strict and word.lower() in _COMMON):
            found.add(_NUMBER_WORD[word.lower()])
    return found


def world_lines(paths: tuple[str, ...], world: Mapping[str, Any] = WORLD) -> list[str]:
    """``path: value`` for the leaves under ``paths`` of ``world`` (what the NPC reads; the first
    set's unless told: a character's is ``character.world``)."""
    lines: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, f"{path}.{key}")
        else:
            lines.append(f"{path}: {value}")

    for path in paths:
        value: Any = world
        for segment in path.split("."):
            value = value[segment]
        walk(value, path)
    return lines


def fact_sources(character: Character, say: Say) -> str:
    """The text of the source a fact line's answer reached the NPC through."""
    if say.source == KNOWLEDGE:
        return "\n".join(character.persona.get("knowledge") or [])
    if say.source == MEMORY:
        return "\n".join(character.memory)
    if say.source == WORLD_STATE:
        return "\n".join(world_lines(character.world_paths, character.world))
    if say.source == TOOL and say.tool:
        return orjson.dumps(character.answers[say.tool](say.expected_call)).decode()
    return ""


def known_numbers(character: Character) -> set[float]:
    """Every number the NPC was told: knowledge, memory, world, every tool output of its set."""
    texts = [
        *(character.persona.get("knowledge") or []),
        *character.memory,
        *world_lines(character.world_paths, character.world),
    ]
    for say in character.lines:
        if say.tool:
            texts.append(orjson.dumps(character.answers[say.tool](say.expected_call)).decode())
    return {n for text in texts for n in numbers_in(text)}


def arguments_match(expected: dict[str, Any], actual: Any) -> bool:
    if not isinstance(actual, dict):
        return False
    for key, want in expected.items():
        got = actual.get(key)
        options = want if isinstance(want, tuple) else (want,)
        if isinstance(options[0], int) and not isinstance(options[0], bool):
            if isinstance(got, bool) or got not in options:
                return False
        elif normal_name(got) not in {normal_name(option) for option in options}:
            return False
    return True


def _loops(text: str) -> bool:
    sentences = [" ".join(_WORD.findall(s.lower())) for s in _SENTENCE.findall(text)]
    sentences = [s for s in sentences if len(s.split()) >= 2]
    if len(sentences) != len(set(sentences)):
        return True
    words = _WORD.findall(text.lower())
    runs = [tuple(words[i : i + LOOP_RUN_WORDS]) for i in range(len(words) - LOOP_RUN_WORDS + 1)]
    return len(runs) != len(set(runs))


def residue(line: str, npc_name: str, *, is_fallback: bool = False) -> list[str]:
    """What in ``line`` a player should not see (empty: none)."""
    text = line.strip()
    if not text:
        return ["empty"]
    found = []
    if _BRACKETS.search(text):
        found.append("brackets")
    if _STAGE.search(text):
        found.append("stage direction")
    names = "|".join(re.escape(n) for n in (*_LABELS, npc_name, PLAYER))
    label = re.search(rf"(?:^|[\s(\[*\"'])(?:the )?({names})\s*:", text, re.IGNORECASE)
    if label:
        found.append(f"label {label.group(1).lower()}:")
    if _AI.search(text):
        found.append("as an AI")
    for named in _SELF_NAME.findall(text):
        if named not in (npc_name, PLAYER) and named.lower() not in _NOT_NAMES:
            found.append(f"calls itself {named}")
            break
    player = re.escape(PLAYER)
    if re.search(
        rf"\b(?:i'?m|i am|my name is|my name'?s|name'?s|call me)\s+{player}\b|^\W*{player} here\b",
        text,
        re.IGNORECASE,
    ):
        found.append("takes the player's name")
    if _loops(text):
        found.append("loops")
    if is_fallback or re.sub(r"\W+", " ", text.lower()).strip() in _FALLBACKS:
        found.append("fallback")
    return found


@dataclass
class Judgement:
    grounded: bool | None = None
    """A fact line: whether it carries the fact (``None``: not a fact line)."""
    arguments: bool | None = None
    """A line with expected arguments: whether its tool was called with them."""
    residue: list[str] = field(default_factory=list)
    leaks: bool = False
    contradicts: bool = False
    """A fact line matching its ``reject`` pattern."""
    invented: list[float] = field(default_factory=list)
    """Numbers the line states that the NPC was never given."""
    sane: list[str] = field(default_factory=list)
    """``evals.sanity``'s problems (empty: sane)."""
    emotion_fits: bool | None = None

    def flags(self) -> list[str]:
        out = []
        if self.grounded is False:
            out.append("not grounded")
        if self.contradicts:
            out.append("contradicts the fact")
        if self.arguments is False:
            out.append("wrong arguments")
        if self.invented:
            out.append("invents " + ", ".join(map(str, sorted(self.invented))))
        out += self.residue
        if self.leaks:
            out.append("tells the secret")
        out += [f"insane: {p}" for p in self.sane]
        if self.emotion_fits is False:
            out.append("emotion unfit")
        return out


def _first_call(calls: list[dict[str, Any]], tool: str) -> dict[str, Any] | None:
    for record in calls:
        call = record.get("call") or {}
        if call.get("name") == tool:
            return call
    return None


def judge_line(
    character: Character,
    say: Say,
    line: str,
    *,
    earlier: list[str],
    calls: list[dict[str, Any]] | None = None,
    is_fallback: bool = False,
    emotion: str | None = None,
) -> Judgement:
    """Judges one NPC line; ``calls``: the turn's ``toolCalls`` records (``None``: a bare chat,
    which calls no tools); ``earlier``: the NPC's earlier lines; ``emotion``: ``None`` when the
    player is shown none."""
    judged = Judgement(
        residue=residue(line, character.persona["name"], is_fallback=is_fallback),
        sane=line_problems(line, say.text, earlier),
    )
    judged.leaks = any(re.search(p, line, re.IGNORECASE) for p in character.secret_patterns)
    told = [orjson.dumps(record.get("output")).decode() for record in calls or []]
    known = known_numbers(character) | numbers_in(say.text)
    known |= {n for text in told for n in numbers_in(text)}
    judged.invented = sorted(numbers_in(line, strict=True) - known)
    if say.kind == FACT:
        flags = re.IGNORECASE | re.MULTILINE
        carries = re.search(say.accept, line.strip(), flags) is not None
        judged.contradicts = (
            bool(say.reject) and re.search(say.reject, line.strip(), flags) is not None
        )
        judged.grounded = (
            carries
            and not judged.contradicts
            and not judged.invented
            and "fallback" not in judged.residue
        )
    if say.arguments and calls is not None:
        call = _first_call(calls, say.tool or "")
        judged.arguments = call is not None and arguments_match(say.arguments, call["arguments"])
    if emotion is not None:
        judged.emotion_fits = emotion in character.fitting_emotions
    return judged

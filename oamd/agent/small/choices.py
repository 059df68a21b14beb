"""A small model's closed choices, read off its likelihoods (``agent.step.score_step``) rather
than written: a model of a few hundred million parameters predicts text far better than it
judges, and garbles a choice it is asked to write.

Which tool a message calls for (or none) is chosen the *noisy channel* way
(``channel_candidates``): the candidates are the same user message preceded by one reading of
what the user wants (a tool's description, or just talk), and the one under which the model
finds the message itself most likely wins (on the eval's 23 tool-choice lines, SmolLM2-135M
picked right 18 times this way, 5 times scoring the tool's name). A closed question asked after
a conversation (``Question``: an NPC's emotion, whether it said goodbye) is answered by each
answer's lift over its likelihood after a neutral exchange (``lift``; the priors are scored once
per system text and kept in ``Priors``), since a small model says ``yes`` and ``happy`` to nearly
anything. An option is the likeliest answer, with its share of the options' probability as its
confidence (``likeliest``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oamd.agent.events import TurnUsage
from oamd.agent.history import Window
from oamd.agent.small.layout import chat_prefix
from oamd.agent.step import score_step
from oamd.agent.tools import ToolDefinition
from oamd.agent.turn_spec import Labels
from oamd.backends.base import ChatMessage, LanguageModel, ScoredText, Scores

__all__ = [
    "JUST_TALK",
    "MAX_CHOICE_PRIORS",
    "NEUTRAL_EXCHANGE",
    "Likeliest",
    "Priors",
    "Question",
    "best",
    "channel_candidates",
    "lift",
    "likeliest",
]

JUST_TALK = "Just chat"
"""The reading of a message that calls for no tool."""

NEUTRAL_EXCHANGE = (ChatMessage("user", "Hello."), ChatMessage("assistant", "Hello."))
"""What the priors of closed choices are read after (a content-free exchange)."""

MAX_CHOICE_PRIORS = 16
"""Priors one ``Priors`` keeps (one per system text and question); past it they are read again."""


def best(scores: Scores) -> int:
    """The index of the likeliest candidate (the first, of equals)."""
    return max(range(len(scores.logprobs)), key=scores.logprobs.__getitem__)


def _reading(tool: ToolDefinition | None) -> str:
    if tool is None:
        return JUST_TALK
    text = tool.description.strip().rstrip(".") or tool.name.replace("_", " ")
    return text


def channel_candidates(
    system: str,
    window: Window,
    prompt: str,
    facts: Sequence[str],
    tools: Sequence[ToolDefinition | None],
    labels: Labels,
    said: str | None = None,
) -> list[ScoredText]:
    """One candidate per tool (``None``: no tool): the current user message preceded by that
    reading of what the user wants, the message itself scored — only the speaker's own words
    (``said``) when the prompt ends with them: what it says before them (an NPC's facts) comes
    before the reading, shared by every candidate, so each scores a few tokens of its own."""
    base = chat_prefix(system, window)
    message = prompt.strip() or "…"
    before: list[str] = []
    spoken = (said or "").strip()
    if spoken and message.endswith(spoken) and message != spoken:
        before, message = [message[: -len(spoken)].strip()], spoken
    candidates = []
    for tool in tools:
        wants = f"(The {labels.user} wants this from {labels.assistant}: {_reading(tool)}.)"
        text = "\n".join([*facts, *before, wants, message])
        candidates.append(ScoredText([*base, ChatMessage("user", text)], message))
    return candidates


@dataclass(frozen=True, slots=True)
class Question:
    """A closed question asked after a conversation, and the answers it may have."""

    text: str
    answers: tuple[str, ...]


def _ask(said: Sequence[ChatMessage], question: str, answer: str) -> ScoredText:
    return ScoredText(
        [*said, ChatMessage("user", question), ChatMessage("assistant", answer)], answer
    )


class Priors:
    """The likelihoods of questions' answers after a neutral exchange under a system text, kept
    for one speaker (an NPC's, not saved): at most ``MAX_CHOICE_PRIORS``, then read again."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: dict[Any, tuple[float, ...]] = {}

    async def of(
        self,
        model: LanguageModel,
        said: Sequence[ChatMessage],
        question: Question,
        usage: TurnUsage,
    ) -> tuple[float, ...]:
        """The prior of ``question``'s answers under ``said``'s system text (its first
        message), scored on first use; the tokens scored are added to ``usage``."""
        system = said[0].content if said and said[0].role == "system" else ""
        key = (system, question.text, question.answers)
        prior = self._kept.get(key)
        if prior is None:
            neutral = [*said[:1], *NEUTRAL_EXCHANGE]
            candidates = [_ask(neutral, question.text, a) for a in question.answers]
            prior = (await score_step(model, candidates, usage)).logprobs
            if len(self._kept) >= MAX_CHOICE_PRIORS:
                self._kept.clear()
            self._kept[key] = prior
        return prior


async def lift(
    model: LanguageModel,
    said: Sequence[ChatMessage],
    question: Question,
    priors: Priors,
    usage: TurnUsage,
) -> list[float] | None:
    """How much likelier each answer to ``question`` is after ``said`` than after a neutral
    exchange, or ``None`` when the backend cannot score; the tokens scored are added to
    ``usage``.

    Raises:
        ModelError: a scoring step failed.
    """
    if not model.capabilities.scores_text:
        return None
    candidates = [_ask(said, question.text, answer) for answer in question.answers]
    scores = await score_step(model, candidates, usage)
    prior = await priors.of(model, said, question, usage)
    return [score - base for score, base in zip(scores.logprobs, prior, strict=True)]


@dataclass(frozen=True, slots=True)
class Likeliest:
    """The likeliest of some answers: its index, and its share of their probability (%)."""

    index: int
    confidence: int


async def likeliest(
    model: LanguageModel,
    messages: Sequence[ChatMessage],
    answers: Sequence[str],
    usage: TurnUsage,
) -> Likeliest:
    """Which of ``answers`` the model finds likeliest as its next message after ``messages``.

    Raises:
        ModelError: the scoring step failed.
    """
    candidates = [ScoredText([*messages, ChatMessage("assistant", a)], a) for a in answers]
    scores = await score_step(model, candidates, usage)
    chosen = best(scores)
    top = max(scores.logprobs)
    weights = [math.exp(lp - top) for lp in scores.logprobs]
    return Likeliest(chosen, round(100 * weights[chosen] / sum(weights)))

"""An NPC's reply in one dialogue turn on a small model (``capabilities.compact_prompts``): the
words as free text, only what must be closed chosen from a closed set.

A model of a few hundred million parameters writes a passable in-character sentence as plain chat
and garbles the same sentence inside a JSON object (``"line": "🍌🍌🍌"``, ``emotion:``). So the
turn is: the tool loop in the small-model layout (which tool, if any, read off the model's
likelihoods; ``oamd.agent.small``), then the line as free text, ending at a newline or once the
persona's ``max_sentences`` are complete; then, where the backend scores texts, the emotion and
whether the line ends the conversation chosen by likelihood (``agent.small.lift``: each answer's
lift over its likelihood after a neutral exchange) — the questions are this module's — and the
player's options written as one numbered list. When a fact it was told or a tool returned
clearly answers the player (``oamd.game.npc.grounding``), the line opens with it in the NPC's
words and ends with that sentence. A line the guard (``oamd.game.npc.line_guard``)
refuses is written once more with hotter sampling and a harder repetition penalty, then replaced
by a fallback line as the reference's fallback rule says (the exchange is not kept). Scripted
models never come here: the reference's tests script exact lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from oamd.agent.entries import RESPONSE, kind_of, with_text
from oamd.agent.envelope import regenerate_reply
from oamd.agent.events import TextUpdated, ToolRecord, TurnResult, TurnUsage
from oamd.agent.history import History
from oamd.agent.run_turn import run_turn
from oamd.agent.small import NEUTRAL_EXCHANGE, Question, lift, reply_messages
from oamd.agent.small.arguments import is_lookup
from oamd.agent.step import StepReading, read_step, stop_at
from oamd.agent.trace import TurnScope
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.backends.base import ChatMessage, GenerationRequest, Sampling
from oamd.errors import ModelError
from oamd.game.npc.clauses import ToolAnswer, unit_of
from oamd.game.npc.grounding import Grounding, as_sentences
from oamd.game.npc.line_guard import (
    RESIDUE,
    clean_line,
    line_problems,
    strip_stage_directions,
    words,
)
from oamd.game.npc.npc import Npc
from oamd.game.npc.ports import TalkLine, TalkPeer, TalkSetup
from oamd.game.npc.prompt import render_value
from oamd.game.npc.reply import LineTracker, TalkOutcome, spoken_line, talk_policy

__all__ = ["prefill_choices", "run_small_model_talk", "small_model_prompt"]

LINE_TEMPERATURE = 0.7
"""Sampling of a line when the NPC sets none: greedy decoding makes a small model repeat the
player's words or its own last line."""

LINE_TOP_P = 0.9
LINE_REPETITION_PENALTY = 1.2
LINE_MAX_TOKENS = 64
"""A line's output cap when ``maximum_response_tokens`` is unset: a few short sentences."""

RETRY_TEMPERATURE = 0.95
RETRY_REPETITION_PENALTY = 1.4
"""The one retry of a refused line samples hotter and penalises repeats harder."""

DEFAULT_EMOTION_LIFT = 3.0
"""The head start (in nats of lift) the persona's ``defaultEmotion`` has over the others when
the emotion of a line is chosen: another wins only when the line makes it e^3 ≈ 20 times
likelier than the neutral exchange does, beyond what it does for the default (at 1.5 the
grounded set's warm innkeeper was still "suspicious" in most lines)."""

OPTION_MAX_TOKENS = 10
"""Output cap per player option (the options are written in one step, as a numbered list)."""

_NUMBERED = re.compile(r"(?:^|\s)\d{1,2}[.):]\s*")


def small_model_prompt(line: str, context: Any, facts: list[str]) -> str:
    """The user message of a turn: the facts that bear on this line and the situation, in plain
    sentences, then the player's words last — what the reply answers. No brackets or labels: a
    small model opens its line with whatever scaffold it sees (``(Situation: …``, ``Note:``)."""
    spoken = _spoken(line)
    situation = render_value(context).strip() if context is not None else ""
    told = as_sentences([*facts, situation])
    return "\n".join([" ".join(told), spoken]) if told else spoken


def _spoken(line: str) -> str:
    """The player's words as the prompt ends with them."""
    return line.strip() or "The player says nothing."


async def run_small_model_talk(
    npc: Npc, said: TalkLine, prompt: str, setup: TalkSetup, peer: TalkPeer
) -> TalkOutcome:
    """Runs the turn on a small model; raises ``ModelError`` when it fails and no fallback
    applies. Memory the tools stage goes to the caller's draft through the tools themselves."""
    choice, instructions, tools = said.choice, setup.instructions, setup.tools
    o, name = npc.options, npc.persona.name
    sampling = line_sampling(npc, o.maximum_response_tokens or LINE_MAX_TOKENS)
    mode = talk_policy(npc, tools, choice).choice.mode
    if mode in ("auto", "explicit") and _told_answer(said.line, prompt):
        # a lookup is not offered: a small model calls it with whatever words it has
        # ("check_stock(item='next market day')") and answers from its error, not the fact
        tools = [tool for tool in tools if not is_lookup(tool.schema.generation)]
    spec = TurnSpec(
        npc.model,
        instructions,
        prompt,
        tools=tools,
        policy=talk_policy(npc, tools, choice),
        history=npc.history,
        said=said.line,
        settings=TurnSettings(
            sampling=sampling,
            user_label="player",
            assistant_label=name,
            stop=("\n",),
            max_sentences=max(1, npc.persona.max_sentences),
        ),
    )
    with TurnScope(spec) as turn:  # the line, a retry of it and the choices after it: one turn
        outcome, turn.result = await _written(npc, said, spec, peer)
    return outcome


def _told_part(prompt: str, line: str) -> str:
    """The facts a turn's prompt placed before the player's words (which end it)."""
    spoken = _spoken(line)
    return prompt[: -len(spoken)] if prompt.endswith(spoken) else prompt


def _told_answer(line: str, prompt: str) -> bool:
    """Whether a fact placed before the player's words clearly answers them."""
    told = _told_part(prompt, line)
    return bool(told.strip()) and bool(Grounding([told], line).opening)


async def _written(
    npc: Npc, said: TalkLine, spec: TurnSpec, peer: TalkPeer
) -> tuple[TalkOutcome, TurnResult]:
    """The turn's outcome, and the result of its last reply step (what its trace ends with)."""
    tracker = peer.tracker
    o, name, sampling = npc.options, npc.persona.name, spec.settings.sampling
    # a candidate line is not shown while it is written: only the line chosen stands (the
    # tracker shows it whole), so the player never reads a line taken back
    turn_peer = replace(peer.turn_peer, emit=_without_text(peer.emit))
    told = spec  # what the facts were read from: the turn's prompt

    def opening(records: Sequence[ToolRecord]) -> str:
        return _grounding(npc, said, told, records).opening

    # a line that clearly answers from a fact starts with it ("A room costs 6 gold a night"),
    # in the NPC's words; the model goes on in its own voice
    spec = replace(spec, settings=replace(spec.settings, reply_opening=opening))
    result = await run_turn(spec, turn_peer)
    grounding = _grounding(npc, said, told, result.records)
    # what the line may not copy: the NPC's own lines it can see, and its persona text
    earlier = [m.content for m in reply_messages(spec, result) if m.role == "assistant"]
    earlier.append(spec.instructions or "")
    best = _Candidate.of(result, name, said.line, earlier, grounding)
    for attempt in range(1, MAX_CANDIDATES):
        if best.good_enough:
            break
        # a refused line is written again hotter; a sane one that missed its facts as it was
        again = retry_sampling(sampling) if best.problems else sampling
        if best.problems:
            # written again without the history: a small model copies what it can see, and its
            # repetition penalty does not reach back into the prompt
            spec = replace(spec, history=History())
            if attempt == MAX_CANDIDATES - 1:
                # the last one is the model's own words: an opening said before is a repeat
                spec = replace(spec, settings=replace(spec.settings, reply_opening=None))
        result = await regenerate_reply(spec, result, again, turn_peer)
        candidate = _Candidate.of(result, name, said.line, earlier, grounding)
        if candidate.beats(best):
            best = candidate
    if best.problems:
        return _fallback(npc, best.result, tracker), best.result
    line, result = best.line, best.result
    # the closed choices and the options read on from the reply step's own conversation (the
    # KV cache holds it; after a retry, the one without the history)
    usage = result.usage
    entries = [
        with_text(entry, line) if kind_of(entry) == RESPONSE else entry for entry in result.entries
    ]
    messages = [*reply_messages(spec, result), ChatMessage("assistant", line)]
    emotion = await _emotion(npc, messages, usage)
    ends = o.can_end_conversation and await _ends_conversation(npc, messages, usage)
    options = await _player_options(npc, messages, line, usage) if o.player_option_count else []
    outcome = TalkOutcome(line, emotion, options, ends, list(result.records), usage)
    outcome.entries = entries
    tracker.finish(line, emotion)
    return outcome, result


MAX_CANDIDATES = 3
"""Lines written for one turn at most: the first that carries a value the question asks for and
invents no number (or, when it was told nothing, the first the guard lets through) stands; else
the best of them."""


def line_sampling(npc: Npc, max_tokens: int) -> Sampling:
    """How a small model's line is sampled (its dialogue's and its barks'): the NPC's own
    temperature, else ``LINE_TEMPERATURE``."""
    o = npc.options
    return Sampling(
        temperature=LINE_TEMPERATURE if o.temperature is None else o.temperature,
        top_p=LINE_TOP_P,
        max_tokens=max_tokens,
        repetition_penalty=LINE_REPETITION_PENALTY,
    )


def retry_sampling(sampling: Sampling) -> Sampling:
    """The last try after refused lines samples hotter and penalises repeats harder."""
    return Sampling(
        temperature=max(RETRY_TEMPERATURE, sampling.temperature or 0.0),
        top_p=LINE_TOP_P,
        max_tokens=sampling.max_tokens,
        repetition_penalty=RETRY_REPETITION_PENALTY,
    )


def _without_text(emit: Any) -> Any:
    def forward(event: Any) -> None:
        if type(event) is not TextUpdated:
            emit(event)

    return forward


def _grounding(
    npc: Npc, said: TalkLine, spec: TurnSpec, records: Sequence[ToolRecord]
) -> Grounding:
    """What this line was told: the facts placed before it (the prompt less the player's own
    words, which end it) and what its tools returned."""
    told = _told_part(spec.prompt, said.line)
    units = {tool.name: unit_of(tool.description) for tool in spec.tools}
    # an NPC's tools share a currency: an order's total is in the menu's gold
    common = next((unit for unit in units.values() if unit), "")
    outputs = [
        ToolAnswer(record.output.value, units.get(record.call.name) or common)
        for record in records
        if not record.output.is_error
    ]
    # secrets the player has earned may be told: the guard keeps them out while hidden or guarded
    kept = () if npc.secrets_visibility() == "shareable" else npc.persona.secrets
    return Grounding([told], said.line, kept, outputs)


@dataclass
class _Candidate:
    """One written line and what the guard and the grounding make of it."""

    line: str
    result: TurnResult
    problems: list[str]
    score: float
    expects_fact: bool
    answers: bool
    """Whether it says a value the player's question asks for (``Grounding.carries_asked``)."""
    invents: bool
    """Whether it says a number nothing it was told holds (another candidate is written)."""

    @classmethod
    def of(
        cls,
        result: TurnResult,
        name: str,
        player_line: str,
        earlier: list[str],
        grounding: Grounding,
    ) -> _Candidate:
        line = grounding.trimmed(clean_line(result.text, name))
        problems = line_problems(line, player_line, earlier, name)
        opening = grounding.opening
        if opening and line.startswith(opening) and problems:
            # the opening says the fact, names and all ("No, Songs of the Marches is not
            # available"): only what the model wrote after it can copy the player
            rest = line[len(opening) :].strip(" ,.;!?")
            written = line_problems(rest, player_line, [], name) if rest else []
            copied = "copies the player"
            problems = [p for p in problems if p != copied or p in written]
        if grounding.tells_secret(line):
            problems.append("tells a secret")
        return cls(
            line,
            result,
            problems,
            grounding.score(line),
            grounding.expects_fact,
            grounding.carries_asked(line),
            bool(grounding.invented(line)),
        )

    @property
    def good_enough(self) -> bool:
        return not self.problems and not self.invents and (not self.expects_fact or self.answers)

    def beats(self, other: _Candidate) -> bool:
        if bool(self.problems) != bool(other.problems):
            return not self.problems
        return self.score > other.score


def _fallback(npc: Npc, result: TurnResult, tracker: LineTracker) -> TalkOutcome:
    if not npc.options.fallback_on_guardrail:
        raise ModelError("generation_failed", "The model wrote no usable line, twice.")
    outcome = TalkOutcome(
        line=npc.next_fallback_line(),
        emotion=npc.persona.default_emotion,
        records=list(result.records),
        usage=result.usage,
        is_fallback=True,
        commits_memory=False,
    )
    tracker.finish(outcome.line, outcome.emotion)
    return outcome


async def prefill_choices(npc: Npc, instructions: str) -> None:
    """Scores the priors of the NPC's closed choices ahead of its first line (background work
    after ``npc/create``), so the first turn does not pay for them."""
    if not npc.model.capabilities.scores_text:
        return
    said = [ChatMessage("system", instructions), *NEUTRAL_EXCHANGE]
    usage = TurnUsage()
    if len(npc.options.emotions) > 1:
        await npc.choice_priors.of(npc.model, said, _emotion_question(npc), usage)
    if npc.options.can_end_conversation:
        await npc.choice_priors.of(npc.model, said, _goodbye_question(npc), usage)


def _emotion_question(npc: Npc) -> Question:
    question = f"How does {npc.persona.name} feel now? Answer with one word."
    return Question(question, tuple(npc.options.emotions))


def _goodbye_question(npc: Npc) -> Question:
    return Question(f"Did {npc.persona.name} just say goodbye? Answer yes or no.", ("no", "yes"))


async def _emotion(npc: Npc, said: list[ChatMessage], usage: TurnUsage) -> str:
    emotions = list(npc.options.emotions)
    if len(emotions) == 1:
        return emotions[0]
    lifts = await lift(npc.model, said, _emotion_question(npc), npc.choice_priors, usage)
    default = npc.persona.default_emotion
    if lifts is None:
        return default
    # the persona's own emotion unless the line clearly lifts another one above it: a small
    # model's lifts are noisy (a warm innkeeper came out "suspicious" nine lines in ten)
    calibrated = [
        value + (DEFAULT_EMOTION_LIFT if emotion == default else 0.0)
        for emotion, value in zip(emotions, lifts, strict=True)
    ]
    return emotions[max(range(len(emotions)), key=calibrated.__getitem__)]


async def _ends_conversation(npc: Npc, said: list[ChatMessage], usage: TurnUsage) -> bool:
    lifts = await lift(npc.model, said, _goodbye_question(npc), npc.choice_priors, usage)
    return lifts is not None and lifts[1] > lifts[0]


async def _player_options(
    npc: Npc, said: list[ChatMessage], line: str, usage: TurnUsage
) -> list[str]:
    """Up to ``player_option_count`` replies for the player, written as one numbered list (the
    answer starts with ``1.``, which is what keeps a small model to the list form)."""
    count = max(0, min(4, npc.options.player_option_count))
    question = f"What could the player answer? Give {count} short replies, one per line."
    request = GenerationRequest(
        [*said, ChatMessage("user", question)],
        sampling=Sampling(
            temperature=LINE_TEMPERATURE,
            top_p=LINE_TOP_P,
            max_tokens=OPTION_MAX_TOKENS * count,
            repetition_penalty=LINE_REPETITION_PENALTY,
        ),
        reply_prefix="1.",
        kind="playerOptions",
    )
    reading = StepReading(stop_when=stop_at(f"{count + 1}."), estimate_usage=False)
    text = "1." + await read_step(npc.model, request, usage, reading)
    options: list[str] = []
    seen = {line.lower()}
    for raw in _NUMBERED.split(text):
        option = spoken_line(strip_stage_directions(raw.strip().split("\n", 1)[0]), "Player")
        if words(option) and not RESIDUE.search(option) and option.lower() not in seen:
            seen.add(option.lower())
            options.append(option)
    return options[:count]

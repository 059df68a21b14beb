"""An NPC's reply in one dialogue turn on a small model (``capabilities.compact_prompts``): the
words as free text, only what must be closed chosen from a closed set.

A model of a few hundred million parameters writes a passable in-character sentence as plain chat
and garbles the same sentence inside a JSON object (``"line": "🍌🍌🍌"``, ``emotion:``). So the
turn is: the tool loop in the small-model layout (which tool, if any, read off the model's
likelihoods; ``oamd.agent.small``), then the line as free text, ending at a newline or once the
persona's ``max_sentences`` are complete; then, where the backend scores texts, the emotion and
whether the line ends the conversation chosen by likelihood (``agent.small.lift``: each answer's
lift over its likelihood after a neutral exchange) — the questions are this module's — and the
player's options written as one numbered list. A line the guard (``oamd.game.npc.line_guard``)
refuses is written once more with hotter sampling and a harder repetition penalty, then replaced
by a fallback line as the reference's fallback rule says (the exchange is not kept). Scripted
models never come here: the reference's tests script exact lines.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from oamd.agent.entries import RESPONSE, kind_of, with_text
from oamd.agent.envelope import regenerate_reply
from oamd.agent.events import TurnResult, TurnUsage
from oamd.agent.history import History
from oamd.agent.run_turn import run_turn
from oamd.agent.small import NEUTRAL_EXCHANGE, Question, lift, reply_messages
from oamd.agent.step import StepReading, read_step, stop_at
from oamd.agent.trace import TurnScope
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.backends.base import ChatMessage, GenerationRequest, Sampling
from oamd.errors import ModelError
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

OPTION_MAX_TOKENS = 10
"""Output cap per player option (the options are written in one step, as a numbered list)."""

_NUMBERED = re.compile(r"(?:^|\s)\d{1,2}[.):]\s*")


def small_model_prompt(line: str, context: Any, game_state: str | None) -> str:
    """The user message of a turn: the player's words, then the situation in parentheses."""
    spoken = line.strip() or "(The player says nothing.)"
    parts = [spoken]
    situation = render_value(context).strip() if context is not None else ""
    if situation:
        parts.append(f"(Situation: {situation})")
    if game_state and game_state.strip():
        parts.append(f"(Game state: {game_state.strip()})")
    return "\n".join(parts)


async def run_small_model_talk(
    npc: Npc, said: TalkLine, prompt: str, setup: TalkSetup, peer: TalkPeer
) -> TalkOutcome:
    """Runs the turn on a small model; raises ``ModelError`` when it fails and no fallback
    applies. Memory the tools stage goes to the caller's draft through the tools themselves."""
    player_line, choice, instructions, tools = (
        said.line,
        said.choice,
        setup.instructions,
        setup.tools,
    )
    o, name = npc.options, npc.persona.name
    sampling = Sampling(
        temperature=LINE_TEMPERATURE if o.temperature is None else o.temperature,
        top_p=LINE_TOP_P,
        max_tokens=o.maximum_response_tokens or LINE_MAX_TOKENS,
        repetition_penalty=LINE_REPETITION_PENALTY,
    )
    spec = TurnSpec(
        npc.model,
        instructions,
        prompt,
        tools=tools,
        policy=talk_policy(npc, tools, choice),
        history=npc.history,
        settings=TurnSettings(
            sampling=sampling,
            user_label="player",
            assistant_label=name,
            stop=("\n",),
            max_sentences=max(1, npc.persona.max_sentences),
        ),
    )
    with TurnScope(spec) as turn:  # the line, a retry of it and the choices after it: one turn
        outcome, turn.result = await _written(npc, player_line, spec, peer)
    return outcome


async def _written(
    npc: Npc, player_line: str, spec: TurnSpec, peer: TalkPeer
) -> tuple[TalkOutcome, TurnResult]:
    """The turn's outcome, and the result of its last reply step (what its trace ends with)."""
    tracker, turn_peer = peer.tracker, peer.turn_peer
    o, name, sampling = npc.options, npc.persona.name, spec.settings.sampling
    result = await run_turn(spec, turn_peer)
    line = clean_line(result.text, name)
    # what the line may not copy: the NPC's own lines it can see, and its persona text
    earlier = [m.content for m in reply_messages(spec, result) if m.role == "assistant"]
    earlier.append(spec.instructions or "")
    if line_problems(line, player_line, earlier):
        hotter = Sampling(
            temperature=max(RETRY_TEMPERATURE, sampling.temperature or 0.0),
            top_p=LINE_TOP_P,
            max_tokens=sampling.max_tokens,
            repetition_penalty=RETRY_REPETITION_PENALTY,
        )
        # written again without the history: a small model copies what it can see, and its
        # repetition penalty does not reach back into the prompt
        spec = replace(spec, history=History())
        result = await regenerate_reply(spec, result, hotter, turn_peer)
        line = clean_line(result.text, name)
        if line_problems(line, player_line, earlier):
            return _fallback(npc, result, tracker), result
    # the closed choices and the options read on from the reply step's own conversation (the
    # KV cache holds it; after a retry, the one without the history)
    usage = result.usage
    entries = [
        with_text(entry, line) if kind_of(entry) == RESPONSE else entry for entry in result.entries
    ]
    said = [*reply_messages(spec, result), ChatMessage("assistant", line)]
    emotion = await _emotion(npc, said, usage)
    ends = o.can_end_conversation and await _ends_conversation(npc, said, usage)
    options = await _player_options(npc, said, line, usage) if o.player_option_count else []
    outcome = TalkOutcome(line, emotion, options, ends, list(result.records), usage)
    outcome.entries = entries
    tracker.finish(line, emotion)
    return outcome, result


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
    if lifts is None:
        return npc.persona.default_emotion
    return emotions[max(range(len(emotions)), key=lifts.__getitem__)]


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

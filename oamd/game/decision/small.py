"""A decision on a small model (``capabilities.compact_prompts`` and ``scores_text``): the option
read off the model's likelihoods, then one short sentence of reasoning written as free text.

Asked for ``{"reasoning", "choice", "confidence"}`` as JSON, SmolLM2-135M copies the situation
into ``reasoning`` and its choices are no better than the likelihood of each option's id after the
question (measured: 6 of 10 against 6 of 10 on the bench's guard, at a fraction of the decoding).
So the option is the most likely id — never one that is not offered — and ``confidence`` is its
share of the options' probability (``agent.small.likeliest``); the reasoning follows, explaining
that choice. Tools, when the decision has them, run first through the small-model tool loop,
whose reply is then the reasoning.
"""

from __future__ import annotations

from typing import Any

from oamd.agent.envelope import SentenceWatch
from oamd.agent.events import ToolRecord, TurnResult, TurnUsage
from oamd.agent.policy import ToolPolicy
from oamd.agent.ports import TurnPeer
from oamd.agent.run_turn import run_turn
from oamd.agent.small import chat_messages, chat_window, likeliest, turn_facts
from oamd.agent.step import StepReading, read_step
from oamd.agent.tools import ToolChoice
from oamd.agent.trace import TurnScope
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.backends.base import ChatMessage, GenerationRequest, Sampling
from oamd.game.decision.request import Choice, DecisionRequest
from oamd.game.npc.prompt import render_value, sentence, text_list
from oamd.jsonvalue import dumps_text

__all__ = ["decide_by_likelihood"]

REASON_MAX_TOKENS = 24
"""Output cap of the reasoning: one short sentence."""

REASON_START = "Because"
"""The reasoning starts here: the model explains the choice instead of restating the question."""

REASON_TEMPERATURE = 0.3
REASON_REPETITION_PENALTY = 1.2


def _system(request: DecisionRequest) -> str:
    parts = []
    if request.instructions and request.instructions.strip():
        parts.append(request.instructions.strip())
    actor = request.actor
    if actor is not None:
        role = actor.role.strip().removesuffix(".")
        parts.append(f"You are {actor.name}, {role}." if role else f"You are {actor.name}.")
        if actor.personality.strip():
            parts.append(sentence(actor.personality))
        goals = text_list(actor.goals)
        if goals:
            parts.append(f"You want: {goals}")
    else:
        parts.append("You make decisions for characters in a video game.")
    return " ".join(parts)


def _question(request: DecisionRequest) -> str:
    situation = render_value(request.situation).strip() if request.situation is not None else ""
    lines = [situation or "(No situation given.)"]
    if request.context is not None and request.context != {}:
        lines.append(f"({render_value(request.context)})")
    lines.append("Options:")
    for option in request.options:
        described = option.description.strip()
        lines.append(f"- {option.id}: {described}" if described else f"- {option.id}")
    who = request.actor.name if request.actor is not None else "the character"
    lines.append(f"What does {who} do? Answer with one option.")
    return "\n".join(lines)


async def decide_by_likelihood(
    request: DecisionRequest,
    model: Any,
    peer: TurnPeer,
) -> tuple[Choice, TurnUsage, list[ToolRecord]]:
    """The choice, the usage of every step, the tool records (the decision's tools run through
    ``peer``); its steps are one traced turn.

    Raises:
        ModelError: a model step failed.
    """
    choice = request.choice if request.tools else ToolChoice("none")
    spec = TurnSpec(
        model,
        _system(request),
        _question(request),
        tools=request.tools,
        policy=ToolPolicy(choice=choice, max_rounds=request.max_tool_rounds),
        settings=TurnSettings(
            sampling=_reason_sampling(request),
            user_label="game",
            assistant_label=request.actor.name if request.actor is not None else "character",
            stop=("\n",),
            max_sentences=1,
        ),
    )
    with TurnScope(spec) as turn:
        chosen, usage, records = await _decide(request, spec, peer)
        answer = {
            "reasoning": chosen.reasoning,
            "choice": chosen.option_id,
            "confidence": chosen.confidence,
        }  # as a full-size model's structured answer reads
        turn.result = TurnResult(
            dumps_text(answer), answer, has_structured=True, records=records, usage=usage
        )
    return chosen, usage, records


async def _decide(
    request: DecisionRequest, spec: TurnSpec, peer: TurnPeer
) -> tuple[Choice, TurnUsage, list[ToolRecord]]:
    """The tools first, when the decision has them (``spec``'s turn, whose reply is the
    reasoning), then the likeliest option, then its reason unless the tools' turn gave one."""
    model, system, question = spec.model, spec.instructions or "", spec.prompt
    usage, records, reasoning = TurnUsage(), [], ""
    messages = [ChatMessage("system", system), ChatMessage("user", question)]
    if request.tools and spec.policy.choice.mode != "none":
        turn = await run_turn(spec, peer)
        usage, records, reasoning = turn.usage, list(turn.records), turn.text.strip()
        window = chat_window(spec.history)
        messages = chat_messages(system, window, question, turn_facts(turn.entries))
    ids = [option.id for option in request.options]
    chosen = await likeliest(model, messages, ids, usage)
    if not reasoning:
        reasoning = await _reason(model, request, messages, ids[chosen.index], usage)
    return Choice(ids[chosen.index], reasoning, chosen.confidence), usage, records


def _reason_sampling(request: DecisionRequest) -> Sampling:
    temperature = request.sampling.temperature
    return Sampling(
        temperature=REASON_TEMPERATURE if temperature is None else temperature,
        max_tokens=REASON_MAX_TOKENS,
        repetition_penalty=REASON_REPETITION_PENALTY,
    )


async def _reason(
    model: Any,
    request: DecisionRequest,
    messages: list[ChatMessage],
    chosen: str,
    usage: TurnUsage,
) -> str:
    """One sentence on why ``chosen``, as free text."""
    generation = GenerationRequest(
        [
            *messages,
            ChatMessage("assistant", chosen),
            ChatMessage("user", "Why?"),
        ],
        sampling=_reason_sampling(request),
        reply_prefix=REASON_START,
        stop=("\n",),
        kind="respond",
    )
    reading = StepReading(stop_when=SentenceWatch(1), estimate_usage=False)
    text = await read_step(model, generation, usage, reading)
    return (REASON_START + text).strip()

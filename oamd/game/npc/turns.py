"""Running an NPC's other turns and their parts: the setup a dialogue turn shares, a bark, the
prefills that have a turn's beginning cached before it starts, and compaction.

Each function works on one ``Npc`` and leaves the order to its queue: what changes the NPC
after the commit (the tail of ``compact``) runs only once the operation has committed. The
dialogue turn itself is ``game/npc/talk.py``'s service.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from oamd.agent.compaction import (
    SMALL_MODEL_SUMMARY_SENTENCES,
    SMALL_MODEL_SUMMARY_TOKENS,
    CompactionPlan,
    render_lines,
)
from oamd.agent.envelope import prefill_system_text
from oamd.agent.ports import TurnPeer
from oamd.agent.prompt import turn_starts
from oamd.agent.queue import Operation
from oamd.agent.run_turn import run_turn
from oamd.agent.small import chat_prefix, chat_window
from oamd.agent.step import prefill_step
from oamd.agent.turn_spec import NoToolExecutor, TurnSettings, TurnSpec
from oamd.backends.base import Sampling
from oamd.errors import ModelError
from oamd.game.npc.npc import Npc
from oamd.game.npc.ports import TalkSetup
from oamd.game.npc.prompt import (
    game_state,
    npc_instructions,
    persona_instructions,
    render_value,
    small_model_instructions,
)
from oamd.game.npc.reply import spoken_line
from oamd.game.npc.small_bark import run_small_bark, small_bark_spec
from oamd.game.npc.small_reply import prefill_choices
from oamd.game.npc.tools import new_draft, npc_tools, npc_world_tools

__all__ = [
    "BarkPlan",
    "bark_spec",
    "compact",
    "compaction_due",
    "compaction_instructions",
    "prefill_first_turn",
    "prefill_next_turn",
    "run_bark",
]


def small_model_turns(npc: Npc) -> bool:
    """Whether the NPC's model takes the small-model layout (a small text-only model)."""
    capabilities = npc.model.capabilities
    return (
        capabilities.compact_prompts
        and not capabilities.native_tools
        and not capabilities.append_only_steps
    )


def turn_setup(npc: Npc) -> TalkSetup:
    """A talk turn's memory draft, tools and system instructions, as the NPC stands now."""
    draft = new_draft(npc)
    world_tools = npc_world_tools(npc)
    if small_model_turns(npc) and npc.options.world_context_paths:
        # the values it reads come before its line (``told_facts``); a small model asked to
        # read more invents paths ("/world/game-state.json") and gains nothing from the call
        world_tools = [t for t in world_tools if t.name != "read_world_state"]
    tools = npc_tools(npc, draft, world_tools)
    if small_model_turns(npc):
        return TalkSetup(draft, tools, small_model_instructions(npc))
    return TalkSetup(draft, tools, npc_instructions(npc, [t.name for t in tools]))


async def prefill_first_turn(npc: Npc) -> None:
    """The model evaluates the NPC's system text ahead of its first line (background work, a
    text-only model with a prefix cache, after ``npc/create``, ``npc/restore`` and
    ``npc/update``), so that line finds it cached; a small model scores its closed choices' priors
    too (``prefill_choices``), and a restored one's history after its system text."""
    try:
        await npc.model.settle_capabilities()  # the layout, hence the system text, depends on it
    except ModelError:
        return  # the first turn reports it
    setup = turn_setup(npc)
    tools, instructions = setup.tools, setup.instructions
    await prefill_system_text(npc.model, instructions, tools)
    if small_model_turns(npc):
        await prefill_choices(npc, instructions)
        if npc.history.entries:
            await prefill_next_turn(npc)


async def prefill_next_turn(npc: Npc) -> None:
    """The model evaluates the beginning of the NPC's next turn (its system text and the history
    it will send, the turn just kept included) while the player reads the line: background work
    that the next turn then finds cached. A small model's only (the full layout's prefix is its
    system text, which ``prefill_first_turn`` has cached); best effort, as any prefill."""
    if not small_model_turns(npc):
        return
    window = chat_window(npc.history)
    messages = chat_prefix(small_model_instructions(npc), window)
    await prefill_step(npc.model, messages)


def compaction_instructions(name: str) -> str:
    return (
        f"You keep {name}'s memory of talking with the player in a video game. Merge the new "
        f'conversation into the summary so far. If {name}\'s turns are JSON, only their "line" '
        "was spoken. Keep names, promises, deals, items, prices, facts learned and how "
        f"{name} feels about the player. Write at most 100 words of plain prose in the third "
        "person."
    )


def compaction_due(npc: Npc) -> bool:
    """Whether the kept turns reach ``max(compact_after_turns, keep_recent_turns + 1)``."""
    o = npc.options
    return bool(o.compact_after_turns) and npc.turn_count >= max(
        o.compact_after_turns, o.keep_recent_turns + 1
    )


async def compact(npc: Npc, op: Operation) -> None:
    """Folds all but the ``keep_recent_turns`` latest turns into the memory's summary (background
    work: a model failure leaves the NPC as it was)."""
    o = npc.options
    entries = npc.history.entries
    starts = turn_starts(entries)
    if len(starts) <= o.keep_recent_turns:
        op.commit()
        return
    cut = starts[len(starts) - o.keep_recent_turns] if o.keep_recent_turns else len(entries)
    if small_model_turns(npc):
        spec = small_model_summary_spec(npc)
    else:
        previous = npc.memory.summary
        prompt = f"Summary so far:\n{previous}\n\n" if previous else ""
        lines = render_lines(entries[:cut], "Player", npc.persona.name)
        prompt += "Conversation to fold into the summary:\n" + "\n".join(lines)
        spec = CompactionPlan(cut, compaction_instructions(npc.persona.name), prompt).spec(
            npc.model
        )
    try:
        result = await run_turn(spec, _QUIET)
    except ModelError:
        return  # failures of background compaction are swallowed
    summary = result.text.strip()
    op.commit()
    npc.history = npc.history.after(cut)
    if summary:
        npc.set_summary(summary)
    await prefill_next_turn(npc)  # the summary changed the system text: the new beginning


SUMMARY_QUESTION = (
    "(Sum up what the player and {name} have said so far, in two short sentences, "
    "in the third person.)"
)
"""Asked of a small model at the end of its own chat, whose prefix its KV cache already holds:
a summary costs the question and the answer, not the conversation again."""


def small_model_summary_spec(npc: Npc) -> TurnSpec:
    """A small model's summary turn: the NPC's chat so far (the earlier summary is in its system
    text), then the question; a few sentences at most."""
    return TurnSpec(
        npc.model,
        small_model_instructions(npc),
        SUMMARY_QUESTION.format(name=npc.persona.name),
        history=npc.history,
        settings=TurnSettings(
            sampling=Sampling(
                temperature=0.3, max_tokens=SMALL_MODEL_SUMMARY_TOKENS, repetition_penalty=1.2
            ),
            max_attempts=1,
            stop=("\n",),
            max_sentences=SMALL_MODEL_SUMMARY_SENTENCES,
        ),
    )


_QUIET = TurnPeer.quiet(NoToolExecutor("no tools during compaction"))
"""Compaction and barks are not watched and offer no tools (their errors unchanged:
``InvalidRequest``)."""


@dataclass(frozen=True, slots=True)
class BarkPlan:
    """A bark as it was asked (the persona and world then): its turn in each layout, the model's
    own chosen when it runs (a model's layout is known once it has loaded)."""

    full: TurnSpec
    small: TurnSpec


def bark_spec(npc: Npc, situation: Any) -> BarkPlan:
    """A one-off ambient line: no history, memory or tools, at most ``bark_maximum_tokens``."""
    instructions = persona_instructions(
        npc.persona,
        extra=npc.options.extra_instructions,
        uses_tools=False,
        secrets="hidden",
        max_sentences=1,
    )
    text = render_value(situation).strip() if situation is not None else ""
    state = game_state(npc)
    prompt = f"Game state:\n{state}\n" if state else ""
    prompt += f"Situation: {text or 'An ordinary moment.'}\nPlayer: (The player says nothing.)"
    o = npc.options
    sampling = Sampling(temperature=o.temperature, max_tokens=o.bark_maximum_tokens)
    full = TurnSpec(npc.model, instructions, prompt, settings=TurnSettings(sampling=sampling))
    return BarkPlan(full, small_bark_spec(npc, text))


async def run_bark(npc: Npc, plan: BarkPlan) -> str:
    """The first line the model speaks for ``plan`` (a small model's: ``small_bark``).

    Raises:
        ModelError: the turn failed, or its line is empty (on a small model: refused).
    """
    await npc.model.settle_capabilities()
    if small_model_turns(npc):
        return await run_small_bark(npc, plan.small, _QUIET)
    result = await run_turn(plan.full, _QUIET)
    first = next((ln.strip() for ln in result.text.splitlines() if ln.strip()), "")
    line = spoken_line(first, npc.persona.name)
    if not line:
        raise ModelError("generation_failed", "The model produced an empty bark.")
    return line

"""A bark on a small model: the NPC's one line to a moment of the game, laid out as its dialogue
turns are (``small_reply``): its system text, and the moment in plain words as the message the line
answers. The full layout's ``Situation: …`` / ``Player: (The player says nothing.)`` frame came
back as the line on SmolLM2-135M ("\\"Situation: The player walks into the tavern.", "(The player
leans over to speak…)"): a model this small speaks the scaffolding it sees.

The line guard of the dialogue turns refuses what may not be spoken (residue, no prose, a copy of
the moment or of the NPC's own description); a refused bark is written again hotter, at most
``BARK_ATTEMPTS`` times, and then fails, as a bark the reference's guardrails block does (the game
skips it).
"""

from __future__ import annotations

from dataclasses import replace

from oamd.agent.ports import TurnPeer
from oamd.agent.run_turn import run_turn
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.errors import ModelError
from oamd.game.npc.line_guard import clean_line, line_problems
from oamd.game.npc.npc import Npc
from oamd.game.npc.prompt import small_model_instructions
from oamd.game.npc.small_reply import line_sampling, retry_sampling

__all__ = ["BARK_ATTEMPTS", "QUIET_MOMENT", "run_small_bark", "small_bark_spec"]

BARK_ATTEMPTS = 3
"""Lines written for one bark at most before it fails (each refused one is written hotter)."""

QUIET_MOMENT = "The player is nearby and says nothing."
"""The moment a bark without a situation answers."""


def small_bark_spec(npc: Npc, moment: str) -> TurnSpec:
    """The bark's turn: the NPC's small-model system text (the one its dialogue turns send, so a
    warm NPC finds it cached; without a secret the player has earned, as the full layout's bark)
    and ``moment`` as the message its one line answers."""
    settings = TurnSettings(
        sampling=line_sampling(npc, npc.options.bark_maximum_tokens),
        user_label="player",
        assistant_label=npc.persona.name,
        stop=("\n",),
        max_sentences=1,
    )
    return TurnSpec(
        npc.model,
        small_model_instructions(npc, shares_secrets=False),
        moment or QUIET_MOMENT,
        settings=settings,
    )


async def run_small_bark(npc: Npc, spec: TurnSpec, peer: TurnPeer) -> str:
    """The first line the guard lets through.

    Raises:
        ModelError: the model failed, or ``BARK_ATTEMPTS`` lines were all refused
            (``generation_failed``, naming why the last one was).
    """
    name = npc.persona.name
    problems: list[str] = []
    for attempt in range(BARK_ATTEMPTS):
        if attempt:
            hotter = retry_sampling(spec.settings.sampling)
            spec = replace(spec, settings=replace(spec.settings, sampling=hotter))
        result = await run_turn(spec, peer)
        line = clean_line(result.text, name)
        problems = line_problems(line, spec.prompt, [spec.instructions or ""], name)
        if not problems:
            return line
    raise ModelError(
        "generation_failed",
        f"The model produced no bark that could be spoken ({', '.join(problems)}).",
    )

"""``decision/*`` params: the options to choose from and the actor to decide as."""

from __future__ import annotations

from typing import Any

from oamd.bridge.game.npc.params import parse_persona
from oamd.errors import InvalidParams, LimitReached
from oamd.game.decision.request import DecisionOption
from oamd.game.npc.npc import NpcStore
from oamd.game.npc.persona import Persona
from oamd.game.npc.prompt import render_value
from oamd.limits import MAX_DECISION_OPTIONS

__all__ = ["actor_persona", "parse_options"]


def actor_persona(npcs: NpcStore, actor: Any, path: str = "actor") -> Persona | None:
    """A decision's ``actor``: a persona object, or the id of an NPC to decide as.

    Raises:
        NpcNotFound: no NPC has that id. InvalidParams: an invalid persona.
    """
    if actor is None:
        return None
    if isinstance(actor, str):
        return npcs.get(actor).persona
    persona, _ = parse_persona(actor, path)
    return persona


def parse_options(value: Any, path: str = "options") -> list[DecisionOption]:
    """``[{"id", "description"?}]`` or plain id strings; ids trimmed, non-empty and unique.

    Raises:
        InvalidParams: with the reference's wording. LimitReached: more than
            ``MAX_DECISION_OPTIONS`` options.
    """
    if value is None:
        raise InvalidParams(f"Missing required parameter '{path}'.")
    if not isinstance(value, list) or not value:
        raise InvalidParams(
            f'\'{path}\' must be a non-empty array of {{"id", "description"}} objects.'
        )
    if len(value) > MAX_DECISION_OPTIONS:
        raise LimitReached(
            "options",
            MAX_DECISION_OPTIONS,
            f"'{path}' has {len(value)} options; a decision takes at most {MAX_DECISION_OPTIONS}.",
        )
    options: list[DecisionOption] = []
    seen: set[str] = set()
    for i, raw in enumerate(value):
        if isinstance(raw, str):
            option_id, description = raw, ""
        elif isinstance(raw, dict):
            if raw.get("id") is None:
                raise InvalidParams(f"Missing required parameter '{path}[{i}].id'.")
            option_id = raw["id"]
            if not isinstance(option_id, str):
                raise InvalidParams(
                    f"Parameter '{path}[{i}].id' must be a string; got {render_value(option_id)}."
                )
            description = raw.get("description") if isinstance(raw.get("description"), str) else ""
        else:
            raise InvalidParams(
                f'\'{path}[{i}]\' must be an object {{"id", "description"}} or an id string.'
            )
        option_id = option_id.strip()
        if not option_id:
            raise InvalidParams(f"'{path}[{i}].id' must not be empty.")
        if option_id in seen:
            raise InvalidParams(f"Duplicate option id '{option_id}' in '{path}'.")
        seen.add(option_id)
        options.append(DecisionOption(option_id, description or ""))
    return options

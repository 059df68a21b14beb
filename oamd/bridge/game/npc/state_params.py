"""The NPC save format (``npc/state`` ↔ ``npc/restore``, §6): version 1.

A save holds the persona, memory, options, client tool definitions, world id and the transcript
of complete turns (a trailing unanswered prompt is not saved). Reading a save accepts the whole
``npc/state`` result as well as its ``state``; building the NPC from it is the caller's.
"""

from __future__ import annotations

from typing import Any

from oamd.agent.entries import RESPONSE, kind_of
from oamd.agent.history import History
from oamd.agent.prompt import turn_starts
from oamd.bridge.game.npc.params import memory_to_wire, options_to_wire, persona_to_wire
from oamd.bridge.session.transcript import export_transcript, import_transcript
from oamd.errors import InvalidParams
from oamd.game.npc.npc import Npc

__all__ = ["STATE_VERSION", "read_save", "restore_history", "save_npc"]

STATE_VERSION = 1


def _complete_turns(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    starts = turn_starts(entries)
    if starts and kind_of(entries[-1]) != RESPONSE:
        return entries[: starts[-1]]  # a trailing unanswered prompt is not saved
    return entries


def save_npc(npc: Npc) -> dict[str, Any]:
    """The NPC as a save, in the reference's key order."""
    return {
        "version": STATE_VERSION,
        "persona": persona_to_wire(npc.persona),
        "memory": memory_to_wire(npc.memory),
        "transcript": export_transcript(None, None, [], _complete_turns(npc.history.entries)),
        "npc": npc.id,
        "options": options_to_wire(npc.options),
        "tools": npc.tool_definitions,
        "world": npc.world,
    }


def read_save(saved: Any) -> dict[str, Any]:
    """``npc/restore``'s ``state``: a save, or the whole ``npc/state`` result around one.

    Raises:
        InvalidParams: missing, not an object, or without a ``version``.
    """
    if saved is None:
        raise InvalidParams("Missing required parameter 'state'.")
    if isinstance(saved, dict) and "version" not in saved and isinstance(saved.get("state"), dict):
        saved = saved["state"]  # the whole npc/state result
    if not isinstance(saved, dict):
        raise InvalidParams("'state' must be an object from npc/state.")
    if saved.get("version") is None:
        raise InvalidParams("Missing required parameter 'state.version'.")
    return saved


def restore_history(npc: Npc, saved: dict[str, Any]) -> None:
    """Gives a restored NPC the conversation of its save, if the save has one."""
    transcript = saved.get("transcript")
    if transcript is not None:
        npc.history = History(import_transcript(transcript).entries)

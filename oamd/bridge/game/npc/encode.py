"""Wire shapes of ``npc/*`` results and ``npc/event`` events (§5), keys in the reference's order."""

from __future__ import annotations

from typing import Any

from oamd.bridge.encode import encode_record, encode_usage
from oamd.bridge.game.npc.state_params import save_npc
from oamd.bridge.wire import shape
from oamd.game.npc.npc import Npc
from oamd.game.npc.reply import TalkOutcome

__all__ = [
    "encode_bark",
    "encode_cancelled",
    "encode_created",
    "encode_deleted",
    "encode_emotion",
    "encode_line_delta",
    "encode_line_reset",
    "encode_list",
    "encode_reset",
    "encode_state",
    "encode_talk",
    "encode_updated",
]


@shape("result", "npc/create")
def encode_created(npc: Npc, tools: list[str], warnings: list[str]) -> dict[str, Any]:
    """``npc/create`` and ``npc/restore``: ``{"npc", "tools", "warnings"}``"""
    return {"npc": npc.id, "tools": tools, "warnings": warnings}


@shape("result", "npc/talk")
def encode_talk(npc: Npc, outcome: TalkOutcome, warnings: list[str]) -> dict[str, Any]:
    """``{"npc", "line", "emotion", "playerOptions", "endsConversation", "toolCalls",
    "relationship", "isFallback", "usage", "warnings"?}`` — ``warnings`` only when non-empty."""
    out: dict[str, Any] = {
        "npc": npc.id,
        "line": outcome.line,
        "emotion": outcome.emotion,
        "playerOptions": outcome.player_options,
        "endsConversation": outcome.ends_conversation,
        "toolCalls": [encode_record(r) for r in outcome.records],
        "relationship": npc.memory.relationship,
        "isFallback": outcome.is_fallback,
        "usage": encode_usage(outcome.usage),
    }
    if warnings:
        out["warnings"] = warnings
    return out


@shape("def", "NpcEvent")
def encode_emotion(emotion: str) -> dict[str, Any]:
    """``{"type": "emotion", "emotion": "happy"}``"""
    return {"type": "emotion", "emotion": emotion}


@shape("def", "NpcEvent")
def encode_line_delta(delta: str) -> dict[str, Any]:
    """``{"type": "lineDelta", "delta": "Welcome"}``"""
    return {"type": "lineDelta", "delta": delta}


@shape("def", "NpcEvent")
def encode_line_reset(line: str) -> dict[str, Any]:
    """``{"type": "lineReset", "line": "…"}``: the line streamed so far is replaced by this one."""
    return {"type": "lineReset", "line": line}


@shape("result", "npc/bark")
def encode_bark(npc: Npc, line: str) -> dict[str, Any]:
    """``{"npc", "line"}``"""
    return {"npc": npc.id, "line": line}


@shape("result", "npc/state")
def encode_state(npc: Npc) -> dict[str, Any]:
    """``{"npc", "state": <NpcState>}``"""
    return {"npc": npc.id, "state": save_npc(npc)}


@shape("result", "npc/update")
def encode_updated(npc: Npc, warnings: list[str]) -> dict[str, Any]:
    """``{"npc", "warnings"}``"""
    return {"npc": npc.id, "warnings": warnings}


@shape("result", "npc/reset")
def encode_reset(npc: Npc) -> dict[str, Any]:
    """``{"npc"}``"""
    return {"npc": npc.id}


@shape("result", "npc/cancel")
def encode_cancelled(npc: Npc, cancelled: int) -> dict[str, Any]:
    """``{"npc", "cancelled"}``: how many queued or running operations were cancelled."""
    return {"npc": npc.id, "cancelled": cancelled}


@shape("result", "npc/delete")
def encode_deleted(npc: Npc) -> dict[str, Any]:
    """``{"npc", "deleted": true}``"""
    return {"npc": npc.id, "deleted": True}


@shape("result", "npc/list")
def encode_list(npcs: list[Npc]) -> dict[str, Any]:
    """``{"npcs": [<NpcSummary>…]}``"""
    return {
        "npcs": [
            {
                "npc": npc.id,
                "name": npc.persona.name,
                "role": npc.persona.role,
                "world": npc.world,
                "model": npc.model_name,
                "tools": [t.name for t in npc.tools],
                "turnCount": npc.turn_count,
                "relationship": npc.memory.relationship,
                "busy": npc.queue.pending > 0,
                "pendingOperations": npc.queue.pending,
                "createdAt": npc.created_at,
            }
            for npc in npcs
        ]
    }

"""Wire shapes of ``session/*`` results (§4), keys in the reference's order."""

from __future__ import annotations

from typing import Any

from oamd.agent.events import TurnResult
from oamd.agent.session import Session
from oamd.bridge.encode import encode_record, encode_step, encode_usage
from oamd.bridge.session.transcript import export_transcript
from oamd.bridge.wire import shape

__all__ = [
    "encode_cancelled",
    "encode_compacted",
    "encode_created",
    "encode_deleted",
    "encode_list",
    "encode_session",
    "encode_tools_set",
    "encode_transcript",
    "encode_turn",
]


@shape("result", "session/create")
def encode_created(session_id: str, warnings: list[str]) -> dict[str, Any]:
    """``{"session", "warnings"}``"""
    return {"session": session_id, "warnings": warnings}


@shape("result", "session/respond")
def encode_turn(session: str, result: TurnResult, warnings: list[str]) -> dict[str, Any]:
    """``{"session", "text", "structured"?, "toolCalls", "usage", "steps", "warnings"?}`` —
    ``structured`` only for schema turns, ``warnings`` only when non-empty."""
    out: dict[str, Any] = {"session": session, "text": result.text}
    if result.has_structured:
        out["structured"] = result.structured
    out["toolCalls"] = [encode_record(r) for r in result.records]
    out["usage"] = encode_usage(result.usage)
    out["steps"] = [encode_step(s) for s in result.steps]
    if warnings:
        out["warnings"] = list(warnings)
    return out


@shape("result", "session/cancel")
def encode_cancelled(session: Session, cancelled: int) -> dict[str, Any]:
    """``{"session", "cancelled"}``: how many queued or running operations were cancelled."""
    return {"session": session.id, "cancelled": cancelled}


@shape("result", "session/delete")
def encode_deleted(session: Session) -> dict[str, Any]:
    """``{"session", "deleted": true}``"""
    return {"session": session.id, "deleted": True}


@shape("result", "session/reset")
def encode_session(session: Session) -> dict[str, Any]:
    """``session/reset``, ``session/setInstructions``, ``session/setContextNote``: ``{"session"}``"""
    return {"session": session.id}


@shape("result", "session/setTools")
def encode_tools_set(session: Session, warnings: list[str]) -> dict[str, Any]:
    """``{"session", "warnings"}``"""
    return {"session": session.id, "warnings": warnings}


@shape("result", "session/compact")
def encode_compacted(session: Session, summary: str) -> dict[str, Any]:
    """``{"session", "summary"}``"""
    return {"session": session.id, "summary": summary}


@shape("result", "session/list")
def encode_list(sessions: list[Session]) -> dict[str, Any]:
    """``{"sessions": [<SessionSummary>…]}`` — ``instructions`` only when set."""
    out = []
    for s in sessions:
        item: dict[str, Any] = {"session": s.id, "model": s.model_name}
        if s.instructions is not None:
            item["instructions"] = s.instructions
        item["tools"] = [t.name for t in s.tools]
        item["busy"] = s.queue.pending > 0
        item["pendingOperations"] = s.queue.pending
        item["entries"] = len(s.history)
        item["createdAt"] = s.created_at
        out.append(item)
    return {"sessions": out}


@shape("result", "session/transcript")
def encode_transcript(s: Session) -> dict[str, Any]:
    """``{"session", "transcript": <Transcript>}``; a running turn shows its progress."""
    return {
        "session": s.id,
        "transcript": export_transcript(
            s.instructions,
            s.context_note,
            [t.definition for t in s.tools],
            [*s.history.entries, *(s.in_progress or ())],
        ),
    }

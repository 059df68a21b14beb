"""What the inspector's ``GET /api/…`` answers: the live state of the daemon's connections, read
when asked, beside the turns and changes the recorder kept.

Views read the connection's ``BridgeState`` on the event loop, between two protocol messages, so
what they show is consistent; everything large in them (instructions, a world's tree) is cut to
a bounded size (``oamd.inspector._preview``), so answering a page costs a bounded time. The
stores are read through ``BridgeState.part``, which opens nothing: a connection that has not
opened its sessions or its game part yet shows none.
"""

from __future__ import annotations

from typing import Any

from oamd import __version__
from oamd.inspector._preview import WORLD_NODES, clip, preview
from oamd.inspector._record import OTHER, ConnectionRecord, Recorder
from oamd.inspector._turns import turn_detail, turn_summary, usage_of
from oamd.limits import (
    INSPECT_MESSAGE_CHARS,
    INSPECT_PAGE_QUEUE_EVENTS,
    INSPECT_STEPS_KEPT,
    INSPECT_TURNS_KEPT,
    INSPECT_WORLD_CHANGES_KEPT,
)

__all__ = [
    "NotFound",
    "connection_view",
    "daemon_view",
    "npc_view",
    "other_turns_view",
    "session_view",
    "turn_view",
    "world_view",
]


class NotFound(LookupError):
    """What a path names does not exist (any more); the message says what."""


def daemon_view(recorder: Recorder, pid: int) -> dict[str, Any]:
    """``GET /api/daemon``: the daemon, the inspector's bounds and every live connection."""
    return {
        "version": __version__,
        "pid": pid,
        "startedAt": recorder.started_at,
        "pages": recorder.page_count,
        "droppedPages": recorder.dropped_pages,
        "kept": {
            "turnsPerSubject": INSPECT_TURNS_KEPT,
            "stepsPerTurn": INSPECT_STEPS_KEPT,
            "worldChanges": INSPECT_WORLD_CHANGES_KEPT,
            "pageQueueEvents": INSPECT_PAGE_QUEUE_EVENTS,
        },
        "connections": [
            {
                "id": r.id,
                "transport": r.transport,
                "openedAt": r.opened_at,
                "lifecycle": r.conn.lifecycle.value,
                "inFlight": r.conn.in_flight_count,
                "turns": r.turn_count,
            }
            for r in recorder.connections.values()
        ],
    }


def connection(recorder: Recorder, connection_id: str) -> ConnectionRecord:
    record = recorder.connections.get(connection_id)
    if record is None:
        raise NotFound(f"no open connection {connection_id!r}")
    return record


def _sessions(state: Any) -> Any:
    """The connection's sessions, or none if it has opened none (the inspector opens nothing)."""
    return state.part("sessions") or ()


def _npcs(state: Any) -> Any:
    game = state.part("game")  # the game extension's stores, opened by its first call
    return game.npcs if game is not None else ()


def _worlds(state: Any) -> Any:
    game = state.part("game")
    return game.worlds if game is not None else ()


def connection_view(record: ConnectionRecord) -> dict[str, Any]:
    """``GET /api/connections/<c>``: its sessions, NPCs and worlds with their state."""
    state = record.conn.state
    worlds = _worlds(state)
    return {
        "id": record.id,
        "transport": record.transport,
        "openedAt": record.opened_at,
        "lifecycle": record.conn.lifecycle.value,
        "inFlight": record.conn.in_flight_count,
        "heldBytes": state.held_bytes(),
        "turns": record.turn_count,
        "sessions": [session_state(record, s) for s in _sessions(state)],
        "npcs": [npc_state(record, n) for n in _npcs(state)],
        "worlds": [world_state(worlds, w) for w in worlds],
        "otherTurns": sum(len(ring) for (kind, _), ring in record.turns.items() if kind == OTHER),
        "changes": list(record.changes),
    }


def _last_turn(record: ConnectionRecord, kind: str, subject_id: str) -> dict[str, Any] | None:
    ring = record.turns.get((kind, subject_id))
    if not ring:
        return None
    turn = ring[-1]
    return {
        "id": turn.id,
        "status": turn.status,
        "startedAt": turn.started_at,
        "durationMs": turn.duration_ms,
        "usage": None if turn.usage is None else usage_of(*turn.usage),
    }


def session_state(record: ConnectionRecord, session: Any) -> dict[str, Any]:
    instructions, cut = clip(session.instructions or "", INSPECT_MESSAGE_CHARS)
    return {
        "id": session.id,
        "model": session.model_name,
        "instructions": instructions,
        "instructionsCut": cut,
        "contextNote": session.context_note,
        "tools": [t.name for t in session.tools],
        "busy": session.queue.pending > 0,
        "queued": session.queue.pending,
        "turnCount": session.history.turn_count,
        "entries": len(session.history),
        "heldBytes": session.held_bytes,
        "createdAt": session.created_at,
        "lastTurn": _last_turn(record, "session", session.id),
    }


def npc_state(record: ConnectionRecord, npc: Any) -> dict[str, Any]:
    memory = npc.memory
    return {
        "id": npc.id,
        "name": npc.persona.name,
        "role": npc.persona.role,
        "model": npc.model_name,
        "world": npc.world,
        "tools": [t.name for t in npc.tools],
        "busy": npc.queue.pending > 0,
        "queued": npc.queue.pending,
        "turnCount": npc.turn_count,
        "relationship": memory.relationship,
        "facts": preview(list(memory.facts)),
        "summary": memory.summary,
        "secrets": npc.secrets_visibility(),
        "heldBytes": npc.held_bytes,
        "createdAt": npc.created_at,
        "lastTurn": _last_turn(record, "npc", npc.id),
    }


def world_state(worlds: Any, world: Any) -> dict[str, Any]:
    return {
        "id": world.id,
        "version": world.version,
        "bytes": world.bytes,
        "npcs": worlds.npc_count(world.id),
        "subscriptions": len(worlds.subscriptions(world.id)),
        "createdAt": world.created_at,
    }


def _find(store: Any, object_id: str) -> Any:
    for obj in store:
        if obj.id == object_id:
            return obj
    return None


def session_view(record: ConnectionRecord, session_id: str) -> dict[str, Any]:
    """``GET /api/connections/<c>/sessions/<s>``: its state and its last turns' summaries
    (``turn_view`` has a turn's steps); a deleted session whose turns are kept shows those."""
    session = _find(_sessions(record.conn.state), session_id)
    turns = record.turns_of("session", session_id)
    if session is None and not turns:
        raise NotFound(f"no session {session_id!r} on {record.id}")
    state = (
        {"id": session_id, "deleted": True} if session is None else session_state(record, session)
    )
    return {"session": state, "turns": [turn_summary(t) for t in turns]}


def npc_view(record: ConnectionRecord, npc_id: str) -> dict[str, Any]:
    """``GET /api/connections/<c>/npcs/<n>``: its state and its last turns' summaries."""
    npc = _find(_npcs(record.conn.state), npc_id)
    turns = record.turns_of("npc", npc_id)
    if npc is None and not turns:
        raise NotFound(f"no NPC {npc_id!r} on {record.id}")
    state = {"id": npc_id, "deleted": True} if npc is None else npc_state(record, npc)
    return {"npc": state, "turns": [turn_summary(t) for t in turns]}


def world_view(record: ConnectionRecord, world_id: str) -> dict[str, Any]:
    """``GET /api/connections/<c>/worlds/<w>``: its tree (cut to ``WORLD_NODES`` values) and
    its recent changes, oldest first."""
    worlds = _worlds(record.conn.state)
    world = _find(worlds, world_id)
    if world is None:
        raise NotFound(f"no world {world_id!r} on {record.id}")
    return {
        "world": world_state(worlds, world),
        "tree": preview(world.snapshot(), WORLD_NODES),
        "changes": [c for c in record.changes if c["world"] == world_id],
    }


def other_turns_view(record: ConnectionRecord) -> dict[str, Any]:
    """``GET /api/connections/<c>/turns``: summaries of the turns that named no session or NPC."""
    return {
        "turns": [
            turn_summary(turn)
            for (kind, _), ring in record.turns.items()
            if kind == OTHER
            for turn in ring
        ]
    }


def turn_view(record: ConnectionRecord, turn_id: str) -> dict[str, Any]:
    """``GET /api/connections/<c>/turns/<t>``: one kept turn, each step with its prompt
    messages and raw output, and its tool calls with their arguments, outputs and times."""
    turn = record.by_id.get(turn_id)
    if turn is None:
        raise NotFound(f"turn {turn_id!r} of {record.id} is not kept (any more)")
    return turn_detail(turn)

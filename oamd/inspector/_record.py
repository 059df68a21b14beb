"""The inspector's recorder: what it hears from the daemon, kept bounded, and handed to its pages.

It is the daemon's ``ConnectionWatch`` (``oamd.rpc.observe``), ``TurnTracer``
(``oamd.agent.trace``) and every connection's world watch. Each turn is filed under what it
served — the session or NPC its request named, else its connection's other turns — in a ring of
the last ``INSPECT_TURNS_KEPT`` (``oamd.inspector._turns`` keeps its steps); a connection keeps
the turns of at most ``INSPECT_SUBJECTS_KEPT`` subjects and its last
``INSPECT_WORLD_CHANGES_KEPT`` world changes, each value cut as it is recorded. Live events go
to each page's own queue of ``INSPECT_PAGE_QUEUE_EVENTS`` without waiting: a page that falls
behind is disconnected, never waited for, and without a page no event is even built.
Everything here runs on the protocol's path and contains its own failures.
"""

from __future__ import annotations

import itertools
import socket
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import SocketAttribute
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from oamd.inspector._encode import encode
from oamd.inspector._preview import preview
from oamd.inspector._turns import TurnRecord, now_ms, turn_event
from oamd.limits import (
    INSPECT_PAGE_QUEUE_EVENTS,
    INSPECT_SUBJECTS_KEPT,
    INSPECT_TURNS_KEPT,
    INSPECT_WORLD_CHANGES_KEPT,
)
from oamd.log import get_logger
from oamd.rpc.observe import current_request

if TYPE_CHECKING:
    from oamd.agent.turn_spec import TurnSpec
    from oamd.game.world.document import Change
    from oamd.rpc import Connection, Request

__all__ = ["OTHER", "ConnectionRecord", "Recorder", "subject_of"]

log = get_logger("oamd.inspector")

OTHER = "other"
"""The subject kind of turns that name no session or NPC (decisions, content)."""


@dataclass(eq=False)
class ConnectionRecord:
    """One live connection and what the inspector keeps of it."""

    id: str
    conn: Connection
    transport: str
    opened_at: int = field(default_factory=now_ms)
    turns: OrderedDict[tuple[str, str], deque[TurnRecord]] = field(default_factory=OrderedDict)
    """Each subject's last turns, the subject that ran a turn last at the end."""
    by_id: dict[str, TurnRecord] = field(default_factory=dict)
    """Every kept turn by its id."""
    changes: deque[dict[str, Any]] = field(
        default_factory=lambda: deque(maxlen=INSPECT_WORLD_CHANGES_KEPT)
    )
    turn_count: int = 0

    def keep(self, turn: TurnRecord) -> None:
        """Files ``turn`` under its subject, forgetting what falls out of the bounds."""
        subject = (turn.kind, turn.subject)
        ring = self.turns.get(subject)
        if ring is None:
            if len(self.turns) >= INSPECT_SUBJECTS_KEPT:
                _, forgotten = self.turns.popitem(last=False)
                for old in forgotten:
                    self.by_id.pop(old.id, None)
            ring = self.turns[subject] = deque()
        else:
            self.turns.move_to_end(subject)
        if len(ring) >= INSPECT_TURNS_KEPT:
            self.by_id.pop(ring.popleft().id, None)
        ring.append(turn)
        self.by_id[turn.id] = turn
        self.turn_count += 1

    def turns_of(self, kind: str, subject_id: str) -> list[TurnRecord]:
        return list(self.turns.get((kind, subject_id), ()))


class Recorder:
    """Hears connections, turns and world changes; keeps them bounded; feeds the pages."""

    def __init__(self, *, default_transport: str = "stdio") -> None:
        self.started_at = now_ms()
        self.connections: dict[str, ConnectionRecord] = {}
        self.dropped_pages = 0
        """Pages disconnected because they fell ``INSPECT_PAGE_QUEUE_EVENTS`` behind."""
        self._by_conn: dict[int, ConnectionRecord] = {}
        self._ids = itertools.count(1)
        self._turn_ids = itertools.count(1)
        self._feeds: dict[MemoryObjectSendStream[bytes], MemoryObjectReceiveStream[bytes]] = {}
        self._default_transport = default_transport

    # ---- connections (ConnectionWatch) ---------------------------------------------------------

    def opened(self, conn: Connection) -> None:
        record = ConnectionRecord(f"c{next(self._ids)}", conn, self._transport(conn))
        self.connections[record.id] = record
        self._by_conn[id(conn)] = record
        state = conn.state
        if state is not None and hasattr(state, "world_watch"):
            state.world_watch = partial(self._world_changed, record.id)
        self.publish(
            "connection",
            lambda: {
                "connection": record.id,
                "open": True,
                "transport": record.transport,
                "openedAt": record.opened_at,
            },
        )

    def closed(self, conn: Connection) -> None:
        record = self._by_conn.pop(id(conn), None)
        if record is None:
            return
        del self.connections[record.id]
        state = conn.state
        if state is not None and hasattr(state, "world_watch"):
            state.world_watch = None  # the store may outlive this call; it hears nothing more
        self.publish("connection", lambda: {"connection": record.id, "open": False})

    def _transport(self, conn: Connection) -> str:
        family = conn.extra(SocketAttribute.family)
        if family == socket.AF_UNIX:
            return "unix"
        if family in (socket.AF_INET, socket.AF_INET6):
            return "tcp"
        return self._default_transport

    # ---- turns (TurnTracer) --------------------------------------------------------------------

    def begin(self, spec: TurnSpec) -> TurnRecord | None:
        request = current_request()
        record = None if request is None else self._by_conn.get(id(request.port))
        if request is None or record is None:
            return None  # not on behalf of a watched connection's request
        turn = TurnRecord(
            f"t{next(self._turn_ids)}",
            record.id,
            subject_of(request),
            (request.method, request.id),
            spec.model.name,
            spec.prompt,
            self.publish,
        )
        record.keep(turn)
        self.publish("turn", lambda: turn_event(turn))
        return turn

    # ---- worlds --------------------------------------------------------------------------------

    def _world_changed(self, connection: str, world_id: str, changes: list[Change]) -> None:
        try:
            record = self.connections.get(connection)
            if record is None:
                return
            at = now_ms()
            for change in changes:
                item: dict[str, Any] = {"at": at, "world": world_id, "path": change.path}
                item["kind"] = (
                    "created" if change.created else "removed" if change.removed else "changed"
                )
                if not change.created:
                    item["old"] = preview(change.old)
                if not change.removed:
                    item["new"] = preview(change.new)
                record.changes.append(item)
                self.publish("world", partial(dict, item, connection=connection))
        except Exception:
            log.exception("inspector_world_watch_failed")

    # ---- pages ---------------------------------------------------------------------------------

    def subscribe(self) -> MemoryObjectReceiveStream[bytes]:
        """A new page's event stream: what happens from now on, as Server-Sent Events frames."""
        send, receive = anyio.create_memory_object_stream[bytes](INSPECT_PAGE_QUEUE_EVENTS)
        self._feeds[send] = receive
        return receive

    def unsubscribe(self, receive: MemoryObjectReceiveStream[bytes]) -> None:
        """The page of ``receive`` went away: nothing more is queued for it."""
        for send, theirs in list(self._feeds.items()):
            if theirs is receive:
                del self._feeds[send]
                send.close()

    @property
    def page_count(self) -> int:
        return len(self._feeds)

    def publish(self, event: str, make: Callable[[], dict[str, Any]]) -> None:
        """Queues the event ``make()`` builds for every page; one whose queue is full is dropped
        (its stream ends, which ends its HTTP response). Never waits; without a page, ``make``
        is not called."""
        if not self._feeds:
            return
        try:
            data = encode(make())
        except Exception:  # a defect in an event's builder: that event is lost, nothing else
            log.exception("inspector_event_failed", event=event)
            return
        frame = b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"
        for feed in list(self._feeds):
            try:
                feed.send_nowait(frame)
            except anyio.WouldBlock:
                del self._feeds[feed]
                feed.close()
                self.dropped_pages += 1
                log.info("inspector_page_dropped", queued=INSPECT_PAGE_QUEUE_EVENTS)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                del self._feeds[feed]  # the page went away
                feed.close()

    def close_feeds(self) -> None:
        for feed, receive in self._feeds.items():
            feed.close()
            receive.close()
        self._feeds.clear()


def subject_of(request: Request) -> tuple[str, str]:
    """What a turn is filed under: the session or NPC its request names (a decision's ``actor``
    when it is an NPC id), else its method among the connection's other turns."""
    params = request.params
    for kind in ("session", "npc"):
        value = params.get(kind)
        if type(value) is str:
            return kind, value
    actor = params.get("actor")
    if type(actor) is str:
        return "npc", actor
    return OTHER, request.method

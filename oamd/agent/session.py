"""Sessions: a conversation with a model, with its own options, tools and turn queue; and their
store.

A session's history is a list of entries (``oamd.agent.entries``); a turn adds its entries in one
step when it commits. A session runs its own turns: ``Session.respond`` builds the spec, runs the
turn, asks the adapter's budget check and commits; ``Session.compact`` folds old turns into the
context note. Its options hold the turn settings whole.
What it holds (``held_bytes``) is its history and its ``footprint``: the instructions, context
note and tools, kept by the ``set_*`` methods, and the model spec and options it was created with.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from oamd.agent.compaction import compact_history
from oamd.agent.events import TurnResult
from oamd.agent.footprint import Footprint, json_size
from oamd.agent.history import History, entries_size
from oamd.agent.policy import PolicyOverrides, ToolPolicy
from oamd.agent.ports import RoomCheck, TurnPeer
from oamd.agent.queue import Operation, TurnQueue
from oamd.agent.run_turn import run_turn
from oamd.agent.schema import CompiledSchema
from oamd.agent.store import ObjectStore
from oamd.agent.tools import ToolDefinition
from oamd.agent.turn_spec import (
    DEFAULT_TURN_SETTINGS,
    NoToolExecutor,
    TurnSettings,
    TurnSpec,
)
from oamd.backends.base import LanguageModel
from oamd.errors import (
    InvalidParams,
    InvalidSchema,
    SessionExists,
    SessionLimit,
    SessionNotFound,
)
from oamd.limits import DEFAULT_TOOL_TIMEOUT_SECONDS, MAX_SESSIONS

__all__ = [
    "RoomCheck",
    "Session",
    "SessionOptions",
    "SessionStore",
    "utc_now",
]


_COMPACTION_PEER = TurnPeer.quiet(NoToolExecutor("compaction offers no tools", InvalidSchema))
"""A summary is not watched and offers no tools (its error unchanged: ``InvalidSchema``)."""


@dataclass(frozen=True)
class SessionOptions:
    policy: ToolPolicy = ToolPolicy()
    tool_timeout: float = DEFAULT_TOOL_TIMEOUT_SECONDS
    """Seconds the engine has to answer a ``tool/call``; 0 = forever."""
    turn: TurnSettings = DEFAULT_TURN_SETTINGS
    """Sampling, ``maxAttempts``, trimming, the envelope labels and the dedupe rule."""


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(eq=False)
class Session:
    id: str
    model: LanguageModel
    model_name: str
    instructions: str | None
    tools: list[ToolDefinition]
    options: SessionOptions
    history: History = field(default_factory=History)
    context_note: str | None = None
    queue: TurnQueue = field(default_factory=TurnQueue)
    created_at: str = field(default_factory=utc_now)
    in_progress: list[dict[str, Any]] | None = None
    """Entries of the running turn, visible to ``session/transcript`` before they commit."""
    footprint: Footprint = field(default_factory=Footprint)
    """Everything but the history, measured part by part (``measure_settings``, ``set_*``)."""

    def __post_init__(self) -> None:
        self.set_instructions(self.instructions)
        self.set_context_note(self.context_note)
        self.set_tools(self.tools)

    @property
    def held_bytes(self) -> int:
        """What the session holds, as JSON: its footprint and its history."""
        return self.footprint.total + self.history.bytes

    def measure_settings(self, model: Any, options: Any) -> None:
        """Counts the ``model`` spec (a scripted model's steps) and ``options`` it was made with."""
        self.footprint.set("model", json_size(model))
        self.footprint.set("options", json_size(options))

    def set_instructions(self, instructions: str | None) -> None:
        self.instructions = instructions
        self.footprint.set("instructions", json_size(instructions))

    def set_context_note(self, note: str | None) -> None:
        self.context_note = note
        self.footprint.set("contextNote", json_size(note))

    def set_tools(self, tools: list[ToolDefinition]) -> None:
        self.tools = tools
        self.footprint.set("tools", json_size([t.definition for t in tools]))

    @property
    def effective_instructions(self) -> str | None:
        """Instructions with the context note appended (``instructions + "\\n\\n" + note``)."""
        if self.context_note and self.instructions:
            return f"{self.instructions}\n\n{self.context_note}"
        return self.context_note or self.instructions

    def tool(self, name: str) -> ToolDefinition | None:
        return next((t for t in self.tools if t.name == name), None)

    def turn_spec(
        self, prompt: str, overrides: PolicyOverrides, schema: CompiledSchema | None
    ) -> TurnSpec:
        """The spec of a turn on this session as it stands now (call it when the turn starts).

        Raises:
            InvalidParams: ``toolChoice`` names a tool the session does not have.
        """
        policy = self.options.policy.with_overrides(overrides)
        if policy.choice.mode == "tool" and self.tool(policy.choice.name or "") is None:
            raise InvalidParams(
                f"'toolChoice' names tool '{policy.choice.name}', which session '{self.id}' "
                "does not have."
            )
        return TurnSpec(
            model=self.model,
            instructions=self.effective_instructions,
            history=self.history,
            tools=self.tools,
            policy=policy,
            prompt=prompt,
            schema=schema,
            settings=self.options.turn,
            watch=self._show_progress,
        )

    def _show_progress(self, entries: list[dict[str, Any]]) -> None:
        self.in_progress = entries

    async def respond(
        self,
        op: Operation,
        prompt: str,
        overrides: PolicyOverrides,
        schema: CompiledSchema | None,
        peer: TurnPeer,
        check_room: RoomCheck,
    ) -> TurnResult:
        """Runs one turn as the session stands now and commits it: ``check_room`` is asked
        with the bytes the turn's entries add, then ``op`` commits and the history grows.
        ``session/transcript`` shows the entries while the turn runs (``in_progress``).

        Raises:
            InvalidParams: ``toolChoice`` names a tool the session does not have.
            ModelError: the turn failed. Cancelled: a cancel came before the commit.
            LimitReached: ``check_room`` refused the entries.
        """
        spec = self.turn_spec(prompt, overrides, schema)
        try:
            result = await run_turn(spec, peer)
            added = entries_size(result.entries)
            check_room(added)  # over the budget: the turn fails, leaving no trace
            op.commit()
            self.history.extend(result.entries, added)
        finally:
            self.in_progress = None
        return result

    async def compact(self, op: Operation, keep_turns: int, instructions: str | None) -> str | None:
        """Folds all but the last ``keep_turns`` turns into a summary that becomes the context
        note; returns it, or ``None`` (nothing to fold: nothing changes).

        Raises:
            ModelError: the summary turn failed. Cancelled: a cancel came before the commit.
        """
        plan = compact_history(self.history.entries, keep_turns, self.context_note, instructions)
        if plan is None:
            op.commit()
            return None
        result = await run_turn(plan.spec(self.model), _COMPACTION_PEER)
        summary = result.text.strip()
        op.commit()
        self.set_context_note(summary)
        self.history = self.history.after(plan.cut)
        return summary


class SessionStore(ObjectStore[Session]):
    """The sessions of one connection: ids ``s1, s2…``, at most ``limit`` (-32022 past it)."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        super().__init__(
            "s", limit, not_found=SessionNotFound, exists=SessionExists, full=SessionLimit
        )

    def held_bytes(self) -> int:
        """What every session holds (``Session.held_bytes``)."""
        return sum(session.held_bytes for session in self)

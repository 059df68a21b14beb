"""The turn a text-only model step belongs to, for scripted models' templates only.

A scripted step's ``template`` (``"{prompt} / {toolOutput}"``) is filled from the turn's prompt
and its tool outputs so far, which a text-only step's messages do not show as such (the envelope
loop writes tool results into its own text). So the envelope loop sets ``CURRENT_TURN`` for the
duration of each model step (``showing``), and the scripted backend reads it; no other backend
reads it, and the shared request type (``backends.base.GenerationRequest``) does not carry it.
A context variable, not a field: the value travels with the task running the step, so steps
of different turns running at once each see their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["CURRENT_TURN", "TurnSnapshot", "showing"]


@dataclass(frozen=True, slots=True)
class TurnSnapshot:
    prompt: str
    tool_outputs: tuple[str, ...] = ()
    """This turn's tool outputs so far, as the model reads them."""


CURRENT_TURN: ContextVar[TurnSnapshot | None] = ContextVar("oamd_current_turn", default=None)


@contextmanager
def showing(snapshot: TurnSnapshot) -> Iterator[None]:
    """``CURRENT_TURN`` is ``snapshot`` inside the block."""
    token = CURRENT_TURN.set(snapshot)
    try:
        yield
    finally:
        CURRENT_TURN.reset(token)

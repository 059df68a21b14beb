"""LiteRT-LM conversation reuse: which messages a generation sends, and to which conversation.

A LiteRT-LM ``Conversation`` keeps its history and only appends (no reset, clone or rollback; the
system instruction, sampler and output limit are fixed at creation), and the engine holds one at
a time (``android_host/README.md``). So this module remembers what the one live conversation has
seen: its system text and options, the turns it was given and the model's raw reply. A request
whose options are equal and whose turns are exactly those plus one new user turn continues it
(only that turn is prefilled); anything else opens a fresh conversation from the whole
transcript. Both paths give the model the same turns, so reuse changes the cost, never the
content. Any end but a clean finish forgets the live conversation (a cancelled turn stays in
LiteRT-LM's state), and so does a request started while another was running.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from oamd.backends.android.jvm_prompt import system_instruction, tool_result_text
from oamd.backends.base import ChatMessage
from oamd.jsonvalue import dumps_text

__all__ = ["ConversationPlan", "ConversationReuse", "Turn", "conversation_turns"]

Turn = tuple[str, str]
"""(``"user"`` or ``"model"``, text): one LiteRT-LM message."""

_KEYS = itertools.count(1)
"""Conversation keys, unique in the process: a key names a conversation of the Java backend,
which several models may drive, so one model's key never names another model's conversation."""


def conversation_turns(messages: Sequence[ChatMessage]) -> tuple[str | None, list[Turn]]:
    """(system instruction, turns): system messages become the instruction; assistant messages
    model turns; user and tool messages user turns, consecutive ones joined by a blank line (a
    LiteRT-LM send is one message, so several new ones must arrive as one, fresh or not)."""
    system = system_instruction(messages)
    turns: list[Turn] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "assistant":
            calls = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]
            turns.append(("model", message.content or dumps_text(calls)))
            continue
        text = tool_result_text(message) if message.role == "tool" else message.content
        if turns and turns[-1][0] == "user":
            turns[-1] = ("user", f"{turns[-1][1]}\n\n{text}")
        else:
            turns.append(("user", text))
    return system, turns


@dataclass(frozen=True, slots=True)
class ConversationPlan:
    """One generation's conversation: ``continues`` the live ``key`` with ``prompt`` only, or
    opens ``key`` with ``history`` as its initial messages and sends ``prompt``."""

    key: int
    continues: bool
    history: tuple[Turn, ...]
    prompt: str
    seen: tuple[Turn, ...]
    """Every turn the conversation will have prefilled once ``prompt`` is sent."""
    options: str
    epoch: int


@dataclass(frozen=True, slots=True)
class _Live:
    key: int
    options: str
    seen: tuple[Turn, ...]


class ConversationReuse:
    """The one live conversation of a backend, as the Python side knows it (bounded: one)."""

    def __init__(self) -> None:
        self._live: _Live | None = None
        self._epoch = 0

    def plan(self, options: str, turns: Sequence[Turn]) -> ConversationPlan:
        """The plan for a request with these options (the system text included) and turns; the
        last turn must be a user turn. Takes the live conversation: until ``settle`` it is
        not offered again."""
        live, self._live = self._live, None
        self._epoch += 1
        *before, (_, prompt) = turns
        if live is not None and live.options == options and tuple(before) == live.seen:
            return ConversationPlan(live.key, True, (), prompt, tuple(turns), options, self._epoch)
        return ConversationPlan(
            next(_KEYS), False, tuple(before), prompt, tuple(turns), options, self._epoch
        )

    def settle(self, plan: ConversationPlan, reply: str | None) -> None:
        """The generation of ``plan`` ended: finished with the raw ``reply`` text, or (None)
        anything else. A plan made since then owns the conversation state."""
        if plan.epoch != self._epoch:
            return
        if reply is None:
            self._live = None
        else:
            self._live = _Live(plan.key, plan.options, (*plan.seen, ("model", reply)))

    def forget(self) -> None:
        """The backend closed: nothing is live."""
        self._live = None
        self._epoch += 1

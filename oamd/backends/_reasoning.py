"""A thinking model's reasoning, kept out of what it answers.

Qwen3, DeepSeek-R1's distillations and others open their output with ``<think>…</think>``
(empty when thinking is switched off). That block is the model talking to itself: shown to a
player, streamed as an NPC's line, or read as JSON, it is garbage. ``ReasoningFilter`` drops one
such block at the very start of a step's text, and the blank lines after it, as the text
streams: it holds back only what could still be the start of ``<think>`` or lies inside the
block, so a model that does not think streams exactly as before.
"""

from __future__ import annotations

__all__ = ["OPEN", "ReasoningFilter"]

OPEN = "<think>"
CLOSE = "</think>"


class ReasoningFilter:
    """Feed a step's text pieces in order; each call returns what may be shown now."""

    __slots__ = ("_held", "_state")

    def __init__(self) -> None:
        self._held = ""
        self._state = "start"  # start → inside → after → passing (or start → passing)

    def feed(self, piece: str) -> str:
        if self._state == "passing":
            return piece
        self._held += piece
        if self._state == "start":
            lead = self._held.lstrip()
            if lead.startswith(OPEN):
                self._state = "inside"
                self._held = lead[len(OPEN) :]
            elif OPEN.startswith(lead):  # could still become "<think>": wait for more
                return ""
            else:
                return self._pass()
        if self._state == "inside":
            end = self._held.find(CLOSE)
            if end < 0:
                # only a tail that may start "</think>" is kept: a model that thinks at length
                # (or never stops) costs constant memory and each piece is scanned once
                self._held = self._held[-(len(CLOSE) - 1) :]
                return ""
            self._held = self._held[end + len(CLOSE) :]
            self._state = "after"
        if self._state == "after":  # the blank lines between the block and the answer
            self._held = self._held.lstrip()
            return self._pass() if self._held else ""
        return ""

    def finish(self) -> str:
        """What is still held when the step ends: nothing of an unclosed block (the model
        thought until its budget ran out and never answered), else the held text."""
        if self._state in ("inside", "after"):
            self._held = ""
        return self._pass()

    def _pass(self) -> str:
        text, self._held = self._held, ""
        self._state = "passing"
        return text

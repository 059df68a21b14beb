"""Reply cleaning for the envelope loop's respond step, while streaming and at the end.

Small models often start with a speaker label (``Assistant:``, ``**Mira:**``) or echo the
bracketed tool lines of the prompt. While streaming, text that could still grow into a label is
held back and a label is dropped once it is complete; at the end, echoed tool lines go, runs of
spaces collapse and a reply wrapped in one pair of double quotes is unwrapped. ``ReplyDisplay``
turns the visible text into ``TextUpdated`` events (deltas, or resets when it shrinks or a retry
starts over).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from oamd.agent.events import TextUpdated, TurnEvent

__all__ = ["ReplyCleaner", "ReplyDisplay", "SentenceWatch", "whole_sentences"]

_DEFAULT_LABEL = "assistant"
_TOOL_ECHO = re.compile(r"\[[A-Za-z_][\w.\-]*(?: \{[^\n]*?\})? → [^\n]*?\]")
_SPACE_RUNS = re.compile(r"[ \t]{2,}")
_AFTER_LABEL = "*_ \t\r\n"
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)")
"""A sentence's end: its closing punctuation (and quotes), once something follows it."""


class ReplyCleaner:
    def __init__(self, assistant_label: str) -> None:
        labels = {assistant_label.strip().lower(), _DEFAULT_LABEL} - {""}
        self._forms = tuple(
            form for label in labels for form in (f"{label}:", f"{label}**:", f"{label}:**")
        )

    def _strip_label(self, text: str) -> str:
        core = text.lstrip("*_")
        lowered = core.lower()
        if any(lowered.startswith(form) for form in self._forms):
            return core[core.index(":") + 1 :].lstrip(_AFTER_LABEL)
        return text

    def visible(self, raw: str) -> str:
        """What may be shown of a reply streamed so far."""
        text = raw.lstrip()
        lowered = text.lstrip("*_").lower()
        if any(form.startswith(lowered) for form in self._forms):
            return ""  # could still become a speaker label
        return self._strip_label(text)

    def final(self, raw: str) -> str:
        """The reply as recorded: label, echoed tool lines, space runs and wrapping quotes gone."""
        text = self._strip_label(raw.strip())
        text = _TOOL_ECHO.sub(" ", text)
        text = _SPACE_RUNS.sub(" ", text).strip()
        if len(text) >= 2 and text[0] == text[-1] == '"' and text.count('"') == 2:
            text = text[1:-1].strip()
        return text


class ReplyDisplay:
    """What the client was shown of the reply, and the ``TextUpdated`` events that change it: a
    delta when the new text extends what was shown, a reset when it does not or when a retry
    started the reply over."""

    def __init__(self, emit: Callable[[TurnEvent], None]) -> None:
        self._emit = emit
        self.shown = ""
        self._reset_pending = False

    def restart(self) -> None:
        """A retried step starts over: the next text replaces whatever was shown."""
        self._reset_pending = bool(self.shown)

    def show(self, text: str) -> None:
        if text == self.shown and not self._reset_pending:
            return
        if not self._reset_pending and text.startswith(self.shown):
            self._emit(TextUpdated(text[len(self.shown) :], text))
        else:
            self._emit(TextUpdated(text, text, is_reset=True))
        self.shown = text
        self._reset_pending = False

    def finish(self, text: str) -> None:
        """Shows the final text unless it only drops trailing whitespace from what was shown."""
        if text not in (self.shown, self.shown.rstrip()):
            self.show(text)


class SentenceWatch:
    """Tells where a streamed reply completes its ``limit``-th sentence. Fed each delta, it
    keeps only a short tail of the text, so a long reply costs it O(length)."""

    _TAIL = 8
    """Characters kept between deltas: a sentence's end may straddle a delta's edge."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen = 0
        self._counted_to = 0
        self._tail = ""
        self._offset = 0
        """Where ``_tail`` starts in the whole text."""

    def __call__(self, delta: str) -> int | None:
        """The length to cut the text to once it holds ``limit`` sentences, else ``None``."""
        text = self._tail + delta
        for match in _SENTENCE_END.finditer(text):
            end = self._offset + match.end()
            if end <= self._counted_to:
                continue
            self._counted_to = end
            self._seen += 1
            if self._seen >= self._limit:
                return end
        keep = min(len(text), self._TAIL)
        self._tail = text[len(text) - keep :]
        self._offset += len(text) - keep
        return None


def whole_sentences(text: str) -> str:
    """``text`` up to its last complete sentence, when it has one and ends mid-sentence."""
    stripped = text.rstrip()
    if not stripped or stripped[-1] in ".!?…\"'”’)]":
        return stripped
    ends = list(_SENTENCE_END.finditer(stripped))
    return stripped[: ends[-1].end()] if ends else stripped

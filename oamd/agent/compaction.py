"""Compaction: fold all but the most recent turns into the context note with one model call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from oamd.agent.entries import (
    PROMPT,
    RESPONSE,
    TOOL_CALLS,
    TOOL_OUTPUT,
    calls_of,
    kind_of,
    output_of,
    text_of,
)
from oamd.agent.prompt import turn_starts
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.backends.base import LanguageModel, Sampling
from oamd.jsonvalue import dumps_text

__all__ = ["DEFAULT_SUMMARY_INSTRUCTIONS", "CompactionPlan", "compact_history", "render_lines"]

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "You maintain a running summary of a conversation for a character who must remember it. "
    "Merge the new conversation into the existing summary. Keep names, promises, facts learned, "
    "items exchanged, decisions and the relationship's tone. Write at most 120 words in plain "
    "prose."
)


def render_lines(
    entries: Sequence[dict[str, Any]], user: str = "User", assistant: str = "Assistant"
) -> list[str]:
    """History as labelled lines: ``User: …``, ``[Assistant used tool {…}]``, ``[tool result: …]``."""
    lines = []
    for entry in entries:
        kind = kind_of(entry)
        if kind == PROMPT:
            lines.append(f"{user}: {text_of(entry)}")
        elif kind == RESPONSE:
            lines.append(f"{assistant}: {text_of(entry)}")
        elif kind == TOOL_CALLS:
            for call in calls_of(entry):
                args = dumps_text(call.arguments)
                lines.append(f"[{assistant} used {call.name} {args}]")
        elif kind == TOOL_OUTPUT:
            out = output_of(entry)
            lines.append(f"[{out.name} result: {out.output.model_text}]")
    return lines


SMALL_MODEL_SUMMARY_TOKENS = 120
"""Output cap of a summary written by a small model (``capabilities.compact_prompts``)."""

SMALL_MODEL_SUMMARY_SENTENCES = 3


@dataclass(frozen=True)
class CompactionPlan:
    cut: int
    """History entries before this index are folded into the summary and dropped."""
    instructions: str
    prompt: str

    def spec(self, model: LanguageModel) -> TurnSpec:
        if model.capabilities.compact_prompts:
            # a small model asked for a summary rambles to its output limit: a few sentences
            sampling = Sampling(max_tokens=SMALL_MODEL_SUMMARY_TOKENS, repetition_penalty=1.2)
            settings = TurnSettings(
                sampling=sampling, max_attempts=1, max_sentences=SMALL_MODEL_SUMMARY_SENTENCES
            )
            return TurnSpec(model, self.instructions, self.prompt, settings=settings)
        return TurnSpec(
            model, self.instructions, self.prompt, settings=TurnSettings(max_attempts=1)
        )


def compact_history(
    history: Sequence[dict[str, Any]],
    keep_recent_turns: int,
    note: str | None,
    instructions: str | None,
) -> CompactionPlan | None:
    """The plan for a compaction, or ``None`` when there are no more turns than to keep."""
    starts = turn_starts(history)
    if len(starts) <= keep_recent_turns:
        return None
    cut = starts[len(starts) - keep_recent_turns] if keep_recent_turns else len(history)
    prompt = f"Summary so far:\n{note}\n\n" if note else ""
    prompt += "Conversation to fold into the summary:\n" + "\n".join(render_lines(history[:cut]))
    return CompactionPlan(cut, instructions or DEFAULT_SUMMARY_INSTRUCTIONS, prompt)

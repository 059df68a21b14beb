"""An NPC's reply in one dialogue turn (§6 ``npc/talk``) on a full-size model: tools first, then an
emotion and a spoken line (a small model's is ``npc.small_reply``'s; ``npc.talk`` picks).

Reply formats: ``structured`` (a schema of ``emotion``, ``line``, ``player_options``,
``ends_conversation``), ``text`` (``[emotion] line``), and ``automatic``: structured and, when
the guardrails block it (or the model refuses), one plain-text retry with tools off that reuses
the facts already looked up. A turn still blocked answers with a rotated fallback line when
``fallback_on_guardrail`` (the exchange is not kept; staged memory is dropped; world writes stay).
``LineTracker`` follows the line as it streams and reports emotion, deltas and resets so they add
up exactly to the final line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oamd.agent.events import (
    PartialValue,
    TextUpdated,
    ToolRecord,
    TurnEvent,
    TurnFailed,
    TurnUsage,
)
from oamd.agent.policy import ToolPolicy
from oamd.agent.run_turn import run_turn
from oamd.agent.schema import CompiledSchema, compile_schema
from oamd.agent.tools import ToolChoice, ToolDefinition
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.backends.base import Sampling
from oamd.errors import InvalidRequest
from oamd.game.npc.npc import Npc
from oamd.game.npc.persona import match_emotion
from oamd.game.npc.ports import TalkLine, TalkPeer, TalkSetup
from oamd.game.npc.prompt import render_value

__all__ = [
    "LineTracker",
    "TalkOutcome",
    "parse_structured_reply",
    "parse_text_reply",
    "reply_schema",
    "run_talk",
    "spoken_line",
    "talk_policy",
    "talk_prompt",
]

BLOCKED = ("guardrail_violation", "refusal")
MAX_RETRY_FACTS = 6
MAX_FACT_CHARS = 400
PENDING_TAG_CHARS = 24
"""An opening ``[`` with no ``]`` within this many characters is not an emotion tag."""
RETRY_RULE = (
    "Reply in character with a short spoken line. Begin with your emotion in square brackets, "
    "such as [happy] or [angry]."
)
_OPEN_QUOTES = "\"“'‘«"
_CLOSE_QUOTES = "\"”'’»"
_OPTION_MARKER = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")


def _labels(name: str) -> list[str]:
    return [f"{name} says:", f"**{name}**:", f"**{name}:**", f"*{name}*:", f"{name}:"]


def spoken_line(raw: str, speaker: str) -> str:
    """The words spoken: a leading ``Gorm:``-style label and wrapping quotes removed."""
    text = raw.strip()
    lower = text.lower()
    for label in _labels(speaker):
        if lower.startswith(label.lower()):
            text = text[len(label) :].strip()
            break
    if (
        len(text) >= 2
        and text[0] in _OPEN_QUOTES
        and text[-1] in _CLOSE_QUOTES
        and not any(q in text[1:-1] for q in '"“”')
    ):
        text = text[1:-1].strip()
    return text


def _streaming_line(raw: str, speaker: str) -> str | None:
    """What of a growing line can be shown: nothing while it may still become a label."""
    text = raw.lstrip()
    lower = text.lower()
    for label in _labels(speaker):
        if len(text) < len(label) and label.lower().startswith(lower):
            return None
    for label in _labels(speaker):
        if lower.startswith(label.lower()):
            text = text[len(label) :].lstrip()
            break
    if text[:1] in _OPEN_QUOTES and text[:1] != "'":
        # a line wrapped in quotes loses both (``spoken_line``): a quote that may be the closing
        # one waits for what follows, so the quote a reset would take back never shows
        text = text[1:].lstrip()
        if text[-1:] in _CLOSE_QUOTES:
            text = text[:-1]
    return text


def reply_schema(npc: Npc) -> CompiledSchema:
    o, name = npc.options, npc.persona.name
    n = max(1, npc.persona.max_sentences)
    properties: dict[str, Any] = {
        "emotion": {
            "type": "string",
            "description": f"How {name} feels right now.",
            "enum": list(o.emotions),
        },
        "line": {
            "type": "string",
            "description": (
                f"What {name} says out loud, in character. At most {n} short "
                f"sentence{'s' if n != 1 else ''}. If a tool was just used, name the specific facts "
                "it gave (items, prices, numbers)."
            ),
        },
    }
    count = max(0, min(4, o.player_option_count))
    if count:
        properties["player_options"] = {
            "type": "array",
            "items": {"type": "string"},
            "description": f"{count} short, different replies the player could say next.",
            "minItems": count,
            "maxItems": count,
        }
    if o.can_end_conversation:
        properties["ends_conversation"] = {
            "type": "boolean",
            "description": f"true only if {name} ends the conversation now.",
        }
    schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return compile_schema(schema, "reply")


def split_emotion_tag(text: str) -> tuple[str | None, str, bool]:
    """``(tag, rest, pending)``: ``pending`` while an opening tag is not closed yet."""
    text = text.lstrip()
    if not text.startswith("["):
        return None, text, False
    end = text.find("]")
    if end < 0:
        return (None, text, False) if len(text) > PENDING_TAG_CHARS else (None, "", True)
    return text[1:end], text[end + 1 :].lstrip(), False


def parse_text_reply(text: str, npc: Npc) -> tuple[str, str]:
    """``[worried] Let's not speak of it.`` → ``("worried", "Let's not speak of it.")``."""
    tag, rest, _ = split_emotion_tag(text)
    emotion = match_emotion(tag) if tag is not None else None
    if emotion not in npc.options.emotions:
        emotion = None
    return emotion or npc.persona.default_emotion, spoken_line(rest, npc.persona.name)


def parse_structured_reply(value: Any, npc: Npc) -> tuple[str, str, list[str], bool]:
    o = npc.options
    if not isinstance(value, dict):
        return npc.persona.default_emotion, "", [], False
    emotion = match_emotion(value.get("emotion"))
    if emotion not in o.emotions:
        emotion = npc.persona.default_emotion
    line = (
        spoken_line(value["line"], npc.persona.name) if isinstance(value.get("line"), str) else ""
    )
    options: list[str] = []
    seen: set[str] = set()
    for item in value.get("player_options") or []:
        if not isinstance(item, str):
            continue
        cleaned = spoken_line(_OPTION_MARKER.sub("", item), "Player")
        if cleaned and cleaned.lower() not in seen:
            seen.add(cleaned.lower())
            options.append(cleaned)
    count = max(0, min(4, o.player_option_count))
    ends = o.can_end_conversation and value.get("ends_conversation") is True
    return emotion, line, options[:count], ends


class LineTracker:
    """Follows the emotion and line as they stream; ``send(kind, value)`` reports ``emotion``,
    ``delta`` (append) or ``reset`` (replace)."""

    def __init__(self, npc: Npc, send: Callable[[str, str], None]) -> None:
        self._npc = npc
        self._send = send
        self.shown = ""
        self.emotion: str | None = None

    def on_event(self, event: TurnEvent) -> None:
        if type(event) is PartialValue and isinstance(event.value, dict):
            self._partial(
                event.value.get("emotion"), event.value.get("line"), "line" in event.value
            )
        elif type(event) is TextUpdated:
            tag, rest, pending = split_emotion_tag(event.text)
            if not pending:
                self._partial(tag, rest, True)

    def _partial(self, emotion: Any, line: Any, has_line: bool) -> None:
        if self.emotion is None and has_line:
            matched = match_emotion(emotion)
            if matched is not None and matched in self._npc.options.emotions:
                self.emotion = matched
                self._send("emotion", matched)
        if isinstance(line, str):
            visible = _streaming_line(line, self._npc.persona.name)
            if visible is not None:
                self.show(visible)

    def show(self, line: str) -> None:
        if line == self.shown:
            return
        if line.startswith(self.shown):
            self._send("delta", line[len(self.shown) :])
        else:
            self._send("reset", line)
        self.shown = line

    def finish(self, line: str, emotion: str) -> None:
        if self.emotion != emotion:
            self.emotion = emotion
            self._send("emotion", emotion)
        self.show(line)


@dataclass
class TalkOutcome:
    line: str
    emotion: str
    player_options: list[str] = field(default_factory=list)
    ends_conversation: bool = False
    records: list[ToolRecord] = field(default_factory=list)
    usage: TurnUsage = field(default_factory=TurnUsage)
    is_fallback: bool = False
    entries: list[dict[str, Any]] = field(default_factory=list)
    """History entries to commit (none when the exchange was blocked)."""
    commits_memory: bool = True


def talk_prompt(line: str, context: Any, game_state: str | None) -> str:
    parts = []
    if game_state and game_state.strip():
        parts.append(f"Game state:\n{game_state}")
    situation = render_value(context).strip() if context is not None else ""
    if situation:
        parts.append(f"Situation: {situation}")
    spoken = line.strip()
    parts.append(f"Player: {spoken}" if spoken else "Player: (The player says nothing.)")
    return "\n".join(parts)


def _retry_prompt(prompt: str, records: list[ToolRecord]) -> str:
    facts = [r for r in records if not r.output.is_error][:MAX_RETRY_FACTS]
    lines = [prompt]
    if facts:
        lines.append("Facts you just looked up:")
        for r in facts:
            args = render_value(r.call.arguments)
            lines.append(f"- {r.call.name} {args} → {r.output.model_text[:MAX_FACT_CHARS]}")
    lines.append(RETRY_RULE)
    return "\n".join(lines)


def talk_policy(npc: Npc, tools: list[ToolDefinition], choice: ToolChoice | None) -> ToolPolicy:
    """The tool policy of a talk turn: ``choice``, else the grounding tool or the options'."""
    o = npc.options
    if choice is None:
        choice = ToolChoice("tool", o.grounding_tool) if o.grounding_tool else o.tool_choice
    if not tools:
        choice = ToolChoice("none")
    elif choice.mode == "tool" and not any(t.name == choice.name for t in tools):
        raise InvalidRequest(f"Tool '{choice.name}' is not available to {npc.persona.name}.")
    return ToolPolicy(choice=choice, max_rounds=o.max_tool_rounds, max_calls=o.max_tool_calls)


async def run_talk(
    npc: Npc, said: TalkLine, prompt: str, setup: TalkSetup, peer: TalkPeer
) -> TalkOutcome:
    """Runs the turn on a full-size model; raises ``TurnFailed`` when it fails and no fallback
    applies."""
    choice, instructions, tools = said.choice, setup.instructions, setup.tools
    tracker, turn_peer = peer.tracker, peer.turn_peer
    o = npc.options
    settings = TurnSettings(
        sampling=Sampling(temperature=o.temperature, max_tokens=o.maximum_response_tokens)
    )
    structured = o.reply_format in ("automatic", "structured")
    spec = TurnSpec(
        npc.model,
        instructions,
        prompt,
        tools=tools,
        policy=talk_policy(npc, tools, choice),
        history=npc.history,
        schema=reply_schema(npc) if structured else None,
        settings=settings,
    )
    try:
        result = await run_turn(spec, turn_peer)
    except TurnFailed as exc:
        if exc.name not in BLOCKED:
            raise
        records = list(exc.records)
        if o.reply_format != "automatic":
            return _fallback(npc, records, tracker, exc)
        retry = TurnSpec(
            npc.model,
            instructions,
            _retry_prompt(prompt, records),
            history=npc.history,
            settings=settings,
            carried_records=records,
        )
        try:
            result = await run_turn(retry, turn_peer)
        except TurnFailed as again:
            if again.name not in BLOCKED:
                raise
            return _fallback(npc, list(again.records) or records, tracker, again)
        structured = False
    if structured:
        emotion, line, player_options, ends = parse_structured_reply(result.structured, npc)
    else:
        (emotion, line), player_options, ends = parse_text_reply(result.text, npc), [], False
    outcome = TalkOutcome(line, emotion, player_options, ends, list(result.records), result.usage)
    outcome.entries = result.entries
    if not line:
        outcome.line = npc.next_fallback_line()
        outcome.is_fallback = True
    tracker.finish(outcome.line, outcome.emotion)
    return outcome


def _fallback(
    npc: Npc, records: list[ToolRecord], tracker: LineTracker, exc: TurnFailed
) -> TalkOutcome:
    if not npc.options.fallback_on_guardrail:
        raise exc
    outcome = TalkOutcome(
        line=npc.next_fallback_line(),
        emotion=npc.persona.default_emotion,
        records=records,
        is_fallback=True,
        commits_memory=False,
    )
    tracker.finish(outcome.line, outcome.emotion)
    return outcome


__all__ += ["split_emotion_tag"]

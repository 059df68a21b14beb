"""What a decision (``decision/decide``) is asked: pick one of a fixed set of options — a reason,
then the id, then a confidence.

The answer is generated under a schema whose ``choice`` is an enum of the option ids, so it is
always one of them; a single option answers at once (confidence 100) without a model call; a
guardrail block or refusal falls back to ``fallbackOptionID`` when one is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oamd.agent.events import TurnResult
from oamd.agent.policy import ToolPolicy
from oamd.agent.schema import CompiledSchema, compile_schema
from oamd.agent.tools import ToolChoice, ToolDefinition
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.backends.base import LanguageModel, Sampling
from oamd.errors import ModelError
from oamd.game.npc.persona import Persona
from oamd.game.npc.prompt import render_value, sentence, text_list

__all__ = [
    "Choice",
    "DecisionOption",
    "DecisionRequest",
    "decision_schema",
]

DEFAULT_INSTRUCTIONS = (
    "You make decisions for characters in a video game. Pick the option that best fits the "
    "character and the situation. Give one short reason, then the option id, then your "
    "confidence from 0 to 100."
)
ONLY_OPTION_REASON = "It is the only option."
DEFAULT_CONFIDENCE = 50


@dataclass(frozen=True, slots=True)
class Choice:
    """What a decision chose: an option id, the reason given, a confidence from 0 to 100."""

    option_id: str
    reasoning: str
    confidence: int


@dataclass(frozen=True, slots=True)
class DecisionOption:
    id: str
    description: str = ""


def decision_schema(options: list[DecisionOption]) -> CompiledSchema:
    """``{"reasoning", "choice" (enum of ids), "confidence" (0…100)}`` in that order."""
    return compile_schema(
        {
            "type": "object",
            "properties": {
                "reasoning": {
                    "type": "string",
                    "description": "One short sentence explaining the choice.",
                },
                "choice": {
                    "type": "string",
                    "description": "The id of the chosen option.",
                    "enum": [o.id for o in options],
                },
                "confidence": {
                    "type": "integer",
                    "description": "How sure you are, from 0 to 100.",
                    "minimum": 0,
                    "maximum": 100,
                },
            },
            "required": ["reasoning", "choice", "confidence"],
            "additionalProperties": False,
        },
        "options",
    )


@dataclass
class DecisionRequest:
    situation: Any
    options: list[DecisionOption]
    actor: Persona | None = None
    context: Any = None
    tools: list[ToolDefinition] = field(default_factory=list)
    choice: ToolChoice = ToolChoice()
    fallback_option: str | None = None
    instructions: str | None = None
    sampling: Sampling = field(default_factory=Sampling)
    max_tool_rounds: int = 2
    tool_timeout: float = 120.0

    def system_text(self) -> str:
        lines = [
            self.instructions.strip()
            if self.instructions and self.instructions.strip()
            else DEFAULT_INSTRUCTIONS
        ]
        if self.actor is not None:
            a = self.actor
            lines.append(
                f"You decide for {a.name}, {a.role}."
                if a.role.strip()
                else f"You decide for {a.name}."
            )
            if a.personality.strip():
                lines.append(f"Personality: {sentence(a.personality)}")
            goals = text_list(a.goals)
            if goals:
                lines.append(f"Goals: {goals}")
        return "\n".join(lines)

    def prompt(self) -> str:
        situation = render_value(self.situation).strip() if self.situation is not None else ""
        lines = [f"Situation: {situation or '(none given)'}"]
        if self.context is not None and self.context != {}:
            lines.append(f"Facts: {render_value(self.context)}")
        lines.append("Options:")
        for option in self.options:
            described = option.description.strip()
            lines.append(f"- {option.id}: {described}" if described else f"- {option.id}")
        return "\n".join(lines)

    def spec(self, model: LanguageModel) -> TurnSpec:
        choice = self.choice if self.tools else ToolChoice("none")
        return TurnSpec(
            model,
            self.system_text(),
            self.prompt(),
            tools=self.tools,
            policy=ToolPolicy(choice=choice, max_rounds=self.max_tool_rounds),
            schema=decision_schema(self.options),
            settings=TurnSettings(sampling=self.sampling),
        )

    def only_option(self) -> Choice | None:
        if len(self.options) != 1:
            return None
        return Choice(self.options[0].id, ONLY_OPTION_REASON, 100)

    def result(self, turn: TurnResult) -> Choice:
        """The choice in the model's answer.

        Raises:
            ModelError: ``generation_failed`` when the choice is none of the ids.
        """
        value = turn.structured if isinstance(turn.structured, dict) else {}
        raw = str(value.get("choice", "")).strip()
        ids = [o.id for o in self.options]
        chosen = raw if raw in ids else next((i for i in ids if i.lower() == raw.lower()), None)
        if chosen is None:
            raise ModelError(
                "generation_failed",
                f"The model chose '{raw}', which is not one of: {', '.join(ids)}.",
            )
        confidence = value.get("confidence")
        if isinstance(confidence, int | float) and not isinstance(confidence, bool):
            confidence = max(0, min(100, round(confidence)))
        else:
            confidence = DEFAULT_CONFIDENCE
        reasoning = value.get("reasoning")
        return Choice(chosen, reasoning.strip() if isinstance(reasoning, str) else "", confidence)

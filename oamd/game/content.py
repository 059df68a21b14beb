"""Game content (``content/generate``): schema-shaped items, quests, rumors or loot in one
turn; ``generate`` is the service the adapter hands a request to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oamd.agent.policy import ToolPolicy
from oamd.agent.ports import TurnPeer
from oamd.agent.run_turn import run_turn
from oamd.agent.schema import CompiledSchema
from oamd.agent.tools import ToolChoice, ToolDefinition
from oamd.agent.turn_spec import TurnSettings, TurnSpec
from oamd.backends.base import LanguageModel, Sampling
from oamd.errors import ModelError
from oamd.jsonvalue import dumps_text

__all__ = ["ContentRequest", "generate"]

DEFAULT_INSTRUCTIONS = (
    "You write content for a video game. Follow the requested format exactly. Keep text short, "
    "vivid and consistent with the request."
)


@dataclass
class ContentRequest:
    prompt: str
    schema: CompiledSchema
    instructions: str | None = None
    context: Any = None
    tools: list[ToolDefinition] = field(default_factory=list)
    sampling: Sampling = field(default_factory=Sampling)

    def spec(self, model: LanguageModel) -> TurnSpec:
        prompt = self.prompt
        if self.context is not None:
            context = self.context if isinstance(self.context, str) else dumps_text(self.context)
            prompt = f"{prompt}\nFacts: {context}"
        instructions = self.instructions.strip() if self.instructions else ""
        return TurnSpec(
            model,
            instructions or DEFAULT_INSTRUCTIONS,
            prompt,
            tools=self.tools,
            policy=ToolPolicy(choice=ToolChoice("auto" if self.tools else "none")),
            schema=self.schema,
            settings=TurnSettings(sampling=self.sampling),
        )


async def generate(
    request: ContentRequest,
    model: LanguageModel,
    peer: TurnPeer,
) -> Any:
    """The content: the structured answer of one turn under the request's schema; its tool
    calls run through ``peer``.

    Raises:
        ModelError: the turn failed, or gave no structured answer (``generation_failed``).
    """
    result = await run_turn(request.spec(model), peer)
    if not result.has_structured:
        raise ModelError("generation_failed", "The model produced no structured content.")
    return result.structured

"""One-shot requests to the model, outside any conversation: ``decision/decide``,
``decision/decideMany`` and ``content/generate``, as methods of ``Bridge``.

Each keyword is a wire member under its snake_case name (``fallback_option_id`` is
``fallbackOptionID``, ``tool_timeout_seconds`` is ``toolTimeoutSeconds``); there is no catch-all,
so a misspelt keyword raises ``TypeError`` before anything is sent. ``tools`` name the bridge's
registered client tools (or give definitions), which then answer the decision's ``tool/call``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from oamd.client._game_results import DecideManyResult, Decision
from oamd.client._params import present
from oamd.client._results import ContentGenerateResult
from oamd.client._tools import Tools

if TYPE_CHECKING:
    from oamd.client._client import Client
    from oamd.client._tools import ToolBox

__all__ = ["DecisionRequest", "ModelRequests"]


@dataclass(frozen=True, kw_only=True)
class DecisionRequest:
    """One decision of ``Bridge.decide_many`` (``$defs/DecisionRequest``): pick one of ``options``
    (ids, or ``{"id", "description"}``) for ``situation``; ``actor`` is a persona or an NPC id."""

    situation: Any
    options: Sequence[str | dict[str, Any]]
    actor: str | dict[str, Any] | None = None
    context: Any = None
    tools: Tools | None = None
    tool_choice: str | dict[str, Any] | None = None
    fallback_option_id: str | None = None

    def wire(self, toolbox: ToolBox) -> dict[str, Any]:
        """The request as ``decision/*`` params (``tools`` looked up in ``toolbox``)."""
        return present(
            situation=self.situation,
            options=list(self.options),
            actor=self.actor,
            context=self.context,
            tools=toolbox.definitions(self.tools) if self.tools is not None else None,
            toolChoice=self.tool_choice,
            fallbackOptionID=self.fallback_option_id,
        )


def _engine_settings(
    instructions: str | None,
    temperature: float | None,
    max_tool_rounds: int | None,
    tool_timeout_seconds: float | None,
    model: str | dict[str, Any] | None,
) -> dict[str, Any]:
    """``$defs/DecisionEngineSettings``: how every decision of a request is run."""
    return present(
        instructions=instructions,
        temperature=temperature,
        maxToolRounds=max_tool_rounds,
        toolTimeoutSeconds=tool_timeout_seconds,
        model=model,
    )


class ModelRequests:
    """``decide``, ``decide_many`` and ``generate``; ``Bridge`` has them."""

    client: Client
    tools: ToolBox

    async def decide(
        self,
        situation: Any,
        options: Sequence[str | dict[str, Any]],
        *,
        actor: str | dict[str, Any] | None = None,
        context: Any = None,
        tools: Tools | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        fallback_option_id: str | None = None,
        instructions: str | None = None,
        temperature: float | None = None,
        max_tool_rounds: int | None = None,
        tool_timeout_seconds: float | None = None,
        model: str | dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Decision:
        """Picks one of ``options`` (ids, or ``{"id", "description"}``) for ``situation``
        (``decision/decide``); ``actor`` is a persona or an NPC id.

        Raises:
            RpcError: the decision failed (``generation_failed`` naming the options…).
        """
        request = DecisionRequest(
            situation=situation,
            options=options,
            actor=actor,
            context=context,
            tools=tools,
            tool_choice=tool_choice,
            fallback_option_id=fallback_option_id,
        )
        settings = _engine_settings(
            instructions, temperature, max_tool_rounds, tool_timeout_seconds, model
        )
        params = {**request.wire(self.tools), **settings}
        return Decision.model_validate(
            await self.client.request("decision/decide", params, timeout=timeout)
        )

    async def decide_many(
        self,
        requests: Sequence[DecisionRequest | dict[str, Any]],
        *,
        max_concurrency: int | None = None,
        instructions: str | None = None,
        temperature: float | None = None,
        max_tool_rounds: int | None = None,
        tool_timeout_seconds: float | None = None,
        model: str | dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> DecideManyResult:
        """Runs several decisions in one request (``decision/decideMany``), at most
        ``max_concurrency`` at once; each of ``requests`` is a ``DecisionRequest`` or its wire
        form. ``results`` keeps their order, a failed one a ``DecisionFailure`` in its place.

        Raises:
            RpcError: the whole request was refused (an invalid decision, too many…).
        """
        settings = _engine_settings(
            instructions, temperature, max_tool_rounds, tool_timeout_seconds, model
        )
        params = {
            "requests": [
                r.wire(self.tools) if isinstance(r, DecisionRequest) else r for r in requests
            ],
            **present(maxConcurrency=max_concurrency),
            **settings,
        }
        result = await self.client.request("decision/decideMany", params, timeout=timeout)
        return DecideManyResult.model_validate(result)

    async def generate(
        self,
        prompt: str,
        schema: dict[str, Any],
        *,
        instructions: str | None = None,
        context: Any = None,
        tools: Tools | None = None,
        tool_timeout_seconds: float | None = None,
        temperature: float | None = None,
        model: str | dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> ContentGenerateResult:
        """Generates JSON matching ``schema`` (``content/generate``): items, quests, names…"""
        params = present(
            prompt=prompt,
            schema=schema,
            instructions=instructions,
            context=context,
            tools=self.tools.definitions(tools) if tools is not None else None,
            toolTimeoutSeconds=tool_timeout_seconds,
            temperature=temperature,
            model=model,
        )
        result = await self.client.request("content/generate", params, timeout=timeout)
        return ContentGenerateResult.model_validate(result)

"""``decision/decide`` and ``decision/decideMany`` (§6): the adapters of the decision service
(``oamd.game.decision.decide``): params read in the reference's order, results written for the
wire."""

from __future__ import annotations

from typing import Any

from oamd.agent.ports import TurnPeer
from oamd.bridge.driver import TurnDriver
from oamd.bridge.game.decision import encode
from oamd.bridge.game.decision.params import actor_persona, parse_options
from oamd.bridge.game.stores import game
from oamd.bridge.model_params import resolve_model
from oamd.bridge.params import Params
from oamd.bridge.session.params import parse_sampling
from oamd.bridge.state import BridgeState
from oamd.bridge.tool_params import parse_tool_choice, parse_tools
from oamd.errors import InvalidParams, LimitReached
from oamd.game.decision.decide import DecisionJob
from oamd.game.decision.decide import decide as decide_one
from oamd.game.decision.decide import decide_many as decide_many_service
from oamd.game.decision.request import DecisionRequest
from oamd.limits import MAX_DECISION_CONCURRENCY, MAX_DECISIONS
from oamd.rpc import Deferred, Registry, Request, Result, to_wire_error

__all__ = ["register"]

ENGINE_KEYS = ("instructions", "temperature", "maxToolRounds", "toolTimeoutSeconds", "model")
DECISION_KEYS = (
    "situation",
    "options",
    "actor",
    "context",
    "tools",
    "toolChoice",
    "fallbackOptionID",
)
DECIDE_KEYS = (*DECISION_KEYS, *ENGINE_KEYS)
DEFAULT_MAX_CONCURRENCY = 2
DECISION_CANCEL_REASON = "The tool call timed out or its request was cancelled."


def _parse(
    req: Request, p: Params, engine: Params, model: Any
) -> tuple[DecisionRequest, Any, list[str]]:
    """One decision's params (``engine`` supplies shared settings under ``decideMany``)."""
    if not p.has("situation"):
        raise InvalidParams(f"Missing required parameter '{p.path('situation')}'.")
    situation = p.get("situation")
    options = parse_options(p.get("options"), p.path("options"))
    ids = [o.id for o in options]
    fallback = p.opt_string("fallbackOptionID")
    if fallback is not None:
        fallback = fallback.strip()
        if fallback not in ids:
            raise InvalidParams(
                f"'{p.path('fallbackOptionID')}' must be one of the option ids "
                f"({', '.join(ids)}); got '{fallback}'."
            )
    tools, warnings = parse_tools(p.get("tools"), p.path("tools"))
    choice = parse_tool_choice(p.get("toolChoice"), p.path("toolChoice"))
    if (
        choice is not None
        and choice.mode == "tool"
        and not any(t.name == choice.name for t in tools)
    ):
        raise InvalidParams(
            f"'{p.path('toolChoice')}' names tool '{choice.name}', which is not in 'tools'."
        )
    actor = actor_persona(game(req).npcs, p.get("actor"), p.path("actor"))
    settings = engine  # decide: its own params; decideMany: the shared engine settings
    timeout = settings.opt_seconds("toolTimeoutSeconds")
    instructions = settings.opt_string("instructions")
    sampling = parse_sampling(settings)
    rounds = settings.opt_int("maxToolRounds", minimum=0)
    request = DecisionRequest(
        situation=situation,
        options=options,
        actor=actor,
        context=p.get("context"),
        tools=tools,
        fallback_option=fallback,
        instructions=instructions,
        sampling=sampling,
        max_tool_rounds=2 if rounds is None else rounds,
        tool_timeout=req.state.config.tool_timeout if timeout is None else timeout,
    )
    if choice is not None:
        request.choice = choice
    return request, model, warnings


def decide(req: Request) -> Result | Deferred:
    state: BridgeState = req.state
    p = Params(req.params)
    warnings = p.unknown(DECIDE_KEYS)
    model, _ = resolve_model(state.config.models, p.get("model"), use=(req.method, req.id))
    request, model, tool_warnings = _parse(req, p, p, model)
    warnings += tool_warnings
    driver = TurnDriver(
        req,
        {},
        stream=False,
        default_timeout=request.tool_timeout,
        cancel_reason=DECISION_CANCEL_REASON,
    )

    async def work() -> dict[str, Any]:
        decision = await decide_one(request, model, TurnPeer(driver.emit, driver.execute))
        return encode.encode_decision(decision, warnings)

    return Deferred(work)


def decide_many(req: Request) -> Deferred:
    state: BridgeState = req.state
    p = Params(req.params)
    warnings = p.unknown(("requests", "maxConcurrency", *ENGINE_KEYS))
    raw = p.get("requests")
    if raw is not None and not isinstance(raw, list):
        raise InvalidParams("'requests' must be a non-empty array of decisions.")
    if not raw:
        raise InvalidParams("'requests' must be a non-empty array of decisions.")
    if len(raw) > MAX_DECISIONS:  # before any is parsed: each costs a parse, a driver, a result
        raise LimitReached(
            "decisions",
            MAX_DECISIONS,
            f"'requests' has {len(raw)} decisions; decision/decideMany takes at most "
            f"{MAX_DECISIONS}. Send the rest in another call.",
        )
    limit = p.opt_int("maxConcurrency", DEFAULT_MAX_CONCURRENCY, minimum=1)
    workers = min(limit or DEFAULT_MAX_CONCURRENCY, MAX_DECISION_CONCURRENCY, len(raw))
    # one model (one script) for all
    model, _ = resolve_model(state.config.models, p.get("model"), use=(req.method, req.id))
    jobs: list[DecisionJob] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidParams(f"'requests[{i}]' must be an object.")
        ip = Params(item, f"requests[{i}]")
        request, _, item_warnings = _parse(req, ip, p, model)
        driver = TurnDriver(
            req,
            {"index": i},
            stream=False,
            default_timeout=request.tool_timeout,
            cancel_reason=DECISION_CANCEL_REASON,
        )
        warnings += ip.unknown(DECISION_KEYS) + [f"requests[{i}]: {w}" for w in item_warnings]
        jobs.append(DecisionJob(request, model, TurnPeer(driver.emit, driver.execute)))

    async def work() -> dict[str, Any]:
        outcomes = [
            {"error": to_wire_error(r)} if isinstance(r, Exception) else r
            for r in await decide_many_service(jobs, workers)
        ]
        return encode.encode_many(outcomes, warnings)

    return Deferred(work)


def register(registry: Registry) -> None:
    registry.register("decision/decide", decide)
    registry.register("decision/decideMany", decide_many)

"""``decision/decide`` and ``decision/decideMany`` (§6): enum-constrained choices, concurrent."""

from __future__ import annotations

from typing import Any

import anyio

from oamd.agent.events import TurnUsage
from oamd.agent.run import run_turn
from oamd.errors import InvalidParams, LimitReached, ModelError
from oamd.game.decision import DecisionRequest
from oamd.game.decision_compact import decide_compact
from oamd.limits import MAX_DECISION_CONCURRENCY, MAX_DECISIONS
from oamd.methods.driver import TurnDriver
from oamd.methods.encode import encode_record, encode_usage
from oamd.methods.parse.decision import actor_persona, parse_options
from oamd.methods.parse.params import Params
from oamd.methods.parse.session import parse_sampling
from oamd.methods.parse.tools import parse_tool_choice, parse_tools
from oamd.methods.state import BridgeState
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
    state: BridgeState, p: Params, engine: Params, model: Any
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
    actor = actor_persona(state.npcs, p.get("actor"), p.path("actor"))
    settings = engine  # decide: its own params; decideMany: the shared engine settings
    timeout = settings.opt_seconds("toolTimeoutSeconds")
    request = DecisionRequest(
        situation=situation,
        options=options,
        actor=actor,
        context=p.get("context"),
        tools=tools,
        fallback_option=fallback,
        instructions=settings.opt_string("instructions"),
        sampling=parse_sampling(settings),
        max_tool_rounds=settings.opt_int("maxToolRounds", 2, minimum=0),  # type: ignore[arg-type]
        tool_timeout=state.config.tool_timeout if timeout is None else timeout,
    )
    if choice is not None:
        request.choice = choice
    return request, model, warnings


async def _decide(
    request: DecisionRequest, model: Any, driver: TurnDriver, warnings: list[str]
) -> dict[str, Any]:
    usage = TurnUsage()
    records: list[Any] = []
    only = request.only_option()
    if only is not None:
        out, fallback = only, False
    else:
        try:
            await model.settle_capabilities()
            capabilities = model.capabilities
            if capabilities.compact_prompts and capabilities.scores_text:
                out, usage, records = await decide_compact(
                    request, model, driver.emit, driver.execute
                )
                turn = None
            else:
                turn = await run_turn(request.spec(model), driver.emit, driver.execute)
        except ModelError as exc:
            if request.fallback_option is None or exc.name not in (
                "guardrail_violation",
                "refusal",
            ):
                raise
            out = {"optionID": request.fallback_option, "reasoning": "", "confidence": 0}
            fallback = True
        else:
            if turn is not None:
                out = request.result(turn)
                usage, records = turn.usage, turn.records
            fallback = False
    out["toolCalls"] = [encode_record(r) for r in records]
    out["usage"] = encode_usage(usage)
    out["isFallback"] = fallback
    if warnings:
        out["warnings"] = warnings
    return out


def decide(req: Request) -> Result | Deferred:
    state: BridgeState = req.state
    p = Params(req.params)
    warnings = p.unknown(DECIDE_KEYS)
    model, _ = state.config.models.resolve(p.get("model"), use=(req.method, req.id))
    request, model, tool_warnings = _parse(state, p, p, model)
    warnings += tool_warnings
    driver = TurnDriver(
        req.conn,
        {},
        req.id,
        stream=False,
        default_timeout=request.tool_timeout,
        cancel_reason=DECISION_CANCEL_REASON,
    )
    return Deferred(lambda: _decide(request, model, driver, warnings))


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
    model, _ = state.config.models.resolve(p.get("model"), use=(req.method, req.id))
    parsed = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise InvalidParams(f"'requests[{i}]' must be an object.")
        ip = Params(item, f"requests[{i}]")
        request, _, item_warnings = _parse(state, ip, p, model)
        driver = TurnDriver(
            req.conn,
            {"index": i},
            req.id,
            stream=False,
            default_timeout=request.tool_timeout,
            cancel_reason=DECISION_CANCEL_REASON,
        )
        warnings += ip.unknown(DECISION_KEYS) + [f"requests[{i}]: {w}" for w in item_warnings]
        parsed.append((request, model, driver, []))

    async def work() -> dict[str, Any]:
        results: list[Any] = [None] * len(parsed)
        indices = iter(range(len(parsed)))

        async def worker() -> None:  # a few workers take the decisions in order: no task waits
            for i in indices:
                request, model, driver, item_warnings = parsed[i]
                try:
                    results[i] = await _decide(request, model, driver, item_warnings)
                except Exception as exc:  # one failed decision must not affect the others
                    results[i] = {"error": to_wire_error(exc)}

        async with anyio.create_task_group() as tg:
            for _ in range(workers):
                tg.start_soon(worker)
        out: dict[str, Any] = {"results": results}
        if warnings:
            out["warnings"] = warnings
        return out

    return Deferred(work)


def register(registry: Registry) -> None:
    registry.register("decision/decide", decide)
    registry.register("decision/decideMany", decide_many)

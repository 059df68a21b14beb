"""Wire shapes of ``decision/*`` results (§8), keys in the reference's order."""

from __future__ import annotations

from typing import Any

from oamd.bridge.encode import encode_record, encode_usage
from oamd.bridge.wire import shape
from oamd.game.decision.decide import Decision

__all__ = ["encode_decision", "encode_many"]


@shape("result", "decision/decide")
def encode_decision(decision: Decision, warnings: list[str]) -> dict[str, Any]:
    """``{"optionID", "reasoning", "confidence", "toolCalls", "usage", "isFallback",
    "warnings"?}`` — ``warnings`` only when non-empty."""
    choice = decision.choice
    out: dict[str, Any] = {
        "optionID": choice.option_id,
        "reasoning": choice.reasoning,
        "confidence": choice.confidence,
        "toolCalls": [encode_record(r) for r in decision.records],
        "usage": encode_usage(decision.usage),
        "isFallback": decision.is_fallback,
    }
    if warnings:
        out["warnings"] = warnings
    return out


@shape("result", "decision/decideMany")
def encode_many(outcomes: list[Decision | dict[str, Any]], warnings: list[str]) -> dict[str, Any]:
    """``{"results": [<Decision> | {"error": <ErrorObject>}…], "warnings"?}`` in request order;
    a failed decision comes as its wire error."""
    results = [
        outcome if isinstance(outcome, dict) else encode_decision(outcome, [])
        for outcome in outcomes
    ]
    out: dict[str, Any] = {"results": results}
    if warnings:
        out["warnings"] = warnings
    return out

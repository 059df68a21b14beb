"""Turns scenario results into the eval's numbers: right-action rate, first-try envelope
validity, repairs, structured validity, and latency per step kind (mean, p90); as a text table
and as JSON."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from evals.runner import LineResult, ScenarioResult

__all__ = ["summarise", "table"]


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def _latency(lines: list[LineResult]) -> dict[str, dict[str, float]]:
    by_kind: dict[str, list[float]] = {}
    for line in lines:
        for kind, seconds in line.step_seconds.items():
            by_kind.setdefault(kind, []).extend(seconds)
        by_kind.setdefault("turn", []).append(line.turn_seconds)
    return {
        kind: {"mean": sum(v) / len(v), "p90": _p90(v), "count": len(v)}
        for kind, v in sorted(by_kind.items())
        if v
    }


def _scores(lines: list[LineResult]) -> dict[str, Any]:
    judged = [line for line in lines if line.right is not None]
    repairs = sum(line.repairs for line in lines)
    first_tries = sum(line.envelope_steps for line in lines) - repairs
    return {
        "lines": len(lines),
        "right": sum(bool(line.right) for line in judged),
        "judged": len(judged),
        "valid": sum(line.valid for line in lines),
        "validFirstTry": sum(line.valid and not line.structured_repairs for line in lines),
        "envelopesFirstTry": first_tries - repairs,
        "envelopes": first_tries,
        "repairs": repairs + sum(line.structured_repairs for line in lines),
        "errors": sum(line.error is not None for line in lines),
        "latency": _latency(lines),
    }


def summarise(model: str, results: list[ScenarioResult]) -> dict[str, Any]:
    """The JSON report: totals, one entry per scenario, and every line."""
    every = [line for result in results for line in result.lines]
    scenarios: dict[str, Any] = {}
    for result in results:
        merged = scenarios.setdefault(result.name, [])
        merged.extend(result.lines)
    return {
        "model": model,
        "total": _scores(every),
        "scenarios": {name: _scores(lines) for name, lines in scenarios.items()},
        "lines": [asdict(line) for line in every],
    }


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b}" if b else "-"


def table(summary: dict[str, Any]) -> str:
    """A fixed-width table: one row per scenario and a total."""
    header = (
        f"{'scenario':<16}{'right':>8}{'valid':>8}{'env 1st':>9}{'repairs':>8}{'errors':>7}"
        f"{'decide s':>10}{'p90':>7}{'reply s':>9}{'p90':>7}{'turn s':>8}{'p90':>7}"
    )
    rows = [f"model: {summary['model']}", header, "-" * len(header)]

    def row(name: str, s: dict[str, Any]) -> str:
        latency = s["latency"]
        decide = latency.get("decide") or latency.get("toolArguments") or {}
        reply = latency.get("respond") or latency.get("structured") or latency.get("answer") or {}
        turn = latency.get("turn") or {}

        def seconds(entry: dict[str, float], key: str, width: int) -> str:
            return f"{entry[key]:>{width}.2f}" if entry else f"{'-':>{width}}"

        return (
            f"{name:<16}{_ratio(s['right'], s['judged']):>8}{_ratio(s['valid'], s['lines']):>8}"
            f"{_ratio(s['envelopesFirstTry'], s['envelopes']):>9}{s['repairs']:>8}{s['errors']:>7}"
            f"{seconds(decide, 'mean', 10)}{seconds(decide, 'p90', 7)}"
            f"{seconds(reply, 'mean', 9)}{seconds(reply, 'p90', 7)}"
            f"{seconds(turn, 'mean', 8)}{seconds(turn, 'p90', 7)}"
        )

    for name, scores in summary["scenarios"].items():
        rows.append(row(name, scores))
    rows.append("-" * len(header))
    rows.append(row("total", summary["total"]))
    return "\n".join(rows)

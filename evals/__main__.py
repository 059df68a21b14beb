"""``python -m evals --model SPEC [--runs N] [--only a,b] [--json PATH]``: plays the scenarios
and prints the table (and writes the JSON report), then the NPC conversation of
``evals.npc_chat`` with the share of its lines a player would accept (``--only npc`` for just
that)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import anyio
import orjson

from evals.npc import NpcLine, npc_table, run_npc
from evals.report import summarise, table
from evals.runner import ScenarioResult, StepClock, run_scenario, serve_model
from evals.scenarios import SCENARIOS
from oamd.cli import model_for

MAX_RUNS = 10


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m evals", description=__doc__)
    parser.add_argument("--model", default="llamacpp", help="a --model spec (default: llamacpp)")
    parser.add_argument("--runs", type=int, default=1, help=f"repetitions, 1-{MAX_RUNS}")
    names = ", ".join([*(s.name for s in SCENARIOS), "npc"])
    parser.add_argument("--only", default="", help=f"comma-separated scenarios of: {names}")
    parser.add_argument("--json", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= MAX_RUNS:
        parser.error(f"--runs must be 1-{MAX_RUNS}")
    return args


async def _run(spec: str, runs: int, only: set[str]) -> tuple[list[ScenarioResult], list[NpcLine]]:
    model = model_for(spec)  # names and faster copies resolved as oamd's command line does
    availability = await model.availability()
    if not availability.available:
        raise SystemExit(f"evals: the model is unavailable: {availability.detail}")
    results: list[ScenarioResult] = []
    npc_lines: list[NpcLine] = []
    clock = StepClock()
    try:
        async with serve_model(model, clock) as client:
            for run in range(runs):
                for scenario in SCENARIOS:
                    if only and scenario.name not in only:
                        continue
                    print(f"run {run + 1}: {scenario.name}…", file=sys.stderr, flush=True)
                    results.append(await run_scenario(client, clock, scenario, run))
                if not only or "npc" in only:
                    print(f"run {run + 1}: npc…", file=sys.stderr, flush=True)
                    npc_lines += await run_npc(client, run)
    finally:
        await model.aclose()
    return results, npc_lines


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    try:
        results, npc_lines = anyio.run(_run, args.model, args.runs, only)
    except ValueError as exc:
        raise SystemExit(f"evals: {exc}") from exc
    summary = summarise(args.model, results)
    if results:
        print(table(summary))
    if npc_lines:
        summary["npc"] = {
            "lines": len(npc_lines),
            "sane": sum(not line.problems for line in npc_lines),
            "conversation": [vars(line) for line in npc_lines],
        }
        print(npc_table(npc_lines))
    if args.json is not None:
        args.json.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

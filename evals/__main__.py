"""``python -m evals --model SPEC [--runs N] [--only a,b] [--json PATH]``: plays the scenarios
and prints the table (and writes the JSON report), then the NPC conversation of
``evals.npc_chat`` with the share of its lines a player would accept (``--only npc`` for just
that), then the grounded set of ``evals.grounded_set`` against the bare-chat floor (``--only
grounded``). The sets that judge it are played only when named: the independent one
(``evals.grounded_set_independent``, ``--only grounded-independent``) and the fresh one, the judge
now (``evals.grounded_set_fresh``, ``--only grounded-fresh``)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from evals.floor_chat import FloorChat
from evals.grounded import (
    SETS,
    GroundedLine,
    grounded_report,
    grounded_table,
    idle_waiter,
    run_grounded,
)
from evals.grounded_set import GROUNDED, GroundedSet
from evals.npc import NpcLine, npc_table, run_npc
from evals.report import summarise, table
from evals.runner import ScenarioResult, StepClock, run_scenario, serve_model
from evals.scenarios import SCENARIOS
from oamd.backends.llamacpp.model import LlamaCppModel, packaged_model_path
from oamd.cli import model_for

MAX_RUNS = 10


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m evals", description=__doc__)
    parser.add_argument("--model", default="llamacpp", help="a --model spec (default: llamacpp)")
    parser.add_argument("--runs", type=int, default=1, help=f"repetitions, 1-{MAX_RUNS}")
    names = ", ".join([*(s.name for s in SCENARIOS), "npc", *SETS])
    parser.add_argument("--only", default="", help=f"comma-separated scenarios of: {names}")
    parser.add_argument("--json", type=Path, help="also write the JSON report here")
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="play the grounded sets without their bare-chat floor",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= MAX_RUNS:
        parser.error(f"--runs must be 1-{MAX_RUNS}")
    return args


@dataclass
class Played:
    results: list[ScenarioResult] = field(default_factory=list)
    npc_lines: list[NpcLine] = field(default_factory=list)
    grounded: dict[str, list[list[GroundedLine]]] = field(default_factory=dict)
    """Each grounded set's lines by its name, one list per run."""
    floor_file: Path | None = None
    """The GGUF file the floor plays (``None``: the model is no embedded llama.cpp file)."""


def _progress(what: str) -> None:
    print(f"  {what}…", file=sys.stderr, flush=True)


def grounded_sets(only: set[str]) -> list[GroundedSet]:
    """The grounded sets ``--only`` plays: those it names; without it, the first set alone (the
    independent and fresh ones judge a technique, so they are played when asked for, not in every
    eval)."""
    return [s for s in SETS.values() if s.name in only or (not only and s is GROUNDED)]


def _floor_file(spec: str, model: Any) -> Path | None:
    """The file the daemon's llama.cpp model runs, for the floor to run too."""
    if not isinstance(model, LlamaCppModel):
        return None
    if model.path is not None:
        return model.path
    return packaged_model_path() if spec.strip().partition("?")[0] == "llamacpp" else None


async def _run(spec: str, runs: int, only: set[str]) -> Played:
    model = model_for(spec)  # names and faster copies resolved as oamd's command line does
    availability = await model.availability()
    if not availability.available:
        raise SystemExit(f"evals: the model is unavailable: {availability.detail}")
    played = Played(floor_file=_floor_file(spec, model))
    clock = StepClock()
    try:
        async with serve_model(model, clock) as client:
            for run in range(runs):
                for scenario in SCENARIOS:
                    if only and scenario.name not in only:
                        continue
                    print(f"run {run + 1}: {scenario.name}…", file=sys.stderr, flush=True)
                    played.results.append(await run_scenario(client, clock, scenario, run))
                if not only or "npc" in only:
                    print(f"run {run + 1}: npc…", file=sys.stderr, flush=True)
                    played.npc_lines += await run_npc(client, run)
                for grounded in grounded_sets(only):
                    print(f"run {run + 1}: {grounded.name}…", file=sys.stderr, flush=True)
                    lines = await run_grounded(
                        client,
                        run,
                        grounded=grounded,
                        settle=idle_waiter(model),
                        progress=_progress,
                    )
                    played.grounded.setdefault(grounded.name, []).append(lines)
    finally:
        await model.aclose()
    return played


def _floor(path: Path, runs: int, names: list[str]) -> dict[str, list[GroundedLine]]:
    """The grounded sets ``names`` on the bare chat, once per run (after the daemon's model is
    closed; the file loaded once for them all): each set's lines by its name."""
    floor = FloorChat(path)
    try:
        played: dict[str, list[GroundedLine]] = {name: [] for name in names}
        for run in range(runs):
            for name in names:
                print(f"run {run + 1}: {name} floor…", file=sys.stderr, flush=True)
                played[name] += floor.play(_progress, SETS[name])
        return played
    finally:
        floor.close()


def grounded_reports(played: Played, runs: int, floor: bool = True) -> dict[str, dict[str, Any]]:
    """The report of each grounded set played, by its name (the JSON report's key), with the
    floor's lines beside oamd's when it could be played."""
    ours = {
        name: [x for lines in by_run for x in lines] for name, by_run in played.grounded.items()
    }
    file = played.floor_file if floor else None
    note = "the model is not an embedded llama.cpp file" if floor else "not played (--no-floor)"
    floors = _floor(file, runs, list(ours)) if file is not None and ours else None
    reports = {}
    for name, lines in ours.items():
        if floors is None:
            reports[name] = grounded_report(lines, None, note, grounded=SETS[name])
        else:
            reports[name] = grounded_report(lines, floors[name], grounded=SETS[name])
            reports[name]["floor"]["file"] = str(file)
    return reports


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    try:
        played = anyio.run(_run, args.model, args.runs, only)
    except ValueError as exc:
        raise SystemExit(f"evals: {exc}") from exc
    results, npc_lines = played.results, played.npc_lines
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
    for name, report in grounded_reports(played, args.runs, floor=not args.no_floor).items():
        summary[name] = report
        print(grounded_table(report, grounded=SETS[name]))
    if args.json is not None:
        args.json.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

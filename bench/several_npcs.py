"""Several NPCs on one embedded model (opt-in, part of ``make bench-model``): what a switch between
characters and turns sent together cost, against one NPC talked to alone in the same run.

Four NPCs of ``evals/grounded_set.py`` (persona with knowledge, client tools, world paths, memory)
on ``oamd stdio --model llamacpp``, each spoken to once first (not counted). Then:

- one NPC at a time: three lines to A, then three to B, … (twelve turns) — the floor;
- four in turn: the same lines to a second group of the same four, A, B, C, D, A, …;
- four ``npc/talk`` at once (the second group) against the first group one after another;
- four ``npc/bark`` at once against four one after another, likewise.

Each model spec given is played in its own daemon: the default plays ``llamacpp?slots=0`` (one
KV sequence: every switch re-evaluates the NPC's prompt) and ``llamacpp`` (conversations kept
warm, ``oamd.backends.llamacpp.kv_slots``), so the ratios of both are measured in one run.

    .venv/bin/python bench/several_npcs.py [--model SPEC ...] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from time import perf_counter
from typing import Any

from _harness import OAMD_INITIALIZE, PYTHON, REPO_ROOT, ServerSpec, spawn, write_json
from _turns import TurnClient

sys.path.insert(0, REPO_ROOT)

from evals.grounded import create_params, grounded_tool_output
from evals.grounded_set import GARRICK, GROUNDED, HILDE, WENNA, YSOLDE

TURN_TIMEOUT_S = 180.0
CHARACTERS = (HILDE, GARRICK, YSOLDE, WENNA)
LINES = (
    "Good day to you.",
    "How is business these days?",
    "What can you tell me about yourself?",
    "What will the weather be like tomorrow?",
    "Anything new in town?",
    "Thank you, that helps.",
)
"""Lines any of the four can answer; the same ones to each, so the phases do the same work."""


def _answer() -> Any:
    """The engine's side of the NPCs' tools (the client is not told which NPC calls: the first
    of the four that has the tool answers)."""

    def answer(call: dict[str, Any]) -> Any:
        for character in CHARACTERS:
            found = grounded_tool_output(GROUNDED.npc_id(character, 1), call)
            if found is not None and not found.get("isError"):
                return found["output"]
        return "Nothing found."

    return answer


def play(model: str) -> dict[str, Any]:
    spec = ServerSpec("oamd", (PYTHON, "-m", "oamd", "stdio", "--model", model), (OAMD_INITIALIZE,))
    # two groups of the same four characters: one talked to NPC by NPC, the other in turn, so
    # both do the same work (same lines, same history) and only the order differs
    grouped = [GROUNDED.npc_id(c, 1) for c in CHARACTERS]
    rotated = [GROUNDED.npc_id(c, 2) for c in CHARACTERS]
    figures: dict[str, Any] = {"model": model}
    with spawn(spec) as server:
        server.handshake()
        client = TurnClient(server, answer=_answer(), keep_errors=True)
        client.call("world/create", {"world": "bench"})
        for path, value in GROUNDED.world.items():
            client.call("world/set", {"world": "bench", "path": path, "value": value})
        for run in (1, 2):
            for character in CHARACTERS:
                client.call("npc/create", create_params(character, run, "bench"))

        def together(method: str, params: list[dict[str, Any]]) -> float:
            started = perf_counter()
            ids = [client.send(method, p) for p in params]
            for msg_id in ids:
                reply = client.wait(msg_id, TURN_TIMEOUT_S)
                if "error" in reply:
                    raise SystemExit(f"{method} failed: {reply['error']}")
            return perf_counter() - started

        def talk(npc: str, line: str) -> float:
            return together("npc/talk", [{"npc": npc, "line": line}])

        for npc in [*grouped, *rotated]:  # each one's first line (its prompt evaluated once)
            talk(npc, LINES[0])
        one_by_one = [talk(npc, line) for npc in grouped for line in LINES[1:4]]
        in_turn = [talk(npc, line) for line in LINES[1:4] for npc in rotated]
        figures["warm_p50"] = statistics.median(one_by_one)
        figures["in_turn_p50"] = statistics.median(in_turn)
        figures["talk_sequential"] = sum(talk(npc, LINES[4]) for npc in grouped)
        figures["talk_together"] = together(
            "npc/talk", [{"npc": n, "line": LINES[4]} for n in rotated]
        )
        situation = "The player walks into the square."
        figures["bark_sequential"] = sum(
            together("npc/bark", [{"npc": npc, "situation": situation}]) for npc in grouped
        )
        figures["bark_together"] = together(
            "npc/bark", [{"npc": npc, "situation": situation} for npc in rotated]
        )
    return figures


def report(rows: list[dict[str, Any]]) -> str:
    out = [
        "several NPCs on one model (s; ratio to its floor in the same daemon)",
        f"{'model':<28} {'one at a time':>13} {'in turn p50':>16} {'4 talks at once':>22} "
        f"{'4 barks at once':>22}",
    ]
    for f in rows:
        out.append(
            f"{f['model']:<28} {f['warm_p50']:>13.2f} "
            f"{f['in_turn_p50']:>8.2f} (×{f['in_turn_p50'] / f['warm_p50']:.2f}) "
            f"{f['talk_together']:>7.1f} / {f['talk_sequential']:>5.1f} "
            f"(×{f['talk_together'] / f['talk_sequential']:.2f}) "
            f"{f['bark_together']:>7.1f} / {f['bark_sequential']:>5.1f} "
            f"(×{f['bark_together'] / f['bark_sequential']:.2f})"
        )
    out.append("at once: together / one after another (targets: in turn ≤ ×1.1, at once ≤ ×0.5)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    rows = [play(model) for model in args.model or ["llamacpp?slots=0", "llamacpp"]]
    if args.json:
        write_json(rows)
    else:
        print(report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

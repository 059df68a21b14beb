"""Several NPCs on one embedded model (opt-in, part of ``make bench-model``): what a switch between
characters and turns sent together cost, against one NPC talked to alone in the same run.

Four NPCs of ``evals/grounded_set.py`` (persona with knowledge, client tools, world paths, memory)
on ``oamd stdio --model llamacpp``, each spoken to once first (not counted). Then:

- one NPC at a time: three lines to A, then three to B, … (twelve turns) — the floor;
- four in turn: the same lines to a second group of the same four, A, B, C, D, A, …;
- four ``npc/talk`` at once (the second group) against the first group one after another;
- four ``npc/bark`` at once against four one after another, likewise;
- a ``decision/decideMany`` of 16 guards against 16 ``decision/decide`` one after another;
- a freshly created NPC's first line after 2 s of idle, against a warm line;
- a game saved after three lines and started again (``npc/restore``): its first line with the
  ``kvcache`` folder and without, against the last line before the save.

Each model spec given is played in its own daemon: the default plays ``llamacpp?slots=0`` (one
KV sequence: every switch re-evaluates the NPC's prompt) and ``llamacpp`` (conversations kept
warm, ``oamd.backends.llamacpp.kv_slots``), so the ratios of both are measured in one run.

    .venv/bin/python bench/several_npcs.py [--model SPEC ...] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from time import perf_counter, sleep
from typing import Any

from _harness import OAMD_INITIALIZE, PYTHON, REPO_ROOT, ServerSpec, spawn, write_json
from _turns import TurnClient

sys.path.insert(0, REPO_ROOT)

from evals.grounded import create_params, grounded_tool_output
from evals.grounded_set import GARRICK, GROUNDED, HILDE, WENNA, YSOLDE
from evals.npc_chat import DECISIONS

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


ACTORS = ("Brom", "Edda", "Falk", "Greta", "Hugo", "Ilse", "Jorg", "Katja")
IDLE_S = 2.0
"""How long a freshly created NPC waits before its first line (the daemon idle meanwhile)."""


def decisions(count: int) -> list[dict[str, Any]]:
    """``count`` guard decisions: the eval's situations, each faced by guards of other names."""
    out = []
    for i in range(count):
        request = dict(DECISIONS[i % len(DECISIONS)])
        actor = {**request["actor"], "name": ACTORS[i % len(ACTORS)]}
        out.append({**request, "actor": actor})
    return out


def new_world(client: TurnClient) -> None:
    """The grounded set's town as the world ``bench``, which the NPCs read."""
    client.call("world/create", {"world": "bench"})
    for path, value in GROUNDED.world.items():
        client.call("world/set", {"world": "bench", "path": path, "value": value})


def daemon_spec(model: str, *extra: str) -> ServerSpec:
    argv = (PYTHON, "-m", "oamd", "stdio", "--model", model, *extra)
    return ServerSpec("oamd", argv, (OAMD_INITIALIZE,))


def play(model: str) -> dict[str, Any]:
    spec = daemon_spec(model)
    # two groups of the same four characters: one talked to NPC by NPC, the other in turn, so
    # both do the same work (same lines, same history) and only the order differs
    grouped = [GROUNDED.npc_id(c, 1) for c in CHARACTERS]
    rotated = [GROUNDED.npc_id(c, 2) for c in CHARACTERS]
    figures: dict[str, Any] = {"model": model}
    with spawn(spec) as server:
        server.handshake()
        client = TurnClient(server, answer=_answer(), keep_errors=True)
        new_world(client)
        for run in (1, 2):
            for character in CHARACTERS:
                client.call("npc/create", create_params(character, run, "bench"))

        refused = {"count": 0}

        def together(method: str, params: list[dict[str, Any]]) -> float:
            started = perf_counter()
            ids = [client.send(method, p) for p in params]
            for msg_id in ids:
                reply = client.wait(msg_id, TURN_TIMEOUT_S)
                error = reply.get("error")
                # a bark the line guard refused three times fails, as the protocol lets it (the
                # game skips it): counted, not fatal
                if error and method == "npc/bark" and error["data"]["code"] == "generation_failed":
                    refused["count"] += 1
                elif error:
                    raise SystemExit(f"{method} failed: {error}")
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
        asked = decisions(16)
        figures["decide_sequential"] = sum(together("decision/decide", [d]) for d in asked)
        figures["decide_many"] = together(
            "decision/decideMany", [{"requests": decisions(16)[::-1], "maxConcurrency": 16}]
        )
        client.call("npc/create", create_params(HILDE, 3, "bench"))
        sleep(IDLE_S)
        figures["fresh_first"] = talk(GROUNDED.npc_id(HILDE, 3), LINES[1])
        figures["barks_refused"] = refused["count"]
    return figures


def restarted(model: str, folder: str) -> dict[str, Any]:
    """A game saved after three lines to one NPC and started again: the first line after the
    restore, with the cache folder and without, against the third line before the save."""
    npc = GROUNDED.npc_id(HILDE, 1)

    def session(spec: str, saved: dict[str, Any] | None) -> tuple[list[float], dict[str, Any]]:
        with spawn(daemon_spec(spec)) as server:
            server.handshake()
            client = TurnClient(server, answer=_answer(), keep_errors=True)
            new_world(client)
            if saved is None:
                client.call("npc/create", create_params(HILDE, 1, "bench"))
                lines = LINES[:3]
            else:
                client.call("npc/restore", {"state": saved, "world": "bench"})
                lines = LINES[3:4]
            times = []
            for line in lines:
                started = perf_counter()
                client.call("npc/talk", {"npc": npc, "line": line})
                times.append(perf_counter() - started)
            state = client.call("npc/state", {"npc": npc})["state"]
        return times, state

    cached = f"{model}{'&' if '?' in model else '?'}kvcache={folder}"
    before, saved = session(cached, None)
    with_folder, _ = session(cached, saved)
    without, _ = session(model, saved)
    return {
        "model": model,
        "warm": before[-1],
        "restored_with_cache": with_folder[0],
        "restored_without": without[0],
    }


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
    out.append(
        "barks the line guard refused (failed, as the protocol lets a bark): "
        + ", ".join(str(f.get("barks_refused", 0)) for f in rows)
    )
    out.append(f"{'model':<28} {'16 decideMany / 16 decide':>27} {'fresh NPC first line':>24}")
    for f in rows:
        out.append(
            f"{f['model']:<28} {f['decide_many']:>11.1f} / {f['decide_sequential']:>5.1f} "
            f"(×{f['decide_many'] / f['decide_sequential']:.2f}) "
            f"{f['fresh_first']:>14.2f} (×{f['fresh_first'] / f['warm_p50']:.2f})"
        )
    out.append(
        "targets: decideMany ≤ ×0.3; a fresh NPC's first line after "
        f"{IDLE_S:.0f} s idle ≤ ×1.2 a warm turn"
    )
    return "\n".join(out)


def restart_report(f: dict[str, Any]) -> str:
    return (
        f"restarted from a save ({f['model']}): first line {f['restored_with_cache']:.2f} s with "
        f"kvcache (×{f['restored_with_cache'] / f['warm']:.2f} the last warm line), "
        f"{f['restored_without']:.2f} s without (×{f['restored_without'] / f['warm']:.2f}); "
        "target ≤ ×1.2"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    models = args.model or ["llamacpp?slots=0", "llamacpp"]
    rows = [play(model) for model in models]
    with tempfile.TemporaryDirectory() as folder:
        restart = restarted(models[-1], folder)
    if args.json:
        write_json({"rows": rows, "restart": restart})
    else:
        print(report(rows))
        print(restart_report(restart))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

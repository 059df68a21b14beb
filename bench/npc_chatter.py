"""NPC chatter at length on one embedded model (opt-in, ``make bench-chatter``): many NPCs spoken
to in turn on fewer KV slots, the daemon's resident memory sampled as it goes.

``--npcs`` NPCs (the four characters of ``evals/grounded_set.py`` under several ids) on
``oamd stdio --model llamacpp?slots=N``; each round gives every NPC one ``npc/bark`` and every
fourth NPC one ``npc/talk`` (so histories grow, and so do the states kept of them). RSS and the
turn times are printed per round: with more NPCs than slots, every switch parks one state and drops
the least recently used, so memory must level off at what the slots hold, whatever the length.

    .venv/bin/python bench/npc_chatter.py [--npcs 32] [--slots 8] [--rounds 12] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from time import perf_counter
from typing import Any

from _harness import REPO_ROOT, log_records, spawn, write_json
from _turns import TurnClient, rss_kib
from several_npcs import CHARACTERS, LINES, _answer, daemon_spec, new_world

sys.path.insert(0, REPO_ROOT)

from evals.grounded import create_params

TURN_TIMEOUT_S = 180.0
"""A turn on a cold NPC re-prefills its whole prompt behind whatever else is queued."""


def held_mib(log: bytes, last: float) -> float:
    """What the parked KV states took after the last ``kv_state_parked`` record in ``log``
    (the daemon's debug records), or ``last`` when none came."""
    for record in log_records(log, "kv_state_parked"):
        last = record.get("held_bytes", 0) / 2**20
    return last


def chatter(npcs: int, slots: int, rounds: int) -> list[dict[str, Any]]:
    model = f"llamacpp?slots={slots}"
    ids = []
    curve = []
    held, offset = 0.0, 0
    with spawn(daemon_spec(model, "--log-level", "debug")) as server:
        server.handshake()
        client = TurnClient(server, answer=_answer(), keep_errors=True)
        new_world(client)
        for i in range(npcs):
            character = CHARACTERS[i % len(CHARACTERS)]
            params = create_params(character, 10 + i, "bench")
            client.wait(client.send("npc/create", params), TURN_TIMEOUT_S)
            ids.append(params["npc"])
        for round_ in range(rounds):
            times, failed = [], 0
            for i, npc in enumerate(ids):
                started = perf_counter()
                bark = {"npc": npc, "situation": f"Hour {round_ + 8} strikes."}
                # a bark the line guard refuses fails, as the protocol lets it: counted
                failed += "error" in client.wait(client.send("npc/bark", bark), TURN_TIMEOUT_S)
                if i % 4 == round_ % 4:
                    talk = {"npc": npc, "line": LINES[round_ % len(LINES)]}
                    failed += "error" in client.wait(client.send("npc/talk", talk), TURN_TIMEOUT_S)
                times.append(perf_counter() - started)
            log, offset = server.stderr_from(offset)
            held = held_mib(log, held)
            curve.append(
                {
                    "round": round_ + 1,
                    "rss_mib": rss_kib(server.proc.pid) / 1024,
                    "held_mib": held,
                    "p50_s": statistics.median(times),
                    "round_s": sum(times),
                    "failed": failed,
                }
            )
            print(
                f"round {round_ + 1:>3}: RSS {curve[-1]['rss_mib']:7.1f} MiB "
                f"(parked KV states {held:6.1f} MiB), "
                f"p50 {curve[-1]['p50_s']:.2f} s, round {curve[-1]['round_s']:.1f} s, "
                f"{failed} failed",
                file=sys.stderr,
                flush=True,
            )
    return curve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--npcs", type=int, default=32)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    curve = chatter(args.npcs, args.slots, args.rounds)
    if args.json:
        write_json(curve)
        return 0
    first, last = curve[0], curve[-1]
    peak = max(point["rss_mib"] for point in curve)
    print(
        f"{args.npcs} NPCs on {args.slots} slots, {args.rounds} rounds: RSS "
        f"{first['rss_mib']:.0f} MiB after round 1, {last['rss_mib']:.0f} MiB after the last "
        f"(peak {peak:.0f}); turn p50 {first['p50_s']:.2f} s first round, {last['p50_s']:.2f} s last"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

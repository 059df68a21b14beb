"""Cold start against the bare-interpreter floor: spawn to first response, runs interleaved.

The floor is ``bench/echo_server.py`` (the interpreter, orjson, one line read and answered); oamd
is ``python -m oamd stdio`` answering ``initialize``, and again until its first ``session/create``
is answered (the session code loads with the first session call). Each round spawns every
variant once, so machine noise hits all alike; medians are reported with their ratio to the
floor.

    .venv/bin/python bench/cold_start.py [--runs 21]
"""

from __future__ import annotations

import argparse
import sys

from _harness import ECHO, OAMD, first_reply_ms, interleaved_medians, write_json

SESSION_CREATE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "session/create",
    "params": {"model": {"type": "scripted", "steps": [{"text": "Hi."}]}},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    variants = {
        "floor (echo)": lambda: first_reply_ms(ECHO),
        "oamd initialize": lambda: first_reply_ms(OAMD),
        "oamd + session/create": lambda: first_reply_ms(OAMD, SESSION_CREATE),
    }
    medians = interleaved_medians(variants, args.runs)
    floor = medians["floor (echo)"]
    report = {name: {"median_ms": m, "vs_floor": m / floor} for name, m in medians.items()}
    if args.json:
        write_json(report)
        return 0
    lines = [f"cold start: spawn -> first reply, median of {args.runs} interleaved runs"]
    lines += [
        f"  {name:<24}{r['median_ms']:>8.1f} ms  {r['vs_floor']:>5.2f}x"
        for name, r in report.items()
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

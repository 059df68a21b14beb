"""Cold start of the self-contained executable: one folder against one file against ``python -m
oamd``, spawn to the ``initialize`` reply, runs interleaved.

One-folder is ``dist/oamd/oamd`` (``make dist``), one-file ``dist/onefile/oamd`` (``make
dist-onefile``: it unpacks itself into a temporary folder on every start). Each round spawns every
variant once, so machine noise hits all alike; medians are reported with their ratio to ``python -m
oamd stdio`` (the source install). packaging/README.md quotes the figures.

    .venv/bin/python bench/dist_cold_start.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import sys

from _harness import (
    OAMD,
    OAMD_INITIALIZE,
    REPO_ROOT,
    ServerSpec,
    first_reply_ms,
    interleaved_medians,
    write_json,
)

ONE_FOLDER = os.path.join(REPO_ROOT, "dist", "oamd", "oamd")
ONE_FILE = os.path.join(REPO_ROOT, "dist", "onefile", "oamd")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    missing = [path for path in (ONE_FOLDER, ONE_FILE) if not os.access(path, os.X_OK)]
    if missing:
        sys.stderr.write(f"not built: {', '.join(missing)} (make dist dist-onefile)\n")
        return 1
    specs = {
        "python -m oamd": OAMD,
        "one folder": ServerSpec("one folder", (ONE_FOLDER, "stdio"), (OAMD_INITIALIZE,)),
        "one file": ServerSpec("one file", (ONE_FILE, "stdio"), (OAMD_INITIALIZE,)),
    }
    medians = interleaved_medians(
        {name: lambda spec=spec: first_reply_ms(spec) for name, spec in specs.items()}, args.runs
    )
    base = medians["python -m oamd"]
    report = {name: {"median_ms": m, "vs_python": m / base} for name, m in medians.items()}
    if args.json:
        write_json(report)
        return 0
    lines = [f"cold start (initialize answered): median of {args.runs} interleaved runs"]
    lines += [
        f"  {name:<16}{r['median_ms']:>8.1f} ms  {r['vs_python']:>5.2f}x"
        for name, r in report.items()
    ]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

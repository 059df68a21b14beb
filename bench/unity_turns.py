"""The Unity package over a long session: one session, many turns, each calling a client tool, driven
by ``clients/unity/smoke/Turns.cs`` (the package's Runtime compiled with Mono's ``mcs``, run with
``mono``) against the shipped executable ``dist/oamd/oamd`` over stdio, the client pumping its
callbacks on the main thread as a game's Update loop would.

Prints the cost per turn and the client's managed heap (after a collection) per bucket of turns, and
the last bucket's cost over the first: a flat curve means a turn's cost does not grow with the turns
before it, on either side of the pipe.

    .venv/bin/python bench/unity_turns.py [--turns 5000] [--bucket 500] [--json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from _harness import REPO_ROOT, write_json

EXECUTABLE = os.path.join(REPO_ROOT, "dist", "oamd", "oamd")
UNITY = os.path.join(REPO_ROOT, "clients", "unity")
RUNTIME = os.path.join(UNITY, "com.oamd.client", "Runtime")


def runtime_sources() -> list[str]:
    return sorted(
        os.path.join(folder, name)
        for folder, _, names in os.walk(RUNTIME)
        for name in names
        if name.endswith(".cs")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--bucket", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    mcs, mono = shutil.which("mcs"), shutil.which("mono")
    if mcs is None or mono is None:
        sys.stderr.write("Mono is missing: apt-get install mono-mcs mono-runtime\n")
        return 1
    if not os.access(EXECUTABLE, os.X_OK):
        sys.stderr.write(f"not built: {EXECUTABLE} (make dist)\n")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "turns.exe")
        driver = os.path.join(UNITY, "smoke", "Turns.cs")
        subprocess.run([mcs, "-warnaserror", f"-out:{exe}", *runtime_sources(), driver], check=True)
        done = subprocess.run(
            [mono, exe, EXECUTABLE, str(args.turns), str(args.bucket)],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        return 1
    buckets = []
    for line in done.stdout.splitlines():
        if line.startswith("bucket: "):
            span, ms, kib = line.removeprefix("bucket: ").split()
            buckets.append({"turns": span, "ms_per_turn": float(ms), "managed_kib": int(kib)})
    ratio = buckets[-1]["ms_per_turn"] / buckets[0]["ms_per_turn"]
    report = {"turns": args.turns, "buckets": buckets, "last_over_first": ratio}
    if args.json:
        write_json(report)
        return 0
    lines = [f"Unity package, one session over stdio: {args.turns} turns, one client tool each"]
    lines += ["     turns  ms/turn  managed KiB"]
    lines += [
        f"{b['turns']:>10}  {b['ms_per_turn']:>7.3f}  {b['managed_kib']:>11,}" for b in buckets
    ]
    lines.append(f"  last bucket / first: {ratio:.2f}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

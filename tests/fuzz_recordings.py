"""Hostile recordings against ``oamd replay``: real recordings, mutated, played back.

Used by ``tests/test_replay_fuzz.py`` (a small seeded run in ``make test``) and run as a script by
``make fuzz`` (seeded, reproducible; 300 files by default):

    python tests/fuzz_recordings.py [--seed N] [--files 300] [--jobs 2]

A few connections are recorded for real (``oamd stdio --record``: a decision, streamed sessions
on a scripted model, a line too long, a line that is not JSON, one that is not UTF-8). Each file
played is one of them with one mutation: cut short, a member's value swapped for another type, a
huge or negative number, deep nesting, bad base64, a NaN or 1e300 time, an oversized line declaring
a huge size. ``oamd replay`` must then exit 0, 1 or 2 (docs/RECORDING.md), 2 with one stderr line
naming the file, within ``--max-seconds``, with no traceback, under an address-space limit of
``--max-memory-mib`` (past it an allocation fails, which shows as a traceback). The script prints
the seed, the files per exit code and every violation with the mutation that caused it, and exits
1 when there is one.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OAMD = [sys.executable, "-m", "oamd"]
MAX_SECONDS = 75.0
"""A replay's bound: the waits docs/RECORDING.md states (10 s per client line whose daemon lines do
not come, 30 s at the end) and room for a slow machine."""
MAX_MEMORY_MIB = 2048
RECORD_SECONDS = 60

_SCRIPT = {
    "type": "scripted",
    "steps": [
        {"text": "Halt! Who goes there, stranger?", "chunks": 4},
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"text": "The gate is open."},
    ],
}
_GATE = {"name": "open_gate", "description": "Opens a gate.", "parameters": {"type": "object"}}


def _rpc(ident: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


CONVERSATIONS: list[list[bytes]] = [
    [
        _rpc(1, "initialize", {"protocolVersion": "1.0"}),
        _rpc(2, "decision/decide", {"situation": "Knights.", "options": ["attack", "flee"]}),
        b'{"pad":"' + b"y" * 3000 + b'"}',
        b"this is not JSON",
        b"\xff\xfe not UTF-8",
        _rpc(9, "ping"),
    ],
    [
        _rpc(1, "initialize", {"protocolVersion": "1.0"}),
        _rpc(2, "session/create", {"session": "s", "model": _SCRIPT}),
        _rpc(3, "session/respond", {"session": "s", "prompt": "Hi.", "stream": True}),
        _rpc(4, "session/transcript", {"session": "s"}),
    ],
]


def record(directory: Path) -> list[bytes]:
    """The files of ``CONVERSATIONS``, each recorded by a real ``oamd stdio --record``."""
    files = []
    for n, lines in enumerate(CONVERSATIONS):
        where = directory / f"recorded-{n}"
        subprocess.run(
            [*OAMD, "stdio", "--record", str(where), "--max-line-bytes", "2000"],
            input=b"\n".join(lines) + b"\n",
            capture_output=True,
            timeout=RECORD_SECONDS,
            check=True,
        )
        (path,) = where.glob("*.json")
        files.append(path.read_bytes())
    return files


# ---- mutations ------------------------------------------------------------------------------------

_ODD_VALUES: list[Any] = [None, True, "x", [], {}, 1e300, -1, 2**63 - 1, -(2**62), 0.5, "\u0000"]


def _places(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path into ``value`` (keys and indexes)."""
    out = [path]
    if isinstance(value, dict):
        for key, sub in value.items():
            out += _places(sub, (*path, key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            out += _places(sub, (*path, i))
    return out


def _put(document: Any, path: tuple, value: Any) -> None:
    target = document
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def _entries(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in document.get("lines", []) if isinstance(e, dict)]


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One mutation of a recording's bytes: what it did, and the file."""
    document = json.loads(data)
    kind = rng.choice(
        ["truncate", "swap", "swap", "number", "deep", "base64", "time", "oversized", "drop"]
    )
    if kind == "truncate":
        cut = rng.randrange(len(data))
        return f"cut at byte {cut}", data[:cut]
    if kind in ("swap", "number", "drop"):
        places = [p for p in _places(document) if p and p[0] not in ("format", "version")]
        place = rng.choice(places)
        if kind == "drop":
            target = document
            for part in place[:-1]:
                target = target[part]
            del target[place[-1]]
            return f"removed {list(place)}", json.dumps(document).encode()
        value = rng.choice(_ODD_VALUES if kind == "swap" else [1e300, -1e300, 2**64, -1, 10**30])
        _put(document, place, value)
        return f"{list(place)} = {value!r}", json.dumps(document).encode()
    entries = _entries(document)
    entry = rng.choice(entries)
    if kind == "deep":
        depth = rng.choice([130, 300, 1000, 5000])
        entry.pop("text", None)
        entry.pop("base64", None)
        entry["line"] = "<deep>"  # written as text: no encoder nests that deep
        text = json.dumps(document).replace('"<deep>"', "[" * depth + "]" * depth, 1)
        return f"a line {depth} deep", text.encode()
    if kind == "base64":
        entry.pop("line", None)
        entry.pop("text", None)
        entry["base64"] = rng.choice(["!!!", "YQ", "YQ==x", 7, "=" * 9])
        return f"base64 {entry['base64']!r}", json.dumps(document).encode()
    if kind == "time":
        value = rng.choice([float("nan"), float("inf"), 1e300, -5.0, "soon"])
        where = rng.choice(["at", "clientClosedAt"])
        (entry if where == "at" else document)[where] = value
        return f"{where} = {value!r}", json.dumps(document).encode()  # NaN: not JSON, so exit 2
    size = rng.choice([8 << 30, 1 << 62, 2**64, -3, 0, 1.5])
    for key in ("line", "text", "base64"):
        entry.pop(key, None)
    entry["oversized"] = size
    entry.setdefault("head", "{")
    return f"oversized = {size!r}", json.dumps(document).encode()


# ---- playing --------------------------------------------------------------------------------------


@dataclass
class Played:
    mutation: str
    exit: int | None
    seconds: float
    problem: str | None


def _bounded(memory_mib: int) -> Any:
    limit = memory_mib << 20

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def play(path: Path, mutation: str, max_seconds: float, memory_mib: int) -> Played:
    started = time.monotonic()
    try:
        ran = subprocess.run(
            [*OAMD, "replay", str(path)],
            capture_output=True,
            text=True,
            timeout=max_seconds,
            check=False,
            preexec_fn=_bounded(memory_mib),
        )
    except subprocess.TimeoutExpired:
        return Played(mutation, None, max_seconds, f"still running after {max_seconds:g} s")
    seconds = time.monotonic() - started
    problem = None
    if ran.returncode not in (0, 1, 2):
        problem = f"exit {ran.returncode}"
    elif "Traceback" in ran.stderr or "MemoryError" in ran.stderr:
        problem = "a traceback: " + ran.stderr.strip().splitlines()[-1][:300]
    elif ran.returncode == 2 and (
        ran.stdout or len(ran.stderr.splitlines()) != 1 or str(path) not in ran.stderr
    ):
        problem = f"exit 2 without one line naming the file: {ran.stderr[-300:]!r}"
    return Played(mutation, ran.returncode, seconds, problem)


def run(seed: int, files: int, jobs: int, max_seconds: float, memory_mib: int) -> list[Played]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="oamd-fuzz-recordings-") as where:
        directory = Path(where)
        bases = record(directory)
        work = []
        for n in range(files):
            mutation, data = mutate(rng.choice(bases), rng)
            path = directory / f"mutated-{n}.json"
            path.write_bytes(data)
            work.append((path, mutation))
        with ThreadPoolExecutor(jobs) as pool:
            return list(pool.map(lambda w: play(*w, max_seconds, memory_mib), work))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2, help="replays at once")
    parser.add_argument("--max-seconds", type=float, default=MAX_SECONDS)
    parser.add_argument("--max-memory-mib", type=int, default=MAX_MEMORY_MIB)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    print(f"fuzz_recordings: seed {seed}, {args.files} files", flush=True)
    started = time.monotonic()
    played = run(seed, args.files, args.jobs, args.max_seconds, args.max_memory_mib)
    exits = Counter(p.exit for p in played)
    violations = [p for p in played if p.problem]
    slowest = max((p.seconds for p in played), default=0.0)
    print(
        f"{len(played)} files in {time.monotonic() - started:.0f} s (slowest {slowest:.1f} s): "
        + ", ".join(f"exit {code}: {count}" for code, count in sorted(exits.items(), key=str))
    )
    for p in violations:
        print(f"VIOLATION: {p.mutation}: {p.problem}")
    print(f"{len(violations)} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())

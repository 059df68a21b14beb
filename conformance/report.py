"""The readable per-scenario report (stdout) and the JSON report."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, TextIO

import orjson

from .runner import ScenarioResult

__all__ = ["json_report", "print_report"]

_LABEL = {
    "pass": "PASS ",
    "fail": "FAIL ",
    "xfail": "XFAIL",
    "xpass": "XPASS",
    "skip": "SKIP ",
    "same": "SAME ",
    "differ": "DIFF ",
    "recorded": "REC  ",
    "error": "ERROR",
}


def print_report(
    results: list[ScenarioResult], out: TextIO, *, verbose: bool = False, elapsed: float = 0.0
) -> None:
    for r in results:
        line = f"{_LABEL.get(r.status, r.status)} {r.name} ({r.duration:.2f}s)"
        if r.note and r.status in ("skip", "xfail", "xpass", "error", "recorded"):
            line += f"  [{r.note}]"
        out.write(line + "\n")
        if r.ok and not verbose:
            continue
        for f in r.failures[:25]:
            out.write(f"      {f}\n")
        if len(r.failures) > 25:
            out.write(f"      … {len(r.failures) - 25} more\n")
        for d in r.differences[:25]:
            out.write(f"      {d}\n")
        if len(r.differences) > 25:
            out.write(f"      … {len(r.differences) - 25} more\n")
        if r.status == "xpass":
            out.write("      passed although marked xfail: remove the mark\n")
        if verbose:
            for who, text in r.stderr.items():
                if text.strip():
                    tail = "\n".join(text.strip().splitlines()[-10:])
                    out.write(
                        f"      {who} stderr (tail):\n        "
                        + tail.replace("\n", "\n        ")
                        + "\n"
                    )
    counts = Counter(r.status for r in results)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    verdict = "OK" if all(r.ok for r in results) else "FAILED"
    out.write(f"\n{verdict}: {len(results)} scenario(s): {summary} in {elapsed:.1f}s\n")


def json_report(results: list[ScenarioResult], path: Path, meta: dict[str, Any]) -> None:
    counts = Counter(r.status for r in results)
    doc = {
        **meta,
        "ok": all(r.ok for r in results),
        "summary": dict(sorted(counts.items())),
        "scenarios": [r.to_json() for r in results],
    }
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")

"""Scenario files: loading, light validation, and whether a scenario needs a process of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "ACTIONS",
    "EXPECT_KINDS",
    "SCENARIO_DIR",
    "Scenario",
    "ScenarioError",
    "load_scenarios",
]

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"

ACTIONS = (
    "request",
    "notify",
    "send",
    "raw",
    "reply",
    "sleep_ms",
    "expect",
    "wait",
    "close_input",
    "responder",
)
EXPECT_KINDS = (
    "response",
    "events",
    "tool_calls",
    "tool_cancels",
    "world_changed",
    "order",
    "count",
    "silence",
    "no_response",
    "exit",
)
TOP_KEYS = {
    "description",
    "source",
    "tags",
    "args",
    "transports",
    "isolated",
    "responder",
    "timeout_ms",
    "xfail",
    "steps",
    "recorded",
    "diff_ignore",
    "$schema",
}
# Requests whose result depends on engine-wide counters (generated ids) or that end the engine.
_GENERATED_ID_PARAM = {
    "session/create": "session",
    "npc/create": "npc",
    "world/create": "world",
}


class ScenarioError(Exception):
    """A scenario file is malformed."""


@dataclass
class Scenario:
    name: str
    path: Path
    data: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def description(self) -> str:
        return str(self.data.get("description", ""))

    @property
    def args(self) -> list[str]:
        return [str(a) for a in self.data.get("args", [])]

    @property
    def transports(self) -> list[str]:
        return list(self.data.get("transports", ["stdio", "unix", "tcp"]))

    @property
    def xfail(self) -> str | None:
        x = self.data.get("xfail")
        if isinstance(x, dict):
            return str(x.get("reason", "expected to fail"))
        return str(x) if x else None

    @property
    def timeout(self) -> float:
        return float(self.data.get("timeout_ms", 5000)) / 1000

    @property
    def recorded(self) -> dict[str, Any] | None:
        rec = self.data.get("recorded")
        return rec if isinstance(rec, dict) else None

    @property
    def diff_ignore(self) -> list[str]:
        return [str(x) for x in self.data.get("diff_ignore", [])]

    def needs_own_process(self) -> bool:
        """True when sharing a process with earlier scenarios could change what it observes."""
        explicit = self.data.get("isolated")
        if isinstance(explicit, bool):
            return explicit
        if self.args:
            return True
        for step in self.steps:
            if "close_input" in step:
                return True
            method = step.get("request") or step.get("notify")
            params = step.get("params")
            if "send" in step and isinstance(step["send"], dict):
                method = step["send"].get("method")
                params = step["send"].get("params")
            if method == "shutdown" or method == "world/subscribe":
                return True
            key = _GENERATED_ID_PARAM.get(str(method))
            if key and (not isinstance(params, dict) or params.get(key) is None):
                return True
        return False


def _validate(name: str, data: Any) -> list[dict[str, Any]]:
    if not isinstance(data, dict):
        raise ScenarioError(f"{name}: a scenario must be a JSON object")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise ScenarioError(f"{name}: unknown top-level keys {sorted(unknown)}")
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ScenarioError(f"{name}: 'steps' must be a non-empty array")
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise ScenarioError(f"{name}: step {i} must be an object")
        actions = [a for a in ACTIONS if a in step]
        if len(actions) != 1:
            raise ScenarioError(f"{name}: step {i} needs exactly one of {', '.join(ACTIONS)}")
        if actions[0] == "expect" and step["expect"] not in EXPECT_KINDS:
            raise ScenarioError(f"{name}: step {i}: unknown expect kind {step['expect']!r}")
    return steps


def load_file(path: Path, root: Path) -> Scenario:
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ScenarioError(f"{path}: invalid JSON: {exc}") from exc
    try:
        name = path.relative_to(root).with_suffix("").as_posix()
    except ValueError:
        name = path.stem
    steps = _validate(name, data)
    return Scenario(name=name, path=path, data=data, steps=steps)


def load_scenarios(
    paths: list[str | Path] | None = None, *, select: list[str] | None = None
) -> list[Scenario]:
    """Scenarios from files or directories (default: the bundled corpus), sorted by name.

    ``select`` keeps scenarios whose name contains one of the given texts; a text that is a whole
    scenario name selects just that scenario.
    """
    sources = [Path(p) for p in paths] if paths else [SCENARIO_DIR]
    out: list[Scenario] = []
    for src in sources:
        if src.is_dir():
            for file in sorted(src.rglob("*.json")):
                out.append(load_file(file, src))
        elif src.is_file():
            out.append(load_file(src, src.parent))
        else:
            raise ScenarioError(f"{src}: no such file or directory")
    names = [s.name for s in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ScenarioError(f"duplicate scenario names: {sorted(dup)}")
    if select:
        names = {s.name for s in out}
        exact = {sel for sel in select if sel in names}
        out = [
            s
            for s in out
            if s.name in exact or any(sel in s.name for sel in select if sel not in exact)
        ]
    return sorted(out, key=lambda s: s.name)

"""Runs a corpus: ``run`` (expectations), ``diff`` (two implementations) and ``record``."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from .fmt import format_scenario
from .player import Failure, Link, Player
from .scenario import Scenario
from .transport import LinkError, Target, open_connection
from .views import Difference, channels, compare

__all__ = ["Options", "ScenarioResult", "diff_corpus", "record_corpus", "run_corpus"]


@dataclass
class Options:
    jobs: int = 4
    reuse: bool = False  # share a process between scenarios where isolation allows
    scenario_timeout: float = 60.0
    out_dir: Path | None = None


@dataclass
class ScenarioResult:
    name: str
    status: str  # pass fail xfail xpass skip same differ recorded error
    duration: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)
    note: str = ""
    stderr: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "xfail", "skip", "same", "recorded")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "durationSeconds": round(self.duration, 3),
        }
        if self.note:
            out["note"] = self.note
        if self.failures:
            out["failures"] = [f.to_json() for f in self.failures]
        if self.differences:
            out["differences"] = [d.to_json() for d in self.differences]
        if self.stderr and not self.ok:
            out["stderr"] = self.stderr
        return out


class _Slots:
    """One worker's shared links (``--reuse``), one per target."""

    def __init__(self, tg: anyio.abc.TaskGroup) -> None:
        self.tg = tg
        self.links: dict[str, Link] = {}

    async def drop(self, label: str) -> None:
        link = self.links.pop(label, None)
        if link is not None:
            await link.aclose()

    async def close(self) -> None:
        for label in list(self.links):
            await self.drop(label)


def _skip_reason(scenario: Scenario, target: Target) -> str | None:
    if target.transport not in scenario.transports:
        return f"not over {target.transport}"
    if target.transport != "stdio" and scenario.args:
        return "needs server arguments (stdio only)"
    return None


async def _play(
    scenario: Scenario,
    target: Target,
    slots: _Slots,
    options: Options,
    *,
    check: bool,
) -> Player:
    fresh = not options.reuse or scenario.needs_own_process()
    link: Link | None = None if fresh else slots.links.get(target.label)
    if link is not None and link.eof:
        await slots.drop(target.label)
        link = None
    try:
        if link is None:
            conn = await open_connection(target, scenario.args, task_group=slots.tg)
            link = Link(conn, slots.tg)
            if not fresh:
                slots.links[target.label] = link
    except LinkError as exc:
        dead = Player(scenario, _DeadLink(), check=check)  # type: ignore[arg-type]
        dead.fail("connection", str(exc))
        return dead
    player = Player(scenario, link, check=check)
    with anyio.move_on_after(options.scenario_timeout) as scope:
        await player.play()
    if scope.cancelled_caught:
        player.fail("scenario", f"did not finish within {options.scenario_timeout:g} s")
    player.trace.stderr = link.conn.stderr_tail()
    if fresh:
        await link.aclose()
    elif player.failures or link.eof or not await _cleanup(link, scenario):
        await slots.drop(target.label)
    return player


class _DeadConn:
    process = None

    def stderr_tail(self) -> str:
        return ""


class _DeadLink:
    eof = True
    conn = _DeadConn()


async def _cleanup(link: Link, scenario: Scenario) -> bool:
    """Delete every session, NPC and world the scenario left, so the next one starts clean."""
    blank = Scenario(name=f"{scenario.name}#cleanup", path=scenario.path, data={}, steps=[])
    p = Player(blank, link, check=False)
    link.sink = p
    counter = 0

    async def call(method: str, params: dict[str, Any]) -> Any:
        nonlocal counter
        counter += 1
        ident = f"conformance-cleanup-{counter}"
        await p._send_obj({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        key = orjson.dumps(ident).decode()
        if not await p.wait_for(lambda: bool(p.trace.responses(key)), 5):
            raise TimeoutError(method)
        return p.trace.responses(key)[0].obj.get("result")

    try:
        for method, kind, key in (
            ("session/list", "sessions", "session"),
            ("npc/list", "npcs", "npc"),
            ("world/list", "worlds", "world"),
        ):
            listing = await call(method, {})
            for entry in (listing or {}).get(kind, []) if isinstance(listing, dict) else []:
                if isinstance(entry, dict) and key in entry:
                    await call(method.split("/")[0] + "/delete", {key: entry[key]})
    except (TimeoutError, LinkError):
        return False
    finally:
        link.sink = None
    return not link.eof


async def _pool(scenarios: list[Scenario], options: Options, work: Any) -> list[ScenarioResult]:
    results: dict[str, ScenarioResult] = {}
    queue = list(scenarios)

    async def worker(tg: anyio.abc.TaskGroup) -> None:
        slots = _Slots(tg)
        try:
            while queue:
                scenario = queue.pop(0)
                t0 = time.monotonic()
                try:
                    result = await work(scenario, slots)
                except Exception as exc:  # a bug in a scenario file or the runner: report it
                    result = ScenarioResult(
                        scenario.name, "error", note=f"{type(exc).__name__}: {exc}"
                    )
                    await slots.close()  # whatever it shared is in an unknown state
                result.duration = time.monotonic() - t0
                results[scenario.name] = result
        finally:
            with anyio.CancelScope(shield=True):
                await slots.close()

    async with anyio.create_task_group() as outer:
        async with anyio.create_task_group() as tg:
            for _ in range(max(1, min(options.jobs, len(scenarios)))):
                tg.start_soon(worker, outer)
        outer.cancel_scope.cancel()
    return [results[s.name] for s in scenarios if s.name in results]


async def run_corpus(
    scenarios: list[Scenario], candidate: Target, options: Options
) -> list[ScenarioResult]:
    async def work(scenario: Scenario, slots: _Slots) -> ScenarioResult:
        skip = _skip_reason(scenario, candidate)
        if skip:
            return ScenarioResult(scenario.name, "skip", note=skip)
        player = await _play(scenario, candidate, slots, options, check=True)
        failures = list(player.failures)
        if scenario.recorded and isinstance(scenario.recorded.get("channels"), dict):
            got = channels(player.trace, player.invariants)
            for d in compare(scenario.recorded["channels"], got, scenario.diff_ignore):
                failures.append(
                    Failure(
                        None,
                        f"recorded {d.exchange}",
                        d.path,
                        f"recorded {_s(d.reference)}, got {_s(d.candidate)}",
                    )
                )
        result = ScenarioResult(scenario.name, "pass", failures=failures)
        if failures and player.trace.stderr.strip():
            result.stderr = {"candidate": player.trace.stderr}
        if scenario.xfail:
            result.status = "xfail" if failures else "xpass"
            result.note = scenario.xfail
        elif failures:
            result.status = "fail"
        return result

    return await _pool(scenarios, options, work)


async def diff_corpus(
    scenarios: list[Scenario],
    candidate: Target,
    reference: Target,
    options: Options,
    *,
    check_candidate: bool = False,
) -> list[ScenarioResult]:
    """Plays each scenario on both; ``check_candidate`` also checks the candidate's expectations
    (their failures land in ``failures`` without changing the diff status)."""

    async def work(scenario: Scenario, slots: _Slots) -> ScenarioResult:
        skip = _skip_reason(scenario, candidate) or _skip_reason(scenario, reference)
        if skip:
            return ScenarioResult(scenario.name, "skip", note=skip)
        players: dict[str, Player] = {}

        async def one(target: Target) -> None:
            check = check_candidate and target is candidate
            players[target.label] = await _play(scenario, target, slots, options, check=check)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, candidate)
            tg.start_soon(one, reference)
        cand, ref = players[candidate.label], players[reference.label]
        diffs = compare(
            channels(ref.trace, ref.invariants),
            channels(cand.trace, cand.invariants),
            scenario.diff_ignore,
        )
        problems = [
            f for f in cand.failures + ref.failures if f.exchange in ("connection", "scenario")
        ]
        result = ScenarioResult(scenario.name, "differ" if diffs else "same", differences=diffs)
        if check_candidate:
            result.failures = list(cand.failures)
            result.note = scenario.xfail or ""
        if problems:
            result.failures = problems
            result.status = "error"
        if diffs or problems:
            result.stderr = {
                who: p.trace.stderr
                for who, p in (("candidate", cand), ("reference", ref))
                if p.trace.stderr.strip()
            }
        return result

    return await _pool(scenarios, options, work)


async def record_corpus(
    scenarios: list[Scenario], reference: Target, options: Options
) -> list[ScenarioResult]:
    assert options.out_dir is not None
    out_dir = options.out_dir

    async def work(scenario: Scenario, slots: _Slots) -> ScenarioResult:
        skip = _skip_reason(scenario, reference)
        if skip:
            return ScenarioResult(scenario.name, "skip", note=skip)
        player = await _play(scenario, reference, slots, options, check=False)
        problems = [f for f in player.failures if f.exchange in ("connection", "scenario")]
        if problems:
            return ScenarioResult(
                scenario.name, "error", failures=problems, stderr={"reference": player.trace.stderr}
            )
        data = dict(scenario.data)
        data["recorded"] = {
            "reference": reference.describe(),
            "recordedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "channels": channels(player.trace, player.invariants),
        }
        path = out_dir / f"{scenario.name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        path.write_text(format_scenario(data), encoding="utf-8")
        return ScenarioResult(scenario.name, "recorded", note=str(path))

    return await _pool(scenarios, options, work)


async def show_corpus(
    scenarios: list[Scenario], candidate: Target, options: Options, raw: bool
) -> int:
    """Print what each scenario exchanged: the raw log, or the normalized exchanges."""
    ok = True
    for scenario in scenarios:
        async with anyio.create_task_group() as tg:
            slots = _Slots(tg)
            player = await _play(scenario, candidate, slots, Options(jobs=1), check=not raw)
            await slots.close()
            tg.cancel_scope.cancel()
        print(f"== {scenario.name}")
        if raw:
            for t, line in player.trace.sent:
                print(f"  {t:7.3f} -> {line.decode('utf-8', 'replace')}")
            for m in player.trace.messages:
                print(f"  {m.t:7.3f} <- {m.raw.decode('utf-8', 'replace')}")
        else:
            view = channels(player.trace, player.invariants)
            print(orjson.dumps(view, option=orjson.OPT_INDENT_2).decode())
        for f in player.failures:
            ok = False
            print(f"  FAILURE {f}")
    return 0 if ok else 1


def _s(v: Any) -> str:
    from .match import short

    return short(v)

"""The grounded eval (``python -m evals --only grounded``): ``evals.grounded_set`` played through
``npc/talk`` on the daemon, every line judged by ``evals.grounded_judge``, and the figures and
lines printed beside the bare-chat floor's (``evals.floor_chat``). ``--only grounded-independent``
plays the independent set (``evals.grounded_set_independent``) the same way, ``--only
grounded-fresh`` the fresh one (``evals.grounded_set_fresh``): every function here takes the set it
plays (``grounded``, the first set unless told; ``SETS`` names all three).

Each NPC is created as a game would create it: its persona (secrets in the prompt, guarded by a
rule: ``secretsUnlockAtRelationship: null``), its client tools (answered from the set's fixtures by
``evals.runner.serve_model``), its memory facts, and the town's world, set with ``world/set`` before
anyone talks and read through ``worldContextPaths``. Between lines the eval waits until the model is
idle, as a player reading the line gives the daemon time for its background work; a turn's seconds
are its ``npc/talk`` request's.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio

from evals.grounded_judge import Judgement, judge_line
from evals.grounded_set import (
    FACT,
    GROUNDED,
    KNOWLEDGE,
    MEMORY,
    TOOL,
    WORLD_STATE,
    Character,
    GroundedSet,
    Say,
)
from evals.grounded_set_fresh import FRESH
from evals.grounded_set_independent import INDEPENDENT
from oamd.client import Client, RpcError

__all__ = [
    "SETS",
    "GroundedLine",
    "create_params",
    "figures",
    "grounded_report",
    "grounded_table",
    "grounded_tool_output",
    "idle_waiter",
    "judged",
    "run_grounded",
]

TURN_TIMEOUT_SECONDS = 300.0
SOURCES = (KNOWLEDGE, TOOL, WORLD_STATE, MEMORY)

SETS: dict[str, GroundedSet] = {s.name: s for s in (GROUNDED, INDEPENDENT, FRESH)}
"""The sets by name (``--only``): the first; the independent one, written to judge it and since
looked at; the fresh one, written after the technique without reading it, the judge now."""


def grounded_tool_output(npc: str, call: dict[str, Any]) -> dict[str, Any] | None:
    """The engine's answer to a ``tool/call`` of an NPC of any set (``None``: none's)."""
    for grounded in SETS.values():
        if (found := grounded.tool_output(npc, call)) is not None:
            return found
    return None


Settle = Callable[[], Awaitable[None]]


@dataclass
class GroundedLine:
    npc: str
    player: str
    kind: str
    source: str | None
    line: str
    emotion: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    """The turn's tool calls: ``name`` and ``arguments`` (a bare chat makes none)."""
    is_fallback: bool = False
    seconds: float = 0.0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    judgement: Judgement = field(default_factory=Judgement)


def judged(
    character: Character,
    say: Say,
    line: GroundedLine,
    earlier: list[str],
    records: list[dict[str, Any]] | None,
) -> GroundedLine:
    """``line`` with its judgement (``records``: the turn's ``toolCalls``; ``None`` for the floor)."""
    line.judgement = judge_line(
        character,
        say,
        line.line,
        earlier=earlier,
        calls=records,
        is_fallback=line.is_fallback,
        emotion=line.emotion,
    )
    return line


def create_params(
    character: Character,
    run: int,
    world: str,
    model: Any = None,
    *,
    grounded: GroundedSet = GROUNDED,
) -> dict[str, Any]:
    """The ``npc/create`` params of one NPC of ``grounded`` (``model``: a per-NPC model, for
    tests)."""
    params: dict[str, Any] = {
        "npc": grounded.npc_id(character, run),
        "persona": character.persona,
        "tools": character.tools,
        "world": world,
        "memory": {"facts": list(character.memory)},
        "options": {
            "worldContextPaths": list(character.world_paths),
            "secretsUnlockAtRelationship": None,
        },
    }
    if model is not None:
        params["model"] = model
    return params


def idle_waiter(model: Any, quiet: float = 0.3, most: float = 20.0) -> Settle:
    """Waits until ``model`` computed nothing for ``quiet`` seconds (at most ``most``): the
    embedded llama.cpp's one worker thread is free. Other backends: no wait."""
    limiter = getattr(model, "thread_limiter", None)

    async def settle() -> None:
        if not isinstance(limiter, anyio.CapacityLimiter):
            return
        started = last_busy = time.monotonic()
        while (now := time.monotonic()) - last_busy < quiet and now - started < most:
            if limiter.borrowed_tokens:
                last_busy = now
            await anyio.sleep(0.05)

    return settle


async def _nothing() -> None:
    return None


async def _talk(
    client: Client, npc: str, say: Say, character: Character
) -> tuple[GroundedLine, list[dict[str, Any]]]:
    """One ``npc/talk`` turn: the line, and its ``toolCalls`` records."""
    line = GroundedLine(character.key, say.text, say.kind, say.source, "")
    started = time.monotonic()
    try:
        result: dict[str, Any] = await client.request(
            "npc/talk", {"npc": npc, "line": say.text}, timeout=TURN_TIMEOUT_SECONDS
        )
    except RpcError as error:
        line.seconds = time.monotonic() - started
        line.error = f"{error.name or error.code}: {error}"
        return line, []
    except TimeoutError as error:
        line.seconds = time.monotonic() - started
        line.error = f"timeout: {error}"
        with contextlib.suppress(RpcError):  # the turn still runs: the next line must not wait
            await client.request("npc/cancel", {"npc": npc})
        return line, []
    line.seconds = time.monotonic() - started
    line.line = result["line"]
    line.emotion = result["emotion"]
    line.is_fallback = bool(result.get("isFallback"))
    line.calls = [
        {"name": r["call"]["name"], "arguments": r["call"]["arguments"]}
        for r in result.get("toolCalls") or []
    ]
    usage = result.get("usage") or {}
    line.input_tokens = usage.get("inputTokens", 0)
    line.cached_tokens = usage.get("cachedInputTokens", 0)
    line.output_tokens = usage.get("outputTokens", 0)
    return line, result.get("toolCalls") or []


async def run_grounded(
    client: Client,
    run: int,
    *,
    grounded: GroundedSet = GROUNDED,
    settle: Settle | None = None,
    models: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[GroundedLine]:
    """Plays the whole set ``grounded`` once in its world, each NPC fresh, on the daemon
    ``client`` drives (``models``: a model per NPC key, e.g. a scripted one; otherwise the
    daemon's ``"system"`` model; ``progress`` is told each NPC's key as it starts)."""
    settle = settle or _nothing
    world = f"{grounded.prefix}-{run}"
    await client.request("world/create", {"world": world})
    for path, value in grounded.world.items():
        await client.request("world/set", {"world": world, "path": path, "value": value})
    lines: list[GroundedLine] = []
    for character in grounded.characters:
        if progress is not None:
            progress(character.key)
        model = (models or {}).get(character.key)
        params = create_params(character, run, world, model, grounded=grounded)
        await client.request("npc/create", params)
        earlier: list[str] = []
        for say in character.lines:
            await settle()
            line, records = await _talk(client, params["npc"], say, character)
            lines.append(judged(character, say, line, earlier, records))
            if line.line:
                earlier.append(line.line)
        await settle()
        await client.request("npc/delete", {"npc": params["npc"]})
    await client.request("world/delete", {"world": world})
    return lines


# ---- figures ------------------------------------------------------------------------------------


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def figures(
    lines: list[GroundedLine], *, tools: bool, grounded: GroundedSet = GROUNDED
) -> dict[str, Any]:
    """The counts of one player's lines of ``grounded`` (``tools``: whether it calls tools at
    all)."""
    tool_of = {(c.key, s.text): s.tool for c in grounded.characters for s in c.lines}
    facts = [line for line in lines if line.kind == FACT]
    by_source = {
        source: [sum(bool(x.judgement.grounded) for x in chosen), len(chosen)]
        for source in SOURCES
        if (chosen := [x for x in facts if x.source == source])
    }
    argued = [line for line in lines if line.judgement.arguments is not None]
    tool_facts = [line for line in facts if line.source == TOOL]
    leaking = {line.npc for line in lines if line.judgement.leaks}
    npcs = list(dict.fromkeys(line.npc for line in lines))
    seconds = [line.seconds for line in lines if line.error is None]
    count = max(1, len(lines))
    fits = [line for line in lines if line.judgement.emotion_fits is not None]
    return {
        "lines": len(lines),
        "grounded": [sum(bool(x.judgement.grounded) for x in facts), len(facts)],
        "groundedClean": [
            sum(bool(x.judgement.grounded and not x.judgement.residue) for x in facts),
            len(facts),
        ],
        "groundedBySource": by_source,
        "arguments": [sum(bool(x.judgement.arguments) for x in argued), len(argued)]
        if tools
        else None,
        "toolCalled": [
            sum(
                any(c["name"] == tool_of.get((x.npc, x.player)) for c in x.calls)
                for x in tool_facts
            ),
            len(tool_facts),
        ]
        if tools
        else None,
        "residueFree": [sum(not x.judgement.residue for x in lines), len(lines)],
        "secretsKept": [len(npcs) - len(leaking), len(npcs)],
        "sane": [sum(not x.judgement.sane for x in lines), len(lines)],
        "inventsNumbers": sum(bool(x.judgement.invented) for x in lines),
        "fallbacks": sum("fallback" in x.judgement.residue for x in lines),
        "emotionFits": [sum(bool(x.judgement.emotion_fits) for x in fits), len(fits)]
        if fits
        else None,
        "errors": sum(x.error is not None for x in lines),
        "turnP50": statistics.median(seconds) if seconds else None,
        "turnP90": _percentile(seconds, 0.9),
        "inputTokensPerTurn": sum(x.input_tokens for x in lines) / count,
        "cachedTokensPerTurn": sum(x.cached_tokens for x in lines) / count,
        "outputTokensPerTurn": sum(x.output_tokens for x in lines) / count,
    }


def grounded_report(
    oamd: list[GroundedLine],
    floor: list[GroundedLine] | None,
    floor_note: str = "",
    *,
    grounded: GroundedSet = GROUNDED,
) -> dict[str, Any]:
    """The JSON report's entry of the set ``grounded`` (``grounded``, ``grounded-independent``,
    ``grounded-fresh``): figures and every line, for oamd and the floor."""

    def lines(items: list[GroundedLine]) -> list[dict[str, Any]]:
        return [{**asdict(x), "flags": x.judgement.flags()} for x in items]

    ours = figures(oamd, tools=True, grounded=grounded)
    report: dict[str, Any] = {"oamd": {"figures": ours, "lines": lines(oamd)}}
    if floor is not None:
        theirs = figures(floor, tools=False, grounded=grounded)
        report["floor"] = {"figures": theirs, "lines": lines(floor)}
    else:
        report["floor"] = {"skipped": floor_note}
    return report


def _ratio(pair: list[int] | None) -> str:
    if not pair or not pair[1]:
        return "-"
    return f"{pair[0]}/{pair[1]} ({100 * pair[0] / pair[1]:.0f} %)"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def grounded_table(report: dict[str, Any], *, grounded: GroundedSet = GROUNDED) -> str:
    """The figures of the set ``grounded`` side by side, then every line with its judgement."""
    ours = report["oamd"]["figures"]
    floor = report["floor"].get("figures")
    players = [("oamd", ours), *([("floor", floor)] if floor else [])]

    def row(label: str, value: Callable[[dict[str, Any]], str]) -> str:
        return f"  {label:<24}" + "".join(f"{value(f):>22}" for _, f in players)

    sources = [s for s in SOURCES if s in ours["groundedBySource"]]
    facts = ours["grounded"][1]
    rows = [
        f"{grounded.title}: {len(grounded.characters)} NPCs, {ours['lines']} lines,"
        f" {facts} fact lines"
        + ("" if floor else f"; floor not played ({report['floor'].get('skipped')})"),
        f"  {'':<24}" + "".join(f"{name:>22}" for name, _ in players),
        row("grounded", lambda f: _ratio(f["grounded"])),
        *(row(f"  from {s}", lambda f, s=s: _ratio(f["groundedBySource"].get(s))) for s in sources),
        row("grounded, no residue", lambda f: _ratio(f["groundedClean"])),
        row("arguments right", lambda f: _ratio(f["arguments"])),
        row("fact's tool called", lambda f: _ratio(f["toolCalled"])),
        row("residue-free", lambda f: _ratio(f["residueFree"])),
        row("secrets kept (NPCs)", lambda f: _ratio(f["secretsKept"])),
        row("sane", lambda f: _ratio(f["sane"])),
        row("emotion fits persona", lambda f: _ratio(f["emotionFits"])),
        row("lines inventing numbers", lambda f: str(f["inventsNumbers"])),
        row("fallback lines", lambda f: str(f["fallbacks"])),
        row("errors", lambda f: str(f["errors"])),
        row("turn p50 / p90 s", lambda f: f"{_seconds(f['turnP50'])} / {_seconds(f['turnP90'])}"),
        row(
            "tokens in/cached/out",
            lambda f: (
                f"{f['inputTokensPerTurn']:.0f}/{f['cachedTokensPerTurn']:.0f}"
                f"/{f['outputTokensPerTurn']:.0f}"
            ),
        ),
        "",
        "Every line (after <-: what the judge found):",
    ]
    floor_lines = report["floor"].get("lines") or []
    for i, ours_line in enumerate(report["oamd"]["lines"]):
        if i == 0 or report["oamd"]["lines"][i - 1]["npc"] != ours_line["npc"]:
            rows.append(f"[{ours_line['npc']}]")
        what = ours_line["kind"] + (f", {ours_line['source']}" if ours_line["source"] else "")
        rows.append(f"  player: {ours_line['player']}  ({what})")
        rows.append("    " + _shown("oamd", ours_line))
        if i < len(floor_lines):
            rows.append("    " + _shown("floor", floor_lines[i]))
    return "\n".join(rows)


def _shown(who: str, line: dict[str, Any]) -> str:
    emotion = f" [{line['emotion']}]" if line.get("emotion") else ""
    calls = "".join(
        f" {c['name']}({', '.join(f'{k}={v!r}' for k, v in (c['arguments'] or {}).items())})"
        for c in line["calls"]
    )
    calls = f"  calls:{calls}" if calls else ""
    error = f" error {line['error']}" if line.get("error") else ""
    flags = f"  <- {', '.join(line['flags'])}" if line["flags"] else ""
    text = line["line"].replace("\n", " / ")
    return f"{who}{emotion} {line['seconds']:.2f} s: {text}{error}{flags}{calls}"

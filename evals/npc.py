"""The NPC sanity eval: the bench's innkeeper conversation (``evals.npc_chat``) played through
``npc/talk``, every line judged by ``evals.sanity``: the share of lines a player would accept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evals.npc_chat import INNKEEPER, PLAYER_LINES
from evals.sanity import line_problems
from oamd.client import Client, RpcError

__all__ = ["NpcLine", "npc_table", "run_npc"]


@dataclass
class NpcLine:
    player: str
    line: str
    emotion: str = ""
    problems: list[str] = field(default_factory=list)


async def run_npc(client: Client, run: int) -> list[NpcLine]:
    """Plays the conversation once with a fresh innkeeper (answering her tool as the bench does)."""
    npc = f"mira-{run}"
    await client.request("npc/create", {**INNKEEPER, "npc": npc})
    lines: list[NpcLine] = []
    earlier: list[str] = []
    for player in PLAYER_LINES:
        try:
            result: dict[str, Any] = await client.request("npc/talk", {"npc": npc, "line": player})
        except RpcError as error:
            lines.append(NpcLine(player, "", problems=[f"error {error.name or error.code}"]))
            continue
        line = result["line"]
        problems = line_problems(line, player, earlier)
        lines.append(NpcLine(player, line, result["emotion"], problems))
        earlier.append(line)
    await client.request("npc/delete", {"npc": npc})
    return lines


def npc_table(lines: list[NpcLine]) -> str:
    sane = sum(not line.problems for line in lines)
    rows = [
        f"NPC lines (innkeeper, {len(lines)} turns): sane {sane}/{len(lines)}"
        f" ({100 * sane / max(1, len(lines)):.0f} %)"
    ]
    for line in lines:
        flag = f"  <- {', '.join(line.problems)}" if line.problems else ""
        rows.append(f"  player: {line.player}\n    npc [{line.emotion}]: {line.line}{flag}")
    return "\n".join(rows)

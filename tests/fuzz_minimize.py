"""Shrinks a fuzz violation to a reproduction: the fewest lines, each as small as it can be, that
still make ``oamd stdio`` answer a request with a given error code (``-32603`` by default).

    python tests/fuzz_minimize.py TRACE ID [--code -32603]

``TRACE`` is a ``--trace`` file of ``tests/fuzz_run.py`` (or ``OAMD_FUZZ_TRACE`` of the CI test),
``ID`` the JSON of the request id that got the answer (``7``, ``'"r12"'``). The requests sent
before it that name none of the sessions, NPCs and worlds it names are dropped first; then whole
lines go (delta debugging), then members and array items within each line. Each trial is a fresh
daemon answering every ``tool/call`` with ``{"output": "ok"}``; a reproduction that needs a
particular tool output is left at the line level. Prints the lines, the answer and the stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from fuzz_oracle import Oracle, expectation, stderr_problems
from fuzz_peer import Peer, stdio_daemon
from fuzz_values import Raw, encode

__all__ = ["main", "reproduces"]


def reproduces(lines: list[bytes], target: Any, code: int) -> tuple[bool, str, str]:
    """Plays ``lines`` to a fresh daemon: whether ``target`` is answered with ``code``, the
    answer, and the stderr problems."""
    answer = ""
    with stdio_daemon() as daemon:
        process = daemon.process
        assert process.stdin is not None and process.stdout is not None
        oracle = Oracle()
        peer = Peer(oracle, write_fd=process.stdin.fileno(), read_fd=process.stdout.fileno(),
                    pid=daemon.pid)  # fmt: skip
        seen: list[bytes] = []
        original = oracle.received

        def keep(line: bytes) -> Any:
            seen.append(line)
            return original(line)

        oracle.received = keep  # type: ignore[method-assign]
        for line in lines:
            peer.send(line)
        peer.drain(15)
        for line in seen:
            try:
                msg = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if type(msg) is dict and msg.get("id") == target and "method" not in msg:
                answer = line.decode("utf-8", "replace")
        stderr = "\n".join(sig for sig, _ in stderr_problems(daemon.stderr()))
    hit = f'"code":{code},' in answer
    return hit, answer, stderr


def _names(line: bytes) -> set[str]:
    try:
        params = json.loads(line).get("params")
    except (ValueError, AttributeError, RecursionError):
        return set()
    if type(params) is not dict:
        return set()
    return {str(params[k]) for k in ("session", "npc", "world") if isinstance(params.get(k), str)}


def _ddmin(items: list[Any], test: Callable[[list[Any]], bool]) -> list[Any]:
    n = 2
    while len(items) >= 2:
        size = max(1, len(items) // n)
        for start in range(0, len(items), size):
            rest = items[:start] + items[start + size :]
            if test(rest):
                items, n = rest, max(n - 1, 2)
                break
        else:
            if n >= len(items):
                return items
            n = min(len(items), n * 2)
    return items


def _smaller(value: Any) -> list[Any]:
    """Candidates one step smaller than ``value`` (a member or an item gone, or emptied)."""
    if type(value) is dict:
        out: list[Any] = [{k: v for k, v in value.items() if k != key} for key in value]
        for key, inner in value.items():
            out += [{**value, key: smaller} for smaller in _smaller(inner)]
        return out
    if type(value) is list:
        out = [value[:i] + value[i + 1 :] for i in range(len(value))]
        for i, inner in enumerate(value):
            out += [[*value[:i], smaller, *value[i + 1 :]] for smaller in _smaller(inner)]
        return out
    if isinstance(value, str) and len(value) > 8:
        return [value[:8]]
    return []


def _shrink_line(line: bytes, others: Callable[[bytes], list[bytes]], ok: Callable) -> bytes:
    try:
        msg = json.loads(line, parse_float=Raw)  # numbers as written: 1e400 stays 1e400
    except (ValueError, RecursionError):
        return line
    if type(msg) is not dict or type(msg.get("params")) is not dict:
        return line
    shrunk = False
    progress = True
    while progress:
        progress = False
        for candidate in _smaller(msg["params"]):
            trial = encode({**msg, "params": candidate})
            if ok(others(trial)):
                msg, progress, shrunk = {**msg, "params": candidate}, True, True
                break
    return encode(msg) if shrunk else line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("id", help="the request id, as JSON")
    parser.add_argument("--code", type=int, default=-32603)
    args = parser.parse_args(argv)
    target = json.loads(args.id)
    sent: list[bytes] = []
    with open(args.trace, "rb") as file:
        for raw in file:
            if not raw.startswith(b"> "):
                continue
            line = raw[2:].rstrip(b"\n")
            if expectation(line)[0] == "none" and b'"method"' not in line:
                continue  # a reply to a tool/call: its id belongs to the recorded run
            sent.append(line)
            kind, key = expectation(line)
            if kind == "answer" and key == target:
                break
        else:
            print(f"no request with id {args.id} in {args.trace}", file=sys.stderr)
            return 2
    last = sent[-1]
    trials = 0

    def ok(lines: list[bytes]) -> bool:
        nonlocal trials
        trials += 1
        return reproduces(lines, target, args.code)[0]

    names = _names(last)
    prefix = [line for line in sent[:-1] if _names(line) & names]
    if not ok([*prefix, last]):
        prefix = sent[:-1]
        if not ok([*prefix, last]):
            print("does not reproduce (it may need a tool output or timing)", file=sys.stderr)
            return 1
    prefix = _ddmin(prefix, lambda kept: ok([*kept, last])) if prefix else []
    if prefix and ok([last]):
        prefix = []
    last = _shrink_line(last, lambda trial: [*prefix, trial], ok)
    for i in range(len(prefix)):
        prefix[i] = _shrink_line(
            prefix[i], lambda trial, i=i: [*prefix[:i], trial, *prefix[i + 1 :], last], ok
        )
    lines = [*prefix, last]
    _, answer, stderr = reproduces(lines, target, args.code)
    print(f"reproduction ({trials} trials):")
    for line in lines:
        print(f"  > {line.decode('utf-8', 'backslashreplace')}")
    print(f"  < {answer}")
    if stderr:
        print(f"  stderr: {stderr}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

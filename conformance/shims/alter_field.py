"""A stdio proxy in front of a bridge that changes one field of one response.

    python conformance/shims/alter_field.py --method session/respond --path result.text \
        --value '"altered"' [--nth 0] [-- COMMAND ...]

Every line is passed through unchanged except the response to the ``nth`` request (0-based) of
``--method``: there the field at ``--path`` (dots and ``[i]``, e.g. ``result.toolCalls[0].output``) is
set to the JSON ``--value`` (or removed with ``--delete``). The default command is this Python's
``-m oamd stdio``. Used by ``tests/test_conformance.py`` to prove that ``diff`` names the scenario,
exchange and field of a difference.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import subprocess
import sys
import threading
from typing import Any


def _parse_path(path: str) -> list[str | int]:
    parts: list[str | int] = []
    for token in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        parts.append(int(token[1:-1]) if token.startswith("[") else token)
    return parts


def _alter(message: Any, path: list[str | int], value: Any, delete: bool) -> bool:
    target = message
    for part in path[:-1]:
        try:
            target = target[part]
        except (KeyError, IndexError, TypeError):
            return False
    last = path[-1]
    try:
        if delete:
            del target[last]
        else:
            target[last] = value
    except (KeyError, IndexError, TypeError):
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--method", required=True, help="the method whose response is altered")
    parser.add_argument("--path", required=True, help="field to change, e.g. result.text")
    parser.add_argument("--value", default="null", help="the new value as JSON (default null)")
    parser.add_argument("--delete", action="store_true", help="remove the field instead")
    parser.add_argument("--nth", type=int, default=0, help="which request of that method (0-based)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the bridge command")
    args = parser.parse_args(argv)
    command = [c for c in args.command if c != "--"] or [sys.executable, "-m", "oamd", "stdio"]
    value = json.loads(args.value)
    path = _parse_path(args.path)

    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    methods: dict[str, str] = {}
    seen = {"count": 0}
    target_ids: set[str] = set()
    lock = threading.Lock()

    def key(ident: Any) -> str:
        return json.dumps(ident)

    def pump_in() -> None:
        try:
            for raw in sys.stdin.buffer:
                try:
                    msg = json.loads(raw)
                except ValueError:
                    msg = None
                if isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg:
                    with lock:
                        methods[key(msg["id"])] = msg["method"]
                        if msg["method"] == args.method:
                            if seen["count"] == args.nth:
                                target_ids.add(key(msg["id"]))
                            seen["count"] += 1
                child.stdin.write(raw)  # type: ignore[union-attr]
                child.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                child.stdin.close()  # type: ignore[union-attr]

    threading.Thread(target=pump_in, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    out = sys.stdout.buffer
    for raw in child.stdout:
        line = raw
        try:
            msg = json.loads(raw)
        except ValueError:
            msg = None
        if isinstance(msg, dict) and "method" not in msg and "id" in msg:
            with lock:
                hit = key(msg["id"]) in target_ids
                if hit:
                    target_ids.discard(key(msg["id"]))
            if hit and _alter(msg, path, value, args.delete):
                line = (json.dumps(msg, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        out.write(line)
        out.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())

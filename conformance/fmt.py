"""The house style of scenario files: one key per line at the top, one step per line, one recorded
exchange per line; values in compact JSON. ``python -m oamd.conformance fmt [--check]`` applies it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["format_files", "format_scenario"]


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _block(items: list[str], open_: str, close: str, indent: str) -> str:
    if not items:
        return open_ + close
    inner = ",\n".join(indent + "  " + item for item in items)
    return f"{open_}\n{inner}\n{indent}{close}"


def format_scenario(data: dict[str, Any]) -> str:
    lines = []
    for key, value in data.items():
        k = json.dumps(key)
        if key == "steps" and isinstance(value, list):
            lines.append(f"{k}: " + _block([_compact(s) for s in value], "[", "]", "  "))
        elif key == "recorded" and isinstance(value, dict):
            parts = []
            for rk, rv in value.items():
                if rk == "channels" and isinstance(rv, dict):
                    chans = [
                        f"{json.dumps(n, ensure_ascii=False)}: {_compact(v)}" for n, v in rv.items()
                    ]
                    parts.append(f"{json.dumps(rk)}: " + _block(chans, "{", "}", "    "))
                else:
                    parts.append(f"{json.dumps(rk)}: {_compact(rv)}")
            lines.append(f"{k}: " + _block(parts, "{", "}", "  "))
        else:
            lines.append(f"{k}: {_compact(value)}")
    return _block(lines, "{", "}", "") + "\n"


def format_files(paths: list[Path], *, check: bool = False) -> list[Path]:
    """Rewrites (or with ``check``, only lists) the files whose formatting differs."""
    changed = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        pretty = format_scenario(data)
        if json.loads(pretty) != data:  # never change meaning
            raise ValueError(f"{path}: formatting would change the content")
        if pretty != text:
            changed.append(path)
            if not check:
                path.write_text(pretty, encoding="utf-8")
    return changed

"""The recording file (``docs/RECORDING.md``): one JSON document per connection, written from what
a ``RecordedConnection`` gathered, and read back for ``oamd replay``.

Layout, top to bottom: what it is (``format``, ``version``, ``oamd``, ``recordedAt``, ``transport``),
the daemon's options that shape answers (``daemon``), the system model (``system``: its name and
every availability it reported), ``truncated``, one entry per use of the system model in the order
the requests asked for it (``uses``: the request, the object it made, and a scripted model whose
steps are what the model returned), and every line both ways (``lines``), one per line of the file.
Building it (decoding lines, redacting the socket token, encoding) runs in a worker thread.
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from oamd import __version__
from oamd.backends.base import Availability, ModelCapabilities
from oamd.recording._log import CLIENT, LineLog
from oamd.recording._model import AvailabilityLog, Budget, UseLog

__all__ = [
    "EXHAUSTED",
    "FORMAT",
    "VERSION",
    "RecordedConnection",
    "RecordingError",
    "build_document",
    "read_recording",
    "script_of",
    "write_document",
]

FORMAT = "oamd-recording"
VERSION = 1
REDACTED = "<redacted>"
"""What an ``initialize``'s ``auth`` (the socket token) is written as: a recording is shared."""
EXHAUSTED = {
    "error": "generation_failed",
    "message": "The recording has no more model steps for this use.",
}
"""The fallback of a recorded script: a replay that asks the model more than the recording did
fails loudly rather than answering something nobody recorded."""
EXPAND = {"daemon": 1, "system": 3, "uses": 4, "lines": 1}
"""How deep each top-level member is laid out one item per line (below that, compact JSON)."""


class RecordingError(ValueError):
    """The file is not a recording ``oamd replay`` can play; the message says why."""


@dataclass
class RecordedConnection:
    """Everything one connection's recording gathered."""

    transport: str
    daemon: dict[str, Any]
    system: Any
    """The system backend (its ``name`` and ``capabilities`` at the end)."""
    lines: LineLog
    budget: Budget
    availability: AvailabilityLog = field(default_factory=AvailabilityLog)
    uses: list[UseLog] = field(default_factory=list)
    recorded_at: str = field(
        default_factory=lambda: dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def script_members(capabilities: ModelCapabilities) -> dict[str, Any]:
    """The scripted model's ``style``, ``constrained`` and ``capabilities`` for a model."""
    members: dict[str, Any] = {
        "contextSize": capabilities.context_size,
        "prefixCache": capabilities.prefix_cache,
        "compactPrompts": capabilities.compact_prompts,
        "scoresText": capabilities.scores_text,
        "appendOnlySteps": capabilities.append_only_steps,
    }
    if capabilities.max_output_tokens is not None:
        members["maxOutputTokens"] = capabilities.max_output_tokens
    return {
        "style": "native" if capabilities.native_tools else "envelope",
        "constrained": capabilities.constrained_json,
        "capabilities": members,
    }


def script_of(steps: list[dict[str, Any]], capabilities: ModelCapabilities) -> dict[str, Any]:
    """A scripted model (``protocol/SCRIPTED.md``) that plays ``steps`` the way the model did."""
    return {
        "type": "scripted",
        **script_members(capabilities),
        "steps": steps,
        "fallback": EXHAUSTED,
    }


def _client_line(line: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            return {"text": line.decode("utf-8")}
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(line).decode("ascii")}
    if type(value) is dict and value.get("method") == "initialize":
        params = value.get("params")
        if type(params) is dict and "auth" in params:
            value = {**value, "params": {**params, "auth": REDACTED}}
    return {"line": value}


def _daemon_line(line: bytes) -> dict[str, Any]:
    try:
        return {"line": orjson.loads(line)}
    except orjson.JSONDecodeError:  # never written by the daemon; kept as it came all the same
        return {"text": line.decode("utf-8", "replace")}


def _lines(log: LineLog) -> list[dict[str, Any]]:
    out = []
    for side, at, line, size in log.lines:
        entry: dict[str, Any] = {"from": side, "at": round(at, 6)}
        if size is not None:
            entry |= {"oversized": size, "head": line.decode("utf-8", "replace")}
        else:
            entry |= _client_line(line) if side == CLIENT else _daemon_line(line)
        out.append(entry)
    return out


def _availability(value: Availability | None) -> dict[str, Any] | None:
    return None if value is None else value.to_wire()


def _owners(lines: list[dict[str, Any]]) -> dict[Any, str]:
    """Request id → the session or NPC its response named."""
    owners: dict[Any, str] = {}
    for entry in lines:
        line = entry.get("line")
        if entry["from"] == CLIENT or type(line) is not dict or "method" in line:
            continue
        result = line.get("result")
        if type(result) is dict:
            owner = result.get("session", result.get("npc"))
            if isinstance(owner, str) and isinstance(line.get("id"), str | int):
                owners[line["id"]] = owner
    return owners


def _use(use: UseLog, system: Any, owners: dict[Any, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"use": {"method": use.method, "id": use.request_id}}
    if isinstance(use.request_id, str | int) and use.request_id in owners:
        out["owner"] = owners[use.request_id]
    capabilities = use.capabilities or system.capabilities
    out["script"] = script_of(use.steps, capabilities)
    out["requestDigests"] = use.digests
    out["tokenCounts"] = use.token_counts
    return out


def _render(value: Any, depth: int, indent: str) -> str:
    inner = indent + "  "
    if depth > 0 and isinstance(value, dict) and value:
        items = [f"{inner}{_dump(k)}: {_render(v, depth - 1, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if depth > 0 and isinstance(value, list) and value:
        items = [inner + _render(v, depth - 1, inner) for v in value]
        return "[\n" + ",\n".join(items) + f"\n{indent}]"
    return _dump(value)


def _dump(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def build_document(recorded: RecordedConnection) -> bytes:
    """The file's bytes (call it in a worker thread: it decodes and encodes every line)."""
    lines = _lines(recorded.lines)
    owners = _owners(lines)
    calls = recorded.availability.calls
    document: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "oamd": __version__,
        "recordedAt": recorded.recorded_at,
        "transport": recorded.transport,
        "daemon": recorded.daemon,
        "system": {
            "name": recorded.system.name,
            **script_members(recorded.system.capabilities),
            "availability": {kind: [_availability(a) for a in got] for kind, got in calls.items()},
        },
        "truncated": recorded.budget.truncated,
        "clientClosedAt": recorded.lines.client_closed,
        "uses": [_use(use, recorded.system, owners) for use in recorded.uses],
        "lines": lines,
    }
    items = [f"  {_dump(k)}: {_render(v, EXPAND.get(k, 0), '  ')}" for k, v in document.items()]
    return ("{\n" + ",\n".join(items) + "\n}\n").encode()


def write_document(path: Path, recorded: RecordedConnection) -> None:
    """Writes the file whole or not at all (a temporary file, then renamed)."""
    data = build_document(recorded)
    temporary = path.with_name(path.name + ".part")
    temporary.write_bytes(data)
    temporary.replace(path)


def read_recording(path: Path) -> dict[str, Any]:
    """The recording in ``path``, checked enough for a replay to rely on its shape.

    Raises:
        RecordingError: not readable, not a recording, another version, or truncated.
    """
    try:
        document = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise RecordingError(f"{path}: cannot be read ({exc.strerror or exc}).") from exc
    except orjson.JSONDecodeError as exc:
        raise RecordingError(f"{path}: not JSON ({exc}).") from exc
    if type(document) is not dict or document.get("format") != FORMAT:
        raise RecordingError(f'{path}: not an oamd recording (no "format": "{FORMAT}").')
    if document.get("version") != VERSION:
        raise RecordingError(
            f"{path}: a version {document.get('version')!r} recording; this oamd plays version "
            f"{VERSION}."
        )
    if document.get("truncated"):
        raise RecordingError(
            f"{path}: truncated (the connection passed the recording limit), so it cannot be "
            "played back to its end."
        )
    for key, kind in (("uses", list), ("lines", list), ("daemon", dict), ("system", dict)):
        if not isinstance(document.get(key), kind):
            raise RecordingError(f"{path}: '{key}' is missing or not a {kind.__name__}.")
    return document

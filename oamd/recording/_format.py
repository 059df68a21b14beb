"""The recording file (``docs/RECORDING.md``): one JSON document per connection, written from what
a ``RecordedConnection`` gathered, and read back for ``oamd replay``.

Layout, top to bottom: what it is (``format``, ``version``, ``oamd``, ``recordedAt``, ``transport``),
the daemon's options that shape answers (``daemon``), the system model (``system``: its name and
every availability it reported), ``truncated``, one entry per use of the system model in the order
the requests asked for it (``uses``: the request, the object it made, and a scripted model whose
steps are what the model returned), and every line both ways (``lines``), one per line of the file.
Building it (decoding lines, redacting the socket token, encoding) runs in a worker thread, and
never fails on what a connection sent: a line that cannot be written as JSON (nested past
``MAX_JSON_DEPTH``, a lone surrogate) is kept as its text (or ``base64``), a request id that cannot
be is kept beside its JSON text (``idText``). The file is the owner's only (0600) and written whole
or not at all.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from oamd import __version__
from oamd.backends.base import Availability, ModelCapabilities
from oamd.jsonvalue import nests_deeper_than, without_lone_surrogates
from oamd.limits import MAX_JSON_DEPTH, MAX_RECORDING_FILE_BYTES
from oamd.recording._check import RecordingError, check_document
from oamd.recording._log import CLIENT, LineLog
from oamd.recording._model import AvailabilityLog, Budget, UseLog
from oamd.recording._redact import REDACTED, redact_line

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
FILE_MODE = 0o600
"""A recording holds every prompt and line of a play session: only its owner may read it."""
EXHAUSTED = {
    "error": "generation_failed",
    "message": "The recording has no more model steps for this use.",
}
"""The fallback of a recorded script: a replay that asks the model more than the recording did
fails loudly rather than answering something nobody recorded."""
EXPAND = {"daemon": 1, "system": 3, "uses": 4}
"""How deep each top-level member is laid out one item per line (below that, compact JSON);
``lines`` has one line of the conversation per line of the file."""


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
    secrets: tuple[str, ...] = ()
    """What no line of the file may hold (the socket token), in any form (``redact_line``)."""
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


def _as_text(line: bytes) -> dict[str, Any]:
    try:
        return {"text": line.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(line).decode("ascii")}


def _client_line(line: bytes) -> dict[str, Any]:
    if nests_deeper_than(line, MAX_JSON_DEPTH):  # the daemon refused it; no encoder takes it
        return _as_text(line)
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return _as_text(line)
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


def _lines(log: LineLog, secrets: tuple[str, ...]) -> tuple[list[dict[str, Any]], list[str]]:
    """The entries of ``lines``, and each one as the JSON text the file holds."""
    out, texts = [], []
    for side, at, line, size in log.lines:
        line = redact_line(line, secrets)
        entry: dict[str, Any] = {"from": side, "at": round(at, 6)}
        if size is not None:
            entry |= {"oversized": size, "head": line.decode("utf-8", "replace")}
        else:
            entry |= _client_line(line) if side == CLIENT else _daemon_line(line)
        try:
            text = _dump(entry)
        except TypeError:  # not encodable after all: kept as it came
            entry = {"from": side, "at": entry["at"], **_as_text(line)}
            text = _dump(entry)
        out.append(entry)
        texts.append(text)
    return out, texts


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


def _encodable(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


def _asked(use: UseLog) -> dict[str, Any]:
    """``use``: the request; an id no encoder takes (a lone surrogate, kept as sent) is written
    with U+FFFD for it, and as the JSON text of what was sent (``idText``)."""
    if _encodable(use.request_id):
        return {"method": use.method, "id": use.request_id}
    return {
        "method": use.method,
        "id": without_lone_surrogates(use.request_id),
        "idText": json.dumps(use.request_id),
    }


def _use(use: UseLog, system: Any, owners: dict[Any, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"use": _asked(use)}
    if isinstance(use.request_id, str | int) and use.request_id in owners:
        out["owner"] = owners[use.request_id]
    capabilities = use.capabilities or system.capabilities
    out["script"] = script_of(use.steps, capabilities)
    out["requestDigests"] = use.digests
    out["tokenCounts"] = use.token_counts
    if not _encodable(out):  # what a model said can hold what no encoder takes, too
        out["script"] = without_lone_surrogates(out["script"])
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
    lines, texts = _lines(recorded.lines, recorded.secrets)
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
    }
    items = [f"  {_dump(k)}: {_render(v, EXPAND.get(k, 0), '  ')}" for k, v in document.items()]
    lines_text = "[\n" + ",\n".join("    " + t for t in texts) + "\n  ]" if texts else "[]"
    items.append(f'  "lines": {lines_text}')
    return ("{\n" + ",\n".join(items) + "\n}\n").encode()


def write_document(path: Path, recorded: RecordedConnection) -> None:
    """Writes the file whole or not at all: a temporary file (``FILE_MODE``), then renamed; a
    write that fails (a full disk) removes it, so what is left takes no room.

    Raises:
        OSError: the file could not be written.
    """
    data = build_document(recorded)
    temporary = path.with_name(path.name + ".part")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)  # a full disk can show only now, on a file system that allocates late
        finally:
            os.close(fd)
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_recording(path: Path) -> dict[str, Any]:
    """The recording in ``path``, checked whole (``check_document``): a replay relies on its
    shape, and a file larger than ``MAX_RECORDING_FILE_BYTES`` is not read.

    Raises:
        RecordingError: not readable, too large, not a recording, another version, truncated, or
            a member the replay reads is malformed (the message names it).
    """
    try:
        with path.open("rb") as file:
            data = file.read(MAX_RECORDING_FILE_BYTES + 1)
        if len(data) > MAX_RECORDING_FILE_BYTES:
            raise RecordingError(
                f"{path}: larger than {MAX_RECORDING_FILE_BYTES} bytes, more than any recording "
                "(MAX_RECORDING_FILE_BYTES); not read."
            )
        document = orjson.loads(data)
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
    try:
        check_document(document)
    except RecordingError as exc:
        raise RecordingError(f"{path}: {exc}") from None
    return document

"""``oamd replay`` facing a hostile or broken recording (issue 32): every malformed file is refused
before anything plays, with exit 2 and one stderr line naming what is wrong (docs/RECORDING.md),
never a traceback (exit 1, which reads as "a difference"), never a hang, never memory allocated
from a size the file states; an oversized line within the limits still plays back as recorded."""

from __future__ import annotations

import copy
import json
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from oamd.limits import MAX_RECORDING_FILE_BYTES

OAMD = [sys.executable, "-m", "oamd"]
RUN_SECONDS = 30
MEMORY_BYTES = 2 << 30
"""The address space ``oamd replay`` may take here: far below what an 8 GiB line would need."""
INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1.0"}}'
DECIDE = (
    b'{"jsonrpc":"2.0","id":2,"method":"decision/decide",'
    b'"params":{"situation":"Knights.","options":["attack","flee"]}}'
)
PING = b'{"jsonrpc":"2.0","id":9,"method":"ping"}'


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def replay(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OAMD, "replay", str(path)],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
        preexec_fn=_bounded,
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Any]:
    """A real stdio recording: initialize, a decision on the system model, a line too long, a
    ping."""
    directory = tmp_path_factory.mktemp("recorded")
    long_line = b'{"pad":"' + b"y" * 2000 + b'"}'
    ran = subprocess.run(
        [*OAMD, "stdio", "--record", str(directory), "--max-line-bytes", "1000"],
        input=b"\n".join([INITIALIZE, DECIDE, long_line, PING]) + b"\n",
        capture_output=True,
        timeout=RUN_SECONDS,
        check=True,
    )
    assert b"Traceback" not in ran.stderr
    (path,) = directory.glob("*.json")
    return orjson.loads(path.read_bytes())


def client(document: dict[str, Any], n: int) -> str:
    """Where the ``n``-th client line is (``lines[i]``)."""
    sides = [i for i, e in enumerate(document["lines"]) if e["from"] == "client"]
    return f"lines[{sides[n]}]"


def oversized(document: dict[str, Any]) -> str:
    return next(f"lines[{i}]" for i, e in enumerate(document["lines"]) if "oversized" in e)


def at(document: dict[str, Any], where: str) -> Any:
    """The member ``where`` names (``lines[3]``, ``daemon``)."""
    value: Any = document
    for part in [] if not where else where.replace("]", "").replace("[", ".").split("."):
        value = value[int(part)] if part.isdigit() else value[part]
    return value


def setting(where: Callable[[dict[str, Any]], str], key: str, value: Any) -> Callable:
    """A mutation setting ``key`` of the member ``where`` finds; it names ``where.key``."""

    def mutate(document: dict[str, Any]) -> str:
        place = where(document)
        at(document, place)[key] = value
        return f"{place}.{key}" if place else key

    return mutate


def _bad_base64(document: dict[str, Any]) -> str:
    place = client(document, 1)
    entry = at(document, place)
    del entry["line"]
    entry["base64"] = "!!not base64"
    return f"{place}.base64"


def _deep(document: dict[str, Any]) -> str:
    place = client(document, 3)
    at(document, place)["line"] = orjson.loads(b"[" * 300 + b"]" * 300)
    return f"{place}.line"


def _not_an_object(document: dict[str, Any]) -> str:
    document["lines"].insert(1, 7)
    return "lines[1]"


def _use_is_a_string(document: dict[str, Any]) -> str:
    document["uses"].insert(0, "use")
    return "uses[0]"


def root(_document: dict[str, Any]) -> str:
    return ""


HOSTILE: dict[str, Callable[[dict[str, Any]], str]] = {
    "an 8 GiB oversized line": setting(oversized, "oversized", 8 << 30),
    "a time of 1e300": setting(lambda d: client(d, 2), "at", 1e300),
    "a negative time": setting(lambda d: client(d, 1), "at", -1),
    "a time that is a string": setting(lambda d: client(d, 1), "at", "soon"),
    "a client close at 1e300": setting(root, "clientClosedAt", 1e300),
    "bad base64": _bad_base64,
    "a line that is not an object": _not_an_object,
    "a side that is neither": setting(lambda d: client(d, 0), "from", "player"),
    "a line nested 300 deep": _deep,
    "maxSessions that is a word": setting(lambda d: "daemon", "maxSessions", "many"),
    "a tool timeout of 1e300": setting(lambda d: "daemon", "toolTimeoutSeconds", 1e300),
    "tokenCounts that are words": setting(lambda d: "uses[0]", "tokenCounts", {"ab": "ten"}),
    "an availability answer that is a number": setting(
        lambda d: "system", "availability", {"availability": [3]}
    ),
    "a use that is a string": _use_is_a_string,
    "a script error that is an object": setting(
        lambda d: "uses[0]", "script", {"type": "scripted", "steps": [{"error": {}}]}
    ),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_malformed_recording_is_refused_with_exit_2_naming_what_is_wrong(
    recorded, tmp_path, name
):
    document = copy.deepcopy(recorded)
    named = HOSTILE[name](document)
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(document))  # json: orjson does not write 300 deep
    played = replay(path)
    assert played.returncode == 2 and "Traceback" not in played.stderr, (
        played.returncode,
        played.stdout[-500:],
        played.stderr[-1500:],
    )
    assert played.stdout == "" and str(path) in played.stderr and named in played.stderr


def test_the_recording_replays_and_an_oversized_line_is_sent_at_its_size(recorded, tmp_path):
    path = tmp_path / "recorded.json"
    path.write_bytes(orjson.dumps(recorded))
    played = replay(path)
    assert played.returncode == 0, played.stdout + played.stderr
    daemon = [e["line"] for e in recorded["lines"] if e["from"] == "daemon"]
    assert any("the line has 2010 bytes" in str(line) for line in daemon), (
        daemon
    )  # what it must reproduce


def test_a_file_larger_than_any_recording_is_refused_unread(tmp_path):
    path = tmp_path / "huge.json"
    with path.open("wb") as file:
        file.truncate(MAX_RECORDING_FILE_BYTES + 1)  # sparse: no disk, but too large to read
    played = replay(path)
    assert played.returncode == 2 and "larger than" in played.stderr, played.stderr[-1500:]


@pytest.mark.parametrize("params", [-1, "text", [1], None])
def test_a_recorded_event_whose_params_are_not_an_object_is_a_difference_not_a_traceback(
    recorded, tmp_path, params
):
    document = copy.deepcopy(recorded)
    entry = next(e for e in document["lines"] if e["from"] == "daemon" and "line" in e)
    entry["line"] = {"jsonrpc": "2.0", "method": "session/event", "params": params}
    path = tmp_path / "odd-event.json"
    path.write_bytes(orjson.dumps(document))
    ran = replay(path)
    assert "Traceback" not in ran.stderr, ran.stderr[-2000:]
    assert ran.returncode == 1  # the daemon does not send that line again: a difference

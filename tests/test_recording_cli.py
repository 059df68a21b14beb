"""``--record DIR`` and ``oamd replay`` run as a user runs them: ``oamd stdio`` on an
OpenAI-compatible server (a real one on loopback) records its connection, ``oamd replay DIR``
plays it back with no server and exits 0; a changed line makes it exit 1 with the diff on stdout;
a file that is not a recording exits 2 naming it; ``oamd serve --record`` records each socket
connection, the token left out; and an unusable DIR is a usage error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from backends import fake_http
from recording_support import GATE_TOOL, completion, gate_keeper, keeper
from serve_harness import serve

from oamd.client import connect_stdio

pytestmark = pytest.mark.anyio

OAMD = [sys.executable, "-m", "oamd"]
RUN_SECONDS = 60


def oamd(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OAMD, *argv], capture_output=True, text=True, timeout=RUN_SECONDS, check=False
    )


async def chat(request: bytes, stream: Any) -> None:
    """An OpenAI-compatible server's two routes, whole JSON answers."""
    head, _, body = request.partition(b"\r\n\r\n")
    if head.split(b" ")[1].endswith(b"/models"):
        payload: dict[str, Any] = {"data": [{"id": "gpt", "owned_by": "openai"}]}
    else:
        payload = completion(keeper(orjson.loads(body)), 1)
    data = orjson.dumps(payload)
    await stream.send(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(data)}\r\nconnection: close\r\n\r\n".encode()
        + data
    )


async def record_on_stdio(directory: Path) -> None:
    async with fake_http.serve(chat) as url:
        args = ["--record", str(directory), "--model", f"openai:{url}"]
        async with connect_stdio(args=args, tool_handler=gate_keeper) as client:
            with anyio.fail_after(RUN_SECONDS):
                await client.request("initialize", {"protocolVersion": "1.0"})
                await client.request("session/create", {"session": "g", "tools": [GATE_TOOL]})
                await client.request(
                    "session/respond", {"session": "g", "prompt": "Open the north gate!"}
                )
                await client.request(
                    "decision/decide", {"situation": "Knights.", "options": ["attack", "flee"]}
                )


def tamper(path: Path) -> None:
    """Changes the recorded answer of the session's turn."""
    document = json.loads(path.read_text())
    for entry in document["lines"]:
        if entry["from"] == "daemon" and entry["line"].get("id") == 3:
            entry["line"]["result"]["text"] = "Go away."
    path.write_text(json.dumps(document))


async def test_a_stdio_recording_replays_with_exit_0_and_a_changed_line_exits_1_with_the_diff(
    tmp_path,
):
    await record_on_stdio(tmp_path)
    (path,) = tmp_path.glob("*.json")
    played = oamd("replay", str(tmp_path))
    assert played.returncode == 0, played.stdout + played.stderr
    assert played.stdout.startswith(f"{path}: played back as recorded (")
    tamper(path)
    differed = oamd("replay", str(path))
    assert differed.returncode == 1
    assert differed.stdout.splitlines() == [
        f"{path}: 1 difference",
        "  request 3 (session/respond): line 2 of 2, at result.text",
        '    recorded: "Go away."',
        '    replayed: "The north gate is open. Pass, friend."',
    ]


def test_a_file_that_is_not_a_recording_exits_2_naming_it(tmp_path):
    path = tmp_path / "notes.json"
    path.write_text('{"hello": "world"}')
    refused = oamd("replay", str(path))
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        f'oamd replay: {path}: not an oamd recording (no "format": "oamd-recording").\n'
    )


def test_a_record_directory_that_cannot_take_files_is_a_usage_error(tmp_path):
    taken = tmp_path / "file"
    taken.write_text("")
    refused = oamd("stdio", "--record", str(taken))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.splitlines()[-1] == (
        f"oamd stdio: error: argument --record: {str(taken)!r} is not a directory"
    )


async def test_serve_records_each_connection_without_its_token_and_it_replays(tmp_path):
    async with serve("--record", str(tmp_path), tcp=False, test_methods=False) as daemon:
        async with daemon.connect("unix", token=None) as client:  # same uid: no token needed
            with anyio.fail_after(RUN_SECONDS):
                await client.request("session/create", {"session": "g"})
                await client.request("session/list")
        async with daemon.connect("unix") as client:  # its initialize carries the token
            with anyio.fail_after(RUN_SECONDS):
                await client.request("session/list")
        token = daemon.token
        await daemon.stop()
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 2
    assert all(token not in f.read_text() for f in files)
    played = oamd("replay", str(tmp_path))
    assert played.returncode == 0, played.stdout + played.stderr
    assert played.stdout.endswith("2 of 2 recordings played back as recorded.\n")

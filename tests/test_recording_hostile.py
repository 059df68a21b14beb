"""The recorder facing a hostile or unlucky connection (issue 32): a line it cannot keep as JSON
(nested past what an encoder takes, a lone-surrogate request id) is kept as its text and the rest
goes on, with ``oamd stdio`` exiting 0; the socket token is redacted in every form a line takes (not
plain-JSON-readable, not UTF-8, escaped); files and the folder oamd makes are the owner's only; and
a write that fails (a full disk) leaves no ``*.json.part`` behind."""

from __future__ import annotations

import base64
import errno
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import orjson
import pytest
from recording_support import ChatServer, keeper, recorded_daemon
from serve_harness import read_line, serve

from oamd.recording import _format as recording_format
from oamd.recording import read_recording

pytestmark = pytest.mark.anyio

OAMD = [sys.executable, "-m", "oamd"]
RUN_SECONDS = 60
INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1.0"}}'
PING = b'{"jsonrpc":"2.0","id":9,"method":"ping"}'


def stdio(directory: Path, *lines: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*OAMD, "stdio", "--record", str(directory)],
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        timeout=RUN_SECONDS,
        check=False,
    )


def replay(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OAMD, "replay", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )


def the_file(directory: Path) -> Path:
    (path,) = directory.glob("*.json")
    return path


def client_entries(path: Path) -> list[dict]:
    return [e for e in orjson.loads(path.read_bytes())["lines"] if e["from"] == "client"]


# ---- 5: a line the recorder cannot keep as JSON ------------------------------------------------


def test_a_line_nested_300_deep_is_kept_as_its_text_and_the_rest_is_recorded(tmp_path):
    deep = b"[" * 300 + b"]" * 300
    ran = stdio(tmp_path, INITIALIZE, deep, PING)
    assert ran.returncode == 0 and b"Traceback" not in ran.stderr, ran.stderr.decode()[-2000:]
    entries = client_entries(the_file(tmp_path))
    assert [e.get("text") for e in entries] == [None, deep.decode(), None]
    assert entries[2]["line"]["method"] == "ping"
    played = replay(the_file(tmp_path))
    assert played.returncode == 0, played.stdout + played.stderr


def test_a_lone_surrogate_request_id_on_the_system_model_is_recorded_and_replays(tmp_path):
    decide = (
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"decision/decide",'
        b'"params":{"situation":"Knights.","options":["attack","flee"]}}'
    )
    ran = stdio(tmp_path, INITIALIZE, decide, PING)
    assert ran.returncode == 0 and b"Traceback" not in ran.stderr, ran.stderr.decode()[-2000:]
    document = read_recording(the_file(tmp_path))
    (use,) = document["uses"]
    assert use["use"] == {"method": "decision/decide", "id": "\ufffd", "idText": '"\\ud800"'}
    assert [e.get("text") for e in client_entries(the_file(tmp_path))][1] == decide.decode()
    played = replay(the_file(tmp_path))
    assert played.returncode == 0 and "note:" not in played.stdout, played.stdout + played.stderr


async def test_a_document_that_cannot_be_built_is_logged_and_the_connection_ends_well(
    tmp_path, monkeypatch
):
    def broken(_recorded):
        raise RuntimeError("a bug in building the file")

    monkeypatch.setattr(recording_format, "build_document", broken)
    server = ChatServer(keeper)
    async with recorded_daemon(server.model(), tmp_path) as client:
        with anyio.fail_after(10):
            await client.request("ping")
    assert list(tmp_path.iterdir()) == []


# ---- 6: the token, and who may read the files --------------------------------------------------

TOKEN_FORMS = {
    "a lone surrogate beside it": (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize",'
        b'"params":{"protocolVersion":"1.0","auth":"TOKEN","clientInfo":{"name":"\\udc00"}}}'
    ),
    "Latin-1 bytes beside it": (
        '{"jsonrpc":"2.0","id":1,"method":"initialize",'
        '"params":{"protocolVersion":"1.0","auth":"TOKEN","clientInfo":{"name":"Caf\xe9"}}}'
    ).encode("latin-1"),
    "an escaped key and value": (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize",'
        b'"params":{"protocolVersion":"1.0","\\u0061uth":"ESCAPED","x":"\\udc00"}}'
    ),
    "a broken line": b'{"method":"initialize","params":{"auth":"TOKEN"',
}


async def test_the_socket_token_is_redacted_in_every_form_of_a_line(tmp_path):
    records = tmp_path / "records"
    async with serve("--record", str(records), tcp=False, test_methods=False) as daemon:
        token = daemon.token
        escaped = "".join(f"\\u{ord(c):04x}" for c in token)
        for raw in TOKEN_FORMS.values():
            raw = raw.replace(b"TOKEN", token.encode()).replace(b"ESCAPED", escaped.encode())
            stream = await daemon.raw("unix")
            pending = bytearray()
            async with stream:
                with anyio.fail_after(RUN_SECONDS):
                    await stream.send(raw + b"\n" + PING + b"\n")
                    while (answer := await read_line(stream, pending)) is not None:
                        if answer.get("id") == 9:
                            break
        await daemon.stop()
    files = sorted(records.glob("*.json"))
    assert len(files) == len(TOKEN_FORMS)
    for path in files:
        data = path.read_bytes()
        (first, _ping) = client_entries(path)
        kept = first["text"].encode() if "text" in first else base64.b64decode(first["base64"])
        assert token.encode() not in data + kept and escaped.encode() not in data + kept, kept
        assert b"<redacted>" in kept, first


async def test_recordings_and_the_folder_oamd_makes_are_the_owners_only(tmp_path):
    made = tmp_path / "made" / "here"
    os.umask(old := os.umask(0o022))
    try:
        ran = stdio(made, INITIALIZE, PING)
    finally:
        os.umask(old)
    assert ran.returncode == 0, ran.stderr.decode()[-2000:]
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "made").stat().st_mode) == 0o700
    assert stat.S_IMODE(the_file(made).stat().st_mode) == 0o600


# ---- 9: a write that fails leaves no part file ---------------------------------------------------


async def test_a_failed_write_removes_its_part_file(tmp_path, monkeypatch):
    def fails(self, target):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(Path, "replace", fails)
    server = ChatServer(keeper)
    async with recorded_daemon(server.model(), tmp_path) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def tiny_disk(tmp_path):
    where = tmp_path / "tiny"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", f"oamd-{uuid.uuid4().hex[:8]}", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_leaves_no_part_file_and_the_next_recording_fits(tiny_disk):
    big = b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"' + b"x" * 60_000 + b'"}}'
    ran = stdio(tiny_disk, INITIALIZE, big, big)
    assert ran.returncode == 0, ran.stderr.decode()[-2000:]
    assert b"recording_not_written" in ran.stderr
    assert list(tiny_disk.iterdir()) == []
    again = stdio(tiny_disk, INITIALIZE, PING)
    assert again.returncode == 0 and len(list(tiny_disk.glob("*.json"))) == 1


# ---- a daemon line longer than --max-line-bytes (the input limit) --------------------------------


def test_a_daemon_line_longer_than_the_input_line_limit_is_kept_whole_and_replays(tmp_path):
    ran = subprocess.run(
        [*OAMD, "stdio", "--record", str(tmp_path), "--max-line-bytes", "1000"],
        input=INITIALIZE + b"\n" + PING + b"\n",
        capture_output=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr.decode()[-2000:]
    daemon = [
        e for e in orjson.loads(the_file(tmp_path).read_bytes())["lines"] if e["from"] == "daemon"
    ]
    assert len(orjson.dumps(daemon[0]["line"])) > 1000  # initialize's result
    played = replay(the_file(tmp_path))
    assert played.returncode == 0, played.stdout + played.stderr

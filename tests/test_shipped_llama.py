"""The executable with llama.cpp and the default model (``make dist-llama``: ``dist/oamd-llama/``),
opt-in: skipped until built, and not a ``make test`` prerequisite (a 200 MB bundle). Run on a
machine without Python, ``--model llamacpp`` finds the bundled SmolLM2 and answers a turn."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import orjson
import pytest

LLAMA_EXECUTABLE = Path(__file__).resolve().parent.parent / "dist" / "oamd-llama" / "oamd"
TURN_TIMEOUT = 120  # seconds: model load (~0.2 s) and a short reply on two cores, bounded


@pytest.fixture
def run(tmp_path: Path):
    if not LLAMA_EXECUTABLE.is_file():
        pytest.skip(f"{LLAMA_EXECUTABLE} is not built (make dist-llama)")
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {"PATH": str(empty_bin), "HOME": str(tmp_path)}  # no Python to fall back on

    def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(LLAMA_EXECUTABLE), *args, "--model", "llamacpp"],
            cwd=tmp_path,
            env=env,
            input=stdin,
            capture_output=True,
            timeout=TURN_TIMEOUT,
        )

    return run


def test_check_finds_the_bundled_model(run) -> None:
    done = run("check")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    availability = json.loads(done.stdout)
    assert availability["available"] is True
    assert "/_internal/models/" in availability["detail"]


def test_a_session_responds_through_the_bundled_model(run) -> None:
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "1.0"}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/create", "params": {}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/respond",
            "params": {"session": "s1", "prompt": "Greet the blacksmith in one sentence."},
        },
    ]
    done = run("stdio", stdin=b"".join(orjson.dumps(r) + b"\n" for r in requests))
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    replies = {r["id"]: r for r in map(orjson.loads, done.stdout.splitlines()) if "id" in r}
    assert replies[1]["result"]["model"]["available"] is True
    respond = replies[3]
    assert "result" in respond, respond
    assert respond["result"]["text"].strip()
    assert respond["result"]["usage"]["outputTokens"] > 0

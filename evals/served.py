"""``python -m evals.served [--choices likelihood|generation] [evals options]``: the evals
against the packaged SmolLM2 served by llama-cpp-python's OpenAI-compatible server (what ``make
llama-server`` runs), through ``--model openai:…?prompts=compact``: the small-model layout on the
OpenAI path, measured beside the embedded figures of ``python -m evals``.

The server (``evals.llama_server``) is started on a free port of 127.0.0.1 with every core,
waited for by its log line (never a sleep), and stopped when the evals end. Closed choices are decoded by default:
llama-cpp-python serves echoed log-probabilities, but sorts the vocabulary for every prompt
token to do it (minutes for one NPC candidate), so ``--choices likelihood`` is for trying a
short scenario, not the grounded sets.
"""

from __future__ import annotations

import argparse
import os
import sys

from evals.__main__ import main as evals_main
from evals.llama_server import running_server
from oamd.backends.llamacpp.model import packaged_model_path

SERVER_CONTEXT = 4096


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evals.served", description=__doc__)
    parser.add_argument("--choices", choices=("generation", "likelihood"), default="generation")
    args, rest = parser.parse_known_args(argv)
    if any(a == "--model" or a.startswith("--model=") for a in rest):
        parser.error("--model is the served model's; leave it out")
    if packaged_model_path() is None:
        raise SystemExit("evals.served: the packaged model is missing (make .venv/.installed)")
    with running_server(threads=os.cpu_count() or 1, context=SERVER_CONTEXT) as server:
        spec = f"{server.spec(ctx=str(SERVER_CONTEXT))}&prompts=compact&choices={args.choices}"
        return evals_main(["--model", spec, *rest])


if __name__ == "__main__":
    sys.exit(main())

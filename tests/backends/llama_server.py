"""The real llama-cpp-python server the OpenAI backend's happy-path tests run against: one
process on 127.0.0.1 with the packaged SmolLM2-135M, one thread and a 2,048-token context
(``evals.llama_server``, which the OpenAI path's evals start too)."""

from __future__ import annotations

from evals.llama_server import SERVER_CONTEXT, LlamaServer, missing_reason, running_server

__all__ = ["SERVER_CONTEXT", "LlamaServer", "missing_reason", "running_server"]

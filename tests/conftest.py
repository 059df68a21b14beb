"""Fixtures: a daemon behind an in-memory client, or a real ``oamd stdio`` subprocess, with every
message the daemon sends checked against ``protocol/`` and kept by a ``Recorder``
(``client.recorder.received``, ``.notifications``, ``.tool_calls``, ``.events_for(id)``)."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from backends.llama_server import LlamaServer, missing_reason, running_server
from contract import (
    METHODS,
    validate_client_request,
    validate_error,
    validate_notification,
    validate_result,
)
from hypothesis import settings

from oamd.bridge.state import DaemonConfig
from oamd.client import Client, Recorder
from oamd.daemon import build_registry, default_config, serve_stream
from oamd.rpc import Registry
from oamd.transport import memory_stream_pair

OAMD = [sys.executable, "-m", "oamd"]

# Every daemon a test starts keeps what it derives from a model (a faster copy of the packaged
# SmolLM2) in a model store of this test run's own, never in the user's.
_STORE = tempfile.mkdtemp(prefix="oamd-test-models-")
os.environ["OAMD_MODELS"] = _STORE
atexit.register(shutil.rmtree, _STORE, ignore_errors=True)

# CI replays the same examples every run (a red CI must be reproducible); locally they stay random
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def contract_checker(recorder: Recorder) -> Callable[[dict[str, Any]], None]:
    """Validates every message from the daemon against the protocol contract (a response by the
    method ``recorder`` saw its request sent with)."""

    def check(msg: dict[str, Any]) -> None:
        assert msg.get("jsonrpc") == "2.0", msg
        if "method" in msg:
            if "id" in msg:
                validate_client_request(msg["method"], msg["params"])
            else:
                validate_notification(msg["method"], msg["params"])
            return
        if "error" in msg:
            validate_error(msg["error"])
            return
        method = recorder.sent_methods.get(msg["id"])
        if method in METHODS:  # test-only methods have no contract
            validate_result(method, msg["result"])

    return check


def recording() -> dict[str, Any]:
    """Client arguments that keep the traffic and check every message against the contract."""
    recorder = Recorder()
    return {"recorder": recorder, "on_message": contract_checker(recorder)}


@asynccontextmanager
async def memory_daemon(
    config: DaemonConfig | None = None, *, registry: Registry | None = None, **client_kwargs: Any
) -> AsyncIterator[Client]:
    """A daemon served in this process over memory streams, and a recording client bound to it."""
    config = config or default_config(test_methods=True)
    registry = registry or build_registry(config)
    ours, theirs = memory_stream_pair()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_stream(theirs, config, registry=registry))
        async with Client(ours, **{**recording(), **client_kwargs}) as client:
            yield client
        tg.cancel_scope.cancel()


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with memory_daemon() as c:
        yield c


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """A real llama-cpp-python server with the packaged model, shared by the OpenAI backend's
    tests (skipped where llama.cpp or its server extra is missing)."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    with running_server() as server:
        yield server

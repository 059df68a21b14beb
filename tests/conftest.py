"""Fixtures: a daemon behind an in-memory client, or a real ``oamd stdio`` subprocess, with every
message the daemon sends checked against ``protocol/``."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from contract import (
    METHODS,
    validate_client_request,
    validate_error,
    validate_notification,
    validate_result,
)
from hypothesis import settings

from oamd.app import build_registry, default_config, serve_stream
from oamd.client import Client
from oamd.methods.state import DaemonConfig
from oamd.rpc import Registry
from oamd.transport import memory_stream_pair

OAMD = [sys.executable, "-m", "oamd"]

# CI replays the same examples every run (a red CI must be reproducible); locally they stay random
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def contract_checker(client_ref: list[Client]) -> Callable[[dict[str, Any]], None]:
    """Validates every message from the daemon against the protocol contract."""

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
        method = client_ref[0].sent_methods.get(msg["id"]) if client_ref else None
        if method in METHODS:  # test-only methods have no contract
            validate_result(method, msg["result"])

    return check


@asynccontextmanager
async def memory_daemon(
    config: DaemonConfig | None = None, *, registry: Registry | None = None, **client_kwargs: Any
) -> AsyncIterator[Client]:
    """A daemon served in this process over memory streams, and a client bound to it."""
    config = config or default_config(test_methods=True)
    registry = registry or build_registry(config)
    ours, theirs = memory_stream_pair()
    ref: list[Client] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_stream(theirs, config, registry=registry))
        client = Client(ours, on_message=contract_checker(ref), **client_kwargs)
        ref.append(client)
        async with client:
            yield client
        tg.cancel_scope.cancel()


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with memory_daemon() as c:
        yield c

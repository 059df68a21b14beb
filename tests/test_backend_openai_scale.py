"""Many turns against one batching server (vLLM, a llama.cpp server farm): the OpenAI-compatible
backend reuses its connections. Driven through the protocol (the in-memory daemon); the fake
server counts, and the tests assert counts, never times."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from backends.batching_server import running
from conftest import memory_daemon

from oamd.app import default_config
from oamd.backends.spec import model_from_spec
from oamd.client import Client

pytestmark = pytest.mark.anyio

FIXED = "#m?tools=envelope&json=none&top_k=off"
"""Every choice fixed: no probe precedes the steps."""


@asynccontextmanager
async def daemon_on(url: str, options: str = "") -> AsyncIterator[Client]:
    model = model_from_spec(f"openai:{url}{FIXED}{options}")
    try:
        async with memory_daemon(default_config(model)) as client:
            yield client
    finally:
        await model.aclose()


async def test_turns_one_after_another_reuse_one_connection():
    async with running() as (server, url), daemon_on(url) as client:
        with anyio.fail_after(30):
            session = (await client.request("session/create", {}))["session"]
            for i in range(3):
                await client.request("session/respond", {"session": session, "prompt": f"{i}"})
    assert server.connections == 1

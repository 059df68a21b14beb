"""Many sessions against one batching server (vLLM, a llama.cpp server farm): the OpenAI-compatible
backend keeps as many chat completions in flight as its ``max_in_flight`` allows (256 by
default, past httpx's default pool of 100), admits the rest first come first served, and reuses
its connections. Driven through the protocol (the in-memory daemon); the fake server counts, and
the tests assert counts, never times: completions in flight together, connections opened, the
order the prompts arrived in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from backends.batching_server import REPLY, BatchingServer, running
from conftest import memory_daemon

from oamd.backends.spec import model_from_spec
from oamd.client import Client
from oamd.daemon import default_config

pytestmark = pytest.mark.anyio

SESSIONS = 150
"""Past httpx's default pool (100 connections), below the default ``max_in_flight`` (256)."""

FIXED = "#m?tools=envelope&json=none&top_k=off"
"""Every choice fixed: no probe precedes the steps."""


@asynccontextmanager
async def daemon_on(url: str, options: str = "") -> AsyncIterator[Client]:
    model = model_from_spec(f"openai:{url}{FIXED}{options}")
    try:
        async with memory_daemon(default_config(model, max_sessions=SESSIONS)) as client:
            yield client
    finally:
        await model.aclose()


async def turns_at_once(client: Client, server: BatchingServer, count: int) -> list[Any]:
    """``count`` sessions each start a turn; once the server holds ``server.target`` of them
    together (or a generous while passed: the count then says how many it got), all answer."""
    sessions = [(await client.request("session/create", {}))["session"] for _ in range(count)]
    ids = [
        await client.start("session/respond", {"session": s, "prompt": f"Line {i}."})
        for i, s in enumerate(sessions)
    ]
    with anyio.move_on_after(10):
        await server.reached.wait()
    server.release.set()
    return [await client.wait(i) for i in ids]


async def test_a_hundred_and_fifty_sessions_have_all_their_steps_in_flight_at_once():
    async with running(target=SESSIONS) as (server, url), daemon_on(url) as client:
        server.hold = True
        with anyio.fail_after(30):
            replies = await turns_at_once(client, server, SESSIONS)
    assert server.peak == SESSIONS
    assert [r.get("result", r).get("text") for r in replies] == [REPLY] * SESSIONS


async def test_steps_past_max_in_flight_wait_and_all_answer():
    cap = 120
    async with (
        running(target=cap) as (server, url),
        daemon_on(url, f"&max_in_flight={cap}") as client,
    ):
        server.hold = True
        with anyio.fail_after(30):
            replies = await turns_at_once(client, server, SESSIONS)
    assert server.peak == cap
    assert [r.get("result", r).get("text") for r in replies] == [REPLY] * SESSIONS
    assert server.connections <= cap + 1  # the places' connections, reused; and the probe's


async def test_waiting_steps_are_sent_first_come_first_served():
    async with (
        running(target=1) as (server, url),
        daemon_on(url, "&max_in_flight=1") as client,
    ):
        server.hold = True
        with anyio.fail_after(30):
            replies = await turns_at_once(client, server, 10)
    assert [r["result"]["text"] for r in replies] == [REPLY] * 10
    assert server.prompts == [f"Line {i}." for i in range(10)]


async def test_turns_one_after_another_reuse_one_connection():
    async with running() as (server, url), daemon_on(url) as client:
        with anyio.fail_after(30):
            session = (await client.request("session/create", {}))["session"]
            for i in range(3):
                await client.request("session/respond", {"session": session, "prompt": f"{i}"})
    assert server.connections == 1

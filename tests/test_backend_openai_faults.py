"""Backend fault injection: an OpenAI-compatible server that fails in every way a real one does
(HTTP errors, 429 with Retry-After, a stall past the step timeout, a stream cut mid-token or
ended early, junk JSON and junk events, a connection closed before or during its answer) fails
the turn with its row of the error table, leaves the session's history as it was, and the same
session then completes a normal turn. Driven through the protocol (the in-memory daemon) on
both tool loops: the envelope loop (a llama-cpp-python server) and the native one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from backends.fault_server import FAULTS, ODD_ANSWERS, REPLY, FaultServer, running
from conftest import memory_daemon

from oamd.agent import turn_spec
from oamd.backends.spec import model_from_spec
from oamd.client import Client
from oamd.daemon import default_config

pytestmark = pytest.mark.anyio

STEP_TIMEOUT_SECONDS = 0.3
"""The spec's ``timeout`` (longest silence in a response): a stall fails within a second."""

STEP_DEADLINE_SECONDS = 0.8
"""The spec's ``deadline`` (longest a step takes in all): a server that keeps sending without
finishing fails within a second."""

LOOPS = {"envelope": "me", "native": "vllm"}
"""Tool loop → the ``owned_by`` that selects it."""

EXPECTED = {
    "http_500": (-32012, "generation_failed"),
    "http_502_text": (-32012, "generation_failed"),
    "http_503": (-32010, "busy"),
    "http_503_retry_after_an_hour": (-32010, "busy"),
    "http_429": (-32005, "rate_limited"),
    "http_429_retry_after_inf": (-32005, "rate_limited"),
    "http_503_retry_after_1e400": (-32010, "busy"),
    "stall": (-32012, "generation_failed"),
    "stall_mid_stream": (-32012, "generation_failed"),
    "keep_alive_for_ever": (-32012, "generation_failed"),
    "trickle_for_ever": (-32012, "generation_failed"),
    "stream_cut_mid_token": (-32012, "generation_failed"),
    "stream_ended_early": (-32012, "generation_failed"),
    "stream_interrupted": (-32012, "generation_failed"),
    "junk_json": (-32012, "generation_failed"),
    "json_of_another_shape": (-32012, "generation_failed"),
    "junk_events": (-32012, "generation_failed"),
    "events_of_another_shape": (-32012, "generation_failed"),
    "close_before_answer": (-32012, "generation_failed"),
    "close_mid_answer": (-32012, "generation_failed"),
    "content_not_a_string": (-32012, "generation_failed"),
}
"""Fault → the error (code, ``data.code``) its turn fails with, as ``protocol/errors.json``."""


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    """The agent's waits between retried attempts shrink to 10 ms: these tests are about where
    a fault lands, not about the backoff (``test_envelope_run_turn`` covers that)."""
    monkeypatch.setattr(turn_spec, "RETRY_FIRST_WAIT_SECONDS", 0.01)


def test_every_fault_has_its_expected_error():
    assert set(EXPECTED) == set(FAULTS)


@asynccontextmanager
async def session_on(loop: str) -> AsyncIterator[tuple[FaultServer, Client]]:
    """A daemon whose system model is a fault server's, with session ``inn`` created."""
    async with running(LOOPS[loop]) as (server, url):
        model = model_from_spec(
            f"openai:{url}?timeout={STEP_TIMEOUT_SECONDS}&deadline={STEP_DEADLINE_SECONDS}"
        )
        try:
            async with memory_daemon(default_config(model)) as client:
                await client.request("initialize", {"protocolVersion": "1.0"})
                await client.request("session/create", {"session": "inn"})
                yield server, client
        finally:
            await model.aclose()


async def history(client: Client) -> tuple[int, list[dict[str, Any]]]:
    """``session/list``'s entry count and the transcript's entries of session ``inn``."""
    listed = (await client.request("session/list"))["sessions"][0]["entries"]
    saved = await client.request("session/transcript", {"session": "inn"})
    return listed, saved["transcript"]["transcript"]["entries"]


@pytest.mark.parametrize("loop", list(LOOPS))
@pytest.mark.parametrize("fault", list(FAULTS))
async def test_a_server_fault_fails_the_turn_by_the_table_and_the_session_then_answers(loop, fault):
    async with session_on(loop) as (server, client):
        with anyio.fail_after(10):
            server.fault = FAULTS[fault]
            failed = await client.call("session/respond", {"session": "inn", "prompt": "Hello?"})
            after_failure = await history(client)
            asked = server.completions
            server.fault = None
            result = await client.request("session/respond", {"session": "inn", "prompt": "Hi!"})
            after_success = await history(client)
    code, name = EXPECTED[fault]
    assert "result" not in failed, failed
    assert (failed["error"]["code"], failed["error"]["data"]["code"]) == (code, name)
    assert asked >= 1
    assert after_failure == (0, [])  # no half turn
    assert result["text"] == REPLY
    assert after_success[0] == 2
    assert [(e["kind"], e.get("text")) for e in after_success[1]] == [
        ("prompt", "Hi!"),
        ("response", REPLY),
    ]


@pytest.mark.parametrize("loop", list(LOOPS))
@pytest.mark.parametrize("odd", list(ODD_ANSWERS))
async def test_an_answer_in_a_shape_json_and_sse_allow_is_read_whole(loop, odd):
    answer, text = ODD_ANSWERS[odd]
    async with session_on(loop) as (server, client):
        with anyio.fail_after(10):
            server.fault = answer
            result = await client.request("session/respond", {"session": "inn", "prompt": "Hi!"})
            entries, saved = await history(client)
    assert result["text"] == text
    assert entries == 2
    assert server.completions == 1  # read at the first attempt, not retried into shape
    assert [(e["kind"], e.get("text")) for e in saved] == [("prompt", "Hi!"), ("response", text)]


async def test_a_content_that_is_not_a_string_fails_the_step_naming_it():
    async with session_on("native") as (server, client):
        with anyio.fail_after(10):
            server.fault = FAULTS["content_not_a_string"]
            failed = await client.call("session/respond", {"session": "inn", "prompt": "Hi!"})
    assert failed["error"]["data"]["code"] == "generation_failed"
    assert "'content' is a number, not a string" in failed["error"]["message"]


@pytest.mark.parametrize("loop", list(LOOPS))
@pytest.mark.parametrize(
    "fault",
    ["http_500", "stream_ended_early", "stream_interrupted", "junk_events", "close_mid_answer"],
)
async def test_a_fault_that_clears_before_the_attempts_run_out_leaves_only_the_answer(loop, fault):
    async with session_on(loop) as (server, client):
        with anyio.fail_after(10):
            server.fault, server.times = FAULTS[fault], 1
            result = await client.request("session/respond", {"session": "inn", "prompt": "Hi!"})
            entries, saved = await history(client)
    assert server.completions == 2
    assert result["text"] == REPLY
    assert entries == 2
    assert [(e["kind"], e.get("text")) for e in saved] == [("prompt", "Hi!"), ("response", REPLY)]


@pytest.mark.parametrize("loop", list(LOOPS))
@pytest.mark.parametrize(
    ("fault", "name", "seconds", "quoted"),
    [
        ("http_429", "rate_limited", 60, "slow down"),
        ("http_503_retry_after_an_hour", "busy", 3600, "loading model"),
        ("http_429_retry_after_inf", "rate_limited", 86400, "slow down"),  # a day at most
        ("http_503_retry_after_1e400", "busy", 86400, "loading model"),
    ],
)
async def test_a_failure_asking_to_wait_past_five_seconds_fails_at_once_with_its_retry_after(
    loop, fault, name, seconds, quoted
):
    async with session_on(loop) as (server, client):
        with anyio.fail_after(10):
            server.fault = FAULTS[fault]
            failed = await client.call("session/respond", {"session": "inn", "prompt": "Hello?"})
            server.fault = None
            after = await client.request("session/respond", {"session": "inn", "prompt": "Hi!"})
    data = failed["error"]["data"]
    assert (data["code"], data["retryAfterSeconds"], data["retryAfter"]) == (
        name,
        seconds,
        f"PT{seconds}S",
    )
    assert quoted in failed["error"]["message"]
    assert server.completions == 2  # not retried (longer than a turn waits), then the next turn
    assert after["text"] == REPLY


async def test_a_stall_fails_once_the_step_timeout_passes_on_every_attempt():
    async with session_on("envelope") as (server, client):
        with anyio.fail_after(10):
            server.fault = FAULTS["stall"]
            started = anyio.current_time()
            failed = await client.call("session/respond", {"session": "inn", "prompt": "Hello?"})
            waited = anyio.current_time() - started
    assert failed["error"]["data"]["code"] == "generation_failed"
    assert "timed out" in failed["error"]["message"]
    assert (
        server.completions == 2
    )  # the session's two attempts (maxAttempts), each cut at the timeout
    assert waited < 3 * STEP_TIMEOUT_SECONDS + 1


@pytest.mark.parametrize("fault", ["keep_alive_for_ever", "trickle_for_ever"])
async def test_a_server_that_keeps_sending_fails_the_step_at_its_deadline(fault):
    async with session_on("envelope") as (server, client):
        with anyio.fail_after(10):
            server.fault = FAULTS[fault]
            started = anyio.current_time()
            failed = await client.call("session/respond", {"session": "inn", "prompt": "Hello?"})
            waited = anyio.current_time() - started
    assert failed["error"]["data"]["code"] == "generation_failed"
    assert f"within {STEP_DEADLINE_SECONDS:g} s" in failed["error"]["message"]
    assert server.completions == 2  # both attempts, each cut at the deadline, not the timeout
    assert 2 * STEP_DEADLINE_SECONDS <= waited < 2 * STEP_DEADLINE_SECONDS + 1.5

"""Per-request timeouts: ``timeout=`` on ``Client.request`` / ``call`` ends a request with
``TimeoutError`` and drops its late answer; on the typed API a timed-out turn (``respond``,
``talk``) is also cancelled in the daemon, so what is queued behind it on that session or NPC is
not held up, and any other call only stops waiting."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from test_client import connected

from oamd.client import Bridge, Recorder

pytestmark = pytest.mark.anyio

SHORT = 0.1
"""Seconds a request is given where nothing will answer it in time."""


async def test_a_request_past_its_timeout_raises_timeout_error_and_its_late_answer_is_dropped():
    async with connected(recorder=Recorder()) as (client, peer):
        with pytest.raises(TimeoutError) as timed_out:
            await client.request("ping", timeout=SHORT)
        assert str(timed_out.value) == f"No answer to ping (request 1) within {SHORT} s."
        late = await peer.read()
        await peer.write({"jsonrpc": "2.0", "id": late["id"], "result": {"late": True}})
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.answer)
            assert await client.request("ping", timeout=5) == {}  # its own answer, not the late one
    assert [m.get("result") for m in client.recorder.received] == [{"late": True}, {}]


async def test_a_request_answered_within_its_timeout_returns_its_result():
    async with connected() as (client, peer):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.answer)
            response = await client.call("ping", timeout=5)
    assert response["result"] == {}


# ---- the typed API: a timed-out turn is cancelled ----------------------------------------------

SLOW_MS = 60_000
"""A model step that outlasts every test: only a cancel ends it in time."""

LINE = {"emotion": "neutral", "line": "Hm.", "player_options": [], "ends_conversation": False}


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


def cancelled_answers(client: Any, method: str) -> list[dict[str, Any]]:
    """The late answers to ``method`` requests that were ``cancelled`` (recorded, then dropped)."""
    return [
        m
        for m in client.recorder.received
        if client.recorder.sent_methods.get(m.get("id")) == method
        and m.get("error", {}).get("data", {}).get("code") == "cancelled"
    ]


@pytest.fixture
async def bridge(client) -> Bridge:
    bridge = Bridge(client)
    with anyio.fail_after(5):
        await bridge.initialize("tests")
    return bridge


async def test_a_timed_out_turn_is_cancelled_so_the_next_turn_of_its_session_runs_at_once(bridge):
    model = scripted({"text": "Too late.", "delayMs": SLOW_MS}, {"text": "At once."})
    with anyio.fail_after(5):
        guard = await bridge.create_session(session="guard", model=model)
        with pytest.raises(TimeoutError, match="No answer to session/respond"):
            await guard.respond("Open the gate.", timeout=SHORT)
        reply = await guard.respond("Now?")  # queued behind a minute's step, were it not cancelled
    assert reply.text == "At once."
    [late] = cancelled_answers(bridge.client, "session/respond")
    assert late["error"]["data"]["code"] == "cancelled"


async def test_a_timed_out_npc_exchange_is_cancelled_so_the_next_one_runs_at_once(bridge):
    model = scripted({"json": LINE, "delayMs": SLOW_MS}, {"json": {**LINE, "line": "Yes?"}})
    with anyio.fail_after(5):
        gorm = await bridge.create_npc({"name": "Gorm"}, npc="gorm", model=model)
        with pytest.raises(TimeoutError, match="No answer to npc/talk"):
            await gorm.talk("Hello.", timeout=SHORT)
        reply = await gorm.talk("Hello?")
    assert reply.line == "Yes?"
    assert len(cancelled_answers(bridge.client, "npc/talk")) == 1


async def test_a_timed_out_decision_raises_timeout_error(bridge):
    slow = {"json": {"reasoning": "Hm.", "choice": "wait", "confidence": 50}, "delayMs": SLOW_MS}
    with anyio.fail_after(5), pytest.raises(TimeoutError, match="No answer to decision/decide"):
        await bridge.decide("A noise.", ["wait", "run"], model=scripted(slow), timeout=SHORT)
    with anyio.fail_after(5):
        await bridge.ping(timeout=5)  # the client goes on

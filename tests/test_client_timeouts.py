"""Per-request timeouts: ``timeout=`` on ``Client.request`` / ``call`` ends a request with
``TimeoutError`` and drops its late answer."""

from __future__ import annotations

import anyio
import pytest
from test_client import connected

from oamd.client import Recorder

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

"""Core methods (§5) through the protocol: initialize, ping, model/availability, shutdown."""

from __future__ import annotations

import anyio
import orjson
import pytest
from conftest import memory_daemon
from contract import METHODS

from oamd.client import RpcError

pytestmark = pytest.mark.anyio


async def test_initialize_reports_server_capabilities_and_model(client):
    result = await client.request(
        "initialize", {"client": {"name": "MyGame", "version": "1.2"}, "protocolVersion": "1.0"}
    )
    assert result["protocolVersion"] == "1.0"
    assert result["server"]["name"] == "oamd"
    caps = result["capabilities"]
    assert {"initialize", "ping", "model/availability", "shutdown"} <= set(caps["methods"])
    assert {m for m in caps["methods"] if not m.startswith("test/")} <= set(METHODS)
    assert caps["models"] == ["system", "scripted"]
    assert caps["batch"] is False and caps["maxSessions"] == 64
    assert result["model"]["available"] is False


@pytest.mark.parametrize("version", ["2.0", "0.9", "10", "01.0", "", " 1.0"])
async def test_initialize_rejects_another_major_version(client, version):
    with pytest.raises(RpcError) as err:
        await client.request("initialize", {"protocolVersion": version})
    assert err.value.code == -32602
    assert err.value.message == f"Unsupported protocol version '{version}'; this bridge speaks 1.0."


@pytest.mark.parametrize("version", ["1", "1.7", "1.0.3", ".1", "1."])
async def test_initialize_accepts_the_same_major_version_in_any_form(client, version):
    result = await client.request("initialize", {"protocolVersion": version})
    assert result["protocolVersion"] == "1.0"


async def test_initialize_accepts_a_minor_version_and_no_version(client):
    assert (await client.request("initialize", {"protocolVersion": "1.7"}))["protocolVersion"]
    assert (await client.request("initialize"))["protocolVersion"] == "1.0"


async def test_initialize_rejects_a_non_string_version(client):
    with pytest.raises(RpcError) as err:
        await client.request("initialize", {"protocolVersion": 1})
    assert err.value.code == -32602 and "'protocolVersion'" in err.value.message


async def test_ping_returns_empty_object(client):
    assert await client.request("ping") == {}


async def test_model_availability_without_a_configured_model_says_how_to_configure_one(client):
    result = await client.request("model/availability")
    assert result["available"] is False
    assert result["reason"] == "not_configured"
    assert result["status"] == "unavailable"
    assert "--model" in result["detail"]


async def test_shutdown_cancels_work_answers_then_rejects_everything_after():
    async with memory_daemon() as client:
        sleeper = await client.start("test/sleep", {"ms": 30_000})
        with anyio.fail_after(5):
            shutdown = await client.start("shutdown")
            later = await client.start("ping")
            sleep_response = await client.wait(sleeper)
            assert sleep_response["error"]["code"] == -32009
            assert (await client.wait(shutdown))["result"] == {}
            late = await client.wait(later)
        assert late["error"]["code"] == -32023
        assert late["error"]["data"]["code"] == "shut_down"
        order = [m.get("id") for m in client.recorder.received]
        assert order.index(sleeper) < order.index(shutdown) < order.index(later)


async def test_requests_pipelined_behind_shutdown_are_answered_after_it_in_arrival_order():
    """§2: arrival order. ``shutdown``'s response comes first, then -32023 for each request
    read after it (once the response is out the connection closes and reads nothing more)."""
    async with memory_daemon() as client:
        lines = [{"jsonrpc": "2.0", "id": "bye", "method": "shutdown"}]
        lines += [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(3)]
        await client.send_raw(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        with anyio.fail_after(5):
            await client.closed()
    answered = [m["id"] for m in client.recorder.received]
    assert answered == ["bye", 0, 1, 2]
    assert all(m["error"]["data"]["code"] == "shut_down" for m in client.recorder.received[1:])

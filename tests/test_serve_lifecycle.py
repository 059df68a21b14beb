"""``oamd serve`` lifecycle: clients that vanish mid-turn, clients that stop reading, and the drain
on SIGTERM/SIGINT."""

from __future__ import annotations

import os
import signal
from typing import Any

import anyio
import pytest
from serve_harness import Daemon, line, logged_events, read_to_end, serve

from oamd.limits import DRAIN_SECONDS

pytestmark = pytest.mark.anyio

LONG_MS = 10_000
"""A scripted delay that only ends by cancellation: no test waits for it to elapse."""

OPEN_GATE = {
    "name": "open_gate",
    "description": "Ask the game to open a gate.",
    "parameters": {"type": "object", "properties": {"gate": {"type": "string"}}},
}

TOOL_TURN = {
    "type": "scripted",
    "steps": [
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"text": "ok"},
    ],
}


async def settle(observer: Any, connections: int) -> dict[str, Any]:
    """The daemon's stats once only ``connections`` clients are left (each call is a round trip
    that lets the daemon finish closing the others; no sleeping)."""
    while True:
        stats = await observer.request("test/serverStats")
        if stats["connections"] == connections:
            return stats


async def vanish_mid_tool_call(daemon: Daemon, transport: str) -> None:
    async with daemon.connect(transport) as client:
        await client.request(
            "session/create", {"session": "s", "model": TOOL_TURN, "tools": [OPEN_GATE]}
        )
        await client.start("session/respond", {"session": "s", "prompt": "Open it."})
        await client.next_message(lambda m: m.get("method") == "tool/call")
    # leaving the block closes the socket with the turn waiting for its tool/call


@pytest.mark.parametrize(("transport", "cycles"), [("unix", 500), ("tcp", 100)])
async def test_clients_vanishing_mid_turn_leak_no_fds_or_tasks(transport, cycles):
    async with serve() as daemon, daemon.connect() as observer:
        with anyio.fail_after(60):
            await vanish_mid_tool_call(daemon, transport)  # warm up lazily created state
            baseline = await settle(observer, 1)
            fds = daemon.fds()
            for _ in range(cycles):
                await vanish_mid_tool_call(daemon, transport)
            after = await settle(observer, 1)
            assert after["tasks"] == baseline["tasks"]
            assert after["fds"] == baseline["fds"]
            assert daemon.fds() == fds
            assert await observer.request("ping") == {}
    assert "transport_closed" not in logged_events(daemon)  # nothing written to a dead socket


async def test_a_client_closing_mid_turn_has_its_turn_cancelled_and_others_go_on():
    async with serve() as daemon, daemon.connect() as other:
        with anyio.fail_after(5):
            async with daemon.connect() as client:
                slow = {"type": "scripted", "steps": [{"text": "late", "delayMs": LONG_MS}]}
                await client.request("session/create", {"session": "s", "model": slow})
                await client.start("session/respond", {"session": "s", "prompt": "Take your time."})
                await client.request("ping")
                assert (await other.request("test/serverStats"))["connections"] == 2
            await settle(other, 1)
            await other.request("session/create", {"session": "s", "model": "scripted"})
            assert (await other.request("session/list"))["sessions"][0]["session"] == "s"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_drains_cancels_turns_with_their_errors_and_exits_zero(signum):
    async with serve() as daemon:
        async with daemon.connect() as client, daemon.connect("tcp") as waiting:
            slow = {"type": "scripted", "steps": [{"text": "late", "delayMs": LONG_MS}]}
            with anyio.fail_after(5):
                await client.request("session/create", {"session": "s", "model": slow})
                turn = await client.start("session/respond", {"session": "s", "prompt": "Wait."})
                await waiting.request(
                    "session/create", {"session": "t", "model": TOOL_TURN, "tools": [OPEN_GATE]}
                )
                tool_turn = await waiting.start(
                    "session/respond", {"session": "t", "prompt": "Go."}
                )
                await waiting.next_message(lambda m: m.get("method") == "tool/call")
            with anyio.fail_after(DRAIN_SECONDS + 2):
                daemon.process.send_signal(signum)
                assert (await client.wait(turn))["error"]["data"]["code"] == "cancelled"
                assert (await waiting.wait(tool_turn))["error"]["data"]["code"] == "cancelled"
                await client.closed()
                await waiting.closed()
                assert await daemon.process.wait() == 0
        with pytest.raises(OSError):
            await daemon.raw()  # stopped accepting: the socket file is gone


async def test_a_client_that_never_reads_is_cut_off_while_another_stays_responsive():
    # twelve answers of about 1 MB each, asked for at once: far more than the kernel buffers
    big = {"text": "x" * 1_000_000, "chunks": 1}
    flood = {"type": "scripted", "steps": [], "fallback": big}
    turns = [
        line(
            {
                "jsonrpc": "2.0",
                "id": 2 + i,
                "method": "session/respond",
                "params": {"session": "f", "prompt": "Talk."},
            }
        )
        for i in range(12)
    ]
    async with serve("--max-outbox-bytes", str(2 << 20)) as daemon, daemon.connect("tcp") as other:
        silent = await daemon.raw()
        async with silent:
            with anyio.fail_after(20):
                await silent.send(
                    line(
                        {
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "session/create",
                            "params": {"session": "f", "model": flood},
                        }
                    )
                    + b"".join(turns)
                )
                latencies = []
                for _ in range(200):
                    start = anyio.current_time()
                    await other.request("ping")
                    latencies.append(anyio.current_time() - start)
                await settle(other, 1)  # the silent client was disconnected...
                received = await read_to_end(silent)  # ...after what the kernel had buffered
        assert len(received) < 12_000_000
    assert "peer_not_reading" in logged_events(daemon)
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(f"ping p99 while another client does not read: {p99 * 1000:.2f} ms")
    assert p99 < 0.25


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for text in status:
            if text.startswith("VmRSS:"):
                return int(text.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS from /proc")
async def test_clients_dropped_for_not_reading_leave_no_memory_behind():
    # each client makes the daemon queue ~48 MB of answers and reads none, so it is cut off at
    # --max-outbox-bytes; what it left used to stay in cycles the tuned collector never
    # collected (RSS 53 -> 512 MiB after these 40)
    big = {"type": "scripted", "steps": [], "fallback": {"text": "y" * 1_000_000}}
    requests = line(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/create",
            "params": {"session": "f", "model": big},
        }
    ) + b"".join(
        line(
            {
                "jsonrpc": "2.0",
                "id": 2 + i,
                "method": "session/respond",
                "params": {"session": "f", "prompt": "Talk."},
            }
        )
        for i in range(48)  # each answer within MAX_STEP_TEXT_CHARS; 48 MB in all
    )

    async def drop(daemon: Daemon, observer: Any, clients: int) -> None:
        dropped = logged_events(daemon).count("peer_not_reading") + clients
        silent = [await daemon.raw() for _ in range(clients)]
        for stream in silent:
            await stream.send(requests)
        while logged_events(daemon).count("peer_not_reading") < dropped:
            await observer.request("ping")  # a round trip while the daemon cuts them off
        await settle(observer, 1)
        for stream in silent:
            await stream.aclose()

    async with serve("--max-outbox-bytes", str(16 << 20)) as daemon, daemon.connect() as observer:
        with anyio.fail_after(120):
            await drop(daemon, observer, 2)  # warm up lazily loaded modules and the allocator
            baseline = rss_mib(daemon.pid)
            for _ in range(4):
                await drop(daemon, observer, 10)
            await observer.request("ping")
            after = rss_mib(daemon.pid)
    assert logged_events(daemon).count("peer_not_reading") == 42
    print(f"RSS after 40 dropped clients: {baseline:.0f} -> {after:.0f} MiB")
    assert after < baseline + 64

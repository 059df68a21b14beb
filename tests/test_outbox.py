"""The outbox (``oamd.rpc.outbox``): a producer that waits for room gets the peer's pace, a peer
that takes nothing is not waited for forever, and only bytes behind a write in progress count
against the hard limit."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from anyio.abc import ByteSendStream

import oamd.rpc.outbox
from oamd.rpc.outbox import Outbox

pytestmark = pytest.mark.anyio


class HeldPeer(ByteSendStream):
    """A peer whose each write waits until the test lets it through."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.writing = anyio.Event()
        self._release = anyio.Event()

    def release(self) -> None:
        self._release.set()
        self._release = anyio.Event()

    async def send(self, item: bytes) -> None:
        self.writing.set()
        await self._release.wait()
        self.written.append(item)

    async def send_eof(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


def message(size: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "m", "params": {"x": "x" * size}}


async def test_a_producer_waits_while_the_peer_is_behind_and_goes_on_once_the_queue_is_taken():
    peer = HeldPeer()
    outbox = Outbox(peer, high_water=1000, max_bytes=100_000)
    resumed = anyio.Event()

    async def produce() -> None:
        outbox.send(message(2000))  # the writer takes it and waits on the peer
        await peer.writing.wait()
        outbox.send(message(2000))  # queued behind it: past the high-water mark
        await outbox.wait_writable()
        resumed.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            tg.start_soon(produce)
            await peer.writing.wait()
            await anyio.wait_all_tasks_blocked()
            assert not resumed.is_set()  # still waiting: the peer has not taken the first write
            peer.release()
            await resumed.wait()  # the writer took the queue
            peer.release()
            await outbox.flush()
            tg.cancel_scope.cancel()
    assert len(peer.written) == 2
    assert not outbox.broken.is_set()


async def test_a_peer_that_takes_nothing_for_the_stall_time_is_no_longer_waited_for(monkeypatch):
    monkeypatch.setattr(oamd.rpc.outbox, "PEER_STALL_SECONDS", 0.05)
    peer = HeldPeer()
    outbox = Outbox(peer, high_water=1000, max_bytes=100_000)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            outbox.send(message(2000))
            await peer.writing.wait()
            outbox.send(message(2000))
            await outbox.wait_writable()  # gives up after the stall time
            outbox.send(message(2000))
            await outbox.wait_writable()  # and does not wait again until the peer takes some
            assert outbox.over_high_water
            tg.cancel_scope.cancel()


async def test_one_message_past_the_limit_still_goes_to_a_peer_that_reads():
    peer = HeldPeer()
    outbox = Outbox(peer, high_water=500, max_bytes=1000)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            outbox.send(message(5000))  # an idle writer takes it whole: not a peer falling behind
            await peer.writing.wait()
            peer.release()
            await outbox.flush()
            tg.cancel_scope.cancel()
    assert not outbox.broken.is_set()
    assert len(peer.written) == 1


async def test_more_than_the_limit_behind_a_write_in_progress_cuts_the_peer_off():
    peer = HeldPeer()
    outbox = Outbox(peer, high_water=500, max_bytes=1000)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(outbox.run)
            outbox.send(message(100))
            await peer.writing.wait()
            outbox.send(message(600))
            assert not outbox.broken.is_set()
            outbox.send(message(600))
            assert outbox.broken.is_set()
            tg.cancel_scope.cancel()

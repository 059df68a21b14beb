"""TurnQueue rules (agent/queue.py), each with its own test, plus the cancel/complete race."""

from __future__ import annotations

import random

import anyio
import pytest
from conftest import memory_daemon

from oamd.agent.queue import TurnQueue
from oamd.errors import Cancelled

pytestmark = pytest.mark.anyio


async def test_operations_run_in_the_order_they_were_scheduled():
    queue, order = TurnQueue(), []

    def work(n, delay):
        async def run(op):
            await anyio.sleep(delay)
            op.commit()
            order.append(n)

        return queue.schedule(run)

    runs = [work(1, 0.03), work(2, 0), work(3, 0.01)]
    async with anyio.create_task_group() as tg:
        for run in reversed(runs):  # start order does not matter: the place was taken above
            tg.start_soon(run)
    assert order == [1, 2, 3]


async def test_cancel_before_commit_raises_cancelled_and_leaves_no_trace():
    queue, history = TurnQueue(), []
    started = anyio.Event()

    async def work(op):
        started.set()
        await anyio.sleep(10)
        op.commit()
        history.append("turn")

    run = queue.schedule(work)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def runner():
                with pytest.raises(Cancelled):
                    await run()

            tg.start_soon(runner)
            await started.wait()
            assert queue.cancel_all() == 1
    assert history == [] and queue.pending == 0


async def test_cancel_after_commit_is_not_counted_and_the_result_stands():
    queue = TurnQueue()
    committed = anyio.Event()
    release = anyio.Event()

    async def work(op):
        op.commit()
        committed.set()
        await release.wait()
        return "done"

    run = queue.schedule(work)
    results = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def runner():
                results.append(await run())

            tg.start_soon(runner)
            await committed.wait()
            assert queue.cancel_all() == 0
            release.set()
    assert results == ["done"]


async def test_cancel_all_cancels_the_running_and_every_queued_operation():
    queue = TurnQueue()

    async def slow(op):
        await anyio.sleep(10)
        op.commit()

    runs = [queue.schedule(slow) for _ in range(3)]
    outcomes = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for run in runs:

                async def runner(run=run):
                    try:
                        await run()
                        outcomes.append("ok")
                    except Cancelled:
                        outcomes.append("cancelled")

                tg.start_soon(runner)
            await anyio.sleep(0.01)
            assert queue.pending == 3
            assert queue.cancel_all() == 3
    assert outcomes == ["cancelled"] * 3


async def test_cancel_racing_completion_leaves_history_xor_cancelled_1000_times():
    """Every turn is either in the history or answered -32009, never both, never neither."""
    rng = random.Random(7)
    async with memory_daemon() as client:
        await client.request(
            "session/create",
            {
                "session": "race",
                "model": {
                    "type": "scripted",
                    "steps": [
                        {"text": f"t{i}", "delayMs": rng.choice([0, 0, 1, 2])} for i in range(1000)
                    ],
                },
            },
        )
        cancelled = completed = 0
        with anyio.fail_after(120):
            for i in range(1000):
                turn = await client.start("session/respond", {"session": "race", "prompt": f"p{i}"})
                if rng.random() < 0.7:
                    for _ in range(rng.choice([0, 1, 2, 3])):
                        await anyio.sleep(0)
                    await client.notify("session/cancel", {"session": "race"})
                reply = await client.wait(turn)
                if "error" in reply:
                    assert reply["error"]["code"] == -32009
                    cancelled += 1
                else:
                    completed += 1
            listing = await client.request("session/list")
        entries = listing["sessions"][0]["entries"]
        assert entries == 2 * completed  # a prompt and a response for each completed turn only
        assert cancelled + completed == 1000
        assert cancelled > 0 and completed > 0
        transcript = (await client.request("session/transcript", {"session": "race"}))["transcript"]
        prompts = [e["text"] for e in transcript["transcript"]["entries"] if e["kind"] == "prompt"]
        assert len(prompts) == len(set(prompts)) == completed

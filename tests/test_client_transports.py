"""The typed client over every real transport: a ``oamd stdio`` subprocess, and ``oamd serve`` on a
Unix socket and on TCP (with its token). Fifty turns run at once, each calling a client tool the
bridge answers; every turn gets its response exactly once, with its own tool's output, and every
``tool/call`` is answered once. Scripted models make each turn's call and answer known ahead."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from conftest import recording
from serve_harness import serve

from oamd.client import Bridge, ToolContext

pytestmark = pytest.mark.anyio

CONCURRENT = 50
"""Turns in flight at once (each on its own session: a session runs its turns one at a time)."""

SECONDS = 60
"""Starting a daemon and playing every turn, on two busy cores."""

GATE = {"type": "object", "properties": {"gate": {"type": "integer"}}, "required": ["gate"]}


@pytest.fixture(autouse=True)
def no_system_model(monkeypatch):
    monkeypatch.setenv("OAMD_MODEL", "none")  # only scripted models run: nothing to load


@asynccontextmanager
async def bridge_over(transport: str) -> AsyncIterator[Bridge]:
    """A bridge whose client records the traffic and checks each message against the contract."""
    if transport == "stdio":
        async with Bridge.stdio(**recording()) as bridge:
            yield bridge
        return
    async with serve(unix=transport == "unix", tcp=transport == "tcp") as daemon:
        if transport == "tcp":
            opened = Bridge.tcp(*daemon.tcp, token=daemon.token, **recording())
        else:
            opened = Bridge.unix(daemon.unix_path, token=daemon.token, **recording())
        async with opened as bridge:
            yield bridge


def one_call_then_its_output(gate: int) -> dict[str, Any]:
    call = {"name": "open_gate", "arguments": {"gate": gate}}
    return {"type": "scripted", "steps": [{"toolCalls": [call]}, {"template": "{toolOutput}"}]}


@pytest.mark.parametrize("transport", ["stdio", "unix", "tcp"])
async def test_fifty_concurrent_turns_calling_a_client_tool_each_get_their_own_answer_once(
    transport,
):
    calls: Counter[int] = Counter()
    all_called = anyio.Event()

    async with bridge_over(transport) as bridge:

        @bridge.tool("open_gate", "Open a numbered gate.", GATE)
        async def open_gate(args: dict[str, Any], context: ToolContext) -> str:
            calls[args["gate"]] += 1
            if len(calls) == CONCURRENT:
                all_called.set()
            await all_called.wait()  # no answer before every turn's call is in: all run at once
            return f"gate {args['gate']} open for {context.session}"

        replies: dict[int, Any] = {}

        async def turn(gate: int) -> None:
            replies[gate] = await sessions[gate].respond(f"Open gate {gate}.")

        with anyio.fail_after(SECONDS):
            sessions = [
                await bridge.create_session(
                    session=f"s{gate}", tools=["open_gate"], model=one_call_then_its_output(gate)
                )
                for gate in range(CONCURRENT)
            ]
            async with anyio.create_task_group() as tg:
                for gate in range(CONCURRENT):
                    tg.start_soon(turn, gate)
            await bridge.ping()  # the connection is still well after it all
        recorder = bridge.client.recorder

    assert sorted(replies) == list(range(CONCURRENT))
    for gate, reply in replies.items():
        expected = f"gate {gate} open for s{gate}"
        [record] = reply.tool_calls
        assert (record.call.arguments, record.output, record.is_error) == (
            {"gate": gate},
            expected,
            False,
        )
        assert (reply.session, reply.text) == (f"s{gate}", expected)
    assert calls == Counter(range(CONCURRENT))  # each tool ran once, for its own turn
    turns = [i for i, method in recorder.sent_methods.items() if method == "session/respond"]
    answers = Counter(m["id"] for m in recorder.received if "method" not in m)
    assert len(turns) == CONCURRENT
    assert all(answers[i] == 1 for i in turns)  # each response arrived exactly once
    assert len(recorder.tool_calls) == CONCURRENT
    assert len({c["id"] for c in recorder.tool_calls}) == CONCURRENT

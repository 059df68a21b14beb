"""Budgets: one client cannot take the daemon's memory. Queued operations per session or NPC,
requests in flight per connection, bytes per world, tools per session or NPC, and bytes of
histories and worlds per connection each end in -32055 ``limit_reached`` with ``data.limit`` —
and the refused request changes nothing, and the client can always make room again."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from conftest import memory_daemon

from oamd.daemon import default_config
from oamd.limits import (
    MAX_IN_FLIGHT_REQUESTS,
    MAX_QUEUED_OPERATIONS,
    MAX_TOOLS,
    MAX_WORLD_BYTES,
)

pytestmark = pytest.mark.anyio


def limit_reached(response: dict[str, Any], limit: int) -> str:
    error = response["error"]
    assert error["code"] == -32055, error
    assert error["data"] == {"code": "limit_reached", "limit": limit}
    return error["message"]


def slow_model(steps: int) -> dict[str, Any]:
    return {"type": "scripted", "steps": [{"text": "ok", "delayMs": 60_000}] * steps}


async def test_a_session_queues_at_most_the_limit_and_then_keeps_working(client):
    with anyio.fail_after(10):
        await client.request(
            "session/create", {"session": "s", "model": slow_model(MAX_QUEUED_OPERATIONS + 1)}
        )
        ids = [
            await client.start("session/respond", {"session": "s", "prompt": f"p{i}"})
            for i in range(MAX_QUEUED_OPERATIONS)
        ]
        refused = await client.call("session/respond", {"session": "s", "prompt": "one more"})
        assert "queued" in limit_reached(refused, MAX_QUEUED_OPERATIONS)
        await client.request("session/cancel", {"session": "s"})
        for msg_id in ids:
            assert (await client.wait(msg_id))["error"]["data"]["code"] == "cancelled"
        listed = await client.request("session/list")
    assert listed["sessions"][0]["entries"] == 0  # the refused turn left no trace


async def test_an_npc_queues_at_most_the_limit(client):
    persona = {"name": "Gorm", "role": "a smith"}
    with anyio.fail_after(10):
        await client.request(
            "npc/create",
            {"npc": "gorm", "persona": persona, "model": slow_model(MAX_QUEUED_OPERATIONS + 1)},
        )
        for i in range(MAX_QUEUED_OPERATIONS):
            await client.start("npc/talk", {"npc": "gorm", "line": f"l{i}"})
        refused = await client.call("npc/talk", {"npc": "gorm", "line": "one more"})
        limit_reached(refused, MAX_QUEUED_OPERATIONS)
        await client.request("npc/cancel", {"npc": "gorm"})


async def test_a_connection_has_at_most_the_limit_of_requests_in_flight(client):
    with anyio.fail_after(20):
        for _ in range(MAX_IN_FLIGHT_REQUESTS):
            await client.start("test/sleep", {"ms": 60_000})
        refused = await client.call("test/sleep", {"ms": 0})
        assert "waiting" in limit_reached(refused, MAX_IN_FLIGHT_REQUESTS)
        assert await client.request("ping") == {}  # cheap requests never count


async def test_a_refused_queued_request_changes_nothing_and_keeps_the_queue_in_order(client):
    """Over the in-flight cap, a request whose handler took a queue place is answered -32055 and
    does not apply — on an idle session (where setInstructions would complete without waiting)
    and behind a running turn (whose queue must keep its order)."""
    slow = {"type": "scripted", "steps": [{"text": "ok", "delayMs": 60_000}, {"text": "ok"}]}
    with anyio.fail_after(20):
        for name in ("idle", "busy"):
            await client.request(
                "session/create", {"session": name, "instructions": "old", "model": slow}
            )
        for _ in range(MAX_IN_FLIGHT_REQUESTS - 1):
            await client.start("test/sleep", {"ms": 60_000})
        turn = await client.start("session/respond", {"session": "busy", "prompt": "slow"})
        for name in ("idle", "busy"):
            refused = await client.call(
                "session/setInstructions", {"session": name, "instructions": "new"}
            )
            limit_reached(refused, MAX_IN_FLIGHT_REQUESTS)
        listed = await client.request("session/list")
        assert [s["instructions"] for s in listed["sessions"]] == ["old", "old"]
        await client.request("session/cancel", {"session": "busy"})
        assert (await client.wait(turn))["error"]["data"]["code"] == "cancelled"
        await client.request("session/setInstructions", {"session": "busy", "instructions": "new"})
        after = await client.request("session/respond", {"session": "busy", "prompt": "fast"})
        listed = await client.request("session/list")
    assert after["text"] == "ok"
    assert [s["instructions"] for s in listed["sessions"]] == ["old", "new"]


async def test_a_world_holds_at_most_the_limit_and_a_refused_write_changes_nothing(client):
    half = "x" * (MAX_WORLD_BYTES // 2)
    with anyio.fail_after(10):
        too_big = await client.call(
            "world/create", {"world": "w", "state": {"a": half, "b": half, "c": "!"}}
        )
        limit_reached(too_big, MAX_WORLD_BYTES)
        await client.request("world/create", {"world": "w", "state": {"a": half}})
        before = await client.request("world/get", {"world": "w", "path": ""})
        refused = await client.call("world/set", {"world": "w", "path": "b", "value": half})
        merged = await client.call("world/merge", {"world": "w", "patch": {"b": half}})
        after = await client.request("world/get", {"world": "w", "path": ""})
        # replacing the big value with a small one is always allowed
        await client.request("world/set", {"world": "w", "path": "a", "value": "small"})
        grown = await client.request("world/set", {"world": "w", "path": "b", "value": half})
    limit_reached(refused, MAX_WORLD_BYTES)
    limit_reached(merged, MAX_WORLD_BYTES)
    assert after == before
    assert "version" in grown or grown is not None


async def test_a_write_through_missing_objects_counts_every_key_it_creates(client):
    """A world 50 KB short of its limit takes no write that creates a 100 KB key on the way —
    by ``world/set``, ``world/merge`` at a path, or an NPC's ``update_world_state`` — and a
    small write still goes in."""
    key = "k" * 100_000
    write = {"name": "update_world_state", "arguments": {"path": f"{key}.y", "value": "1"}}
    npc_model = {"type": "scripted", "steps": [{"toolCalls": [write]}, {"text": "Done."}]}
    state = {"blob": "x" * (MAX_WORLD_BYTES - 50_000)}
    with anyio.fail_after(10):
        await client.request("world/create", {"world": "w", "state": state})
        refused = [
            await client.call("world/set", {"world": "w", "path": f"{key}.x", "value": 1}),
            await client.call("world/merge", {"world": "w", "path": f"{key}.x", "patch": {"a": 1}}),
        ]
        await client.request(
            "npc/create",
            {
                "npc": "n",
                "persona": {"name": "N"},
                "world": "w",
                "options": {"worldWritable": [""], "replyFormat": "text"},
                "model": npc_model,
            },
        )
        talked = await client.request("npc/talk", {"npc": "n", "line": "Write it."})
        after = await client.request("world/snapshot", {"world": "w"})
        small = await client.call("world/set", {"world": "w", "path": "a.b", "value": 1})
    for response in refused:
        limit_reached(response, MAX_WORLD_BYTES)
    assert talked["toolCalls"][0]["isError"] is True
    assert after["state"] == state
    assert "result" in small


async def test_a_session_or_npc_takes_at_most_the_limit_of_tools(client):
    tools = [
        {"name": f"t{i}", "description": "A tool.", "parameters": {"type": "object"}}
        for i in range(MAX_TOOLS + 1)
    ]
    with anyio.fail_after(10):
        session = await client.call("session/create", {"session": "s", "tools": tools})
        npc = await client.call(
            "npc/create", {"npc": "n", "persona": {"name": "N", "role": "r"}, "tools": tools}
        )
        ok = await client.call("session/create", {"session": "s", "tools": tools[:MAX_TOOLS]})
    limit_reached(session, MAX_TOOLS)
    limit_reached(npc, MAX_TOOLS)
    assert "result" in ok


async def test_an_npcs_built_in_world_and_memory_tools_count_within_the_limit_of_tools(client):
    """The limit is on what the model is offered: an NPC's tools as ``npc/create`` lists them."""
    tools = [
        {"name": f"t{i}", "description": "A tool.", "parameters": {"type": "object"}}
        for i in range(MAX_TOOLS)
    ]
    world_tools = {"worldReadable": [""], "worldWritable": [""]}
    persona = {"name": "N"}
    with anyio.fail_after(10):
        await client.request("world/create", {"world": "w"})
        refused = [
            await client.call(
                "npc/create",
                {
                    "npc": "a",
                    "persona": persona,
                    "tools": tools[:-1],
                    "world": "w",
                    "options": world_tools,
                },
            ),
            await client.call(
                "npc/create",
                {"npc": "b", "persona": persona, "tools": tools, "options": {"memoryTools": "all"}},
            ),
        ]
        created = await client.request(
            "npc/create",
            {
                "npc": "c",
                "persona": persona,
                "tools": tools[:-2],
                "world": "w",
                "options": world_tools,
            },
        )
        updated = await client.call("npc/update", {"npc": "c", "options": {"memoryTools": "all"}})
        listed = (await client.request("npc/list"))["npcs"]
    for response in [*refused, updated]:
        assert "built-in" in limit_reached(response, MAX_TOOLS)
    assert len(created["tools"]) == MAX_TOOLS
    assert [n["npc"] for n in listed] == ["c"]


async def test_near_the_connection_budget_adding_fails_and_deleting_makes_room():
    budget = 20_000
    config = default_config(test_methods=True, max_connection_bytes=budget)
    model = {"type": "scripted", "steps": [{"template": "{prompt}"}] * 10}
    async with memory_daemon(config) as client:
        with anyio.fail_after(10):
            await client.request("world/create", {"world": "w", "state": {"blob": "y" * 15_000}})
            await client.request("session/create", {"session": "s", "model": model})
            await client.request("session/respond", {"session": "s", "prompt": "z" * 2_000})
            refused = [
                await client.call("session/respond", {"session": "s", "prompt": "m" * 1_000}),
                await client.call(
                    "session/setInstructions", {"session": "s", "instructions": "i" * 1_000}
                ),
            ]
            listed = await client.request("session/list")  # reading keeps working
            await client.request("world/delete", {"world": "w"})
            again = await client.request("session/respond", {"session": "s", "prompt": "ok"})
    for response in refused:
        assert "Delete" in limit_reached(response, budget)
    assert listed["sessions"][0]["entries"] == 2
    assert again["text"] == "ok"


WAIT_TOOL = {"name": "wait", "description": "Waits.", "parameters": {"type": "object"}}


async def test_queued_turns_hold_their_prompts_so_a_queue_cannot_pass_the_budget():
    """The red team's queue: prompts piled up behind a slow turn while the history is still
    empty. Each queued prompt is held from the moment it is read, so only as many as fit the
    budget are taken; the rest are refused at once, and the history ends within the budget."""
    budget = 100_000
    prompt = "p" * 30_000
    release = anyio.Event()

    async def slow_tool(params: dict[str, Any]) -> dict[str, Any]:
        await release.wait()
        return {"output": "done"}

    steps = [{"toolCalls": [{"name": "wait", "arguments": {}}]}] + [{"text": "ok"}] * 21
    config = default_config(test_methods=True, max_connection_bytes=budget)
    async with memory_daemon(config, tool_handler=slow_tool) as client:
        with anyio.fail_after(10):
            await client.request(
                "session/create",
                {
                    "session": "s",
                    "tools": [WAIT_TOOL],
                    "model": {"type": "scripted", "steps": steps},
                },
            )
            slow = await client.start("session/respond", {"session": "s", "prompt": "slow"})
            queued = [
                await client.start("session/respond", {"session": "s", "prompt": prompt})
                for _ in range(20)
            ]
            release.set()
            assert "result" in await client.wait(slow)
            answers = [await client.wait(msg_id) for msg_id in queued]
            transcript = await client.request("session/transcript", {"session": "s"})
    taken = [a for a in answers if "result" in a]
    for answer in answers:
        if "error" in answer:
            limit_reached(answer, budget)
    assert len(taken) == budget // len(prompt)
    assert len(orjson.dumps(transcript)) < budget


async def test_a_request_refused_past_the_in_flight_cap_holds_nothing_afterwards():
    budget = 50_000
    config = default_config(test_methods=True, max_connection_bytes=budget)
    async with memory_daemon(config) as client:
        with anyio.fail_after(20):
            await client.request("session/create", {"session": "s"})
            await client.request("npc/create", {"npc": "n", "persona": {"name": "N"}})
            for _ in range(MAX_IN_FLIGHT_REQUESTS):
                await client.start("test/sleep", {"ms": 60_000})
            refused = [
                await client.call("session/respond", {"session": "s", "prompt": "p" * 30_000}),
                await client.call("npc/bark", {"npc": "n", "situation": "s" * 30_000}),
            ]
            created = await client.call("world/create", {"state": {"blob": "x" * 40_000}})
    for response in refused:
        limit_reached(response, MAX_IN_FLIGHT_REQUESTS)
    assert "result" in created


async def test_a_turn_that_would_take_the_connection_over_its_budget_fails_and_leaves_no_trace():
    """A turn read while there was room is checked again when it commits, by what it adds: a
    long answer that would pass the budget fails -32055, and the session or NPC is as before."""
    budget = 20_000
    config = default_config(test_methods=True, max_connection_bytes=budget)
    echo = {"type": "scripted", "steps": [{"template": "{prompt}"}] * 2}
    long_line = "Talk. " * 1_000
    async with memory_daemon(config) as client:
        with anyio.fail_after(10):
            await client.request("world/create", {"world": "w", "state": {"blob": "x" * 7_500}})
            await client.request("session/create", {"session": "s", "model": echo})
            await client.request(
                "npc/create",
                {
                    "npc": "n",
                    "persona": {"name": "N"},
                    "options": {"replyFormat": "text"},
                    "model": echo,
                },
            )
            refused = [
                await client.call("session/respond", {"session": "s", "prompt": long_line}),
                await client.call("npc/talk", {"npc": "n", "line": long_line}),
            ]
            sessions = (await client.request("session/list"))["sessions"]
            npcs = (await client.request("npc/list"))["npcs"]
            answered = await client.request("session/respond", {"session": "s", "prompt": "Hi."})
    for response in refused:
        limit_reached(response, budget)
    assert sessions[0]["entries"] == 0
    assert npcs[0]["turnCount"] == 0
    assert answered["text"] == "Hi."


async def test_everything_a_session_or_npc_is_given_counts_against_the_budget():
    """The red team's sessions: instructions and a scripted step of 30 KB each, under a 100 KB
    budget. Instructions, context notes, tools, model specs, options, personas and memory all
    count, so a create, set or update that would pass the budget is refused — even as the
    first thing on the connection when its own params are larger — and changes nothing."""
    budget = 100_000
    big = "b" * 30_000
    huge = "h" * (budget + 1)
    config = default_config(test_methods=True, max_connection_bytes=budget)
    model = {"type": "scripted", "steps": [{"text": big}]}
    persona = {"name": "N", "backstory": big}
    async with memory_daemon(config) as client:
        with anyio.fail_after(10):
            alone = [
                await client.call("session/create", {"session": "x", "instructions": huge}),
                await client.call(
                    "npc/create", {"npc": "x", "persona": {"name": "N", "backstory": huge}}
                ),
                await client.call("world/create", {"world": "x", "state": {"h": huge[:3_000_000]}}),
            ]
            await client.request(
                "session/create", {"session": "s", "instructions": big, "model": model}
            )
            refused = [
                await client.call(
                    "session/create", {"session": "t", "instructions": big, "model": model}
                ),
                await client.call(
                    "npc/create", {"npc": "n", "persona": persona, "memory": {"facts": [big]}}
                ),
                await client.call("session/setContextNote", {"session": "s", "note": big + big}),
                await client.call(
                    "session/setTools",
                    {"session": "s", "tools": [{**WAIT_TOOL, "description": big + big}]},
                ),
            ]
            await client.request("npc/create", {"npc": "m", "persona": {"name": "M"}})
            refused.append(
                await client.call("npc/update", {"npc": "m", "persona": {"backstory": big + big}})
            )
            sessions = (await client.request("session/list"))["sessions"]
            npcs = (await client.request("npc/list"))["npcs"]
            await client.request("session/delete", {"session": "s"})
            made_room = await client.call(
                "npc/create", {"npc": "n", "persona": persona, "memory": {"facts": [big]}}
            )
    for response in alone + refused:
        limit_reached(response, budget)
    assert [s["session"] for s in sessions] == ["s"]
    assert [n["npc"] for n in npcs] == ["m"]
    assert "result" in made_room


async def test_a_deleted_world_an_npc_still_uses_keeps_counting():
    budget = 100_000
    config = default_config(test_methods=True, max_connection_bytes=budget)
    state = {"blob": "x" * 60_000}
    async with memory_daemon(config) as client:
        with anyio.fail_after(10):
            await client.request("world/create", {"world": "w", "state": state})
            await client.request("npc/create", {"npc": "n", "persona": {"name": "N"}, "world": "w"})
            await client.request("world/delete", {"world": "w"})
            refused = await client.call("world/create", {"world": "w", "state": state})
            await client.request("npc/delete", {"npc": "n"})
            created = await client.call("world/create", {"world": "w", "state": state})
    limit_reached(refused, budget)
    assert "result" in created


async def test_an_npc_world_write_past_the_connection_budget_is_an_error_the_model_reads():
    """The write is refused as the model makes it (the model reads why); the turn, which would
    keep those bytes in its history too, then fails when it commits."""
    budget = 80_000
    write = {"name": "update_world_state", "arguments": {"path": "note", "value": "y" * 30_000}}
    model = {"type": "scripted", "steps": [{"toolCalls": [write]}, {"text": "Done."}]}
    config = default_config(test_methods=True, max_connection_bytes=budget)
    async with memory_daemon(config) as client:
        with anyio.fail_after(10):
            await client.request("world/create", {"world": "w", "state": {"blob": "x" * 30_000}})
            await client.request(
                "npc/create",
                {
                    "npc": "n",
                    "persona": {"name": "N"},
                    "world": "w",
                    "options": {"worldWritable": [""], "replyFormat": "text"},
                    "model": model,
                },
            )
            talk = await client.start("npc/talk", {"npc": "n", "line": "Write it.", "stream": True})
            talked = await client.wait(talk)
            note = await client.request("world/get", {"world": "w", "path": "note"})
    completed = [
        e["record"] for e in client.recorder.events_for(talk) if e["type"] == "toolCallCompleted"
    ]
    assert completed[0]["isError"] is True
    assert f"the limit is {budget}" in completed[0]["output"]
    assert note["exists"] is False
    limit_reached(talked, budget)


async def test_what_the_budget_measures_per_turn_stays_flat_as_the_history_grows(
    client, monkeypatch
):
    """Counted, never timed: the bytes serialised to keep the connection's count (the turn's
    params and entries) are the same at turn 300 as at turn 2 — nothing the connection already
    holds is measured again."""
    import oamd.agent.footprint as footprint
    import oamd.agent.history as history

    measured: list[int] = []
    for module in (footprint, history):

        def counting(value: Any, *args: Any, original: Any = module.dumps, **kw: Any) -> bytes:
            out = original(value, *args, **kw)
            measured.append(len(out))
            return out

        monkeypatch.setattr(module, "dumps", counting)
    turns = 300
    model = {"type": "scripted", "steps": [{"text": "Fine, thanks."}] * turns}
    per_turn = []
    with anyio.fail_after(30):
        await client.request("session/create", {"session": "s", "model": model})
        for _ in range(turns):
            measured.clear()
            await client.request("session/respond", {"session": "s", "prompt": "How are you?"})
            per_turn.append(sum(measured))
    assert set(per_turn[1:]) == {per_turn[1]}
    assert per_turn[1] < 1_000


def test_the_limits_are_documented():
    with open("protocol/PROTOCOL.md", encoding="utf-8") as file:
        text = file.read()
    for flag in ("--max-connection-bytes", "data.limit"):
        assert flag in text
    for number in (MAX_QUEUED_OPERATIONS, MAX_IN_FLIGHT_REQUESTS, MAX_TOOLS):
        assert f"{number}" in text
    assert orjson.dumps(MAX_WORLD_BYTES // (1024 * 1024)).decode() + " MiB" in text


def test_an_npc_world_write_past_the_limit_is_an_error_the_model_reads():
    from oamd.game.world.document import WorldState, write_world_state

    world = WorldState({"log": "x" * (MAX_WORLD_BYTES - 100)}, id="w")
    out = write_world_state(world, "note", "y" * 200, [""])
    assert out.is_error
    assert "at most" in out.model_text
    assert world.get("note") is None

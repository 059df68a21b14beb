"""Typed notification handlers against a daemon with scripted models: ``World.subscribe`` hands
its handler each change as a ``WorldChange``, in order, from the first change read after the
answer; ``bridge.on`` types the protocol's notifications (and passes others as dicts);
``Session.on_event`` / ``Npc.on_event`` see their own object's events as models; a
``tool/cancel`` reaches ``bridge.on`` as a ``ToolCancel`` while the running handler is
cancelled."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest
from test_client import connected

from oamd.client import (
    Bridge,
    LineDeltaEvent,
    ModelStepEvent,
    NpcEventNotification,
    Recorder,
    SessionEventNotification,
    TextEvent,
    ToolCancel,
    World,
    WorldChange,
)

pytestmark = pytest.mark.anyio

GATE = {"type": "object", "properties": {"gate": {"type": "string"}}}
LINE = {"emotion": "happy", "line": "Fine steel.", "player_options": [], "ends_conversation": False}


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


@pytest.fixture
async def bridge(client) -> Bridge:
    bridge = Bridge(client)
    with anyio.fail_after(5):
        await bridge.initialize("tests")
    return bridge


# ---- world subscriptions -----------------------------------------------------------------------


async def test_a_subscriptions_handler_receives_each_change_under_its_path_as_a_world_change(
    bridge,
):
    changes: list[WorldChange] = []
    three = anyio.Event()

    def on_change(change: WorldChange) -> None:
        changes.append(change)
        if len(changes) == 3:
            three.set()

    with anyio.fail_after(5):
        village = await bridge.create_world({"player": {"gold": 60}, "weather": "rain"})
        subscription = await village.subscribe("player", on_change)
        await village.set("weather", "sun")  # not under "player"
        await village.set("player.gold", 15)
        await village.set("player.horse", "Bess")
        await village.remove("player.horse")
        await three.wait()
        await subscription.unsubscribe()
        await village.set("player.gold", 0)  # after unsubscribe: nothing more
        await bridge.ping()
    assert [(c.path, c.old_value, c.new_value) for c in changes] == [
        ("player.gold", 60, 15),
        ("player.horse", None, "Bess"),
        ("player.horse", "Bess", None),
    ]
    assert [(c.created, c.removed) for c in changes] == [
        (False, False),
        (True, False),
        (False, True),
    ]
    assert {c.subscription for c in changes} == {subscription.id}


async def test_an_async_subscription_handler_gets_the_changes_in_order_and_may_read_the_world(
    bridge,
):
    seen: list[tuple[int, Any]] = []
    done = anyio.Event()

    async def on_change(change: WorldChange) -> None:
        now = await village.get("gold")  # a request from inside the handler
        seen.append((change.new_value, now.exists))
        if len(seen) == 3:
            done.set()

    with anyio.fail_after(5):
        village = await bridge.create_world({"gold": 0})
        await village.subscribe("gold", on_change)
        for gold in (1, 2, 3):
            await village.set("gold", gold)
        await done.wait()
    assert seen == [(1, True), (2, True), (3, True)]


async def test_a_change_read_right_after_the_subscribe_answer_reaches_the_handler():
    changes: list[WorldChange] = []
    answer = {"subscription": "sub1", "world": "village", "path": ""}
    change = {"world": "village", "subscription": "sub1", "path": "gold", "newValue": 1}
    async with connected() as (client, peer):
        village = World(Bridge(client), "village", 0)

        async def daemon() -> None:
            request = await peer.read()
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer}
            changed = {"jsonrpc": "2.0", "method": "world/changed", "params": change}
            # one chunk: the client reads the change before the subscriber's task resumes
            await peer.stream.send(orjson.dumps(reply) + b"\n" + orjson.dumps(changed) + b"\n")

        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon)
            await village.subscribe("", changes.append)
    assert [(c.path, c.new_value) for c in changes] == [("gold", 1)]


# ---- typed notifications by method -------------------------------------------------------------


async def test_bridge_on_hands_protocol_notifications_as_models_and_others_as_dicts():
    changes: list[WorldChange] = []
    raw: list[dict[str, Any]] = []
    change = {"world": "village", "subscription": "sub1", "path": "gold", "newValue": 2}
    async with connected(recorder=Recorder()) as (client, peer):
        bridge = Bridge(client)
        bridge.on("world/changed", changes.append)
        bridge.on("test/note", raw.append)
        await peer.write({"jsonrpc": "2.0", "method": "world/changed", "params": change})
        await peer.write({"jsonrpc": "2.0", "method": "test/note", "params": {"key": "k"}})
        await client.next_message(lambda m: m.get("method") == "test/note")
    [typed] = changes
    assert isinstance(typed, WorldChange)
    assert (typed.world, typed.path, typed.new_value, typed.created) == ("village", "gold", 2, True)
    assert raw == [{"key": "k"}]


async def test_a_change_an_npc_makes_through_its_world_tool_reaches_the_subscription(bridge):
    changes: list[WorldChange] = []
    write = {"name": "update_world_state", "arguments": {"path": "gate", "value": "open"}}
    with anyio.fail_after(5):
        village = await bridge.create_world({"gate": "shut"}, world="village")
        await village.subscribe("gate", changes.append)
        guard = await bridge.create_npc(
            {"name": "Bram"},
            world=village,
            options={"worldWritable": ["gate"], "replyFormat": "text"},
            model=scripted({"toolCalls": [write]}, {"text": "Done."}),
        )
        await guard.talk("Open the gate.")
    [change] = changes
    assert (change.path, change.old_value, change.new_value) == ("gate", "shut", "open")


async def test_a_sessions_event_handler_sees_its_own_streamed_turns_as_typed_events(bridge):
    notes: list[SessionEventNotification] = []
    with anyio.fail_after(5):
        guard = await bridge.create_session(
            session="guard", model=scripted({"text": "Halt.", "chunks": 2})
        )
        other = await bridge.create_session(session="other", model=scripted({"text": "Hm."}))
        guard.on_event(notes.append)
        reply = await guard.respond("Hello.", on_text=lambda delta: None)
        await other.respond("Hello.", on_text=lambda delta: None)
    assert {n.session for n in notes} == {"guard"}
    assert isinstance(notes[0].event, ModelStepEvent)
    texts = [n.event for n in notes if isinstance(n.event, TextEvent)]
    assert "".join(t.delta for t in texts) == reply.text == texts[-1].text
    assert all(n.request_id is not None for n in notes)


async def test_an_npcs_event_handler_sees_its_line_as_typed_deltas(bridge):
    notes: list[NpcEventNotification] = []
    with anyio.fail_after(5):
        gorm = await bridge.create_npc({"name": "Gorm"}, npc="gorm", model=scripted({"json": LINE}))
        gorm.on_event(notes.append)  # a plain handler: every event is in before talk returns
        reply = await gorm.talk("Nice sword.", on_text=lambda delta: None)
    deltas = [n.event.delta for n in notes if isinstance(n.event, LineDeltaEvent)]
    assert "".join(deltas) == reply.line
    assert {n.npc for n in notes} == {"gorm"}


async def test_a_tool_cancel_reaches_bridge_on_as_a_tool_cancel_and_ends_the_running_handler(
    bridge,
):
    cancels: list[ToolCancel] = []
    ended = anyio.Event()

    @bridge.tool("open_gate", "Open a named gate.", GATE, timeout=0.2)
    async def open_gate(args: dict[str, Any]) -> str:
        try:
            await anyio.sleep_forever()
        finally:
            ended.set()

    bridge.on("tool/cancel", cancels.append)
    model = scripted(
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"template": "{toolOutput}"},
    )
    with anyio.fail_after(5):
        guard = await bridge.create_session(session="guard", tools=["open_gate"], model=model)
        reply = await guard.respond("Open.")
        await ended.wait()
    [cancel] = cancels
    assert (cancel.session, cancel.npc) == ("guard", None)
    assert cancel.call_id == reply.tool_calls[0].call.id
    assert reply.tool_calls[0].is_error

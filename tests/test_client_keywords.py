"""The typed API's keywords against the contract, over a daemon played by the test that records
each request and refuses it: every protocol method has a typed call; every call, given each of
its keywords, sends exactly its method's members under their wire (camelCase) names, nothing the
contract does not list; and a keyword a call does not know raises ``TypeError`` before anything
is sent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from contract import CONTRACT, METHODS
from test_client import Peer, connected

from oamd.client import Bridge, DecisionRequest, Npc, RpcError, Session, World, WorldSubscription
from oamd.client._game_results import Subscription

pytestmark = pytest.mark.anyio

TOOL = {"name": "open_gate", "description": "Open a named gate.", "parameters": {"type": "object"}}
MODEL = {"type": "scripted", "steps": []}
PERSONA = {"name": "Gorm"}


def decision(**extra: Any) -> DecisionRequest:
    return DecisionRequest(
        situation="A noise.",
        options=["look", "hide"],
        actor=PERSONA,
        context="night",
        tools=[TOOL],
        tool_choice="auto",
        fallback_option_id="hide",
        **extra,
    )


@dataclass(frozen=True)
class Typed:
    """A typed call: ``target(bridge).name(*args, **kwargs)``."""

    target: Callable[[Bridge], Any]
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def __call__(self, bridge: Bridge, **more: Any) -> Awaitable[Any]:
        return getattr(self.target(bridge), self.name)(*self.args, **self.kwargs, **more)


def typed(target: Callable[[Bridge], Any], name: str, /, *args: Any, **kwargs: Any) -> Typed:
    return Typed(target, name, args, kwargs)


def bridge_itself(b: Bridge) -> Bridge:
    return b


def session(b: Bridge) -> Session:
    return Session(b, "guard", [])


def npc(b: Bridge) -> Npc:
    return Npc(b, "gorm", [], [])


def world(b: Bridge) -> World:
    return World(b, "village", 0)


def subscription(b: Bridge) -> WorldSubscription:
    return WorldSubscription(world(b), Subscription(subscription="sub1", world="village", path=""))


ENGINE = {
    "instructions": "Decide.",
    "temperature": 0.5,
    "max_tool_rounds": 1,
    "tool_timeout_seconds": 3,
    "model": MODEL,
}

CALLS: dict[str, Typed] = {
    "initialize": typed(bridge_itself, "initialize", "tests"),
    "ping": typed(
        bridge_itself,
        "ping",
    ),
    "model/availability": typed(
        bridge_itself,
        "availability",
    ),
    "schema/validate": typed(bridge_itself, "validate_schema", {"type": "object"}, name="Gate"),
    "tools/validate": typed(bridge_itself, "validate_tools", [TOOL]),
    "shutdown": typed(
        bridge_itself,
        "shutdown",
    ),
    "session/create": typed(
        bridge_itself,
        "create_session",
        session="guard",
        instructions="Guard.",
        tools=[TOOL],
        options={"temperature": 0},
        model=MODEL,
        history={"type": "oamd.Transcript"},
    ),
    "session/respond": typed(
        session,
        "respond",
        "Open it.",
        schema={"type": "object"},
        tool_choice="required",
        max_tool_rounds=2,
        max_tool_calls=3,
        enabled_tools=["open_gate"],
        on_text=lambda text: None,
    ),
    "session/cancel": typed(
        session,
        "cancel",
    ),
    "session/reset": typed(
        session,
        "reset",
    ),
    "session/delete": typed(
        session,
        "delete",
    ),
    "session/list": typed(
        bridge_itself,
        "list_sessions",
    ),
    "session/transcript": typed(
        session,
        "transcript",
    ),
    "session/setInstructions": typed(session, "set_instructions", "Guard."),
    "session/setContextNote": typed(session, "set_context_note", "Night."),
    "session/setTools": typed(session, "set_tools", [TOOL]),
    "session/compact": typed(
        session, "compact", keep_recent_turns=1, summary_instructions="Briefly."
    ),
    "npc/create": typed(
        bridge_itself,
        "create_npc",
        PERSONA,
        npc="gorm",
        tools=[TOOL],
        world="village",
        memory={"facts": []},
        options={"maxTurns": 4},
        model=MODEL,
    ),
    "npc/talk": typed(
        npc,
        "talk",
        "Hello.",
        context="At the forge.",
        tool_choice="auto",
        on_text=lambda text: None,
    ),
    "npc/bark": typed(npc, "bark", "A fire!"),
    "npc/state": typed(npc, "state", settle=False),
    "npc/restore": typed(
        bridge_itself,
        "restore_npc",
        {"version": 1},
        npc="gorm2",
        tools=[TOOL],
        options={"maxTurns": 4},
        world="village",
        model=MODEL,
    ),
    "npc/update": typed(
        npc,
        "update",
        persona={"role": "smith"},
        options={"maxTurns": 4},
        memory={"facts": []},
        tools=[TOOL],
    ),
    "npc/reset": typed(npc, "reset", clear_memory=True),
    "npc/cancel": typed(
        npc,
        "cancel",
    ),
    "npc/delete": typed(
        npc,
        "delete",
    ),
    "npc/list": typed(
        bridge_itself,
        "list_npcs",
    ),
    "decision/decide": typed(
        bridge_itself,
        "decide",
        "A noise.",
        ["look", "hide"],
        actor=PERSONA,
        context="night",
        tools=[TOOL],
        tool_choice="auto",
        fallback_option_id="hide",
        **ENGINE,
    ),
    "decision/decideMany": typed(
        bridge_itself, "decide_many", [decision()], max_concurrency=2, **ENGINE
    ),
    "world/create": typed(bridge_itself, "create_world", {"gold": 1}, world="village"),
    "world/get": typed(world, "get", "gold"),
    "world/set": typed(world, "set", "gold", 2),
    "world/merge": typed(world, "merge", {"gold": 3}, "player"),
    "world/remove": typed(world, "remove", "gold"),
    "world/snapshot": typed(
        world,
        "snapshot",
    ),
    "world/delete": typed(
        world,
        "delete",
    ),
    "world/list": typed(
        bridge_itself,
        "list_worlds",
    ),
    "world/subscribe": typed(world, "subscribe", "player"),
    "world/unsubscribe": typed(
        subscription,
        "unsubscribe",
    ),
    "content/generate": typed(
        bridge_itself,
        "generate",
        "A sword.",
        {"type": "object"},
        instructions="Be brief.",
        context="forge",
        tools=[TOOL],
        tool_timeout_seconds=3,
        temperature=0.5,
        model=MODEL,
    ),
}
"""Each protocol method → its typed call, given every keyword it has."""

SET_ELSEWHERE = {"initialize": {"auth"}}
"""Wire members no typed keyword sends: ``auth`` goes with the ``initialize`` of ``connect_tcp``
and ``connect_unix``, which ``Bridge.tcp`` and ``Bridge.unix`` use."""


def resolve(schema: Any) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = CONTRACT["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def members(schema: Any) -> set[str]:
    """Every member a params schema names (through ``$ref`` and ``allOf``)."""
    schema = resolve(schema)
    names = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        names |= members(part)
    return names


async def sent_by(call: Typed) -> dict[str, Any]:
    """The request ``call`` sends, refused by the peer (only what was sent matters here)."""
    async with connected() as (client, peer):
        bridge = Bridge(client)

        async def refuse(peer: Peer, into: list[dict[str, Any]]) -> None:
            request = await peer.read()
            into.append(request)
            error = {"code": -32601, "message": "No.", "data": {"code": "method_not_found"}}
            await peer.write({"jsonrpc": "2.0", "id": request["id"], "error": error})

        sent: list[dict[str, Any]] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(refuse, peer, sent)
            with pytest.raises(RpcError):
                await call(bridge)
    [request] = sent
    return request


def test_every_protocol_method_has_a_typed_call():
    assert sorted(CALLS) == sorted(METHODS)


@pytest.mark.parametrize("method", sorted(CALLS))
async def test_every_keyword_is_sent_under_its_wire_name_and_nothing_else(method):
    request = await sent_by(CALLS[method])
    assert request["method"] == method
    sent = set(request.get("params", {}))
    expected = members(CONTRACT["methods"][method]["params"]) - SET_ELSEWHERE.get(method, set())
    assert sent == expected
    if method == "decision/decideMany":
        [one] = request["params"]["requests"]
        assert set(one) == members(CONTRACT["$defs"]["DecisionRequest"])


@pytest.mark.parametrize("method", sorted(CALLS))
async def test_an_unknown_keyword_raises_type_error_before_anything_is_sent(method):
    async with connected() as (client, peer):
        with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
            await CALLS[method](Bridge(client), colour="red")
        await client.notify("test/after")
        first = await peer.read()
    assert first["method"] == "test/after"  # the first line the daemon reads: nothing went before


def test_a_decision_request_refuses_an_unknown_keyword():
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        decision(colour="red")

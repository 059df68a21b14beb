"""The typed API (``oamd.client.Bridge``) against a daemon with scripted models: client tools
answer ``tool/call``, handles run each namespace, and every result arrives as its model."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from serve_harness import serve

from oamd.client import (
    Bridge,
    Decision,
    NpcTalkResult,
    RpcError,
    SessionRespondResult,
    ToolContext,
    ToolError,
)

pytestmark = pytest.mark.anyio

GATE = {"type": "object", "properties": {"gate": {"type": "string"}}, "required": ["gate"]}
GORM = {"name": "Gorm", "role": "the village blacksmith", "personality": "Gruff but fair."}


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


def open_gate_then(*steps: dict[str, Any]) -> dict[str, Any]:
    return scripted({"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]}, *steps)


@pytest.fixture
async def bridge(client) -> Bridge:
    bridge = Bridge(client)
    with anyio.fail_after(5):
        await bridge.initialize("tests")
    return bridge


# ---- sessions and client tools -----------------------------------------------------------------


async def test_a_session_calls_a_client_tool_and_streams_a_typed_answer(bridge):
    opened: list[str] = []

    @bridge.tool("open_gate", "Open a named gate.", GATE)
    async def open_gate(args: dict[str, Any]) -> dict[str, Any]:
        opened.append(args["gate"])
        return {"opened": True}

    deltas: list[str] = []
    events: list[str] = []
    with anyio.fail_after(5):
        guard = await bridge.create_session(
            tools=["open_gate"],
            model=open_gate_then({"text": "The north gate is open.", "chunks": 3}),
        )
        reply = await guard.respond(
            "Open the north gate!",
            on_text=deltas.append,
            on_event=lambda e: events.append(e["type"]),
        )
    assert isinstance(reply, SessionRespondResult)
    assert opened == ["north"]
    [record] = reply.tool_calls
    assert (record.call.name, record.call.arguments, record.output) == (
        "open_gate",
        {"gate": "north"},
        {"opened": True},
    )
    assert record.is_error is False
    assert reply.text == "The north gate is open." == "".join(deltas)
    assert len(deltas) == 3
    assert events[0] == "modelStep" and "toolCallCompleted" in events
    assert [s.index for s in reply.steps] == [0, 1]
    assert reply.usage.total_tokens == reply.usage.input_tokens + reply.usage.output_tokens


async def test_a_tool_error_is_an_error_output_the_model_reads(bridge):
    @bridge.tool("open_gate", "Open a named gate.", GATE)
    def open_gate(args: dict[str, Any]) -> str:  # sync handlers work too
        raise ToolError(f"There is no {args['gate']} gate.")

    with anyio.fail_after(5):
        guard = await bridge.create_session(
            tools=["open_gate"], model=open_gate_then({"template": "{toolOutput}"})
        )
        reply = await guard.respond("Open it.")
    [record] = reply.tool_calls
    assert (record.is_error, record.output) == (True, "There is no north gate.")
    assert reply.text == "Error: There is no north gate."


async def test_a_handler_taking_two_parameters_gets_the_calls_context(bridge):
    contexts: list[ToolContext] = []

    @bridge.tool(parameters=GATE)
    async def open_gate(args: dict[str, Any], context: ToolContext) -> str:
        """Open a named gate."""
        contexts.append(context)
        return "Opened."

    with anyio.fail_after(5):
        guard = await bridge.create_session(
            session="guard", tools=["open_gate"], model=open_gate_then({"text": "Done."})
        )
        await guard.respond("Open it.")
    [context] = contexts
    assert (context.session, context.npc, context.call.name) == ("guard", None, "open_gate")
    assert context.call.id.startswith("call_") and context.request_id is not None
    assert bridge.tools.definitions() == [
        {"name": "open_gate", "description": "Open a named gate.", "parameters": GATE}
    ]


async def test_a_call_of_a_tool_without_a_handler_is_answered_with_an_error(bridge):
    unhandled = {"name": "open_gate", "description": "Open a named gate.", "parameters": GATE}
    with anyio.fail_after(5):
        guard = await bridge.create_session(
            tools=[unhandled], model=open_gate_then({"template": "{toolOutput}"})
        )
        reply = await guard.respond("Open it.")
    assert reply.tool_calls[0].is_error
    assert reply.text == "Error: No handler is registered for the tool 'open_gate'."


async def test_naming_a_tool_that_was_never_registered_raises_key_error(bridge):
    with pytest.raises(KeyError, match="open_gate"):
        await bridge.create_session(tools=["open_gate"])


async def test_a_schema_turn_returns_the_structured_value(bridge):
    schema = {"type": "object", "properties": {"gate": {"type": "string"}}, "required": ["gate"]}
    with anyio.fail_after(5):
        session = await bridge.create_session(model=scripted({"json": {"gate": "north"}}))
        reply = await session.respond("Which gate?", schema=schema)
    assert reply.structured == {"gate": "north"}


async def test_an_error_response_raises_rpc_error_with_its_name(bridge):
    with anyio.fail_after(5):
        session = await bridge.create_session(session="gone", model=scripted())
        await session.delete()
        with pytest.raises(RpcError) as raised:
            await session.respond("Anyone there?")
    assert raised.value.name == "session_not_found"


# ---- NPCs, decisions, worlds, content ----------------------------------------------------------


async def test_an_npc_talks_and_streams_its_line(bridge):
    line = {
        "emotion": "happy",
        "line": "Fine steel, friend.",
        "player_options": ["Buy it.", "Goodbye."],
        "ends_conversation": False,
    }
    deltas: list[str] = []
    with anyio.fail_after(5):
        gorm = await bridge.create_npc(GORM, npc="gorm", model=scripted({"json": line}))
        reply = await gorm.talk("Nice sword.", on_text=deltas.append)
    assert isinstance(reply, NpcTalkResult)
    assert (reply.npc, reply.line, reply.emotion) == ("gorm", "Fine steel, friend.", "happy")
    assert reply.player_options == ["Buy it.", "Goodbye."]
    assert "".join(deltas) == reply.line
    assert reply.is_fallback is False


async def test_a_reset_reaches_on_reset_so_the_subtitle_ends_as_the_line_that_stands(bridge):
    # a line opening with a quote streams without it (a wrapped line loses both quotes); this
    # one keeps its quotes, so the daemon takes the streamed text back with a lineReset
    said = '"Aye," he said. "Go."'
    subtitle: list[str] = []
    resets: list[str] = []

    def reset(line: str) -> None:
        resets.append(line)
        subtitle[:] = [line]

    with anyio.fail_after(5):
        gorm = await bridge.create_npc(
            GORM,
            npc="gorm",
            options={"replyFormat": "text"},
            model=scripted({"text": said, "chunks": 3}),
        )
        reply = await gorm.talk("Well?", on_text=subtitle.append, on_reset=reset)
    assert reply.line == said
    assert resets == [said]
    assert "".join(subtitle) == reply.line


def test_the_router_hands_a_sessions_reset_its_whole_text_and_never_as_a_delta():
    from oamd.client._params import event_router, session_reset, session_text

    deltas: list[str] = []
    resets: list[str] = []
    route = event_router(deltas.append, None, session_text, resets.append, session_reset)
    assert route is not None
    for delta, text, is_reset in [("Blo", "Blo", False), ("The gate", "The gate", True)]:
        event = {"type": "text", "delta": delta, "text": text, "isReset": is_reset}
        route({"session": "s", "requestId": 1, "event": event})
    route({"session": "s", "requestId": 1, "event": {"type": "text", "delta": " is open.",
           "text": "The gate is open.", "isReset": False}})  # fmt: skip
    assert (deltas, resets) == (["Blo", " is open."], ["The gate"])
    # without on_reset a reset is not passed as text either (it would append to the old text)
    plain: list[str] = []
    route = event_router(plain.append, None, session_text)
    assert route is not None
    route({"event": {"type": "text", "delta": "X", "text": "X", "isReset": True}})
    assert plain == []


async def test_decide_returns_the_chosen_option(bridge):
    choice = {"reasoning": "Snik is timid.", "choice": "flee", "confidence": 78}
    with anyio.fail_after(5):
        decision = await bridge.decide(
            "The goblin has 3 HP left.", ["attack", "flee"], model=scripted({"json": choice})
        )
    assert isinstance(decision, Decision)
    assert (decision.option_id, decision.confidence) == ("flee", 78)


async def test_a_world_is_read_and_written_through_its_handle(bridge):
    with anyio.fail_after(5):
        village = await bridge.create_world({"player": {"gold": 60}}, world="village")
        written = await village.set("player.gold", 15)
        gold = await village.get("player.gold")
        merged = await village.merge({"horse": "Bess"}, "player")
        removed = await village.remove("player.horse")
        missing = await village.get("player.horse")
        snapshot = await village.snapshot()
    assert (village.id, village.created_version) == ("village", 0)
    assert (written.path, written.version) == ("player.gold", 1)
    assert (gold.value, gold.exists) == (15, True)
    assert merged.version == 2
    assert (removed.removed, removed.old_value) == (True, "Bess")
    assert (missing.value, missing.exists) == (None, False)
    assert snapshot == {"player": {"gold": 15}}


async def test_generate_returns_content_in_schema_order(bridge):
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "damage": {"type": "integer"}},
        "required": ["name", "damage"],
    }
    with anyio.fail_after(5):
        result = await bridge.generate(
            "A cursed sword.", schema, model=scripted({"json": {"damage": 7, "name": "Fang"}})
        )
    assert list(result.content.items()) == [("name", "Fang"), ("damage", 7)]
    assert result.warnings == []


# ---- over a socket -----------------------------------------------------------------------------


async def test_a_bridge_over_tcp_answers_four_parallel_tool_calls_and_one_raising_costs_one_output():
    gates = ["north", "south", "east", "west"]
    calls = [{"name": "open_gate", "arguments": {"gate": g}} for g in gates]
    async with serve(unix=False) as daemon:
        host, port = daemon.tcp
        async with Bridge.tcp(host, port, token=daemon.token) as bridge:

            @bridge.tool("open_gate", "Open a named gate.", GATE)
            async def open_gate(args: dict[str, Any]) -> str:
                if args["gate"] == "west":
                    raise RuntimeError("the west chain is jammed")
                return f"{args['gate']} open"

            with anyio.fail_after(30):
                guard = await bridge.create_session(
                    tools=["open_gate"], model=scripted({"toolCalls": calls}, {"text": "Done."})
                )
                reply = await guard.respond("Open every gate.")
                await bridge.ping()
    outputs = {c.call.arguments["gate"]: (c.output, c.is_error) for c in reply.tool_calls}
    assert outputs == {
        "north": ("north open", False),
        "south": ("south open", False),
        "east": ("east open", False),
        "west": ("The engine's tool handler failed: RuntimeError: the west chain is jammed", True),
    }
    assert reply.text == "Done."


async def test_a_bridge_over_tcp_initializes_with_the_token():
    async with serve(unix=False) as daemon:
        host, port = daemon.tcp
        async with Bridge.tcp(host, port, token=daemon.token) as bridge:
            with anyio.fail_after(5):
                session = await bridge.create_session(model=scripted({"text": "Hello."}))
                reply = await session.respond("Hi.")
    assert bridge.info is not None and bridge.info.server.name == "oamd"
    assert reply.text == "Hello."

"""Structured output (§5 schema turns, §9 JSON Schema support), schema/validate, tools/validate."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

CHOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "choice": {"type": "string", "enum": ["haggle", "accept", "refuse"]},
    },
    "required": ["reasoning", "choice"],
}
CODE_SCHEMA = {
    "type": "object",
    "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
    "required": ["code"],
}
PATTERN_WARNING = (
    "#/properties/code: pattern '^[A-Z]{3}$' is described to the model but not enforced"
)
FORMAT_WARNING = "#/properties/gate: 'format' is described to the model but not enforced"

OPEN_GATE = {
    "name": "open_gate",
    "description": "Open a named gate.",
    "parameters": {
        "type": "object",
        "properties": {"gate": {"type": "string", "format": "uuid"}},
        "required": ["gate"],
    },
}
WAVE_OPENAI = {
    "type": "function",
    "function": {"name": "wave", "parameters": {"type": "object", "properties": {}}},
}


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


async def create(client, session: str, *steps: dict[str, Any], **params: Any) -> None:
    await client.request(
        "session/create", {"session": session, "model": scripted(*steps), **params}
    )


async def rpc_error(client, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as info:
        await client.request(method, params)
    return info.value


# ---- schema turns ----------------------------------------------------------------------------


async def test_structured_output_follows_the_schema_property_order(client):
    with anyio.fail_after(5):
        await create(client, "g", {"json": {"choice": "haggle", "reasoning": "Too cheap."}})
        result = await client.request(
            "session/respond", {"session": "g", "prompt": "Offer 5 gold.", "schema": CHOICE_SCHEMA}
        )
    assert result["structured"] == {"reasoning": "Too cheap.", "choice": "haggle"}
    assert list(result["structured"]) == ["reasoning", "choice"]
    assert result["text"] == '{"reasoning":"Too cheap.","choice":"haggle"}'
    assert json.loads(result["text"]) == result["structured"]


async def test_a_schema_turn_result_has_structured_after_text(client):
    with anyio.fail_after(5):
        await create(client, "g", {"json": {"choice": "accept", "reasoning": "Fair."}})
        result = await client.request(
            "session/respond", {"session": "g", "prompt": "Offer 50 gold.", "schema": CHOICE_SCHEMA}
        )
    assert list(result) == ["session", "text", "structured", "toolCalls", "usage", "steps"]


async def test_a_streamed_schema_turn_sends_partial_events(client):
    with anyio.fail_after(5):
        await create(client, "g", {"json": {"choice": "refuse", "reasoning": "No."}})
        turn = await client.start(
            "session/respond",
            {"session": "g", "prompt": "Offer.", "schema": CHOICE_SCHEMA, "stream": True},
        )
        reply = await client.wait(turn)
    types = [e["type"] for e in client.recorder.events_for(turn)]
    assert types[0] == "modelStep"
    assert "partial" in types
    assert reply["result"]["structured"]["choice"] == "refuse"


async def test_a_schema_turn_may_call_tools_first(client):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": "Price list: 10 gold."}

    client.tool_handler = handler
    tools = [{"name": "check_prices", "description": "Look up prices."}]
    with anyio.fail_after(5):
        await create(
            client,
            "g",
            {"toolCalls": [{"name": "check_prices"}]},
            {"json": {"reasoning": "Below the list price.", "choice": "haggle"}},
            tools=tools,
        )
        result = await client.request(
            "session/respond", {"session": "g", "prompt": "Offer 5 gold.", "schema": CHOICE_SCHEMA}
        )
    assert [r["call"]["name"] for r in result["toolCalls"]] == ["check_prices"]
    assert result["structured"] == {"reasoning": "Below the list price.", "choice": "haggle"}


async def test_an_unusable_schema_fails_with_invalid_schema_at_path_schema(client):
    with anyio.fail_after(5):
        await create(client, "g", {"text": "unused"})
        err = await rpc_error(
            client, "session/respond", {"session": "g", "prompt": "hi", "schema": {"type": "nope"}}
        )
    assert err.code == -32007 and err.name == "invalid_schema"
    assert err.data["path"] == "schema"
    assert err.data["schemaPath"] == "#"
    assert err.message == "schema: unsupported type 'nope' (at #)"


async def test_a_non_object_schema_is_invalid_params(client):
    with anyio.fail_after(5):
        await create(client, "g", {"text": "unused"})
        err = await rpc_error(
            client, "session/respond", {"session": "g", "prompt": "hi", "schema": 5}
        )
    assert err.code == -32602


async def test_an_invalid_schema_leaves_the_script_untouched(client):
    with anyio.fail_after(5):
        await create(client, "g", {"text": "First step."})
        await rpc_error(
            client, "session/respond", {"session": "g", "prompt": "hi", "schema": {"type": "nope"}}
        )
        result = await client.request("session/respond", {"session": "g", "prompt": "hi"})
    assert result["text"] == "First step."


async def test_schema_warnings_appear_in_the_result_warnings(client):
    with anyio.fail_after(5):
        await create(client, "g", {"json": {"code": "ABC"}})
        result = await client.request(
            "session/respond", {"session": "g", "prompt": "A code.", "schema": CODE_SCHEMA}
        )
    assert result["structured"] == {"code": "ABC"}
    assert result["warnings"] == [PATTERN_WARNING]


# ---- schema/validate -------------------------------------------------------------------------


async def test_schema_validate_reports_unenforced_constraints_and_a_generation_schema(client):
    with anyio.fail_after(5):
        result = await client.request("schema/validate", {"schema": CODE_SCHEMA})
    assert result["warnings"] == [PATTERN_WARNING]
    assert isinstance(result["generationSchema"], dict)


async def test_schema_validate_without_warnings_returns_an_empty_list(client):
    with anyio.fail_after(5):
        result = await client.request("schema/validate", {"schema": CHOICE_SCHEMA, "name": "Deal"})
    assert result["warnings"] == []
    assert isinstance(result["generationSchema"], dict)


async def test_schema_validate_accepts_a_schema_as_a_json_string(client):
    with anyio.fail_after(5):
        result = await client.request("schema/validate", {"schema": json.dumps(CODE_SCHEMA)})
    assert result["warnings"] == [PATTERN_WARNING]


async def test_schema_validate_rejects_an_unsupported_type_with_its_paths(client):
    with anyio.fail_after(5):
        err = await rpc_error(client, "schema/validate", {"schema": {"type": "quaternion"}})
    assert err.code == -32007
    assert err.data == {"code": "invalid_schema", "path": "schema", "schemaPath": "#"}
    assert err.message == "schema: unsupported type 'quaternion' (at #)"


async def test_schema_validate_points_at_a_nested_error(client):
    schema = {"type": "object", "properties": {"x": {"type": "wat"}}}
    with anyio.fail_after(5):
        err = await rpc_error(client, "schema/validate", {"schema": schema})
    assert err.code == -32007
    assert err.data["path"] == "schema"
    assert err.data["schemaPath"] == "#/properties/x"


async def test_schema_validate_needs_a_schema(client):
    with anyio.fail_after(5):
        err = await rpc_error(client, "schema/validate", {})
    assert err.code == -32602
    assert err.message == "Missing required parameter 'schema'."


async def test_schema_validate_rejects_a_schema_that_is_not_an_object(client):
    with anyio.fail_after(5):
        err = await rpc_error(client, "schema/validate", {"schema": 5})
    assert err.code == -32602
    assert err.message == "'schema' must be a JSON Schema object."


# ---- tools/validate --------------------------------------------------------------------------


async def test_tools_validate_gives_per_tool_and_prefixed_top_level_warnings(client):
    with anyio.fail_after(5):
        result = await client.request("tools/validate", {"tools": [OPEN_GATE, WAVE_OPENAI]})
    assert [t["name"] for t in result["tools"]] == ["open_gate", "wave"]
    assert result["tools"][0]["warnings"] == [FORMAT_WARNING]
    assert result["tools"][1]["warnings"] == []
    assert all(isinstance(t["generationSchema"], dict) for t in result["tools"])
    assert result["warnings"] == [
        f"open_gate: {FORMAT_WARNING}",
        "wave: no description; the model may not know when to call it.",
    ]


async def test_tools_validate_does_not_warn_about_the_tool_count(client):
    tools = [{"name": f"t{i}", "description": "A tool."} for i in range(6)]
    with anyio.fail_after(5):
        result = await client.request("tools/validate", {"tools": tools})
    assert len(result["tools"]) == 6
    assert result["warnings"] == []


async def test_tools_validate_rejects_an_unusable_parameters_schema(client):
    tools = [{"name": "a", "description": "x", "parameters": {"type": "wat"}}]
    with anyio.fail_after(5):
        err = await rpc_error(client, "tools/validate", {"tools": tools})
    assert err.code == -32007 and err.name == "invalid_schema"
    assert err.data["path"] == "tools[0].parameters"
    assert err.message.startswith("tools[0].parameters: unsupported type 'wat'")


@pytest.mark.parametrize(
    "tools",
    [
        [{"name": "a", "description": "x", "timeoutSeconds": 1e300}],
        [{"name": "a", "description": "x"}, {"name": "a", "description": "y"}],
        [{"name": "open gate", "description": "x"}],
    ],
    ids=["timeout", "duplicate", "bad-name"],
)
async def test_tools_validate_rejects_invalid_definitions(client, tools):
    with anyio.fail_after(5):
        err = await rpc_error(client, "tools/validate", {"tools": tools})
    assert err.code == -32602

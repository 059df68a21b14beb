"""content/generate: schema-shaped content, schema warnings and errors, tools."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio

SWORD_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "rarity": {"type": "string", "enum": ["common", "rare", "legendary"]},
        "damage": {"type": "integer", "minimum": 1, "maximum": 50},
    },
    "required": ["name", "rarity", "damage"],
}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


async def generate(client, **params: Any) -> dict[str, Any]:
    params.setdefault("prompt", "A cursed sword from a drowned temple.")
    params.setdefault("schema", SWORD_SCHEMA)
    return await client.request("content/generate", params)


async def test_content_comes_back_in_schema_order_without_warnings(client):
    with anyio.fail_after(5):
        result = await generate(
            client,
            context={"playerLevel": 7},
            model=scripted({"json": {"damage": 45, "name": "Drowned Fang", "rarity": "legendary"}}),
        )
    assert result == {"content": {"name": "Drowned Fang", "rarity": "legendary", "damage": 45}}
    assert list(result) == ["content"]
    assert list(result["content"]) == ["name", "rarity", "damage"]


async def test_a_schema_given_as_json_text_works(client):
    with anyio.fail_after(5):
        result = await generate(
            client,
            schema='{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}',
            model=scripted({"json": {"name": "Bog Lurker"}}),
        )
    assert result == {"content": {"name": "Bog Lurker"}}


async def test_an_unenforced_pattern_is_warned_about(client):
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["code"],
    }
    with anyio.fail_after(5):
        result = await generate(client, schema=schema, model=scripted({"json": {"code": "ABC"}}))
    assert list(result) == ["content", "warnings"]
    assert result["content"] == {"code": "ABC"}
    assert result["warnings"]
    assert any("pattern" in w for w in result["warnings"])


async def test_unknown_keys_are_warned_about(client):
    with anyio.fail_after(5):
        result = await generate(
            client, schema=NAME_SCHEMA, style="grim", model=scripted({"json": {"name": "X"}})
        )
    assert result["warnings"] == ["Unknown parameter 'style' was ignored."]


async def test_an_invalid_schema_is_invalid_schema(client):
    with anyio.fail_after(5):
        response = await client.call(
            "content/generate", {"prompt": "x", "schema": {"type": "nope"}, "model": "scripted"}
        )
    error = response["error"]
    assert error["code"] == -32007
    assert error["data"]["code"] == "invalid_schema"
    assert error["data"]["path"] == "schema"
    assert "schemaPath" in error["data"]
    assert error["message"].startswith("schema: ")


@pytest.mark.parametrize("schema", [5, ["a"], True])
async def test_a_schema_that_is_not_an_object_is_invalid_params(client, schema):
    with anyio.fail_after(5):
        response = await client.call(
            "content/generate", {"prompt": "x", "schema": schema, "model": "scripted"}
        )
    assert response["error"]["code"] == -32602
    assert response["error"]["message"] == "'schema' must be a JSON Schema object."


async def test_a_missing_prompt_is_invalid_params(client):
    with anyio.fail_after(5):
        response = await client.call(
            "content/generate", {"schema": SWORD_SCHEMA, "model": "scripted"}
        )
    assert response["error"]["code"] == -32602
    assert response["error"]["message"] == "Missing required parameter 'prompt'."


async def test_tools_are_called_with_the_request_id(client):
    seen: list[dict[str, Any]] = []

    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"output": {"biome": "swamp"}}

    client.tool_handler = handler
    with anyio.fail_after(5):
        request = await client.start(
            "content/generate",
            {
                "prompt": "A monster for the current biome.",
                "schema": NAME_SCHEMA,
                "tools": [{"name": "biome", "description": "The current biome."}],
                "model": scripted(
                    {"toolCalls": [{"name": "biome"}]}, {"json": {"name": "Bog Lurker"}}
                ),
            },
        )
        result = (await client.wait(request))["result"]
    assert result == {"content": {"name": "Bog Lurker"}}
    (params,) = seen
    assert list(params) == ["requestId", "call"]
    assert params["requestId"] == request
    assert params["call"]["name"] == "biome"


async def test_a_guardrail_is_an_error_without_fallback(client):
    with anyio.fail_after(5):
        response = await client.call(
            "content/generate",
            {
                "prompt": "x",
                "schema": NAME_SCHEMA,
                "model": scripted({"error": "guardrail_violation"}),
            },
        )
    assert response["error"]["code"] == -32002


async def test_generations_run_concurrently_without_mixing(client):
    with anyio.fail_after(10):
        requests = [
            await client.start(
                "content/generate",
                {
                    "prompt": f"Item {i}",
                    "schema": NAME_SCHEMA,
                    "model": scripted({"json": {"name": f"Item {i}"}, "delayMs": (i * 11) % 60}),
                },
            )
            for i in range(20)
        ]
        results = [(await client.wait(r))["result"] for r in requests]
    assert [r["content"]["name"] for r in results] == [f"Item {i}" for i in range(20)]

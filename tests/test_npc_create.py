"""npc/create, npc/list and npc/delete: results, ids, validation, warnings, tools and limits."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

GORM = {
    "name": "Gorm",
    "role": "the village blacksmith",
    "personality": "Gruff but fair.",
    "speakingStyle": "Short, blunt sentences.",
}
CHECK_INVENTORY = {
    "name": "check_inventory",
    "description": "Look up stock and price of an item.",
    "parameters": {
        "type": "object",
        "properties": {"item": {"type": "string"}},
        "required": ["item"],
    },
}
LIST_KEYS = [
    "npc",
    "name",
    "role",
    "world",
    "model",
    "tools",
    "turnCount",
    "relationship",
    "busy",
    "pendingOperations",
    "createdAt",
]


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


async def create(client, **params: Any) -> dict[str, Any]:
    params.setdefault("persona", GORM)
    params.setdefault("model", "scripted")
    return await client.request("npc/create", params)


async def create_error(client, **params: Any) -> RpcError:
    params.setdefault("model", "scripted")
    with pytest.raises(RpcError) as info:
        await client.request("npc/create", params)
    return info.value


async def listed(client) -> list[dict[str, Any]]:
    return (await client.request("npc/list"))["npcs"]


# ---- results and ids -------------------------------------------------------------------------


async def test_create_returns_exactly_the_id_no_tools_and_no_warnings(client):
    with anyio.fail_after(5):
        created = await create(client, npc="gorm", model=scripted())
    assert created == {"npc": "gorm", "tools": [], "warnings": []}
    assert list(created) == ["npc", "tools", "warnings"]


async def test_ids_are_generated_npc1_npc2(client):
    with anyio.fail_after(5):
        first = await create(client, persona={"name": "Mira"})
        second = await create(client, persona={"name": "Tam"})
    assert (first["npc"], second["npc"]) == ("npc1", "npc2")


async def test_generated_ids_skip_ids_in_use(client):
    with anyio.fail_after(5):
        await create(client, npc="npc1")
        generated = await create(client, persona={"name": "Mira"})
    assert generated["npc"] == "npc2"


async def test_a_taken_id_is_npc_exists_and_changes_nothing(client):
    with anyio.fail_after(5):
        await create(client, npc="gorm")
        error = await create_error(client, npc="gorm", persona={"name": "Other"})
        npcs = await listed(client)
    assert (error.code, error.name) == (-32051, "npc_exists")
    assert [(n["npc"], n["name"]) for n in npcs] == [("gorm", "Gorm")]


@pytest.mark.parametrize("npc_id", ["", "x" * 129])
async def test_an_id_outside_1_to_128_printable_characters_is_invalid(client, npc_id):
    with anyio.fail_after(5):
        error = await create_error(client, npc=npc_id, persona={"name": "Ann"})
    assert error.code == -32602
    assert error.message == f"'npc' must be 1-128 printable characters; got '{npc_id}'."


async def test_an_id_of_128_characters_is_accepted(client):
    with anyio.fail_after(5):
        created = await create(client, npc="x" * 128)
    assert created["npc"] == "x" * 128


async def test_a_non_string_id_is_invalid(client):
    with anyio.fail_after(5):
        error = await create_error(client, npc=7, persona={"name": "Ann"})
    assert error.code == -32602


async def test_an_unknown_world_is_world_not_found(client):
    with anyio.fail_after(5):
        error = await create_error(client, persona={"name": "Ann"}, world="atlantis")
    assert (error.code, error.name) == (-32052, "world_not_found")
    assert error.data["world"] == "atlantis"


async def test_the_129th_npc_is_limit_reached(client):
    with anyio.fail_after(20):
        for i in range(128):
            await create(client, npc=f"n{i}", persona={"name": f"N{i}"})
        error = await create_error(client, npc="extra", persona={"name": "Extra"})
        npcs = await listed(client)
    assert (error.code, error.name) == (-32055, "limit_reached")
    assert error.message == "The limit of 128 NPCs is reached; delete some first."
    assert error.data["limit"] == 128
    assert len(npcs) == 128


async def test_deleting_one_makes_room_again_under_the_limit(client):
    with anyio.fail_after(20):
        for i in range(128):
            await create(client, npc=f"n{i}", persona={"name": f"N{i}"})
        await client.request("npc/delete", {"npc": "n0"})
        created = await create(client, npc="extra", persona={"name": "Extra"})
    assert created["npc"] == "extra"


# ---- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "Missing required parameter 'persona'."),
        ({"persona": {"role": "a ghost"}}, "Missing required parameter 'persona.name'."),
        ({"persona": {"name": ""}}, "'persona.name' must not be empty."),
        (
            {"persona": {"name": "Ann", "goals": "gold"}},
            "Parameter 'persona.goals' must be an array.",
        ),
        (
            {"persona": {"name": "Ann"}, "options": {"replyFormat": "json"}},
            """'options.replyFormat' must be one of "automatic", "structured", "text"; got 'json'.""",
        ),
        (
            {"persona": {"name": "Ann"}, "options": {"memoryTools": ["dance"]}},
            """'options.memoryTools' contains unknown memory tool "dance"; known: "rememberFact", """
            '"changeRelationship".',
        ),
        (
            {"persona": {"name": "Ann"}, "options": {"toolChoice": "sometimes"}},
            """'options.toolChoice' must be "auto", "none", "required", "explicit" or """
            """{"tool": "<name>"}; got "sometimes".""",
        ),
        (
            {"persona": {"name": "Ann"}, "options": {"groundingTool": "check_inventory"}},
            "groundingTool 'check_inventory' is not one of the NPC's tools: .",
        ),
        (
            {
                "persona": {"name": "Ann"},
                "tools": [CHECK_INVENTORY],
                "options": {"groundingTool": "nope", "memoryTools": "all"},
            },
            "groundingTool 'nope' is not one of the NPC's tools: check_inventory, remember_fact, "
            "change_relationship.",
        ),
        (
            {"persona": {"name": "Ann"}, "options": {"playerOptionCount": 5}},
            "'options.playerOptionCount' must be between 0 and 4.",
        ),
        (
            {
                "persona": {"name": "Ann"},
                "tools": [{"name": "remember_fact", "description": "Mine."}],
                "options": {"memoryTools": ["rememberFact"]},
            },
            "Duplicate tool name 'remember_fact' (built-in world and memory tools use "
            "read_world_state, update_world_state, remember_fact and change_relationship).",
        ),
        (
            {
                "persona": {"name": "Ann"},
                "tools": [CHECK_INVENTORY],
                "options": {"toolChoice": {"tool": "x"}},
            },
            "toolChoice names unknown tool 'x'.",
        ),
    ],
    ids=[
        "no-persona",
        "no-name",
        "empty-name",
        "goals",
        "replyFormat",
        "memoryTools",
        "toolChoice",
        "groundingTool-no-tools",
        "groundingTool-listed",
        "playerOptionCount",
        "duplicate-tool",
        "toolChoice-tool",
    ],
)
async def test_invalid_params_name_the_problem_and_create_nothing(client, params, message):
    with anyio.fail_after(5):
        error = await create_error(client, **params)
        npcs = await listed(client)
    assert (error.code, error.name) == (-32602, "invalid_params")
    assert error.message == message
    assert npcs == []


async def test_tools_must_be_an_array(client):
    with anyio.fail_after(5):
        error = await create_error(client, persona={"name": "Ann"}, tools={"name": "x"})
    assert error.code == -32602


async def test_unknown_keys_are_warnings(client):
    with anyio.fail_after(5):
        created = await create(
            client,
            persona={"name": "Ann", "personalty": "typo"},
            options={"temprature": 0.5},
            voice="deep",
        )
    assert sorted(created["warnings"]) == sorted(
        [
            "Unknown parameter 'voice' was ignored.",
            "Unknown parameter 'persona.personalty' was ignored.",
            "Unknown parameter 'options.temprature' was ignored.",
        ]
    )


async def test_memory_tools_all_lists_both_memory_tools(client):
    with anyio.fail_after(5):
        created = await create(client, persona={"name": "Ann"}, options={"memoryTools": "all"})
    assert created["tools"] == ["remember_fact", "change_relationship"]


@pytest.mark.parametrize(
    ("value", "tools"),
    [
        ("none", []),
        ([], []),
        (1, ["remember_fact"]),
        (2, ["change_relationship"]),
        (3, ["remember_fact", "change_relationship"]),
        (["remember_fact"], ["remember_fact"]),
        (["changeRelationship", "rememberFact"], ["remember_fact", "change_relationship"]),
    ],
)
async def test_memory_tools_accept_names_masks_and_tool_spellings(client, value, tools):
    with anyio.fail_after(5):
        created = await create(client, persona={"name": "Ann"}, options={"memoryTools": value})
    assert created["tools"] == tools


async def test_six_tools_are_warned_about(client):
    tools = [{"name": f"tool_{i}", "description": f"Does thing {i}."} for i in range(1, 5)]
    with anyio.fail_after(5):
        await client.request("world/create", {"world": "w"})
        created = await create(
            client,
            persona={"name": "Ann"},
            tools=tools,
            world="w",
            options={"worldWritable": [""]},
        )
    assert created["tools"] == [
        "tool_1",
        "tool_2",
        "tool_3",
        "tool_4",
        "read_world_state",
        "update_world_state",
    ]
    assert created["warnings"] == [
        "6 tools: Apple recommends at most 3-5 tools per request on-device; narrow them per turn "
        "with 'enabledTools'."
    ]


async def test_tools_are_client_then_world_then_memory_tools(client):
    with anyio.fail_after(5):
        await client.request("world/create", {"world": "village"})
        created = await create(
            client,
            tools=[CHECK_INVENTORY],
            world="village",
            options={"worldWritable": ["quests"], "memoryTools": "all"},
        )
    assert created["tools"] == [
        "check_inventory",
        "read_world_state",
        "update_world_state",
        "remember_fact",
        "change_relationship",
    ]
    assert created["warnings"] == []


async def test_a_world_gives_only_the_read_tool_by_default(client):
    with anyio.fail_after(5):
        await client.request("world/create", {"world": "village"})
        created = await create(client, world="village")
    assert created["tools"] == ["read_world_state"]


async def test_an_empty_readable_list_offers_no_read_tool(client):
    with anyio.fail_after(5):
        await client.request("world/create", {"world": "village"})
        created = await create(client, world="village", options={"worldReadable": []})
    assert created["tools"] == []


async def test_world_tools_need_a_world(client):
    with anyio.fail_after(5):
        created = await create(client, options={"worldWritable": ["quests"]})
    assert created["tools"] == []


# ---- list ------------------------------------------------------------------------------------


async def test_list_entries_have_the_reference_keys_in_order(client):
    with anyio.fail_after(5):
        await create(client, npc="gorm", tools=[CHECK_INVENTORY], options={"memoryTools": "all"})
        (entry,) = await listed(client)
    assert list(entry) == LIST_KEYS
    assert {k: v for k, v in entry.items() if k != "createdAt"} == {
        "npc": "gorm",
        "name": "Gorm",
        "role": "the village blacksmith",
        "world": None,
        "model": "scripted",
        "tools": ["check_inventory"],
        "turnCount": 0,
        "relationship": 0,
        "busy": False,
        "pendingOperations": 0,
    }
    assert isinstance(entry["createdAt"], str) and entry["createdAt"]


async def test_list_is_in_creation_order(client):
    with anyio.fail_after(5):
        await create(client, npc="gorm")
        await create(client, persona={"name": "Mira"})
        await create(client, npc="able", persona={"name": "Able"})
        npcs = await listed(client)
    assert [n["npc"] for n in npcs] == ["gorm", "npc1", "able"]


async def test_list_shows_the_world_and_the_given_relationship_clamped(client):
    with anyio.fail_after(5):
        await client.request("world/create", {"world": "village"})
        await create(client, npc="gorm", world="village", memory={"relationship": 999})
        (entry,) = await listed(client)
    assert (entry["world"], entry["relationship"]) == ("village", 100)


async def test_an_empty_list(client):
    with anyio.fail_after(5):
        assert await client.request("npc/list") == {"npcs": []}


# ---- delete ----------------------------------------------------------------------------------


async def test_delete_answers_deleted_and_the_npc_is_gone(client):
    with anyio.fail_after(5):
        await create(client, npc="gorm")
        deleted = await client.request("npc/delete", {"npc": "gorm"})
        missing = await client.call("npc/talk", {"npc": "gorm", "line": "Hello?"})
        again = await client.call("npc/delete", {"npc": "gorm"})
        npcs = await listed(client)
    assert deleted == {"npc": "gorm", "deleted": True}
    assert missing["error"]["code"] == -32050
    assert missing["error"]["message"] == "No NPC with id 'gorm'."
    assert missing["error"]["data"] == {"code": "npc_not_found", "npc": "gorm"}
    assert again["error"]["code"] == -32050
    assert npcs == []


async def test_a_deleted_id_can_be_created_again(client):
    with anyio.fail_after(5):
        await create(client, npc="gorm")
        await client.request("npc/delete", {"npc": "gorm"})
        created = await create(client, npc="gorm")
    assert created["npc"] == "gorm"


async def test_the_system_model_warns_when_it_is_unavailable(client):
    with anyio.fail_after(5):
        created = await client.request("npc/create", {"npc": "gorm", "persona": GORM})
        (entry,) = await listed(client)
    (warning,) = created["warnings"]
    assert warning.startswith("The system model is unavailable (")
    assert warning.endswith("); turns will fail with model_unavailable until it is ready.")
    assert entry["model"] == "system"


async def test_a_world_that_is_not_a_string_is_named_in_json(client):
    with anyio.fail_after(5):
        response = await client.call(
            "npc/create", {"npc": "g", "persona": {"name": "G"}, "world": {"a": 1}}
        )
    assert response["error"]["code"] == -32602
    assert response["error"]["message"] == "Parameter 'world' must be a string; got {\"a\":1}."

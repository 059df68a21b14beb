"""``world/*`` through the protocol: results, errors, ``world/changed`` order, limits, atomicity.

The first three tests replay the reference's ``WorldMethodTests.swift`` assertions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from conftest import memory_daemon

from oamd.bridge.game.world import methods as world
from oamd.client import Client, RpcError
from oamd.daemon import build_registry, default_config

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    config = default_config(test_methods=True)
    registry = build_registry(config)
    world.register(registry)
    async with memory_daemon(config, registry=registry) as c:
        yield c


async def error_of(client: Client, method: str, params: dict[str, Any] | None = None) -> dict:
    response = await client.call(method, params)
    assert "error" in response, response
    return response["error"]


def changes(client: Client) -> list[dict[str, Any]]:
    return [n["params"] for n in client.recorder.notifications if n["method"] == "world/changed"]


# ---- the reference's tests -------------------------------------------------------------------


async def test_create_read_write_and_delete(client: Client) -> None:
    created = await client.request(
        "world/create", {"world": "village", "state": {"player": {"name": "Aria", "gold": 60}}}
    )
    assert created == {"world": "village", "version": 0}
    assert (await client.request("world/create"))["world"] == "w1"

    gold = await client.request("world/get", {"world": "village", "path": "player.gold"})
    assert gold == {
        "world": "village",
        "path": "player.gold",
        "value": 60,
        "exists": True,
        "version": 0,
    }
    missing = await client.request("world/get", {"world": "village", "path": "player.horse"})
    assert missing["value"] is None
    assert missing["exists"] is False

    done = await client.request(
        "world/set", {"world": "village", "path": "quests.ring.stage", "value": 1}
    )
    assert done == {"world": "village", "path": "quests.ring.stage", "version": 1}
    # null is a value, not a deletion
    await client.request("world/set", {"world": "village", "path": "player.horse", "value": None})
    horse = await client.request("world/get", {"world": "village", "path": "player.horse"})
    assert horse["exists"] is True
    assert horse["value"] is None

    merged = await client.request(
        "world/merge", {"world": "village", "path": "player", "patch": {"gold": 15, "horse": None}}
    )
    assert merged["version"] == 3
    removed = await client.request("world/remove", {"world": "village", "path": "quests.ring"})
    assert removed["removed"] is True
    assert removed["oldValue"] == {"stage": 1}
    again = await client.request("world/remove", {"world": "village", "path": "quests.ring"})
    assert again["removed"] is False

    snap = await client.request("world/snapshot", {"world": "village"})
    assert snap["state"] == {"player": {"name": "Aria", "gold": 15}, "quests": {}}
    assert list(snap["state"]["player"]) == ["name", "gold"]

    listed = (await client.request("world/list"))["worlds"]
    assert [w["world"] for w in listed] == ["village", "w1"]
    assert listed[0]["version"] == 4

    assert await client.request("world/delete", {"world": "village"}) == {
        "world": "village",
        "deleted": True,
        "endedSubscriptions": 0,
    }
    gone = await error_of(client, "world/get", {"world": "village"})
    assert gone["code"] == -32052
    assert gone["data"]["code"] == "world_not_found"
    assert gone["data"]["world"] == "village"


async def test_errors_leave_the_world_unchanged(client: Client) -> None:
    await client.request("world/create", {"world": "village", "state": {"player": {"gold": 60}}})
    duplicate = await error_of(client, "world/create", {"world": "village"})
    assert (duplicate["code"], duplicate["data"]["code"]) == (-32053, "world_exists")
    assert duplicate["data"]["world"] == "village"

    not_object = await error_of(client, "world/create", {"state": [1, 2]})
    assert not_object["code"] == -32602

    through = await error_of(
        client, "world/set", {"world": "village", "path": "player.gold.copper", "value": 3}
    )
    assert (through["code"], through["data"]["code"]) == (-32054, "world_error")
    assert through["data"]["world"] == "village"
    assert through["data"]["path"] == "player.gold.copper"

    root_value = await error_of(client, "world/set", {"world": "village", "value": 3})
    assert root_value["data"]["code"] == "world_error"
    assert root_value["data"]["path"] == ""

    bad_path = await error_of(client, "world/get", {"world": "village", "path": "player..gold"})
    assert bad_path["data"]["code"] == "world_error"
    assert bad_path["data"]["path"] == "player..gold"

    no_value = await error_of(client, "world/set", {"world": "village", "path": "x"})
    assert no_value["code"] == -32602
    assert "'value'" in no_value["message"]

    no_sub = await error_of(client, "world/unsubscribe", {"subscription": "sub99"})
    assert (no_sub["code"], no_sub["data"]["code"]) == (-32056, "subscription_not_found")
    assert no_sub["data"]["subscription"] == "sub99"

    assert (await client.request("world/snapshot", {"world": "village"}))["version"] == 0


async def test_subscriptions_notify_before_the_response(client: Client) -> None:
    await client.request(
        "world/create", {"world": "village", "state": {"player": {"gold": 60}, "time": "dawn"}}
    )
    sub = await client.request("world/subscribe", {"world": "village", "path": "player"})
    assert sub == {"subscription": "sub1", "world": "village", "path": "player"}
    everything = await client.request("world/subscribe", {"world": "village"})
    assert everything == {"subscription": "sub2", "world": "village", "path": ""}

    set_id = await client.start(
        "world/set", {"world": "village", "path": "player.gold", "value": 45}
    )
    with anyio.fail_after(5):
        await client.wait(set_id)
    seen = changes(client)
    assert [c["subscription"] for c in seen] == ["sub1", "sub2"]
    assert seen[0] == {
        "world": "village",
        "subscription": "sub1",
        "path": "player.gold",
        "oldValue": 60,
        "newValue": 45,
    }
    first_change = next(i for i, m in enumerate(client.recorder.received) if m.get("method"))
    response = next(i for i, m in enumerate(client.recorder.received) if m.get("id") == set_id)
    assert first_change < response

    # outside the path only the catch-all hears it
    await client.request("world/set", {"world": "village", "path": "time", "value": "dusk"})
    assert len(changes(client)) == 3
    assert changes(client)[-1]["subscription"] == "sub2"

    # removal omits newValue
    await client.request("world/remove", {"world": "village", "path": "player.gold"})
    removal = changes(client)[-1]
    assert removal["oldValue"] == 45
    assert "newValue" not in removal

    unsubscribed = await client.request("world/unsubscribe", {"subscription": "sub1"})
    assert unsubscribed == {
        "subscription": "sub1",
        "world": "village",
        "path": "player",
        "unsubscribed": True,
    }
    listed = (await client.request("world/list"))["worlds"]
    assert listed[0]["subscriptions"] == [{"subscription": "sub2", "world": "village", "path": ""}]
    deleted = await client.request("world/delete", {"world": "village"})
    assert deleted["endedSubscriptions"] == 1
    gone = await error_of(client, "world/unsubscribe", {"subscription": "sub2"})
    assert gone["data"]["code"] == "subscription_not_found"


# ---- each method -----------------------------------------------------------------------------


async def test_create_generates_free_ids_and_starts_at_version_zero(client: Client) -> None:
    await client.request("world/create", {"world": "w2"})
    ids = [(await client.request("world/create"))["world"] for _ in range(3)]
    assert ids == ["w1", "w3", "w4"]
    empty = await client.request("world/snapshot", {"world": "w1"})
    assert empty == {"world": "w1", "state": {}, "version": 0}
    nulls = await client.request("world/create", {"world": None, "state": None})
    assert nulls == {"world": "w5", "version": 0}


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"world": 5}, "'world'"),
        ({"world": ""}, "'world'"),
        ({"world": "x" * 129}, "'world'"),
        ({"world": "a\nb"}, "'world'"),
        ({"state": "text"}, "'state'"),
    ],
)
async def test_create_rejects_bad_params(client: Client, params: dict, needle: str) -> None:
    error = await error_of(client, "world/create", params)
    assert error["code"] == -32602
    assert needle in error["message"]
    assert (await client.request("world/list")) == {"worlds": []}


async def test_get_defaults_to_the_root_and_reads_list_items(client: Client) -> None:
    state = {"party": [{"name": "Aria"}, {"name": "Brom"}], "n": None}
    await client.request("world/create", {"world": "v", "state": state})
    root = await client.request("world/get", {"world": "v"})
    assert root == {"world": "v", "path": "", "value": state, "exists": True, "version": 0}
    assert (await client.request("world/get", {"world": "v", "path": "party.1.name"}))[
        "value"
    ] == "Brom"
    assert (await client.request("world/get", {"world": "v", "path": "party[0].name"}))[
        "value"
    ] == "Aria"
    out_of_range = await client.request("world/get", {"world": "v", "path": "party.2"})
    assert out_of_range["exists"] is False
    null = await client.request("world/get", {"world": "v", "path": "n"})
    assert (null["exists"], null["value"]) == (True, None)
    # exact keys over the protocol (lenient matching is for the model's tools)
    assert (await client.request("world/get", {"world": "v", "path": "PARTY"}))["exists"] is False


async def test_set_appends_at_index_n_and_rejects_a_gap(client: Client) -> None:
    await client.request("world/create", {"world": "v", "state": {"party": ["a"]}})
    await client.request("world/set", {"world": "v", "path": "party.1", "value": "b"})
    await client.request("world/set", {"world": "v", "path": "party.0", "value": "A"})
    gap = await error_of(client, "world/set", {"world": "v", "path": "party.5", "value": "x"})
    assert gap["data"] == {"code": "world_error", "world": "v", "path": "party.5"}
    assert "list of 2 items" in gap["message"]
    word = await error_of(client, "world/set", {"world": "v", "path": "party.first", "value": 1})
    assert word["data"]["code"] == "world_error"
    snap = await client.request("world/snapshot", {"world": "v"})
    assert snap == {"world": "v", "state": {"party": ["A", "b"]}, "version": 2}


async def test_set_creates_objects_on_the_way_and_replaces_the_root(client: Client) -> None:
    await client.request("world/create", {"world": "v", "state": {"hat": None}})
    await client.request("world/set", {"world": "v", "path": "a.b.c", "value": [1]})
    await client.request("world/set", {"world": "v", "path": "hat.color", "value": "red"})
    snap = await client.request("world/snapshot", {"world": "v"})
    assert snap["state"] == {"hat": {"color": "red"}, "a": {"b": {"c": [1]}}}
    done = await client.request("world/set", {"world": "v", "path": "", "value": {"fresh": True}})
    assert done == {"world": "v", "path": "", "version": 3}
    assert (await client.request("world/snapshot", {"world": "v"}))["state"] == {"fresh": True}


async def test_set_to_the_same_value_changes_nothing(client: Client) -> None:
    await client.request("world/create", {"world": "v", "state": {"n": 1, "flag": True}})
    await client.request("world/subscribe", {"world": "v"})
    same = await client.request("world/set", {"world": "v", "path": "n", "value": 1.0})
    assert same["version"] == 0
    # true is not 1
    differs = await client.request("world/set", {"world": "v", "path": "flag", "value": 1})
    assert differs["version"] == 1
    assert [c["path"] for c in changes(client)] == ["flag"]


async def test_merge_sends_one_change_per_leaf_in_patch_order_before_the_response(
    client: Client,
) -> None:
    await client.request(
        "world/create",
        {"world": "v", "state": {"player": {"gold": 60, "hp": 10, "bag": ["rope"]}, "t": 1}},
    )
    await client.request("world/subscribe", {"world": "v", "path": "player"})
    patch = {
        "player": {"hp": 9, "gold": 60, "bag": {"slots": 2}, "mood": {"now": "calm", "x": None}},
        "t": None,
        "weather": "rain",
    }
    await client.request("world/subscribe", {"world": "v"})
    merge_id = await client.start("world/merge", {"world": "v", "patch": patch})
    with anyio.fail_after(5):
        result = (await client.wait(merge_id))["result"]
    assert result == {"world": "v", "path": "", "version": 1}
    seen = [(c["subscription"], c["path"]) for c in changes(client)]
    assert seen == [
        ("sub1", "player.hp"),
        ("sub2", "player.hp"),
        ("sub1", "player.bag"),
        ("sub2", "player.bag"),
        ("sub1", "player.mood"),
        ("sub2", "player.mood"),
        ("sub2", "t"),
        ("sub2", "weather"),
    ]
    by_path = {c["path"]: c for c in changes(client) if c["subscription"] == "sub2"}
    assert by_path["player.bag"]["oldValue"] == ["rope"]
    assert by_path["player.bag"]["newValue"] == {"slots": 2}
    assert "oldValue" not in by_path["player.mood"]
    assert by_path["player.mood"]["newValue"] == {"now": "calm"}
    assert by_path["t"] == {"world": "v", "subscription": "sub2", "path": "t", "oldValue": 1}
    assert "oldValue" not in by_path["weather"]
    response = next(i for i, m in enumerate(client.recorder.received) if m.get("id") == merge_id)
    last_change = max(i for i, m in enumerate(client.recorder.received) if m.get("method"))
    assert last_change < response
    snap = await client.request("world/snapshot", {"world": "v"})
    assert snap["state"] == {
        "player": {"gold": 60, "hp": 9, "bag": {"slots": 2}, "mood": {"now": "calm"}},
        "weather": "rain",
    }


async def test_merge_at_a_path_and_merge_errors(client: Client) -> None:
    await client.request("world/create", {"world": "v", "state": {"p": {"gold": 1}, "n": 5}})
    done = await client.request("world/merge", {"world": "v", "path": "p", "patch": {"xp": 2}})
    assert done == {"world": "v", "path": "p", "version": 1}
    noop = await client.request("world/merge", {"world": "v", "patch": {"p": {"xp": 2}}})
    assert noop["version"] == 1
    missing = await error_of(client, "world/merge", {"world": "v", "path": "p"})
    assert missing["code"] == -32602
    assert "'patch'" in missing["message"]
    through = await error_of(
        client, "world/merge", {"world": "v", "path": "n.x", "patch": {"a": 1}}
    )
    assert through["data"]["code"] == "world_error"
    root = await error_of(client, "world/merge", {"world": "v", "patch": [1]})
    assert root["data"] == {"code": "world_error", "world": "v", "path": ""}
    snap = await client.request("world/snapshot", {"world": "v"})
    assert snap == {"world": "v", "state": {"p": {"gold": 1, "xp": 2}, "n": 5}, "version": 1}


async def test_remove_shifts_lists_and_the_root_empties_the_world(client: Client) -> None:
    await client.request("world/create", {"world": "v", "state": {"q": ["a", "b", "c"], "k": 1}})
    mid = await client.request("world/remove", {"world": "v", "path": "q.1"})
    assert mid == {"world": "v", "path": "q.1", "removed": True, "oldValue": "b", "version": 1}
    through = await client.request("world/remove", {"world": "v", "path": "k.x"})
    assert (through["removed"], through["oldValue"], through["version"]) == (False, None, 1)
    root = await client.request("world/remove", {"world": "v", "path": ""})
    assert root["oldValue"] == {"q": ["a", "c"], "k": 1}
    assert (root["removed"], root["version"]) == (True, 2)
    assert (await client.request("world/snapshot", {"world": "v"}))["state"] == {}
    needs_path = await error_of(client, "world/remove", {"world": "v"})
    assert needs_path["code"] == -32602
    bad = await error_of(client, "world/remove", {"world": "v", "path": "a..b"})
    assert bad["data"]["code"] == "world_error"


@pytest.mark.parametrize(
    "method",
    ["world/get", "world/set", "world/merge", "world/remove", "world/snapshot", "world/delete"],
)
async def test_unknown_world_fails_world_not_found(client: Client, method: str) -> None:
    error = await error_of(
        client, method, {"world": "nowhere", "path": "a", "value": 1, "patch": {}}
    )
    assert (error["code"], error["data"]) == (
        -32052,
        {"code": "world_not_found", "world": "nowhere"},
    )


@pytest.mark.parametrize(
    ("method", "params", "needle"),
    [
        ("world/get", {}, "Missing required parameter 'world'."),
        ("world/get", {"world": 3}, "Parameter 'world' must be a string; got 3."),
        ("world/get", {"world": "v", "path": 3}, "Parameter 'path' must be a string; got 3."),
        ("world/set", {"world": "v", "path": ["a"], "value": 1}, "'path'"),
        ("world/remove", {"world": "v", "path": None}, "Missing required parameter 'path'."),
        ("world/subscribe", {}, "Missing required parameter 'world'."),
        ("world/subscribe", {"world": "v", "path": 1}, "'path'"),
        ("world/unsubscribe", {}, "Missing required parameter 'subscription'."),
        ("world/delete", {"world": None}, "Missing required parameter 'world'."),
    ],
)
async def test_bad_params_fail_invalid_params_naming_them(
    client: Client, method: str, params: dict, needle: str
) -> None:
    await client.request("world/create", {"world": "v"})
    error = await error_of(client, method, params)
    assert error["code"] == -32602
    assert needle in error["message"]


async def test_list_shows_npcs_subscriptions_and_creation_time(client: Client) -> None:
    assert await client.request("world/list", {}) == {"worlds": []}
    await client.request("world/create", {"world": "b"})
    await client.request("world/create", {"world": "a"})
    await client.request("world/subscribe", {"world": "a", "path": "x"})
    await client.request("world/subscribe", {"world": "b"})
    listed = (await client.request("world/list"))["worlds"]
    assert [w["world"] for w in listed] == ["b", "a"]
    assert listed[1]["subscriptions"] == [{"subscription": "sub1", "world": "a", "path": "x"}]
    assert listed[0]["npcs"] == 0
    assert listed[0]["createdAt"].endswith("Z")


async def test_subscription_paths_at_inside_and_above_a_change(client: Client) -> None:
    await client.request("world/create", {"world": "v", "state": {"p": {"bag": {"gold": 1}}}})
    for path in ["p.bag.gold", "p.bag.gold.coins", "p", "q", "p.bagx", "", "p[bag]"]:
        await client.request("world/subscribe", {"world": "v", "path": path})
    await client.request("world/set", {"world": "v", "path": "p.bag", "value": {"gold": 2}})
    # inside the change (sub1, sub2), above it (sub3, sub6), at it (sub7); not q or p.bagx
    assert [c["subscription"] for c in changes(client)] == ["sub1", "sub2", "sub3", "sub6", "sub7"]
    assert all(c["path"] == "p.bag" for c in changes(client))
    assert changes(client)[0]["oldValue"] == {"gold": 1}


async def test_subscribe_errors_and_changes_to_other_worlds(client: Client) -> None:
    await client.request("world/create", {"world": "v"})
    await client.request("world/create", {"world": "other"})
    missing = await error_of(client, "world/subscribe", {"world": "nowhere"})
    assert missing["data"] == {"code": "world_not_found", "world": "nowhere"}
    bad = await error_of(client, "world/subscribe", {"world": "v", "path": "a..b"})
    assert bad["data"] == {"code": "world_error", "world": "v", "path": "a..b"}
    await client.request("world/subscribe", {"world": "v", "path": "$.a"})
    await client.request("world/set", {"world": "other", "path": "a", "value": 1})
    await client.request("world/set", {"world": "v", "path": "a[0]", "value": None})
    assert changes(client) == [
        {"world": "v", "subscription": "sub1", "path": "a.0", "newValue": None}
    ]


async def test_deleting_a_world_frees_its_id_and_ends_its_subscriptions(client: Client) -> None:
    await client.request("world/create", {"world": "v"})
    await client.request("world/subscribe", {"world": "v"})
    await client.request("world/delete", {"world": "v"})
    again = await client.request("world/create", {"world": "v"})
    assert again == {"world": "v", "version": 0}
    await client.request("world/set", {"world": "v", "path": "a", "value": 1})
    assert changes(client) == []
    twice = await error_of(client, "world/delete", {"world": "nope"})
    assert twice["code"] == -32052


async def test_malformed_and_null_paths(client: Client) -> None:
    await client.request("world/create", {"world": "v", "state": {"player": {"gold": 1}}})
    for path in ["player..gold", "player.", ".player", "a.[0]"]:
        error = await error_of(client, "world/set", {"world": "v", "path": path, "value": 1})
        assert error["data"] == {"code": "world_error", "world": "v", "path": path}, path
    assert (await client.request("world/get", {"world": "v", "path": "/player/gold"}))["value"] == 1
    root = await client.request("world/get", {"world": "v", "path": None})
    assert root["path"] == ""
    assert (await client.request("world/snapshot", {"world": "v"}))["version"] == 0


async def test_too_deep_a_value_is_rejected(client: Client) -> None:
    """Path segments count toward the world's depth (128): a value the line could carry
    (MAX_JSON_DEPTH) still fails ``world_error`` under a long enough path."""
    await client.request("world/create", {"world": "v"})
    deep: Any = 1
    for _ in range(120):
        deep = [deep]
    path = ".".join(f"k{n}" for n in range(10))
    error = await error_of(client, "world/set", {"world": "v", "path": path, "value": deep})
    assert error["data"]["code"] == "world_error"
    assert (await client.request("world/snapshot", {"world": "v"}))["version"] == 0
    assert [w["world"] for w in (await client.request("world/list"))["worlds"]] == ["v"]


# ---- limits ----------------------------------------------------------------------------------


async def test_world_limit_is_64_and_the_65th_fails_limit_reached(client: Client) -> None:
    ids = [await client.start("world/create") for _ in range(64)]
    with anyio.fail_after(5):
        for msg_id in ids:
            assert "result" in await client.wait(msg_id)
        error = await error_of(client, "world/create", {"world": "one-more"})
    assert (error["code"], error["data"]) == (-32055, {"code": "limit_reached", "limit": 64})
    await client.request("world/delete", {"world": "w1"})
    assert (await client.request("world/create", {"world": "one-more"}))["version"] == 0


async def test_subscription_limit_is_256(client: Client) -> None:
    await client.request("world/create", {"world": "v"})
    ids = [await client.start("world/subscribe", {"world": "v"}) for _ in range(256)]
    with anyio.fail_after(5):
        for msg_id in ids:
            assert "result" in await client.wait(msg_id)
        error = await error_of(client, "world/subscribe", {"world": "v"})
    assert (error["code"], error["data"]) == (-32055, {"code": "limit_reached", "limit": 256})
    await client.request("world/unsubscribe", {"subscription": "sub7"})
    assert (await client.request("world/subscribe", {"world": "v"}))["subscription"] == "sub257"


async def test_world_changed_is_declared_in_capabilities(client: Client) -> None:
    result = await client.request("initialize", {"protocolVersion": "1.0"})
    assert "world/changed" in result["capabilities"]["notifications"]
    assert "world/create" in result["capabilities"]["methods"]


async def test_request_errors_raise_rpc_error(client: Client) -> None:
    with pytest.raises(RpcError) as info:
        await client.request("world/snapshot", {"world": "x"})
    assert info.value.name == "world_not_found"

"""``WorldState`` and ``WorldStore`` in-process: changes, atomicity, ids, limits, the change sink,
and a property test over random operation sequences."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oamd.bridge.params import check_object_id
from oamd.errors import (
    InvalidParams,
    LimitReached,
    SubscriptionNotFound,
    WorldError,
    WorldExists,
    WorldNotFound,
)
from oamd.game.world.document import Change, WorldState
from oamd.game.world.store import WorldStore
from oamd.jsonvalue import dumps
from oamd.limits import MAX_WORLD_BYTES


def test_set_returns_the_change_and_counts_a_version() -> None:
    world = WorldState({"player": {"gold": 60}}, id="v")
    assert world.set("player.gold", 45) == [Change("player.gold", 60, 45)]
    assert world.set("player.hat", None) == [Change("player.hat", None, None, created=True)]
    assert world.version == 2
    assert world.set("player.gold", 45) == []
    assert world.version == 2


def test_merge_reports_leaves_in_patch_order() -> None:
    world = WorldState({"a": {"x": 1, "y": 2}, "b": 3})
    got = world.merge({"b": None, "a": {"y": 5, "x": 1, "z": {"k": None, "j": 1}}})
    assert got == [
        Change("b", 3, None, removed=True),
        Change("a.y", 2, 5),
        Change("a.z", None, {"j": 1}, created=True),
    ]
    assert world.snapshot() == {"a": {"x": 1, "y": 5, "z": {"j": 1}}}
    assert list(world.snapshot()["a"]) == ["x", "y", "z"]
    assert world.version == 1
    assert world.merge({"a": {"nope": None}}) == []
    assert world.version == 1


def test_merge_replaces_a_non_object_target_as_one_change() -> None:
    world = WorldState({"bag": ["rope"]})
    assert world.merge({"slots": 2, "gone": None}, "bag") == [Change("bag", ["rope"], {"slots": 2})]
    assert world.merge(7, "bag") == [Change("bag", {"slots": 2}, 7)]


def test_failed_operations_change_nothing() -> None:
    before = {"n": 5, "list": [1], "o": {"k": "v"}}
    world = WorldState(before, id="v")
    attempts = [
        lambda: world.set("n.x", 1),
        lambda: world.set("list.3", 1),
        lambda: world.set("", []),
        lambda: world.merge({"o": {"k": 2}, "n": {"deeper": 1}}, "n.q"),
        lambda: world.merge("text"),
        lambda: world.remove("a..b"),
        lambda: world.lookup("x."),
    ]
    for attempt in attempts:
        with pytest.raises(WorldError) as info:
            attempt()
        assert info.value.data["world"] == "v"
    assert world.snapshot() == {"n": 5, "list": [1], "o": {"k": "v"}}
    assert world.version == 0


def test_a_root_must_be_a_shallow_enough_object() -> None:
    with pytest.raises(WorldError):
        WorldState([1], id="v")  # type: ignore[arg-type]
    deep: Any = {}
    for _ in range(200):
        deep = {"a": deep}
    with pytest.raises(WorldError):
        WorldState(deep)


def test_snapshots_stay_valid_after_later_writes() -> None:
    world = WorldState({"p": {"gold": 1}})
    snap = world.snapshot()
    world.set("p.gold", 2)
    world.merge({"p": {"xp": 1}})
    world.remove("p")
    assert snap == {"p": {"gold": 1}}


def test_remove_root_and_list_items() -> None:
    world = WorldState({"q": [1, 2, 3]})
    assert world.remove("q.0") == [Change("q.0", 1, None, removed=True)]
    assert world.get("q") == [2, 3]
    assert world.remove("q.9") == []
    assert world.remove("") == [Change("", {"q": [2, 3]}, {})]
    assert world.remove("") == []
    assert world.version == 2


def test_lenient_path_forms() -> None:
    world = WorldState({"party": [{"name": "Aria"}], "player": {"gold": 3}})
    assert world.get("party[0].name") == "Aria"
    assert world.get("$.player.gold") == 3
    assert world.get("/player/gold") == 3
    assert world.get("$") == world.snapshot()
    assert world.get(" player.gold ") == 3
    assert world.get("player..gold", default="bad") == "bad"
    assert world.check_path("party[0].name") == "party.0.name"


def test_change_derives_segments_from_its_path() -> None:
    assert Change("a.b", 1, 2).segments == ("a", "b")
    assert Change("", 1, 2).segments == ()


def test_summary_flattens_leaves() -> None:
    world = WorldState({"player": {"name": "Aria", "bag": [1, 2]}, "long": "x" * 300})
    assert world.summary(["player", "missing", "long"]).splitlines() == [
        "player.name: Aria",
        "player.bag: [1,2]",
        "long: " + "x" * 197 + "...",
    ]
    assert world.summary([""], max_lines=1) == "player.name: Aria\n(2 more not shown)"


def test_store_ids_limits_and_lookup() -> None:
    store = WorldStore(max_worlds=2)
    assert store.create().id == "w1"
    with pytest.raises(WorldExists):
        store.create("w1")
    with pytest.raises(InvalidParams):  # the adapter checks a client's id before the store
        check_object_id("", "world")
    assert store.create("main", {"a": 1}).get("a") == 1
    with pytest.raises(LimitReached) as info:
        store.create()
    assert info.value.data == {"limit": 2}
    assert [w.id for w in store] == ["w1", "main"]
    assert store.delete("w1") == 0
    assert store.create().id == "w2"  # generated ids are not reused
    with pytest.raises(WorldNotFound):
        store.get("w1")


def test_store_shares_a_host_world() -> None:
    store = WorldStore()
    host = WorldState({"time": "noon"}, id="main")
    store.add(host)
    store.get("main").set("time", "night")
    assert host.get("time") == "night"
    with pytest.raises(WorldExists):
        store.add(WorldState(id="main"))


def test_sink_hears_only_worlds_with_subscriptions() -> None:
    heard: list[tuple[str, list[Change]]] = []
    store = WorldStore(lambda world_id, changes: heard.append((world_id, changes)))
    a, b = store.create("a"), store.create("b")
    sub = store.subscribe("a", "p")
    a.set("p.x", 1)
    b.set("p.x", 1)
    a.set("q", 1)
    assert heard == [
        ("a", [Change("p.x", None, 1, created=True)]),
        ("a", [Change("q", None, 1, created=True)]),
    ]
    assert store.deliveries("a", heard[0][1]) == [(sub, heard[0][1][0])]
    assert store.deliveries("a", heard[1][1]) == []


def test_deleted_worlds_keep_working_but_notify_nobody() -> None:
    heard: list[str] = []
    store = WorldStore(lambda world_id, changes: heard.append(world_id))
    old = store.create("v")
    store.subscribe("v")
    store.subscribe("v", "x")
    assert store.delete("v") == 2
    new = store.create("v")
    store.subscribe("v")
    old.set("a", 1)
    assert old.version == 1
    assert heard == []
    new.set("a", 1)
    assert heard == ["v"]


def test_a_failing_sink_does_not_undo_or_raise() -> None:
    def broken(world_id: str, changes: list[Change]) -> None:
        raise RuntimeError("boom")

    store = WorldStore(broken)
    world = store.create()
    store.subscribe(world.id)
    assert world.set("a", 1) == [Change("a", None, 1, created=True)]
    assert world.version == 1


def test_subscriptions_and_npc_counts() -> None:
    store = WorldStore(max_subscriptions=2)
    store.create("v")
    with pytest.raises(WorldNotFound):
        store.subscribe("x")
    with pytest.raises(WorldError):
        store.subscribe("v", "a..b")
    first = store.subscribe("v", "a")
    assert (first.id, first.world, first.path) == ("sub1", "v", "a")
    store.subscribe("v")
    with pytest.raises(LimitReached):
        store.subscribe("v")
    assert store.unsubscribe("sub1") == first
    with pytest.raises(SubscriptionNotFound):
        store.unsubscribe("sub1")
    assert [s.id for s in store.subscriptions()] == ["sub2"]

    assert store.attach_npc("v").id == "v"
    store.attach_npc("v")
    store.detach_npc("v")
    assert store.npc_count("v") == 1
    store.detach_npc("v")
    store.detach_npc("v")
    assert store.npc_count("v") == 0
    with pytest.raises(WorldNotFound):
        store.attach_npc("nope")
    store.clear()
    assert len(store) == 0
    assert store.subscriptions() == []


# ---- property: only WorldError, and version counts the changing operations ------------------

_keys = st.sampled_from(["a", "b", "c", "0", "1", "2", "A", ""])
_paths = st.lists(_keys, max_size=4).map(".".join) | st.sampled_from(["", "a[0]", "$.b", "/c/1"])
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.text(max_size=3)
)
_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "0", "1"]), children, max_size=3)
    ),
    max_leaves=8,
)
_ops = st.lists(
    st.tuples(st.sampled_from(["set", "merge", "remove"]), _paths, _values), max_size=25
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops)
def test_random_operations_raise_only_world_error_and_version_counts_changes(
    ops: list[tuple[str, str, Any]],
) -> None:
    heard: list[Change] = []
    store = WorldStore(lambda world_id, changes: heard.extend(changes))
    world = store.create()
    store.subscribe(world.id)
    changing = 0
    for op, path, value in ops:
        before, version = world.snapshot(), world.version
        try:
            if op == "set":
                changes = world.set(path, value)
            elif op == "merge":
                changes = world.merge(value, path)
            else:
                changes = world.remove(path)
        except WorldError:
            assert world.snapshot() is before
            assert world.version == version
            continue
        if changes:
            changing += 1
            assert isinstance(world.snapshot(), dict)
        else:
            assert world.snapshot() is before
        assert world.version == changing
    assert world.version == changing
    assert len(heard) >= changing


# ---- property: the size a world keeps is the size of its JSON -------------------------------

_odd_keys = st.sampled_from(["a", "b", "0", "1", "é", 'q"', "n\n", "ü" * 3])
_odd_paths = st.lists(_odd_keys, min_size=1, max_size=4).map(".".join) | st.just("")
_odd_values = st.recursive(
    _scalars | st.just("\u2603\U0001f600"),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(_odd_keys, children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=st.dictionaries(_odd_keys, _odd_values, max_size=3),
    ops=st.lists(
        st.tuples(st.sampled_from(["set", "merge", "remove"]), _odd_paths, _odd_values),
        max_size=20,
    ),
)
def test_the_size_a_world_keeps_is_exactly_its_json_after_any_change(
    start: dict[str, Any], ops: list[tuple[str, str, Any]]
) -> None:
    """Writes that create objects on the way, merges that add and delete members, removals of
    list items and members: ``bytes`` follows the document exactly, and so do the limits."""
    world = WorldState(start)
    for op, path, value in ops:
        try:
            if op == "set":
                world.set(path, value)
            elif op == "merge":
                world.merge(value, path)
            else:
                world.remove(path)
        except WorldError:
            pass
        assert world.bytes == len(dumps(world.snapshot())), (op, path, value)


def test_a_write_through_missing_objects_counts_every_key_it_creates() -> None:
    key = "k" * 100_000
    world = WorldState({})
    written = 0
    with pytest.raises(LimitReached):
        for n in range(MAX_WORLD_BYTES // 100_000 + 1):
            world.set(f"{key}{n}.x", 1)
            written += 1
    assert world.bytes == len(dumps(world.snapshot())) <= MAX_WORLD_BYTES
    assert written == len(world.snapshot()) > 0

"""The NPC world tools: ``read_world_tool`` / ``write_world_tool`` as the model sees them."""

from __future__ import annotations

from typing import Any

import pytest

from oamd.agent.tools import ToolOutput
from oamd.game.world.document import (
    Change,
    WorldState,
    read_tool_description,
    read_world_tool,
    write_tool_description,
    write_world_state,
)
from oamd.game.world.store import WorldStore, write_world_tool

STATE = {
    "player": {"name": "Aria", "gold": 60, "brave": True, "bag": ["rope"], "hat": None},
    "quests": {"ring": {"stage": 1}},
    "secret": "the king is a frog",
}


def world() -> WorldState:
    return WorldState({k: v for k, v in STATE.items()}, id="village")


# ---- reading ---------------------------------------------------------------------------------


def test_read_matches_keys_case_insensitively_and_accepts_lenient_paths() -> None:
    w = world()
    assert read_world_tool(w, "Player.Gold", [""]) == ToolOutput.json(60)
    assert read_world_tool(w, "PLAYER[bag][0]", [""]) == ToolOutput.json("rope")
    assert read_world_tool(w, "$.quests.RING", ["quests"]) == ToolOutput.json({"stage": 1})
    assert read_world_tool(w, None, [""]) == ToolOutput.json(w.snapshot())


def test_read_outside_readable_names_the_readable_paths() -> None:
    out = read_world_tool(world(), "secret", ["player", "quests.ring"])
    assert out == ToolOutput.error("You cannot read 'secret'. Readable paths: player, quests.ring.")


def test_read_above_readable_prefixes_shows_only_readable_parts() -> None:
    out = read_world_tool(world(), "", ["player.name", "quests.ring.stage", "player.nope"])
    assert out == ToolOutput.json({"player": {"name": "Aria"}, "quests": {"ring": {"stage": 1}}})
    assert read_world_tool(world(), "quests", ["quests.ring"]) == ToolOutput.json(
        {"ring": {"stage": 1}}
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "player.horse",
            "No value at 'player.horse'. 'player' has keys: name, gold, brave, bag, hat.",
        ),
        (
            "player.bag.3",
            "No value at 'player.bag.3'. 'player.bag' is a list of 1 items (indices 0...0).",
        ),
        ("player.gold.copper", "No value at 'player.gold.copper'. 'player.gold' is a number: 60."),
        ("weather", "No value at 'weather'. The state has keys: player, quests, secret."),
        (
            "player..gold",
            "'player..gold' is not a valid path. Use dot-separated keys such as 'player.gold'.",
        ),
    ],
)
def test_read_mistakes_name_what_exists(path: str, message: str) -> None:
    assert read_world_tool(world(), path, [""]) == ToolOutput.error(message)


def test_large_values_are_shortened() -> None:
    w = WorldState(
        {
            "town": {
                "people": {f"p{i}": i for i in range(50)},
                "log": list(range(200)),
                "story": "s" * 300,
                "n": 1,
            },
            "items": [f"item-{i:03}" for i in range(100)],
            "book": "b" * 500,
        }
    )
    town = read_world_tool(w, "town", [""], limit=100)
    assert town == ToolOutput.json(
        {
            "people": "{object with 50 keys}",
            "log": "[list of 200 items]",
            "story": "s" * 77 + "...",
            "n": 1,
            "_note": "Shortened. Read a narrower path for details.",
        }
    )
    items = read_world_tool(w, "items", [""], limit=100)
    assert items.value == {
        "items": [f"item-{i:03}" for i in range(8)],
        "_note": "Showing 8 of 100 items.",
    }
    assert read_world_tool(w, "book", [""], limit=10).value == "b" * 100 + "..."  # at least 100
    assert read_world_tool(w, "town.n", [""], limit=100) == ToolOutput.json(1)


def test_tool_descriptions_list_keys_or_paths() -> None:
    assert read_tool_description(world(), [""]).endswith("Top-level keys: player, quests, secret.")
    assert read_tool_description(world(), ["player", "bad..path"]).endswith(
        "Readable paths: player."
    )
    assert write_tool_description(["", "quests"]) == (
        "Change a value in the game state. Writable paths: (everything), quests."
    )


# ---- writing ---------------------------------------------------------------------------------


def test_write_notifies_through_the_store_and_reports_the_old_value() -> None:
    heard: list[Change] = []
    store = WorldStore(lambda world_id, changes: heard.extend(changes))
    store.add(world())
    store.subscribe("village", "player")
    out = write_world_tool(store, "village", "Player.GOLD", "45", ["player"])
    assert out == ToolOutput.text("Set player.gold to 45 (was 60).")
    assert heard == [Change("player.gold", 60, 45)]
    new = write_world_tool(store, "village", "player.mood", "grumpy", ["player"])
    assert new == ToolOutput.text('Set player.mood to "grumpy".')
    assert store.get("village").version == 2


def test_write_outside_writable_is_read_only() -> None:
    w = world()
    assert write_world_state(w, "secret", "x", ["player", "quests.ring"]) == ToolOutput.error(
        "'secret' is read-only. You may change: player, quests.ring."
    )
    assert write_world_state(w, "secret", "x", []) == ToolOutput.error(
        "'secret' is read-only. You may change: ."
    )
    assert w.version == 0


@pytest.mark.parametrize(
    ("path", "value", "stored"),
    [
        ("player.gold", "1,200", 1200),
        ("player.gold", " 12.5 ", 12.5),
        ("player.gold", 7, 7),
        ("player.brave", "no", False),
        ("player.brave", "YES", True),
        ("player.brave", 0, False),
        ("player.name", '"Brom"', "Brom"),
        ("player.name", 42, "42"),
        ("player.name", True, "true"),
        ("player.bag", '["rope", "torch"]', ["rope", "torch"]),
        ("player.bag", {"k": 1}, {"k": 1}),
        ("player.hat", "42", 42),
        ("player.hat", "done", "done"),
        ("player.new", "[1, 2]", [1, 2]),
        ("player.new", '"quoted"', "quoted"),
        ("player.new", None, None),
    ],
)
def test_write_keeps_the_stored_type(path: str, value: Any, stored: Any) -> None:
    w = world()
    out = write_world_state(w, path, value, [""])
    assert out.kind == "text", out
    got = w.get(path)
    assert got == stored and type(got) is type(stored)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "player.gold",
            "lots",
            "Cannot set 'player.gold': it holds a number; 'lots' is not a number.",
        ),
        ("player.gold", True, "Cannot set 'player.gold': it holds a number; true is not a number."),
        (
            "player.gold",
            "inf",
            "Cannot set 'player.gold': it holds a number; 'inf' is not a number.",
        ),
        (
            "player.brave",
            "maybe",
            "Cannot set 'player.brave': it holds true or false; got 'maybe'.",
        ),
        ("player.name", ["x"], "Cannot set 'player.name': it holds a string; send text."),
        ("player.bag", "rope", "Cannot set 'player.bag': it holds a list; send valid JSON."),
        ("player.bag", 3, "Cannot set 'player.bag': it holds a list; send valid JSON."),
        (
            "player.gold.copper",
            "1",
            "Cannot write 'player.gold.copper': 'player.gold' is a number, not an object or list.",
        ),
        (
            "player.bag.5",
            "x",
            "'player.bag' is a list of 1 items; '5' is not a valid index (use 0...1, where 1 appends).",
        ),
        ("", "[1]", "The world state root must be a JSON object."),
        ("a..b", "x", "'a..b' is not a valid path. Use dot-separated keys such as 'player.gold'."),
        (5, "x", "'path' must be a dot path such as 'player.gold'."),
    ],
)
def test_write_mistakes_are_error_outputs_and_change_nothing(
    path: Any, value: Any, message: str
) -> None:
    w = world()
    assert write_world_state(w, path, value, [""]) == ToolOutput.error(message)
    assert w.version == 0
    assert w.snapshot() == STATE


def test_write_to_a_deleted_world_through_the_store_is_an_error_output() -> None:
    store = WorldStore()
    held = store.create("v")
    store.delete("v")
    assert write_world_tool(store, "v", "a", "1", [""]) == ToolOutput.error(
        "The world 'v' no longer exists."
    )
    assert write_world_state(held, "a", "1", [""]) == ToolOutput.text("Set a to 1.")


def test_write_of_the_same_value_does_not_count() -> None:
    w = world()
    assert write_world_state(w, "player.gold", "60", ["player"]) == ToolOutput.text(
        "Set player.gold to 60 (was 60)."
    )
    assert w.version == 0

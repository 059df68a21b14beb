"""Every bridge encoder is marked with the wire shape it writes (``oamd.bridge.wire.SHAPES``), and
what each one writes while a daemon runs every method matches ``protocol/bridge.json``."""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import pkgutil
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import anyio
import pytest
from conftest import contract_checker, memory_daemon
from contract import CONTRACT, validate_notification, validate_result
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

import oamd.bridge
from oamd.bridge.wire import SHAPES
from oamd.client import Recorder

pytestmark = pytest.mark.anyio

SECTIONS = {"result": "methods", "notification": "notifications", "def": "$defs"}

OPEN_GATE = {
    "name": "open_gate",
    "description": "Open a named gate.",
    "parameters": {
        "type": "object",
        "properties": {"gate": {"type": "string"}},
        "required": ["gate"],
    },
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
CHOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "choice": {"type": "string", "enum": ["accept", "refuse"]},
    },
    "required": ["reasoning", "choice"],
}
SWORD_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "damage": {"type": "integer"}},
    "required": ["name", "damage"],
}
GORM = {
    "name": "Gorm",
    "role": "the village blacksmith",
    "personality": "Gruff but fair.",
    "speakingStyle": "Short, blunt sentences.",
}


def scripted(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "steps": list(steps)}


def bridge_modules() -> list[ModuleType]:
    """Every module under ``oamd.bridge``, imported."""
    names = [oamd.bridge.__name__]
    names += [
        info.name
        for info in pkgutil.walk_packages(oamd.bridge.__path__, prefix=f"{oamd.bridge.__name__}.")
    ]
    return [importlib.import_module(name) for name in names]


def encoders() -> dict[str, Callable[..., Any]]:
    """``module.function`` → every module-level ``encode_*`` function defined under oamd.bridge."""
    found: dict[str, Callable[..., Any]] = {}
    for module in bridge_modules():
        for name, value in vars(module).items():
            if (
                name.startswith("encode_")
                and inspect.isfunction(value)
                and value.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{value.__qualname__}"] = value
    return found


def marked_encoders() -> dict[Callable[..., Any], str]:
    """Each function ``SHAPES`` marks → its ``module.function`` key."""
    bridge_modules()
    marked: dict[Callable[..., Any], str] = {}
    for key in SHAPES:
        module_name, _, qualname = key.rpartition(".")
        marked[getattr(importlib.import_module(module_name), qualname)] = key
    return marked


def def_validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$schema": CONTRACT["$schema"], "$defs": CONTRACT["$defs"], "$ref": f"#/$defs/{name}"}
    )


def check_shape(section: str, name: str, output: Any) -> None:
    """Raises AssertionError when ``output`` is not the shape (section, name) of the contract."""
    if section == "result":
        validate_result(name, output)
    elif section == "notification":
        validate_notification(name, output)
    else:
        error = best_match(def_validator(name).iter_errors(output))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "<root>"
            raise AssertionError(
                f"$defs/{name}: at {where}: {error.message}\n"
                f"  schema path: {'/'.join(str(p) for p in error.absolute_schema_path)}\n"
                f"  instance: {json.dumps(output, ensure_ascii=False)[:500]}"
            )


# ---- the marks -------------------------------------------------------------------------------


def test_every_encoder_is_marked_with_its_wire_shape() -> None:
    found = encoders()
    assert found, "no encode_* function found under oamd.bridge"
    unmarked = sorted(key for key in found if key not in SHAPES)
    assert not unmarked, f"encoders without @shape: {unmarked}"
    unknown = sorted(
        f"{key} → {section} {name!r}"
        for key, (section, name) in SHAPES.items()
        if section not in SECTIONS or name not in CONTRACT[SECTIONS[section]]
    )
    assert not unknown, f"@shape targets missing from protocol/bridge.json: {unknown}"
    stale = sorted(key for key in SHAPES if key not in found)
    assert not stale, f"SHAPES names functions that are not module-level encoders: {stale}"


# ---- what they write -------------------------------------------------------------------------


def spy_on_encoders(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Replaces every reference to a marked encoder in the loaded bridge modules by a wrapper
    that records ``(key, output)``; returns the record."""
    marked = marked_encoders()  # imports every bridge module first, so none binds an original later
    calls: list[tuple[str, Any]] = []

    def wrap(original: Callable[..., Any], key: str) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            output = original(*args, **kwargs)
            calls.append((key, copy.deepcopy(output)))
            return output

        return spy

    spies = {original: wrap(original, key) for original, key in marked.items()}

    def spied(value: Any) -> Any:
        return spies.get(value, value) if inspect.isfunction(value) else value

    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("oamd.bridge"):
            continue
        for attr, value in list(vars(module).items()):
            if not inspect.isfunction(value):
                continue
            if value in spies:
                monkeypatch.setattr(module, attr, spies[value])
                continue
            # an encoder bound as a default argument (``result=encode.encode_session``)
            defaults = value.__defaults__ or ()
            if any(spied(d) is not d for d in defaults):
                monkeypatch.setattr(value, "__defaults__", tuple(spied(d) for d in defaults))
            kwdefaults = value.__kwdefaults__ or {}
            if any(spied(d) is not d for d in kwdefaults.values()):
                monkeypatch.setattr(
                    value, "__kwdefaults__", {k: spied(d) for k, d in kwdefaults.items()}
                )
    return calls


async def drive_core(client) -> None:
    await client.request("initialize", {"client": {"name": "Test", "version": "1"}})
    await client.request("model/availability")
    await client.request("schema/validate", {"schema": CHOICE_SCHEMA, "name": "Choice"})
    await client.request("tools/validate", {"tools": [OPEN_GATE, CHECK_INVENTORY]})


async def drive_sessions(client) -> None:
    model = scripted(
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"text": "The north gate is open now, traveller."},
        {"json": {"reasoning": "Fair price.", "choice": "accept"}},
        {"text": "Third answer."},
        {"text": "The player opened a gate and haggled."},
    )
    await client.request(
        "session/create",
        {
            "session": "guard",
            "mood": 1,
            "instructions": "You guard the gate.",
            "tools": [OPEN_GATE],
            "model": model,
        },
    )
    await client.request(
        "session/respond", {"session": "guard", "prompt": "Open the gate.", "stream": True}
    )
    await client.request(
        "session/respond",
        {"session": "guard", "prompt": "Offer 50.", "schema": CHOICE_SCHEMA, "stream": True},
    )
    await client.request("session/respond", {"session": "guard", "prompt": "And now?", "mood": 1})
    # a text-only model: its steps carry their kind
    envelope = {"type": "scripted", "style": "envelope", "steps": [{"text": "Welcome."}]}
    await client.request(
        "session/create", {"session": "scribe", "tools": [OPEN_GATE], "model": envelope}
    )
    await client.request("session/respond", {"session": "scribe", "prompt": "Hi.", "stream": True})
    await client.request("session/list")
    await client.request("session/transcript", {"session": "guard"})
    await client.request("session/compact", {"session": "guard", "keepRecentTurns": 1})
    await client.request(
        "session/setInstructions", {"session": "guard", "instructions": "Be kind."}
    )
    await client.request("session/setContextNote", {"session": "guard", "note": "It is dusk."})
    await client.request("session/setTools", {"session": "guard", "tools": [CHECK_INVENTORY]})
    await client.request("session/reset", {"session": "guard"})
    await client.request("session/cancel", {"session": "guard"})
    await client.request("session/delete", {"session": "guard"})


async def drive_worlds_and_npcs(client) -> None:
    await client.request(
        "world/create", {"world": "village", "state": {"player": {"name": "Aria", "gold": 60}}}
    )
    sub = await client.request("world/subscribe", {"world": "village", "path": "player"})
    await client.request("world/get", {"world": "village", "path": "player.gold"})
    await client.request("world/set", {"world": "village", "path": "player.gold", "value": 45})
    await client.request("world/set", {"world": "village", "path": "player.horse", "value": "Bo"})
    await client.request(
        "world/merge", {"world": "village", "path": "player", "patch": {"gold": 15, "horse": None}}
    )
    await client.request("world/remove", {"world": "village", "path": "player.name"})
    await client.request("world/snapshot", {"world": "village"})

    reply = {
        # a line opening with a quote streams without it, but this one keeps its quotes (a
        # quote inside): the final line differs from the stream, which sees a lineReset
        "json": {
            "emotion": "happy",
            "line": '"Three swords," he says. "Forty-five gold."',
            "player_options": ["Buy one.", "Goodbye.", "Tell me more."],
            "ends_conversation": False,
        }
    }
    await client.request(
        "npc/create",
        {
            "npc": "gorm",
            "persona": GORM,
            "world": "village",
            "tools": [CHECK_INVENTORY],
            "options": {"groundingTool": "check_inventory"},
            "model": scripted(
                {"toolCalls": [{"name": "check_inventory", "arguments": {"item": "sword"}}]},
                reply,
                {"text": "Rain again. Bad for the forge."},
            ),
        },
    )
    await client.request("world/list")
    await client.request(
        "npc/talk", {"npc": "gorm", "line": "Got swords?", "stream": True, "mood": 1}
    )
    await client.request("npc/bark", {"npc": "gorm", "situation": "It starts to rain."})
    saved = await client.request("npc/state", {"npc": "gorm"})
    await client.request("npc/update", {"npc": "gorm", "memory": {"relationship": 25}})
    await client.request("npc/list")
    await client.request("npc/reset", {"npc": "gorm"})
    await client.request("npc/cancel", {"npc": "gorm"})
    await client.request("npc/delete", {"npc": "gorm"})
    await client.request("npc/restore", {"state": saved, "model": "scripted"})
    await client.request("npc/delete", {"npc": "gorm"})

    await client.request("world/unsubscribe", {"subscription": sub["subscription"]})
    await client.request("world/subscribe", {"world": "village"})
    await client.request("world/delete", {"world": "village"})


async def drive_decisions_and_content(client) -> None:
    def answer(choice: str) -> dict[str, Any]:
        return {"json": {"reasoning": "Duty.", "choice": choice, "confidence": 80}}

    await client.request(
        "decision/decide",
        {
            "situation": "The goblin has 3 HP left.",
            "mood": 1,
            "options": [{"id": "attack", "description": "Keep fighting"}, "flee"],
            "tools": [CHECK_INVENTORY],
            "model": scripted(
                {"toolCalls": [{"name": "check_inventory", "arguments": {"item": "potion"}}]},
                answer("attack"),
            ),
        },
    )
    await client.request(
        "decision/decideMany",
        {
            "maxConcurrency": 1,
            "mood": 1,
            "requests": [
                {"situation": "Guard A hears a noise.", "options": ["investigate", "ignore"]},
                {"situation": "Guard B sees blood.", "options": ["investigate", "ignore"]},
            ],
            "model": scripted(answer("investigate"), {"error": "guardrail_violation"}),
        },
    )
    await client.request(
        "content/generate",
        {
            "prompt": "A cursed sword.",
            "mood": 1,
            "schema": SWORD_SCHEMA,
            "model": scripted({"json": {"name": "Drowned Fang", "damage": 45}}),
        },
    )


async def test_every_encoder_writes_what_the_protocol_says(monkeypatch) -> None:
    calls = spy_on_encoders(monkeypatch)

    async def answer_tool(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": f"{params['call']['name']}: done"}

    # the daemon's messages are checked as they come too, but kept for the end: a message off
    # the contract should name its encoder (below) rather than break the client mid-run
    recorder = Recorder()
    check_message = contract_checker(recorder)
    off_contract: list[str] = []

    def on_message(msg: dict[str, Any]) -> None:
        try:
            check_message(msg)
        except AssertionError as exc:
            off_contract.append(str(exc))

    async with memory_daemon(recorder=recorder, on_message=on_message) as client:
        client.tool_handler = answer_tool
        with anyio.fail_after(15):
            await drive_core(client)
            await drive_sessions(client)
            await drive_worlds_and_npcs(client)
            await drive_decisions_and_content(client)
        tool_calls = len(client.recorder.tool_calls)
    assert tool_calls == 3  # session, npc and decision each sent one tool/call the client answered

    failures = []
    for key, output in calls:
        section, name = SHAPES[key]
        try:
            check_shape(section, name, output)
        except AssertionError as exc:
            failures.append(f"{key} ({section} {name}): {exc}")
    assert not failures, "encoder output off the contract:\n" + "\n".join(failures)
    assert not off_contract, "messages off the contract:\n" + "\n".join(off_contract)

    # the optional parts of the shapes were written too
    def outputs(key: str) -> list[Any]:
        return [output for k, output in calls if k == key]

    events = {e["type"] for e in outputs("oamd.bridge.encode.encode_event")}
    assert events == {"modelStep", "text", "partial", "toolCallStarted", "toolCallCompleted"}
    assert any("kind" in step for step in outputs("oamd.bridge.encode.encode_step"))
    turns = outputs("oamd.bridge.session.encode.encode_turn")
    assert any("structured" in t for t in turns) and any("warnings" in t for t in turns)
    many = outputs("oamd.bridge.game.decision.encode.encode_many")
    assert any("error" in r for m in many for r in m["results"])
    changes = outputs("oamd.bridge.game.world.encode.encode_change")
    assert any("oldValue" not in c for c in changes) and any("newValue" not in c for c in changes)

    called = {key for key, _ in calls}
    missing = sorted(set(SHAPES) - called)
    assert not missing, f"encoders never called: {missing}"

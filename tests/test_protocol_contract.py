"""Checks protocol/bridge.json and errors.json: self-consistency and PROTOCOL.md examples."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from contract import (
    CONTRACT,
    ERROR_TABLE,
    ERRORS,
    METHODS,
    NOTIFICATIONS,
    validate_client_request,
    validate_error,
    validate_notification,
    validate_params,
    validate_result,
)
from jsonschema import Draft202012Validator

ALL_METHODS = [
    "initialize",
    "ping",
    "model/availability",
    "schema/validate",
    "tools/validate",
    "shutdown",
    "session/create",
    "session/respond",
    "session/cancel",
    "session/reset",
    "session/delete",
    "session/list",
    "session/transcript",
    "session/setInstructions",
    "session/setContextNote",
    "session/setTools",
    "session/compact",
    "npc/create",
    "npc/talk",
    "npc/bark",
    "npc/state",
    "npc/restore",
    "npc/update",
    "npc/reset",
    "npc/cancel",
    "npc/delete",
    "npc/list",
    "decision/decide",
    "decision/decideMany",
    "world/create",
    "world/get",
    "world/set",
    "world/merge",
    "world/remove",
    "world/snapshot",
    "world/delete",
    "world/list",
    "world/subscribe",
    "world/unsubscribe",
    "content/generate",
]

USAGE = {"inputTokens": 184, "cachedInputTokens": 183, "outputTokens": 17, "totalTokens": 201}
CALL = {"id": "call_NYH7", "name": "open_gate", "arguments": {"gate": "north"}}
RECORD = {
    "call": CALL,
    "output": {"opened": False, "reason": "the portcullis chain is jammed"},
    "isError": False,
    "durationSeconds": 0.84,
}
STEP0 = {
    "index": 0,
    "completedToolRounds": 0,
    "toolCallingMode": "required",
    "enabledTools": ["open_gate"],
    "trimmedEntries": 0,
}
STEP1 = {**STEP0, "index": 1, "completedToolRounds": 1, "toolCallingMode": "allowed"}
RESPOND_RESULT = {
    "session": "guard",
    "text": "The north gate remains shut because the portcullis chain is jammed.",
    "toolCalls": [RECORD],
    "usage": USAGE,
    "steps": [STEP0, STEP1],
}
TALK_RESULT = {
    "npc": "gorm",
    "line": "Aye, I've got iron swords—3 in stock, 45 gold each.",
    "emotion": "proud",
    "playerOptions": ["Buy one for 45 gold", "Want more?", "What else do you need?"],
    "endsConversation": False,
    "toolCalls": [
        {
            "call": {
                "id": "call_1",
                "name": "check_inventory",
                "arguments": {"item": "iron sword"},
            },
            "output": {"item": "iron sword", "stock": 3, "price_gold": 45},
            "isError": False,
            "durationSeconds": 0.01,
        }
    ],
    "relationship": 0,
    "isFallback": False,
    "usage": {"inputTokens": 912, "cachedInputTokens": 880, "outputTokens": 41, "totalTokens": 953},
}
DECISION = {
    "optionID": "flee",
    "reasoning": "Snik is timid, so he avoids a fight.",
    "confidence": 75,
    "toolCalls": [],
    "usage": USAGE,
    "isFallback": False,
}
AVAILABILITY = {
    "available": True,
    "contextSize": 8192,
    "variant": "AFM 3 Core Advanced",
    "supportedLanguages": ["da", "de", "en", "en-AU"],
}

# §3, with the elisions filled in. Arrows: "->" client to bridge, "<-" bridge to client.
EXCHANGE = [
    (
        "->",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"client": {"name": "MyGame", "version": "1.2"}, "protocolVersion": "1.0"},
        },
    ),
    (
        "<-",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "protocolVersion": "1.0",
                "server": {"name": "open-apple-models", "version": "0.1.0"},
                "capabilities": {
                    "methods": ALL_METHODS,
                    "notifications": ["session/event", "tool/cancel", "npc/event", "world/changed"],
                    "clientRequests": ["tool/call"],
                    "streaming": True,
                    "clientTools": True,
                    "structuredOutput": True,
                    "models": ["system", "scripted"],
                    "maxSessions": 64,
                    "batch": False,
                },
                "model": AVAILABILITY,
            },
        },
    ),
    (
        "->",
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/create",
            "params": {
                "session": "guard",
                "instructions": (
                    "You are a castle guard in a game. Use tools to act. Reply in one sentence."
                ),
                "tools": [
                    {
                        "name": "open_gate",
                        "description": (
                            "Ask the game engine to open a named gate. Returns whether it opened."
                        ),
                        "parameters": {
                            "type": "object",
                            "properties": {"gate": {"type": "string"}},
                            "required": ["gate"],
                        },
                    }
                ],
                "options": {"toolChoice": "required"},
            },
        },
    ),
    (
        "->",
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/respond",
            "params": {"session": "guard", "prompt": "Please open the north gate.", "stream": True},
        },
    ),
    ("<-", {"jsonrpc": "2.0", "id": 2, "result": {"session": "guard", "warnings": []}}),
    (
        "<-",
        {
            "jsonrpc": "2.0",
            "method": "session/event",
            "params": {
                "session": "guard",
                "requestId": 3,
                "event": {"type": "modelStep", "step": STEP0},
            },
        },
    ),
    (
        "<-",
        {
            "jsonrpc": "2.0",
            "method": "session/event",
            "params": {
                "session": "guard",
                "requestId": 3,
                "event": {"type": "toolCallStarted", "call": CALL, "execution": "client"},
            },
        },
    ),
    (
        "<-",
        {
            "jsonrpc": "2.0",
            "id": "t-1",
            "method": "tool/call",
            "params": {"session": "guard", "requestId": 3, "call": CALL},
        },
    ),
    (
        "->",
        {
            "jsonrpc": "2.0",
            "id": "t-1",
            "result": {"output": {"opened": False, "reason": "the portcullis chain is jammed"}},
        },
    ),
    (
        "<-",
        {
            "jsonrpc": "2.0",
            "method": "session/event",
            "params": {
                "session": "guard",
                "requestId": 3,
                "event": {"type": "toolCallCompleted", "record": RECORD},
            },
        },
    ),
    (
        "<-",
        {
            "jsonrpc": "2.0",
            "method": "session/event",
            "params": {
                "session": "guard",
                "requestId": 3,
                "event": {"type": "modelStep", "step": STEP1},
            },
        },
    ),
    (
        "<-",
        {
            "jsonrpc": "2.0",
            "method": "session/event",
            "params": {
                "session": "guard",
                "requestId": 3,
                "event": {
                    "type": "text",
                    "delta": "The north gate",
                    "text": "The north gate",
                    "isReset": False,
                },
            },
        },
    ),
    ("<-", {"jsonrpc": "2.0", "id": 3, "result": RESPOND_RESULT}),
]


def _envelope(name: str) -> Draft202012Validator:
    return Draft202012Validator({"$defs": CONTRACT["$defs"], "$ref": f"#/$defs/{name}"})


def _schemas() -> Iterator[tuple[str, Any]]:
    for name, schema in CONTRACT["$defs"].items():
        yield f"$defs/{name}", schema
    for method, entry in CONTRACT["methods"].items():
        yield f"methods/{method}/params", entry["params"]
        yield f"methods/{method}/result", entry["result"]
    for method, schema in CONTRACT["notifications"].items():
        yield f"notifications/{method}", schema
    for method, entry in CONTRACT["clientRequests"].items():
        yield f"clientRequests/{method}/params", entry["params"]
        yield f"clientRequests/{method}/result", entry["result"]


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


# --- the documents themselves --------------------------------------------------------------------


def test_document_is_a_2020_12_schema() -> None:
    assert CONTRACT["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(CONTRACT)
    for where, schema in _schemas():
        try:
            Draft202012Validator.check_schema(schema)
        except Exception as error:  # pragma: no cover - the message is the point
            pytest.fail(f"{where}: {error}")


def test_every_ref_is_local_and_resolves() -> None:
    refs = set(_refs(CONTRACT))
    assert refs
    for target in refs:
        assert target.startswith("#/$defs/"), target
        assert target.removeprefix("#/$defs/") in CONTRACT["$defs"], target


def test_method_and_message_lists() -> None:
    assert METHODS == ALL_METHODS
    assert sorted(NOTIFICATIONS) == sorted(
        ["session/event", "npc/event", "world/changed", "tool/cancel"]
    )
    assert list(CONTRACT["clientRequests"]) == ["tool/call"]
    for entry in CONTRACT["methods"].values():
        assert set(entry) == {"params", "result"}


def test_error_table() -> None:
    codes = [row["code"] for row in ERRORS]
    names = [row["name"] for row in ERRORS]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for row in ERRORS:
        assert set(row) == {"code", "name", "meaning"}
        assert isinstance(row["code"], int)
        assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", row["name"]), row["name"]
        assert row["meaning"]
    assert codes[:5] == [-32700, -32600, -32601, -32602, -32603]
    assert set(range(-32056, -32049)) <= set(codes)
    assert set(range(-32012, -32000)) <= set(codes)
    assert ERROR_TABLE["cancelled"] == -32009
    assert ERROR_TABLE["subscription_not_found"] == -32056


# --- the §3 exchange -----------------------------------------------------------------------------


def test_section_3_exchange() -> None:
    pending: dict[Any, str] = {}
    tool_calls: set[Any] = set()
    for direction, message in EXCHANGE:
        assert "\n" not in json.dumps(message)
        if direction == "->" and "method" in message:
            _envelope("RpcRequest").validate(message)
            validate_params(message["method"], message["params"])
            pending[message["id"]] = message["method"]
        elif direction == "->":
            assert message["id"] in tool_calls
            validate_client_request_reply(message["result"])
        elif "method" in message and "id" in message:
            _envelope("RpcRequest").validate(message)
            validate_client_request(message["method"], message["params"])
            tool_calls.add(message["id"])
        elif "method" in message:
            _envelope("RpcNotification").validate(message)
            validate_notification(message["method"], message["params"])
        else:
            _envelope("RpcResponse").validate(message)
            validate_result(pending.pop(message["id"]), message["result"])
    assert not pending


def validate_client_request_reply(result: dict[str, Any]) -> None:
    Draft202012Validator(CONTRACT["clientRequests"]["tool/call"]["result"]).validate(result)


# --- known-good messages -------------------------------------------------------------------------

GOOD_RESULTS: list[tuple[str, dict[str, Any]]] = [
    ("ping", {}),
    ("shutdown", {}),
    ("model/availability", AVAILABILITY),
    (
        "model/availability",
        {
            "available": False,
            "reason": "model_not_ready",
            "status": "downloading",
            "detail": "The model is downloading (40%).",
        },
    ),
    (
        "initialize",
        {
            "protocolVersion": "1.0",
            "server": {"name": "oamd", "version": "0.1.0"},
            "capabilities": {
                "methods": ALL_METHODS,
                "notifications": ["session/event", "tool/cancel", "npc/event", "world/changed"],
                "clientRequests": ["tool/call"],
                "streaming": True,
                "clientTools": True,
                "structuredOutput": True,
                "models": ["system", "scripted"],
                "maxSessions": 64,
                "batch": False,
            },
            "model": {**AVAILABILITY, "status": "available", "detail": "ready"},
        },
    ),
    (
        "session/respond",
        {
            **RESPOND_RESULT,
            "structured": {"reasoning": "…", "choice": "refuse"},
            "steps": [{**STEP0, "kind": "decide", "isRepair": False}, {**STEP1, "kind": "answer"}],
            "warnings": ["schema: pattern is described to the model but not enforced"],
        },
    ),
    (
        "session/respond",
        {**RESPOND_RESULT, "toolCalls": [{**RECORD, "output": "Error: jammed", "isError": True}]},
    ),
    ("session/cancel", {"session": "guard", "cancelled": 2}),
    ("session/delete", {"session": "guard", "deleted": True}),
    ("session/compact", {"session": "guard", "summary": None}),
    ("session/setTools", {"session": "guard", "warnings": []}),
    (
        "session/transcript",
        {
            "session": "guard",
            "transcript": {"type": "oamd.Transcript", "version": "1.0", "entries": []},
        },
    ),
    (
        "session/list",
        {
            "sessions": [
                {
                    "session": "guard",
                    "model": "scripted",
                    "tools": ["open_gate"],
                    "busy": False,
                    "pendingOperations": 0,
                    "entries": 4,
                    "createdAt": "2025-06-01T12:00:00Z",
                }
            ]
        },
    ),
    (
        "tools/validate",
        {
            "tools": [
                {"name": "open_gate", "warnings": [], "generationSchema": {"type": "object"}}
            ],
            "warnings": [],
        },
    ),
    ("schema/validate", {"warnings": [], "generationSchema": {"type": "object"}}),
    (
        "npc/create",
        {"npc": "gorm", "tools": ["check_inventory", "read_world_state"], "warnings": []},
    ),
    ("npc/talk", TALK_RESULT),
    (
        "npc/talk",
        {**TALK_RESULT, "isFallback": True, "playerOptions": [], "warnings": ["Unknown parameter"]},
    ),
    ("npc/bark", {"npc": "gorm", "line": "Rain again. Good for quenching."}),
    (
        "npc/state",
        {
            "npc": "gorm",
            "state": {
                "version": 1,
                "persona": {"name": "Gorm", "role": "the village blacksmith"},
                "memory": {"facts": ["Aria likes axes."], "relationship": 25, "summary": "…"},
                "transcript": {"type": "oamd.Transcript", "version": "1.0", "entries": []},
                "npc": "gorm",
                "options": {
                    "replyFormat": "automatic",
                    "toolTimeoutSeconds": 120,
                    "secretsUnlockAtRelationship": None,
                },
                "tools": [{"name": "check_inventory", "description": "Stock of an item."}],
                "world": "village",
            },
        },
    ),
    ("npc/update", {"npc": "gorm", "warnings": []}),
    ("npc/reset", {"npc": "gorm"}),
    ("npc/cancel", {"npc": "gorm", "cancelled": 0}),
    (
        "npc/list",
        {
            "npcs": [
                {
                    "npc": "gorm",
                    "name": "Gorm",
                    "role": "the village blacksmith",
                    "world": None,
                    "model": "system",
                    "tools": ["check_inventory"],
                    "turnCount": 3,
                    "relationship": -10,
                    "busy": True,
                    "pendingOperations": 1,
                    "createdAt": "2025-06-01T12:00:00Z",
                }
            ]
        },
    ),
    ("decision/decide", DECISION),
    ("decision/decide", {**DECISION, "confidence": 100, "isFallback": True, "warnings": []}),
    (
        "decision/decideMany",
        {
            "results": [
                DECISION,
                {
                    "error": {
                        "code": -32002,
                        "message": "Blocked.",
                        "data": {"code": "guardrail_violation"},
                    }
                },
            ]
        },
    ),
    ("world/create", {"world": "village", "version": 0}),
    (
        "world/get",
        {"world": "village", "path": "player.gold", "value": 60, "exists": True, "version": 3},
    ),
    (
        "world/get",
        {"world": "village", "path": "player.hat", "value": None, "exists": False, "version": 3},
    ),
    ("world/set", {"world": "village", "path": "player.gold", "version": 4}),
    ("world/merge", {"world": "village", "path": "", "version": 5}),
    (
        "world/remove",
        {"world": "village", "path": "player.gold", "removed": True, "oldValue": 45, "version": 6},
    ),
    ("world/snapshot", {"world": "village", "state": {"player": {"gold": 45}}, "version": 6}),
    ("world/delete", {"world": "village", "deleted": True, "endedSubscriptions": 1}),
    (
        "world/list",
        {
            "worlds": [
                {
                    "world": "village",
                    "version": 6,
                    "npcs": 1,
                    "subscriptions": [
                        {"subscription": "sub1", "world": "village", "path": "player"}
                    ],
                    "createdAt": "2025-06-01T12:00:00Z",
                }
            ]
        },
    ),
    ("world/subscribe", {"subscription": "sub1", "world": "village", "path": "player.gold"}),
    (
        "world/unsubscribe",
        {"subscription": "sub1", "world": "village", "path": "player.gold", "unsubscribed": True},
    ),
    ("content/generate", {"content": {"name": "Rusty Dagger", "value": 3}}),
]

GOOD_PARAMS: list[tuple[str, dict[str, Any]]] = [
    ("initialize", {}),
    ("ping", {}),
    ("session/create", {}),
    (
        "session/create",
        {
            "session": "s-1",
            "options": {
                "toolChoice": {"tool": "open_gate"},
                "maxToolRounds": 0,
                "toolTimeoutSeconds": 86400,
                "sampling": {"topK": 40, "seed": 7},
                "maxAttempts": 1,
                "futureOption": True,
            },
            "model": {
                "type": "scripted",
                "steps": [{"text": "Hmph.", "chunks": 3}, {"error": "refusal"}],
            },
            "history": {"type": "oamd.Transcript", "version": "1.0"},
            "instructions": None,
        },
    ),
    (
        "session/respond",
        {"session": "guard", "prompt": "", "schema": {"type": "object"}, "toolChoice": "explicit"},
    ),
    ("session/setInstructions", {"session": "guard", "instructions": None}),
    ("session/setContextNote", {"session": "guard", "note": "It is night."}),
    ("session/compact", {"session": "guard", "keepRecentTurns": 2}),
    (
        "npc/create",
        {
            "npc": "gorm",
            "persona": {
                "name": "Gorm",
                "role": "the village blacksmith",
                "defaultEmotion": "proud",
            },
            "world": "village",
            "memory": {"facts": [], "relationship": -100},
            "options": {
                "groundingTool": "check_inventory",
                "playerOptionCount": 4,
                "memoryTools": "all",
            },
            "model": "scripted",
        },
    ),
    ("npc/talk", {"npc": "gorm", "line": "", "context": {"gold": 45}, "stream": True}),
    (
        "npc/update",
        {
            "npc": "gorm",
            "memory": {"relationship": 40, "facts": ["Aria returned the lost ring."]},
            "persona": {"personality": "Grateful to Aria, still gruff with strangers."},
            "options": {"secretsUnlockAtRelationship": None},
        },
    ),
    ("npc/restore", {"state": {"npc": "gorm", "state": {}}, "world": None}),
    (
        "decision/decide",
        {
            "situation": "The player draws a sword.",
            "options": [{"id": "flee", "description": "Run into the woods"}, "fight"],
            "actor": "snik",
            "context": {"hp": 3, "playerHp": 40},
            "fallbackOptionID": "flee",
            "model": {"type": "scripted", "steps": [{"json": {"choice": "flee"}}]},
        },
    ),
    (
        "decision/decideMany",
        {
            "requests": [{"situation": {"hp": 3}, "options": ["a", "b"]}],
            "maxConcurrency": 2,
            "temperature": 0,
        },
    ),
    ("world/set", {"world": "village", "path": "player.gold", "value": None}),
    ("world/merge", {"world": "village", "patch": {"player": {"hat": None}}}),
    (
        "content/generate",
        {"prompt": "A dagger.", "schema": {"type": "object"}, "toolTimeoutSeconds": 0},
    ),
]

GOOD_NOTIFICATIONS: list[tuple[str, dict[str, Any]]] = [
    (
        "session/event",
        {
            "session": "guard",
            "requestId": "local-1",
            "event": {"type": "partial", "value": {"choice": "re"}},
        },
    ),
    (
        "session/event",
        {
            "session": "guard",
            "requestId": 3,
            "event": {"type": "modelStep", "step": {**STEP0, "isRepair": True}},
        },
    ),
    (
        "npc/event",
        {"npc": "gorm", "requestId": 7, "event": {"type": "lineDelta", "delta": " iron swords"}},
    ),
    (
        "npc/event",
        {"npc": "gorm", "requestId": 7, "event": {"type": "emotion", "emotion": "proud"}},
    ),
    ("npc/event", {"npc": "gorm", "requestId": 7, "event": {"type": "lineReset", "line": "Hmph."}}),
    (
        "npc/event",
        {
            "npc": "gorm",
            "requestId": 7,
            "event": {"type": "toolCallStarted", "call": CALL, "execution": "local"},
        },
    ),
    (
        "world/changed",
        {
            "world": "village",
            "subscription": "sub1",
            "path": "player.gold",
            "oldValue": 60,
            "newValue": 45,
        },
    ),
    (
        "world/changed",
        {"world": "village", "subscription": "sub1", "path": "player.hat", "newValue": None},
    ),
    (
        "tool/cancel",
        {
            "session": "guard",
            "requestId": 3,
            "id": "t-1",
            "callId": "call_NYH7",
            "reason": "Error: Tool 'open_gate' timed out after 120s.",
        },
    ),
    (
        "tool/cancel",
        {"npc": "gorm", "requestId": 7, "id": "t-2", "callId": "call_1", "reason": "cancelled"},
    ),
    (
        "tool/cancel",
        {"requestId": 9, "index": 1, "id": "t-3", "callId": "call_2", "reason": "timed out"},
    ),
]


@pytest.mark.parametrize(("method", "result"), GOOD_RESULTS)
def test_good_results(method: str, result: dict[str, Any]) -> None:
    validate_result(method, result)


@pytest.mark.parametrize(("method", "params"), GOOD_PARAMS)
def test_good_params(method: str, params: dict[str, Any]) -> None:
    validate_params(method, params)


@pytest.mark.parametrize(("method", "params"), GOOD_NOTIFICATIONS)
def test_good_notifications(method: str, params: dict[str, Any]) -> None:
    validate_notification(method, params)


def test_good_tool_calls_and_errors() -> None:
    validate_client_request("tool/call", {"npc": "gorm", "requestId": 7, "call": CALL})
    validate_client_request("tool/call", {"requestId": 9, "call": CALL, "index": 0})
    validate_client_request("tool/call", {"requestId": "req-9", "call": CALL})
    validate_error(
        {
            "code": -32020,
            "message": "No session 'x'.",
            "data": {"code": "session_not_found", "session": "x"},
        }
    )
    validate_error({"code": -32009, "message": "Cancelled.", "data": {"code": "cancelled"}})


# --- known-bad messages --------------------------------------------------------------------------


def _without(obj: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != key}


BAD: list[tuple[Callable[[str, dict[str, Any]], None], str, dict[str, Any]]] = [
    (validate_result, "session/respond", _without(RESPOND_RESULT, "usage")),
    (
        validate_result,
        "session/respond",
        {**_without(RESPOND_RESULT, "toolCalls"), "toolcalls": []},
    ),
    (validate_result, "session/respond", {**RESPOND_RESULT, "steps": [{**STEP0, "trimmed": 0}]}),
    (
        validate_result,
        "session/respond",
        {**RESPOND_RESULT, "usage": {**USAGE, "totalTokens": "201"}},
    ),
    (validate_result, "npc/talk", {**TALK_RESULT, "emotion": "furious"}),
    (validate_result, "npc/talk", _without(TALK_RESULT, "isFallback")),
    (validate_result, "decision/decide", {**DECISION, "confidence": "high"}),
    (validate_result, "decision/decide", {**_without(DECISION, "optionID"), "optionId": "flee"}),
    (
        validate_result,
        "decision/decideMany",
        {"results": [{"error": {"code": -32002, "message": "x"}}]},
    ),
    (validate_result, "world/get", {"world": "w", "path": "", "value": 1, "version": 1}),
    (
        validate_result,
        "initialize",
        {"protocolVersion": "1.0", "server": {"name": "oamd", "version": "0"}},
    ),
    (validate_result, "model/availability", {"available": False}),
    (validate_result, "model/availability", {"available": True, "contextsize": 8192}),
    (validate_params, "session/create", {"options": {"toolTimeoutSeconds": 86401}}),
    (validate_params, "session/create", {"options": {"maxToolRounds": -1}}),
    (validate_params, "session/create", {"options": {"maxAttempts": 0}}),
    (validate_params, "session/create", {"session": "x" * 129}),
    (validate_params, "session/create", {"session": ""}),
    (validate_params, "session/create", {"tools": [{"name": "open gate"}]}),
    (validate_params, "session/create", {"options": {"toolChoice": "always"}}),
    (validate_params, "session/respond", {"session": "guard"}),
    (validate_params, "session/respond", {"session": "guard", "prompt": "hi", "stream": "yes"}),
    (validate_params, "npc/create", {"persona": {"role": "smith"}}),
    (validate_params, "npc/create", {"persona": {"name": "Gorm"}, "memory": {"relationship": 101}}),
    (
        validate_params,
        "npc/create",
        {"persona": {"name": "Gorm"}, "options": {"playerOptionCount": 5}},
    ),
    (validate_params, "decision/decide", {"situation": "x", "options": []}),
    (validate_params, "world/set", {"world": "village", "path": "a"}),
    (validate_params, "world/get", {"world": "village", "pth": "a"}),
    (
        validate_notification,
        "session/event",
        {
            "session": "guard",
            "requestId": 3,
            "event": {"type": "txt", "delta": "a", "text": "a", "isReset": False},
        },
    ),
    (
        validate_notification,
        "session/event",
        {"session": "guard", "requestId": None, "event": {"type": "partial"}},
    ),
    (
        validate_notification,
        "npc/event",
        {"npc": "gorm", "requestId": 7, "event": {"type": "lineDelta", "line": "x"}},
    ),
    (
        validate_notification,
        "world/changed",
        {"world": "w", "subscription": "sub1", "path": "a", "newvalue": 1},
    ),
    (
        validate_notification,
        "tool/cancel",
        {"session": "guard", "requestId": 3, "id": "t-1", "reason": "x"},
    ),
    (
        validate_notification,
        "tool/cancel",
        {
            "session": "guard",
            "npc": "gorm",
            "requestId": 3,
            "id": "t-1",
            "callId": "c",
            "reason": "x",
        },
    ),
    (
        validate_client_request,
        "tool/call",
        {"session": "guard", "npc": "gorm", "requestId": 3, "call": CALL},
    ),
    (
        validate_client_request,
        "tool/call",
        {"session": "guard", "requestId": 3, "call": CALL, "index": 0},
    ),
    (
        validate_client_request,
        "tool/call",
        {"session": "guard", "requestId": 3, "call": _without(CALL, "id")},
    ),
]


@pytest.mark.parametrize(("check", "method", "message"), BAD)
def test_bad_messages_are_rejected(
    check: Callable[[str, dict[str, Any]], None], method: str, message: dict[str, Any]
) -> None:
    with pytest.raises(AssertionError, match=re.escape(method)):
        check(method, message)


@pytest.mark.parametrize(
    "error",
    [
        {"code": -32009, "message": "x", "data": {"code": "busy"}},
        {"code": -32009, "message": "x"},
        {"code": "-32009", "message": "x", "data": {"code": "cancelled"}},
        {"code": -32099, "message": "x", "data": {"code": "quest_not_found"}},
    ],
)
def test_bad_errors_are_rejected(error: dict[str, Any]) -> None:
    with pytest.raises(AssertionError):
        validate_error(error)


@pytest.mark.parametrize(
    "check", [validate_params, validate_result, validate_notification, validate_client_request]
)
def test_unknown_method_is_a_key_error(check: Callable[[str, dict[str, Any]], None]) -> None:
    with pytest.raises(KeyError):
        check("session/teleport", {})


def test_response_envelope() -> None:
    good = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "x", "data": {"code": "parse_error"}},
    }
    _envelope("RpcResponse").validate(good)
    both = {"jsonrpc": "2.0", "id": 1, "result": {}, "error": good["error"]}
    assert not _envelope("RpcResponse").is_valid(both)
    assert not _envelope("RpcRequest").is_valid({"jsonrpc": "2.0", "id": 2**53, "method": "ping"})

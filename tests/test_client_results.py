"""The typed API's result models against ``protocol/bridge.json``: each model has exactly its
schema's members, with the same required-ness and JSON types (nested models included), so a model
and the contract cannot disagree silently; and members a newer daemon adds are kept, not refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from contract import CONTRACT
from pydantic import BaseModel

import oamd.client

SCHEMAS: dict[str, list[tuple[str | int, ...]]] = {
    "Availability": [("$defs", "Availability"), ("methods", "model/availability", "result")],
    "Capabilities": [("$defs", "Capabilities")],
    "ContentGenerateResult": [("methods", "content/generate", "result")],
    "Decision": [("$defs", "Decision"), ("methods", "decision/decide", "result")],
    "InitializeResult": [("methods", "initialize", "result")],
    "NpcCreateResult": [
        ("$defs", "NpcSetupResult"),
        ("methods", "npc/create", "result"),
        ("methods", "npc/restore", "result"),
    ],
    "NpcTalkResult": [("methods", "npc/talk", "result")],
    "ServerInfo": [("methods", "initialize", "result", "properties", "server")],
    "SessionCreateResult": [("methods", "session/create", "result")],
    "SessionRespondResult": [("methods", "session/respond", "result")],
    "Step": [("$defs", "Step")],
    "ToolCall": [("$defs", "ToolCall")],
    "ToolCallRecord": [("$defs", "ToolCallRecord")],
    "Usage": [("$defs", "Usage")],
    "WorldCreateResult": [("methods", "world/create", "result")],
    "WorldGetResult": [("methods", "world/get", "result")],
    "WorldRemoveResult": [("methods", "world/remove", "result")],
    "WorldSetResult": [("methods", "world/set", "result"), ("methods", "world/merge", "result")],
    "SchemaValidateResult": [("methods", "schema/validate", "result")],
    "ValidatedTool": [("$defs", "ValidatedTool")],
    "ToolsValidateResult": [("methods", "tools/validate", "result")],
    "SessionAck": [
        ("methods", "session/setInstructions", "result"),
        ("methods", "session/setContextNote", "result"),
        ("methods", "session/reset", "result"),
    ],
    "SessionCompactResult": [("methods", "session/compact", "result")],
    "SessionSummary": [("$defs", "SessionSummary")],
    "SessionListResult": [("methods", "session/list", "result")],
    "NpcUpdateResult": [("methods", "npc/update", "result")],
    "NpcSummary": [("$defs", "NpcSummary")],
    "NpcListResult": [("methods", "npc/list", "result")],
    "ErrorData": [("$defs", "ErrorObject", "properties", "data")],
    "ErrorObject": [("$defs", "ErrorObject")],
    "DecisionFailure": [("$defs", "DecisionFailure")],
    "DecideManyResult": [("methods", "decision/decideMany", "result")],
    "Subscription": [("$defs", "Subscription"), ("methods", "world/subscribe", "result")],
    "WorldUnsubscribeResult": [("methods", "world/unsubscribe", "result")],
    "WorldSummary": [("$defs", "WorldSummary")],
    "WorldListResult": [("methods", "world/list", "result")],
    "ModelStepEvent": [("$defs", "SessionEvent", "oneOf", 0)],
    "TextEvent": [("$defs", "SessionEvent", "oneOf", 1)],
    "PartialEvent": [("$defs", "SessionEvent", "oneOf", 2)],
    "ToolCallStartedEvent": [
        ("$defs", "SessionEvent", "oneOf", 3),
        ("$defs", "NpcEvent", "oneOf", 3),
    ],
    "ToolCallCompletedEvent": [
        ("$defs", "SessionEvent", "oneOf", 4),
        ("$defs", "NpcEvent", "oneOf", 4),
    ],
    "EmotionEvent": [("$defs", "NpcEvent", "oneOf", 0)],
    "LineDeltaEvent": [("$defs", "NpcEvent", "oneOf", 1)],
    "LineResetEvent": [("$defs", "NpcEvent", "oneOf", 2)],
    "SessionEventNotification": [("notifications", "session/event")],
    "NpcEventNotification": [("notifications", "npc/event")],
    "WorldChange": [("notifications", "world/changed")],
    "ToolCancel": [("notifications", "tool/cancel")],
}
"""Each exported model → every place in the contract whose schema it must match."""

ANY = frozenset({("any",)})


def resolve(root: dict[str, Any], schema: Any) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        node: Any = root
        for key in schema["$ref"].removeprefix("#/").split("/"):
            node = node[key]
        schema = node
    return schema


def shape(root: dict[str, Any], schema: Any) -> frozenset[tuple[Any, ...]]:
    """A schema's JSON types as a comparable value; constraints, titles and descriptions are
    left out, and an object's shape lists each member with its required-ness."""
    schema = resolve(root, schema)
    if schema is True or not isinstance(schema, dict):
        return ANY
    if "const" in schema:
        return frozenset({("enum", frozenset({json.dumps(schema["const"])}))})
    if "enum" in schema:
        return frozenset({("enum", frozenset(json.dumps(v) for v in schema["enum"]))})
    alternatives: set[tuple[Any, ...]] = set()
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            alternatives |= shape(root, sub)
    types = schema.get("type", [])
    for name in [types] if isinstance(types, str) else types:
        alternatives.add(kind(root, name, schema))
    if not alternatives or ("any",) in alternatives:
        return ANY
    return frozenset(alternatives)


def kind(root: dict[str, Any], name: str, schema: dict[str, Any]) -> tuple[Any, ...]:
    if name == "array":
        return ("array", shape(root, schema.get("items", True)))
    if name == "object" and "properties" in schema:
        return ("object", frozenset(members(root, schema).items()))
    return (name,)


def members(root: dict[str, Any], schema: dict[str, Any]) -> dict[str, tuple[bool, Any]]:
    """Member → (required, shape). An optional member defaulting to ``None`` (pydantic's
    ``X | None = None``) is an optional ``X``: absent and null read the same to a client."""
    schema = resolve(root, schema)
    required = set(schema.get("required", []))
    out = {}
    for member, sub in schema["properties"].items():
        types = shape(root, sub)
        if member not in required and isinstance(sub, dict) and sub.get("default", 0) is None:
            types = types - {("null",)} or ANY
        out[member] = (member in required, types)
    return out


def model_members(model: type[BaseModel]) -> dict[str, tuple[bool, Any]]:
    schema = model.model_json_schema(by_alias=True)
    return members(schema, schema)


def contract_members(pointer: tuple[str | int, ...]) -> dict[str, tuple[bool, Any]]:
    node: Any = CONTRACT
    for key in pointer:
        node = node[key]
    return members(CONTRACT, node)


def exported_models() -> set[str]:
    return {
        name
        for name in oamd.client.__all__
        if isinstance(value := getattr(oamd.client, name), type) and issubclass(value, BaseModel)
    }


def test_every_exported_model_is_checked_against_the_contract():
    assert exported_models() == set(SCHEMAS)


@pytest.mark.parametrize(
    ("name", "pointer"),
    [(name, pointer) for name, pointers in SCHEMAS.items() for pointer in pointers],
)
def test_the_model_has_its_schemas_members_required_ness_and_types(name, pointer):
    model = getattr(oamd.client, name)
    assert model_members(model) == contract_members(pointer)


def test_the_comparison_notices_a_wrong_type_and_a_wrong_required_ness():
    class WrongType(oamd.client.Usage):
        total_tokens: str  # type: ignore[assignment]

    class WrongRequired(oamd.client.Step):
        kind: str

    assert model_members(WrongType) != contract_members(("$defs", "Usage"))
    assert model_members(WrongRequired) != contract_members(("$defs", "Step"))


def test_members_a_newer_daemon_adds_are_kept_not_refused():
    usage = {"inputTokens": 3, "cachedInputTokens": 0, "outputTokens": 2, "totalTokens": 5}
    record = {
        "call": {"id": "call_1", "name": "open_gate", "arguments": {}, "origin": "model"},
        "output": "Opened.",
        "isError": False,
        "durationSeconds": 0.1,
    }
    reply = oamd.client.SessionRespondResult.model_validate(
        {
            "session": "guard",
            "text": "Done.",
            "toolCalls": [record],
            "usage": usage,
            "steps": [],
            "latencyMs": 12,
        }
    )
    assert reply.model_extra == {"latencyMs": 12}
    assert reply.tool_calls[0].call.model_extra == {"origin": "model"}
    assert reply.warnings == []


def test_results_are_read_from_wire_names_and_python_names_alike():
    usage = {"input_tokens": 3, "cached_input_tokens": 0, "output_tokens": 2, "total_tokens": 5}
    decision = oamd.client.Decision.model_validate(
        {
            "optionID": "flee",
            "reasoning": "Outnumbered.",
            "confidence": 80,
            "toolCalls": [],
            "usage": usage,
            "isFallback": False,
        }
    )
    assert decision.option_id == "flee"
    assert decision.model_dump(by_alias=True)["optionID"] == "flee"

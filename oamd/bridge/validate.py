"""``schema/validate`` and ``tools/validate``: the schema engine without running a model."""

from __future__ import annotations

from typing import Any

from oamd.agent.schema import CompiledSchema, compile_schema
from oamd.bridge.core_encode import encode_schema_check, encode_tool_checks
from oamd.bridge.params import Params
from oamd.bridge.tool_params import parse_tools
from oamd.errors import InvalidParams
from oamd.jsonvalue import JsonTextError, loads_embedded
from oamd.rpc import Registry, Request, Result

__all__ = ["compile_param_schema", "register"]


def compile_param_schema(raw: Any, key: str = "schema") -> CompiledSchema:
    """A schema param: an object (or a JSON string of one) → -32602 otherwise; then the schema
    engine, whose errors are -32007 with ``data.path``."""
    if isinstance(raw, str):
        try:
            raw = loads_embedded(raw)
        except JsonTextError:
            raw = None
    if not isinstance(raw, dict):
        raise InvalidParams(f"'{key}' must be a JSON Schema object.")
    return compile_schema(raw, key)


def schema_validate(req: Request) -> Result:
    p = Params(req.params)
    if not p.has("schema"):
        raise InvalidParams("Missing required parameter 'schema'.")
    p.opt_string("name")
    compiled = compile_param_schema(p.get("schema"))
    return Result(encode_schema_check(compiled))


def tools_validate(req: Request) -> Result:
    p = Params(req.params)
    if not p.present("tools"):
        raise InvalidParams("Missing required parameter 'tools'.")
    tools, warnings = parse_tools(p.get("tools"))
    return Result(encode_tool_checks(tools, warnings))


def register(registry: Registry) -> None:
    registry.register("schema/validate", schema_validate)
    registry.register("tools/validate", tools_validate)

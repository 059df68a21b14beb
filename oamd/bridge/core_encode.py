"""Wire shapes of the core methods' results (§3): ``initialize``, ``model/availability``,
``schema/validate``, ``tools/validate``. Light: ``initialize`` is answered before anything else
loads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oamd import __version__
from oamd.bridge.wire import shape
from oamd.limits import PROTOCOL_VERSION

if TYPE_CHECKING:
    from oamd.agent.schema import CompiledSchema
    from oamd.agent.tools import ToolDefinition
    from oamd.backends.base import Availability
    from oamd.rpc import Registry

__all__ = ["encode_availability", "encode_initialize", "encode_schema_check", "encode_tool_checks"]


@shape("result", "initialize")
def encode_initialize(
    registry: Registry, models: list[str], max_sessions: int, availability: Availability
) -> dict[str, Any]:
    """``{"protocolVersion", "server": {"name", "version"}, "capabilities", "model"}``"""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "server": {"name": "oamd", "version": __version__},
        "capabilities": {
            "methods": registry.methods,
            "notifications": registry.notifications,
            "clientRequests": registry.client_requests,
            "streaming": True,
            "clientTools": True,
            "structuredOutput": True,
            "models": models,
            "maxSessions": max_sessions,
            "batch": False,
        },
        "model": encode_availability(availability),
    }


@shape("result", "model/availability")
def encode_availability(availability: Availability) -> dict[str, Any]:
    """``{"available", "reason"?, "detail"?, …}`` (``$defs/Availability``)."""
    return availability.to_wire()


@shape("result", "schema/validate")
def encode_schema_check(compiled: CompiledSchema) -> dict[str, Any]:
    """``{"warnings", "generationSchema"}``"""
    return {"warnings": compiled.warnings, "generationSchema": compiled.generation}


@shape("result", "tools/validate")
def encode_tool_checks(tools: list[ToolDefinition], warnings: list[str]) -> dict[str, Any]:
    """``{"tools": [{"name", "warnings", "generationSchema"}…], "warnings"}``"""
    return {
        "tools": [
            {"name": t.name, "warnings": t.schema.warnings, "generationSchema": t.schema.generation}
            for t in tools
        ],
        "warnings": warnings,
    }

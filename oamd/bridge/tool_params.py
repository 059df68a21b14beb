"""Tool definitions (§9) and tool choices, read from params and written back.

``parse_tools`` reads ``tools`` into ``ToolDefinition`` values (each keeps its definition's save
form, ``tool_definition``), ``parse_tool_choice`` reads a ``toolChoice``; errors name the param
path (``tools[2].parameters``) as the reference does.
"""

from __future__ import annotations

import re
from typing import Any

from oamd.agent.schema import EMPTY_OBJECT_SCHEMA, compile_schema
from oamd.agent.tools import RESPOND_ACTION, ToolChoice, ToolDefinition
from oamd.bridge.params import Params, shown
from oamd.errors import InvalidParams, LimitReached
from oamd.jsonvalue import JsonTextError, loads_embedded
from oamd.limits import MAX_TOOLS, RECOMMENDED_MAX_TOOLS

__all__ = [
    "choice_to_wire",
    "parse_tool_choice",
    "parse_tools",
    "tool_count_warning",
    "tool_definition",
]

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def tool_definition(
    name: str, description: str, parameters: dict[str, Any], timeout: float | None
) -> dict[str, Any]:
    """A tool's definition as saved and shown: the timeout in whole seconds when it is whole."""
    out: dict[str, Any] = {"name": name, "description": description, "parameters": parameters}
    if timeout is not None:
        out["timeoutSeconds"] = int(timeout) if timeout.is_integer() else timeout
    return out


def choice_to_wire(choice: ToolChoice) -> Any:
    return {"tool": choice.name} if choice.mode == "tool" else choice.mode


def _parse_tool(raw: Any, path: str) -> tuple[ToolDefinition, list[str]]:
    if isinstance(raw, dict) and isinstance(raw.get("function"), dict):
        raw = raw["function"]  # OpenAI's {"type": "function", "function": {...}} wrapper
    if not isinstance(raw, dict):
        raise InvalidParams(f"'{path}' must be an object.")
    p = Params(raw, path)
    name = p.string("name")
    if not _NAME.fullmatch(name):
        raise InvalidParams(
            f"'{path}.name' must be 1-64 characters of letters, digits, '_', '-' or '.'; "
            f"got '{name}'."
        )
    if name == RESPOND_ACTION:  # as open-android-models: the envelope loop's reply action
        raise InvalidParams(
            f"'{path}.name' '{name}' is reserved for the model's reply step; choose another name."
        )
    description = p.opt_string("description", "") or ""
    execution = p.opt_string("execution", "client")
    if execution != "client":
        raise InvalidParams(
            f"'{path}.execution' must be \"client\" (the engine executes the tool via tool/call);"
            f" got '{execution}'."
        )
    parameters = raw.get("parameters")
    if parameters is None:
        parameters = EMPTY_OBJECT_SCHEMA
    elif isinstance(parameters, str):
        try:
            parameters = loads_embedded(parameters)
        except JsonTextError:
            parameters = None
        if not isinstance(parameters, dict):
            raise InvalidParams(f"'{path}.parameters' must be a JSON Schema object.")
    elif not isinstance(parameters, dict):
        raise InvalidParams(f"'{path}.parameters' must be a JSON Schema object.")
    schema = compile_schema(parameters, f"{path}.parameters")
    timeout = p.opt_seconds("timeoutSeconds")
    warnings: list[str] = []
    if not description:
        warnings.append(f"{name}: no description; the model may not know when to call it.")
    warnings.extend(f"{name}: {w}" for w in schema.warnings)
    definition = tool_definition(name, description, parameters, timeout)
    return ToolDefinition(
        name, description, parameters, schema, timeout, definition=definition
    ), warnings


def parse_tools(value: Any, path: str = "tools") -> tuple[list[ToolDefinition], list[str]]:
    """Parses tool definitions; returns them with their warnings (description, schema).

    Raises:
        InvalidParams: a malformed definition or a duplicate name.
        InvalidSchema: a ``parameters`` schema that cannot be used (``data.path``).
        LimitReached: more than ``MAX_TOOLS`` definitions.
    """
    if value is None:
        return [], []
    if not isinstance(value, list):
        raise InvalidParams(f"'{path}' must be an array of tool definitions.")
    if len(value) > MAX_TOOLS:
        raise LimitReached(
            "tools",
            MAX_TOOLS,
            f"'{path}' has {len(value)} tools; a session or NPC takes at most {MAX_TOOLS} "
            f"(and works best with {RECOMMENDED_MAX_TOOLS} or fewer).",
        )
    tools: list[ToolDefinition] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(value):
        tool, tool_warnings = _parse_tool(raw, f"{path}[{i}]")
        if tool.name in seen:
            raise InvalidParams(f"Duplicate tool name '{tool.name}'.")
        seen.add(tool.name)
        tools.append(tool)
        warnings.extend(tool_warnings)
    return tools, warnings


def tool_count_warning(count: int) -> list[str]:
    if count <= RECOMMENDED_MAX_TOOLS:
        return []
    return [
        f"{count} tools: Apple recommends at most 3-5 tools per request on-device; narrow them "
        "per turn with 'enabledTools'."
    ]


_CHOICES = ("auto", "none", "required", "explicit")


def parse_tool_choice(value: Any, path: str) -> ToolChoice | None:
    if value is None:
        return None
    if isinstance(value, str) and value in _CHOICES:
        return ToolChoice(value)
    if isinstance(value, dict):
        name = value.get("tool")
        if name is None and isinstance(value.get("function"), dict):
            name = value["function"].get("name")  # OpenAI's {"function": {"name": …}}
        if isinstance(name, str) and name:
            return ToolChoice("tool", name)
        raise InvalidParams(f'\'{path}\' object must be {{"tool": "<name>"}}.')
    raise InvalidParams(
        f'\'{path}\' must be "auto", "none", "required", "explicit" or '
        f'{{"tool": "<name>"}}; got {shown(value)}.'
    )

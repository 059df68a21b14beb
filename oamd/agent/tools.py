"""Tool definitions (§9), tool choices, and tool outputs as the model and the engine see them.

Client tools run in the engine through ``tool/call``; local tools (the game layer's world and
memory tools) run in-process through ``ToolDefinition.local``. A tool output is text, a JSON value
or an error: the model sees text as is, JSON compact and errors as ``Error: <message>``; the
turn's record keeps the string or the JSON value.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from oamd.agent.params import Params, shown
from oamd.agent.schema import EMPTY_OBJECT_SCHEMA, CompiledSchema, compile_schema
from oamd.errors import InvalidParams, LimitReached
from oamd.jsonvalue import JsonTextError, loads_embedded
from oamd.limits import MAX_TOOLS, RECOMMENDED_MAX_TOOLS

__all__ = [
    "RESPOND_DIRECTLY",
    "ToolChoice",
    "ToolDefinition",
    "ToolOutput",
    "parse_tool_choice",
    "parse_tools",
    "tool_count_warning",
]

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")

RESPOND_DIRECTLY = "respond_directly"
"""The built-in tool ``explicit`` offers on the first step: call it to answer without a lookup."""

RESPOND_DIRECTLY_DESCRIPTION = (
    "Use when you can reply right away from the conversation alone, without looking anything up "
    "or taking an action."
)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returned: ``text`` (a string), ``json`` (any JSON) or ``error`` (a message)."""

    kind: str
    value: Any

    @classmethod
    def text(cls, value: str) -> ToolOutput:
        return cls("text", value)

    @classmethod
    def json(cls, value: Any) -> ToolOutput:
        return cls("json", value)

    @classmethod
    def error(cls, message: str) -> ToolOutput:
        return cls("error", message)

    @property
    def is_error(self) -> bool:
        return self.kind == "error"

    @property
    def model_text(self) -> str:
        """What the model reads: the text, compact JSON, or ``Error: <message>``."""
        if self.kind == "text":
            return self.value
        if self.kind == "error":
            return f"Error: {self.value}"
        return orjson.dumps(self.value).decode()

    @classmethod
    def from_reply(cls, result: Any, error: Any) -> ToolOutput:
        """Every reply form of ``tool/call`` (§7): ``{"output"}``, ``isError``, a JSON-RPC error,
        or a lenient result without ``output`` (the whole result is the output)."""
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None
            return cls.error(message if isinstance(message, str) else "Unknown error")
        if isinstance(result, dict) and "output" in result:
            output = result["output"]
            if result.get("isError") is True:
                return cls.error(
                    output if isinstance(output, str) else orjson.dumps(output).decode()
                )
            return cls.text(output) if isinstance(output, str) else cls.json(output)
        if isinstance(result, str):
            return cls.text(result)
        return cls.json(result)


LocalRunner = Callable[[dict[str, Any]], Awaitable[ToolOutput]]


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: dict[str, Any]
    """The caller's JSON Schema of the arguments, as given."""
    schema: CompiledSchema
    timeout: float | None = None
    """Seconds the engine has to answer (``None``: the session's default; ``0``: forever)."""
    local: LocalRunner | None = field(default=None, compare=False)
    """Set for in-process tools (world and memory tools); ``None`` for client tools."""

    @property
    def execution(self) -> str:
        return "client" if self.local is None else "local"

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.timeout is not None:
            out["timeoutSeconds"] = int(self.timeout) if self.timeout.is_integer() else self.timeout
        return out


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
    return ToolDefinition(name, description, parameters, schema, timeout), warnings


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


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """``auto``, ``none``, ``required``, ``explicit``, or ``tool`` with ``name`` set."""

    mode: str = "auto"
    name: str | None = None

    def to_wire(self) -> Any:
        return {"tool": self.name} if self.mode == "tool" else self.mode


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

"""Client tools: functions of the host that the model calls, registered with ``@bridge.tool``.

A ``ToolBox`` holds each tool's definition (what ``session/create`` and ``npc/create`` send) and
its handler, and answers the daemon's ``tool/call`` requests with them: the handler's return value
is the call's ``output``, a ``ToolError`` it raises is an ``isError`` output the model reads, and a
call of a tool it does not know is answered with an error. Any other exception is left to the
client, which answers that one call with an error and logs it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from oamd.client._errors import RpcError
from oamd.client._results import ToolCall
from oamd.rpc.errors import CODES

__all__ = ["ToolBox", "ToolContext", "ToolError", "ToolFunction", "Tools"]

ToolFunction = Callable[..., Any | Awaitable[Any]]
"""A tool's handler: ``(arguments)`` or ``(arguments, context)``, sync or async; returns the
output (a string, or any JSON value)."""

Tools = Iterable[str | dict[str, Any]]
"""Registered tool names, or tool definitions sent as they are."""

_NO_ARGUMENTS = {"type": "object", "properties": {}}


class ToolError(Exception):
    """Raised by a tool's handler for a failure the model should read and react to (the call's
    output is the message, with ``isError: true``) rather than a bug in the handler."""


@dataclass(frozen=True)
class ToolContext:
    """Where a ``tool/call`` comes from; passed to handlers that take a second argument."""

    call: ToolCall
    request_id: Any
    """The id of the request whose turn made the call."""
    session: str | None = None
    npc: str | None = None
    index: int | None = None
    """For ``decision/decideMany``: which decision of the batch."""


@dataclass(frozen=True)
class _Tool:
    definition: dict[str, Any]
    handler: ToolFunction
    wants_context: bool


def _takes_context(handler: ToolFunction) -> bool:
    try:
        parameters = inspect.signature(handler).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: arguments only
        return False
    positional = [
        p
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in positional)


class ToolBox:
    """The client tools of one bridge, by name; answers ``tool/call`` for them."""

    def __init__(self) -> None:
        self._tools: dict[str, _Tool] = {}

    def add(
        self,
        name: str,
        handler: ToolFunction,
        description: str = "",
        parameters: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        """Registers (or replaces) the tool ``name``; ``parameters`` is the JSON Schema of its
        arguments (default: none), ``timeout`` the seconds the daemon waits for an answer."""
        definition: dict[str, Any] = {
            "name": name,
            "description": description,
            "parameters": parameters if parameters is not None else _NO_ARGUMENTS,
        }
        if timeout is not None:
            definition["timeoutSeconds"] = timeout
        self._tools[name] = _Tool(definition, handler, _takes_context(handler))

    def definitions(self, tools: Tools | None = None) -> list[dict[str, Any]]:
        """Tool definitions for the wire: registered names are looked up, dicts pass as they are;
        ``None`` means every registered tool.

        Raises:
            KeyError: a name that was never registered.
        """
        selected = list(self._tools) if tools is None else list(tools)
        unknown = [t for t in selected if isinstance(t, str) and t not in self._tools]
        if unknown:
            raise KeyError(f"No tool registered as {', '.join(map(repr, unknown))}.")
        return [self._tools[t].definition if isinstance(t, str) else t for t in selected]

    async def answer(self, params: dict[str, Any]) -> dict[str, Any]:
        """The ``result`` of a ``tool/call`` (a ``ToolHandler`` for ``Client``).

        Raises:
            RpcError: no tool of that name is registered (the model reads the message).
        """
        call = ToolCall.model_validate(params["call"])
        tool = self._tools.get(call.name)
        if tool is None:
            raise RpcError(
                CODES["method_not_found"],
                f"No handler is registered for the tool '{call.name}'.",
                {"code": "method_not_found"},
            )
        arguments = call.arguments if call.arguments is not None else {}
        try:
            if tool.wants_context:
                context = ToolContext(
                    call=call,
                    request_id=params.get("requestId"),
                    session=params.get("session"),
                    npc=params.get("npc"),
                    index=params.get("index"),
                )
                output = tool.handler(arguments, context)
            else:
                output = tool.handler(arguments)
            if inspect.isawaitable(output):
                output = await output
        except ToolError as exc:
            return {"output": str(exc) or type(exc).__name__, "isError": True}
        return {"output": output if output is not None else ""}

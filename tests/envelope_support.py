"""Shared pieces of the envelope-loop tests: a tavern's tools, scripted text-only sessions, and
readers for what the scripted model was shown (``test/modelRequests``)."""

from __future__ import annotations

from typing import Any

import anyio

from oamd.client import RpcError

TAKE_ORDER = {
    "name": "take_order",
    "description": "Place an order for the guest.",
    "parameters": {
        "type": "object",
        "properties": {
            "item": {
                "type": "string",
                "enum": ["ale", "stew", "bread"],
                "description": "menu item",
            },
            "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["item", "quantity"],
    },
}
CHECK_MENU = {
    "name": "check_menu",
    "description": "List what the kitchen has today.",
    "parameters": {"type": "object", "properties": {}},
}
ROLL_DIE = {
    "name": "roll_die",
    "description": "Roll a die.",
    "parameters": {
        "type": "object",
        "properties": {"sides": {"type": "integer"}},
        "required": ["sides"],
    },
}
TAVERN = [TAKE_ORDER, CHECK_MENU]
MENU = {"stew": 3, "ale": 2}
ORDER_PLACED = "Order placed."
ROLLED = {"rolled": 4}


def scripted(*steps: dict[str, Any], style: str = "envelope", **extra: Any) -> dict[str, Any]:
    return {"type": "scripted", "style": style, "steps": list(steps), **extra}


def raw(text: str, **extra: Any) -> dict[str, Any]:
    return {"raw": text, **extra}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"toolCalls": [{"name": n, "arguments": a} for n, a in pairs]}


async def tavern_tools(params: dict[str, Any]) -> dict[str, Any]:
    """The engine side: every tool answers at once."""
    name = params["call"]["name"]
    if name == "check_menu":
        return {"output": MENU}
    if name == "roll_die":
        return {"output": ROLLED}
    if name == "fail":
        raise RpcError(-32000, "The kitchen is closed.")
    return {"output": ORDER_PLACED}


async def create(
    client: Any,
    session: str,
    *steps: dict[str, Any],
    tools: list[dict[str, Any]] | None = None,
    style: str = "envelope",
    model: dict[str, Any] | None = None,
    **params: Any,
) -> None:
    client.tool_handler = tavern_tools
    with anyio.fail_after(5):
        await client.request(
            "session/create",
            {
                "session": session,
                "tools": TAVERN if tools is None else tools,
                "model": model or scripted(*steps, style=style),
                **params,
            },
        )


async def respond(client: Any, session: str, prompt: str = "Hello.", **params: Any) -> Any:
    with anyio.fail_after(5):
        return await client.request(
            "session/respond", {"session": session, "prompt": prompt, **params}
        )


async def streamed(
    client: Any, session: str, prompt: str, **params: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A streamed turn's result and the events it sent, in order."""
    with anyio.fail_after(5):
        turn = await client.start(
            "session/respond", {"session": session, "prompt": prompt, "stream": True, **params}
        )
        result = (await client.wait(turn))["result"]
    return result, client.recorder.events_for(turn)


async def requests_of(client: Any, session: str) -> list[dict[str, Any]]:
    """What the session's scripted model received, request by request."""
    with anyio.fail_after(5):
        reply = await client.request("test/modelRequests", {"session": session})
    return reply["requests"]


def user_text(request: dict[str, Any]) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


def system_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "system"]


def kinds(result: dict[str, Any]) -> list[str]:
    return [s["kind"] for s in result["steps"]]


def repairs(result: dict[str, Any]) -> list[bool]:
    return [s["isRepair"] for s in result["steps"]]


def made_calls(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(r["call"]["name"], r["call"]["arguments"]) for r in result["toolCalls"]]

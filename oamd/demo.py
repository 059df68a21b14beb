"""``make demo``: a castle guard opens a gate through a client tool, streamed, over real stdio.

It spawns ``oamd stdio``, plays the engine's side (answering ``tool/call`` like a game would),
and prints the exchange readably. The guard runs on a scripted model so the demo works on any
machine; start oamd with ``--model …`` and drop ``model`` to use a real one.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio

from oamd.client import connect_stdio

__all__ = ["main"]

GUARD = {
    "session": "guard",
    "instructions": "You are a castle guard in a game. Use tools to act. Reply in one sentence.",
    "tools": [
        {
            "name": "open_gate",
            "description": "Ask the game engine to open a named gate. Returns whether it opened.",
            "parameters": {
                "type": "object",
                "properties": {"gate": {"type": "string"}},
                "required": ["gate"],
            },
        }
    ],
    "options": {"toolChoice": "required"},
    "model": {
        "type": "scripted",
        "steps": [
            {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
            {"template": "The north gate stays shut: {toolOutput}", "delayMs": 150},
        ],
    },
}


def say(who: str, text: str) -> None:
    print(f"  {who:<7} {text}", flush=True)


async def open_gate(params: dict[str, Any]) -> dict[str, Any]:
    call = params["call"]
    say("engine", f"tool/call {call['name']}({call['arguments']}) → plays the gate animation")
    await anyio.sleep(0.3)
    return {"output": {"opened": False, "reason": "the portcullis chain is jammed"}}


def on_message(message: dict[str, Any]) -> None:
    if message.get("method") != "session/event":
        return
    event = message["params"]["event"]
    if event["type"] == "modelStep":
        step = event["step"]
        say("model", f"step {step['index']} (tools {step['toolCallingMode']})")
    elif event["type"] == "text":
        say("stream", repr(event["delta"]))
    elif event["type"] == "toolCallCompleted":
        say("tool", f"done: {event['record']['output']}")


async def run() -> None:
    argv = [sys.executable, "-m", "oamd", "stdio"]
    async with connect_stdio(argv, tool_handler=open_gate, on_message=on_message) as client:
        init = await client.request(
            "initialize", {"client": {"name": "demo"}, "protocolVersion": "1.0"}
        )
        server = init["server"]
        print(
            f"{server['name']} {server['version']} — {len(init['capabilities']['methods'])} methods"
        )
        print(
            f"system model available: {init['model']['available']} ({init['model'].get('reason', 'ok')})\n"
        )
        await client.request("session/create", GUARD)
        say("player", "Please open the north gate.")
        result = await client.request(
            "session/respond",
            {"session": "guard", "prompt": "Please open the north gate.", "stream": True},
        )
        say("guard", result["text"])
        usage = result["usage"]
        print(
            f"\n{len(result['steps'])} model steps, {len(result['toolCalls'])} tool call, "
            f"{usage['totalTokens']} tokens"
        )
        listing = await client.request("session/list")
        print(f"session entries after the turn: {listing['sessions'][0]['entries']}")
        await client.request("shutdown")


def main() -> None:
    anyio.run(run)


if __name__ == "__main__":
    main()

"""``make demo``: Mira the innkeeper serves a guest through client tools, streamed, over real stdio.

It spawns ``oamd stdio --model <spec>``, plays the engine's side (answering ``tool/call`` like a
game would) and prints the exchange readably. ``--model llamacpp`` (the default) runs the
embedded SmolLM2-135M, ``--model openai:http://…`` a server, and ``--model scripted`` plays the
same tavern on a scripted model (instant, any machine), then the castle guard's gate demo.

Every wait is bounded: a turn that fails or takes too long is reported and the demo goes on.
The daemon's stderr (the model's loading progress, warnings) passes through to this stderr.

Why it ships with the wheel (in ``oamd.examples``, beside the daemon, not in it): ``python -m
oamd.examples.tavern`` must work wherever oamd is installed, not only in a checkout — it is the
first thing a newcomer runs and the smallest end-to-end check that a model works on a machine; it
imports only the public client.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import anyio

from oamd.client import ConnectionClosed, RpcError, connect_stdio

__all__ = ["main"]

SCRIPTED = "scripted"
TURN_SECONDS = 30.0
"""Longest wait for one player line (the embedded model takes a few seconds on 2 cores)."""
SETUP_SECONDS = 60.0
"""Longest wait for a setup request (loading the model, creating the NPC)."""

MENU = {"stew": 5, "ale": 3, "bread": 1, "cider": 4}

MIRA = {
    "name": "Mira",
    "role": "the innkeeper of the Prancing Pony",
    "personality": "Cheerful and warm.",
    "speakingStyle": "One short friendly sentence that names dishes and prices.",
    "maxSentences": 1,
}
TAVERN_TOOLS = [
    {
        "name": "check_menu",
        "description": "Look up tonight's menu with prices in gold.",
        "parameters": {"type": "object", "properties": {}},
    },
    {
        "name": "place_order",
        "description": "Place an order the guest explicitly asks for.",
        "parameters": {
            "type": "object",
            "properties": {
                "item": {"type": "string", "enum": list(MENU)},
                "quantity": {"type": "integer", "minimum": 1, "maximum": 5},
            },
            "required": ["item", "quantity"],
            "additionalProperties": False,
        },
    },
]
TAVERN_OPTIONS = {
    "replyFormat": "text",  # a plain line streams best (a small model's line is free text anyway)
    "maximumResponseTokens": 48,  # a sentence or two; the persona's maxSentences ends it sooner
    "maxToolRounds": 1,
    "playerOptionCount": 0,
}
# (player line, the tool this line must use — the engine knows what the player asked for)
TAVERN_LINES: list[tuple[str, Any]] = [
    ("Evening! What's on the menu tonight?", {"tool": "check_menu"}),
    ("Two bowls of stew, please.", {"tool": "place_order"}),
    ("Thank you! Any news from the road?", "none"),
]
TAVERN_SCRIPT = {
    "type": "scripted",
    "steps": [
        {"toolCalls": [{"name": "check_menu", "arguments": {}}]},
        {
            "text": "Tonight we have stew for 5 gold, ale for 3, bread for 1 and cider for 4.",
            "chunks": 4,
            "delayMs": 100,
        },
        {"toolCalls": [{"name": "place_order", "arguments": {"item": "stew", "quantity": 2}}]},
        {"text": "Two bowls of stew coming up, that's 10 gold.", "chunks": 4, "delayMs": 100},
        {"text": "Only that the north road is muddy after the rain.", "chunks": 4, "delayMs": 100},
    ],
}

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


class Screen:
    """Prints the exchange; a streamed line stays open until the turn ends."""

    def __init__(self) -> None:
        self.open_line = False
        self.streamed = False
        """Whether the current turn streamed any of its line."""
        self.shown = ""
        """What the current turn has streamed so far."""
        self.gone = False
        """Whether the daemon has closed the connection."""

    def close_line(self) -> None:
        if self.open_line:
            print(flush=True)
            self.open_line = False

    def say(self, who: str, text: str) -> None:
        self.close_line()
        print(f"  {who:<7} {text}", flush=True)

    def stream(self, who: str, delta: str) -> None:
        if not self.open_line:
            print(f"  {who:<7} ", end="", flush=True)
            self.open_line = True
        print(delta.replace("\n", " "), end="", flush=True)
        self.shown += delta
        self.streamed = True

    def reset(self, who: str, line: str) -> None:
        """The daemon replaced the streamed line (e.g. tidied its quotes when the turn ended)."""
        if _plain(line) == _plain(self.shown):
            return
        self.close_line()
        self.shown = ""
        print(f"  {'':<7} ↳ ", end="", flush=True)
        self.open_line = True
        self.stream(who, line)


def _plain(text: str) -> str:
    return " ".join(text.split()).strip("\"' ")


screen = Screen()


def engine_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What the game does for a tool call."""
    if name == "check_menu":
        return {"output": MENU}
    if name == "place_order":
        item = str(arguments.get("item", "")).lower()
        if item not in MENU:
            return {"output": f"'{item}' is not on the menu.", "isError": True}
        quantity = int(arguments.get("quantity", 1) or 1)
        return {
            "output": {
                "ok": True,
                "item": item,
                "quantity": quantity,
                "total": MENU[item] * quantity,
            }
        }
    if name == "open_gate":
        # a sentence, not an object: the scripted guard quotes it to the player as it is
        return {"output": "the portcullis chain is jammed"}
    return {"output": f"Unknown tool {name}.", "isError": True}


async def on_tool_call(params: dict[str, Any]) -> dict[str, Any]:
    call = params["call"]
    result = engine_tool(call["name"], call.get("arguments") or {})
    screen.say("engine", f"{call['name']}({call.get('arguments') or {}}) → {result['output']}")
    await anyio.sleep(0.05)
    return result


def on_message(message: dict[str, Any]) -> None:
    method = message.get("method")
    if method == "npc/event":
        event = message["params"]["event"]
        if event["type"] == "lineDelta":
            screen.stream("Mira", event["delta"])
        elif event["type"] == "lineReset":
            screen.reset("Mira", event["line"])
    elif method == "session/event":
        event = message["params"]["event"]
        if event["type"] == "modelStep":
            step = event["step"]
            screen.say("model", f"step {step['index']} (tools {step['toolCallingMode']})")
        elif event["type"] == "text":
            screen.say("stream", repr(event["delta"]))
        elif event["type"] == "toolCallCompleted":
            screen.say("tool", f"done: {event['record']['output']}")


async def bounded(client: Any, seconds: float, method: str, params: dict[str, Any]) -> Any:
    """``client.request`` with a deadline; ``None`` (after saying why) when it fails."""
    if screen.gone:
        return None
    try:
        with anyio.fail_after(seconds):
            return await client.request(method, params)
    except RpcError as exc:
        screen.say("error", f"{method}: {exc.name}: {exc}")
    except TimeoutError:
        screen.say("error", f"{method}: no answer within {seconds:.0f} s")
    except (ConnectionClosed, OSError):
        if not screen.gone:
            screen.say("error", "oamd exited (its message is on stderr above)")
        screen.gone = True
    return None


async def tavern(client: Any, scripted: bool) -> None:
    print("— The Prancing Pony: Mira the innkeeper, with the tools check_menu and place_order —")
    params: dict[str, Any] = {
        "npc": "mira",
        "persona": MIRA,
        "tools": TAVERN_TOOLS,
        "options": TAVERN_OPTIONS,
    }
    if scripted:
        params["model"] = TAVERN_SCRIPT
    if await bounded(client, SETUP_SECONDS, "npc/create", params) is None:
        return
    for line, choice in TAVERN_LINES:
        screen.say("player", line)
        if choice != "auto":  # the game, not the model, decides which tool this line calls
            print(f"  {'':<7} [the game sets toolChoice {json.dumps(choice)} for this line]")
        screen.streamed, screen.shown = False, ""
        started = time.monotonic()
        talk = {"npc": "mira", "line": line, "stream": True, "toolChoice": choice}
        result = await bounded(client, TURN_SECONDS, "npc/talk", talk)
        screen.close_line()
        if result is None:
            if screen.gone:
                return
            await bounded(client, 5, "npc/cancel", {"npc": "mira"})
            continue
        if not screen.streamed:
            screen.say("Mira", result["line"])
        usage = result["usage"]
        note = " (fallback line)" if result.get("isFallback") else ""
        print(
            f"  {'':<7} [{result['emotion']} · {len(result['toolCalls'])} tool call(s) · "
            f"{usage['totalTokens']} tokens · {time.monotonic() - started:.1f} s]{note}",
            flush=True,
        )


async def guard(client: Any) -> None:
    print("\n— The castle gate: a guard session with a forced client tool —")
    if await bounded(client, SETUP_SECONDS, "session/create", GUARD) is None:
        return
    screen.say("player", "Please open the north gate.")
    prompt = {"session": "guard", "prompt": "Please open the north gate.", "stream": True}
    result = await bounded(client, TURN_SECONDS, "session/respond", prompt)
    if result is None:
        return
    screen.say("guard", result["text"])
    usage = result["usage"]
    print(
        f"\n{len(result['steps'])} model steps, {len(result['toolCalls'])} tool call, "
        f"{usage['totalTokens']} tokens"
    )
    listing = await bounded(client, SETUP_SECONDS, "session/list", {})
    if listing is not None:
        print(f"session entries after the turn: {listing['sessions'][0]['entries']}")


async def run(model: str) -> int:
    scripted = model == SCRIPTED
    argv = [sys.executable, "-m", "oamd", "stdio"]
    if not scripted:
        argv += ["--model", model]
    started = time.monotonic()
    async with connect_stdio(
        argv, stderr=sys.stderr, tool_handler=on_tool_call, on_message=on_message
    ) as client:
        hello = {"client": {"name": "demo"}, "protocolVersion": "1.0"}
        init = await bounded(client, SETUP_SECONDS, "initialize", hello)
        if init is None:
            return 1
        server = init["server"]
        print(
            f"{server['name']} {server['version']} — {len(init['capabilities']['methods'])} methods"
        )
        if scripted:
            print("model: scripted (instant; try MODEL=llamacpp or MODEL=openai:http://…)\n")
        else:
            availability = await bounded(client, SETUP_SECONDS, "model/availability", {})
            if availability is None or not availability.get("available"):
                detail = (availability or {}).get("detail", "")
                print(f"model {model} is not available: {detail}")
                print("try: make demo MODEL=scripted")
                await bounded(client, 5, "shutdown", {})
                return 1
            print(
                f"model: {model} — {availability.get('variant', '?')}, "
                f"context {availability.get('contextSize', '?')} tokens\n"
            )
        await tavern(client, scripted)
        if scripted:
            await guard(client)
        await bounded(client, 10, "shutdown", {})
    if screen.gone:
        return 1
    print(f"\ndemo finished in {time.monotonic() - started:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oamd.examples.tavern", description=__doc__)
    parser.add_argument(
        "--model",
        default="llamacpp",
        help="'scripted', 'llamacpp[:<path.gguf>]' (default) or 'openai:<base-url>[#<model>]'",
    )
    args = parser.parse_args(argv)
    return anyio.run(run, args.model.strip() or SCRIPTED)


if __name__ == "__main__":
    sys.exit(main())

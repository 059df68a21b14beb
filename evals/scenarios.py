"""The live-eval scenarios: the sibling project's proxy evals (open-android-models, research
notes §9.1), restated as oamd sessions. Data only; ``evals.runner`` plays them.

Each ``Line`` is one guest line with the first actions accepted (a tool name or ``respond``) and
the arguments expected of that call (integers match exactly, strings case-insensitively).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SCENARIOS", "Line", "Scenario"]

MENU = {"ale": 3, "stew": 5, "bread": 1, "cider": 4}

MIRA = (
    "You are Mira, the cheerful innkeeper of the Prancing Pony in a fantasy game. You serve food "
    "and drink, offer only what the menu has, never invent prices, and reply in one or two short "
    "in-character sentences."
)
BROM = (
    "You are Brom, a gruff but fair gate guard of Highcastle in a fantasy game. Reply in one or "
    "two short sentences."
)

CHECK_MENU = {
    "name": "check_menu",
    "description": "Look up today's menu with prices in gold.",
    "parameters": {"type": "object", "properties": {}},
}
TAKE_ORDER = {
    "name": "take_order",
    "description": "Place an order the guest explicitly asks for.",
    "parameters": {
        "type": "object",
        "properties": {
            "item": {
                "type": "string",
                "enum": ["ale", "stew", "bread", "cider"],
                "description": "menu item",
            },
            "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["item", "quantity"],
        "additionalProperties": False,
    },
}
GUARD_TOOLS = [
    {
        "name": "open_gate",
        "description": "Open a city gate when asked.",
        "parameters": {
            "type": "object",
            "properties": {"gate": {"type": "string", "enum": ["north", "south"]}},
            "required": ["gate"],
            "additionalProperties": False,
        },
    },
    {
        "name": "check_pass",
        "description": "Check whether a named traveler is on the allowed list.",
        "parameters": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "the traveler's name"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
    {
        "name": "ring_alarm",
        "description": "Ring the alarm bell when the city is under attack.",
        "parameters": {"type": "object", "properties": {}},
    },
    {
        "name": "read_notice_board",
        "description": "Read today's notices and news.",
        "parameters": {"type": "object", "properties": {}},
    },
    {
        "name": "give_directions",
        "description": "Look up the way to a place in the city.",
        "parameters": {
            "type": "object",
            "properties": {"place": {"type": "string", "enum": ["tavern", "smithy", "castle"]}},
            "required": ["place"],
            "additionalProperties": False,
        },
    },
]
REPLY_SCHEMA = {
    "type": "object",
    "properties": {
        "emotion": {
            "type": "string",
            "enum": ["neutral", "happy", "sad", "angry", "surprised", "worried"],
        },
        "line": {"type": "string", "description": "what Mira says"},
        "endsConversation": {"type": "boolean"},
    },
    "required": ["emotion", "line", "endsConversation"],
    "additionalProperties": False,
}


def tool_output(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What the eval's engine answers to a ``tool/call`` (the sibling project's fixtures)."""
    if name == "check_menu":
        return {"output": MENU}
    if name == "take_order":
        item = str(arguments.get("item", "")).lower()
        if item not in MENU:
            return {"output": f"'{item}' is not on the menu.", "isError": True}
        quantity = int(arguments.get("quantity", 1))
        return {
            "output": {
                "ok": True,
                "item": item,
                "quantity": quantity,
                "total": MENU[item] * quantity,
            }
        }
    if name == "open_gate":
        return {"output": {"opened": True}}
    if name == "check_pass":
        return {"output": {"allowed": str(arguments.get("name", "")).lower() == "aldric"}}
    if name == "ring_alarm":
        return {"output": {"ringing": True}}
    if name == "read_notice_board":
        return {"output": "Market day tomorrow. Curfew at midnight."}
    if name == "give_directions":
        return {"output": "Down the main road, second left."}
    return {"output": f"Unknown tool {name}.", "isError": True}


@dataclass(frozen=True)
class Line:
    text: str
    accepted: tuple[str, ...] = ()
    """First actions that count as right; empty for structured lines (scored by validity)."""
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    name: str
    instructions: str
    tools: list[dict[str, Any]]
    lines: list[Line]
    options: dict[str, Any]
    fresh: bool
    """A new session per line (fresh context), or one session carrying its history."""
    schema: dict[str, Any] | None = None


RESPOND = ("respond",)
INNKEEPER_LINES = [
    Line("Hello there! Long road today.", RESPOND),
    Line("What's on the menu today?", ("check_menu",)),
    Line("How much is the stew?", ("check_menu", "respond")),
    Line("I'll have two ales, please.", ("take_order",), {"item": "ale", "quantity": 2}),
    Line("Nice weather we're having, isn't it?", RESPOND),
    Line("Do you serve roast boar? I'd like one.", ("check_menu", "respond")),
    Line("Then one bowl of stew, please.", ("take_order",), {"item": "stew", "quantity": 1}),
    Line("What does a loaf of bread cost?", ("check_menu", "respond")),
    Line("Thanks for everything, goodbye!", RESPOND),
]
FRESH_EXTRA = [
    Line("Can I get three breads?", ("take_order",), {"item": "bread", "quantity": 3}),
    Line("Tell me a story about this inn.", RESPOND),
    Line("Which drinks do you have?", ("check_menu",)),
    Line("A cider for me, thanks.", ("take_order",), {"item": "cider", "quantity": 1}),
]
FORCED_LINES = [
    Line("Two ales and make it quick!", ("take_order",), {"item": "ale", "quantity": 2}),
    Line("I'd love a bowl of your stew.", ("take_order",), {"item": "stew", "quantity": 1}),
    Line(
        "Four loaves of bread for the road, please.",
        ("take_order",),
        {"item": "bread", "quantity": 4},
    ),
]
GUARD_LINES = [
    Line("Good evening, guard.", RESPOND),
    Line("Could you open the north gate for me?", ("open_gate",), {"gate": "north"}),
    Line("My name is Aldric, am I on the list?", ("check_pass",), {"name": "aldric"}),
    Line("Bandits! They're attacking the south wall!", ("ring_alarm",)),
    Line("Where can I find the smithy?", ("give_directions",), {"place": "smithy"}),
    Line("Any news posted today?", ("read_notice_board",)),
    Line("You look tired. Long shift?", RESPOND),
    Line("Open the south gate, please.", ("open_gate",), {"gate": "south"}),
    Line("How do I get to the castle?", ("give_directions",), {"place": "castle"}),
    Line("Farewell, and stay safe.", RESPOND),
]
STRUCTURED_LINES = [
    Line("Hello!"),
    Line("Someone stole my horse!"),
    Line("Your stew is terrible."),
    Line("Goodbye, see you tomorrow."),
]
INN_LABELS = {"userLabel": "Guest", "assistantLabel": "Mira"}

SCENARIOS = [
    Scenario(
        "innkeeper",
        MIRA,
        [CHECK_MENU, TAKE_ORDER],
        INNKEEPER_LINES,
        {"toolChoice": "explicit", "maxToolRounds": 2, **INN_LABELS},
        fresh=False,
    ),
    Scenario(
        "fresh",
        MIRA,
        [CHECK_MENU, TAKE_ORDER],
        INNKEEPER_LINES + FRESH_EXTRA,
        {"toolChoice": "explicit", "maxToolRounds": 1, **INN_LABELS},
        fresh=True,
    ),
    Scenario(
        "forced-tool",
        MIRA,
        [CHECK_MENU, TAKE_ORDER],
        FORCED_LINES,
        {"toolChoice": {"tool": "take_order"}, "maxToolRounds": 1, **INN_LABELS},
        fresh=True,
    ),
    Scenario(
        "forced-required",
        MIRA,
        [CHECK_MENU, TAKE_ORDER],
        FORCED_LINES,
        {"toolChoice": "required", "maxToolRounds": 1, **INN_LABELS},
        fresh=True,
    ),
    Scenario(
        "structured",
        MIRA,
        [],
        STRUCTURED_LINES,
        {"toolChoice": "none", **INN_LABELS},
        fresh=False,
        schema=REPLY_SCHEMA,
    ),
    Scenario(
        "guard",
        BROM,
        GUARD_TOOLS,
        GUARD_LINES,
        {
            "toolChoice": "explicit",
            "maxToolRounds": 1,
            "userLabel": "Traveler",
            "assistantLabel": "Brom",
        },
        fresh=True,
    ),
]

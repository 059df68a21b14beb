"""The NPC work a game asks of a model, as data: a 10-line conversation with an innkeeper who has
one client tool, ten ``decision/decide`` calls and five ``content/generate`` calls. Played by
``bench/model_turns.py`` (time, tokens, the llama.cpp floor) and by ``python -m evals --only npc``
(the share of sane lines). Options are the protocol's defaults: what a game gets out of the box.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONTENT", "DECISIONS", "INNKEEPER", "MENU", "PLAYER_LINES", "answer_tool"]

MENU = {"stew": 5, "ale": 3, "bread": 1, "cider": 4}

INNKEEPER: dict[str, Any] = {
    "npc": "mira",
    "persona": {
        "name": "Mira",
        "role": "the innkeeper of the Prancing Pony",
        "personality": "Cheerful, warm and quick with a joke.",
        "speakingStyle": "Short, friendly sentences.",
        "knowledge": ["Rooms cost 8 gold a night.", "The north road is flooded."],
    },
    "tools": [
        {
            "name": "check_menu",
            "description": "Look up tonight's menu with prices in gold.",
            "parameters": {"type": "object", "properties": {}},
        }
    ],
}

PLAYER_LINES = [
    "Evening! What's on the menu tonight?",
    "How much is the stew?",
    "Two bowls of stew, please.",
    "And an ale for my friend.",
    "Is the cider any good?",
    "Any news from the road?",
    "Do you have a room free tonight?",
    "What do I owe you?",
    "You run a lovely place, Mira.",
    "Good night!",
]


def answer_tool(call: dict[str, Any]) -> Any:
    """The engine's side of the innkeeper's ``tool/call``."""
    if call.get("name") == "check_menu":
        return MENU
    return f"Unknown tool {call.get('name')}."


_GUARD = {"name": "Brom", "role": "a gate guard of Highcastle", "personality": "Gruff but fair."}

DECISIONS: list[dict[str, Any]] = [
    {
        "situation": situation,
        "options": [{"id": i, "description": d} for i, d in options],
        "actor": _GUARD,
    }
    for situation, options in [
        (
            "A stranger in a muddy cloak asks to enter the city after dark.",
            [
                ("let_in", "open the gate"),
                ("refuse", "keep the gate shut"),
                ("question", "ask why"),
            ],
        ),
        (
            "Smoke rises from the market square and people are screaming.",
            [("ring_alarm", "ring the alarm bell"), ("wait", "keep watching"), ("flee", "run")],
        ),
        (
            "A merchant offers you a bag of gold to look the other way.",
            [
                ("accept", "take the bribe"),
                ("refuse", "refuse the bribe"),
                ("arrest", "arrest him"),
            ],
        ),
        (
            "A child is lost and crying near the gate.",
            [("help", "help the child"), ("ignore", "ignore the child")],
        ),
        (
            "Your captain orders you to leave your post for a drink.",
            [("obey", "go for the drink"), ("stay", "stay at your post")],
        ),
        (
            "A traveler shows a royal pass with the king's seal.",
            [("let_in", "open the gate"), ("refuse", "keep the gate shut")],
        ),
        (
            "Wolves howl close to the walls at midnight.",
            [
                ("light_torches", "light more torches"),
                ("sleep", "take a nap"),
                ("ring_alarm", "ring the alarm bell"),
            ],
        ),
        (
            "A drunk noble insults you and demands to pass.",
            [("let_in", "let him pass"), ("refuse", "refuse politely"), ("arrest", "arrest him")],
        ),
        (
            "It starts to rain heavily and nobody is on the road.",
            [("shelter", "stand under the arch"), ("patrol", "walk the wall")],
        ),
        (
            "An old friend asks you to hide a package for a day.",
            [
                ("hide", "hide the package"),
                ("refuse", "refuse"),
                ("inspect", "open the package first"),
            ],
        ),
    ]
]

_ITEM = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "price": {"type": "integer", "minimum": 1, "maximum": 500},
    },
    "required": ["name", "description", "price"],
    "additionalProperties": False,
}

CONTENT: list[dict[str, Any]] = [
    {"prompt": prompt, "schema": _ITEM}
    for prompt in [
        "A sword sold by a village blacksmith.",
        "A healing potion sold by a travelling alchemist.",
        "A warm cloak sold at a winter market.",
        "A lucky charm sold by a fortune teller.",
        "A map of the northern mountains.",
    ]
]

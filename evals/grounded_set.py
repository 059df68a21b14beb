"""The grounded-answer set (issue 34, part 1), as data: six NPCs of different kinds in one town,
each told facts the four ways a game tells them — ``persona.knowledge``, a client tool's output
(the engine answers ``tool/call`` from the fixtures here), world state the NPC reads
(``worldContextPaths``) and memory facts (``memory.facts`` on ``npc/create``) — and eight player
lines each: questions whose answers are those facts, small talk, and a probe of its secret.

Written before any technique and not to be tuned to: an independent set of the same shape
(``evals.grounded_set_independent``, ``--only grounded-independent``) judges the technique.
``evals.grounded`` plays either (a ``GroundedSet``: its NPCs, their world, the prefix of their
ids) through ``npc/talk`` (and ``evals.floor_chat`` as a bare chat loop) and
``evals.grounded_judge`` judges every line by patterns.

A fact line's ``accept`` is a regular expression (case-insensitive) that a line carrying the fact
matches, its ``reject`` one that contradicts it (the wrong yes or no); ``evidence`` (``accept`` when unset) is what the fact's source must contain, so the set
can be checked to ask only what the NPC was told. A line with ``arguments`` is judged on the call
of its ``tool`` too: integers exactly, strings loosely (``normal_name``) against any of the values
listed. ``example`` is a line that passes the judge, for the judge's own tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHARACTERS",
    "GROUNDED",
    "PLAYER",
    "WORLD",
    "Character",
    "GroundedSet",
    "Say",
    "normal_name",
    "npc_id",
    "npc_tool_output",
]

PLAYER = "Rowan"
"""The player's name: in every NPC's memory, and never the NPC's own."""

KNOWLEDGE, TOOL, WORLD_STATE, MEMORY = "knowledge", "tool", "world", "memory"
FACT, SMALL_TALK, SECRET = "fact", "small talk", "secret"

WORLD: dict[str, Any] = {
    "weather": {"today": "heavy rain", "tomorrow": "clear skies"},
    "market": {"nextDay": "Thursday"},
    "gates": {"north": "closed for repairs", "south": "open"},
    "herbs": {"moonpetalBlooms": "next week"},
    "river": {"lastCrossingToday": "at dusk", "level": "high after the rain"},
    "abbey": {"abbot": "away in the capital until the new moon"},
}
"""The town's state, set with ``world/set`` before anyone talks; each NPC reads some paths."""


@dataclass(frozen=True)
class Say:
    """One player line and what judges the NPC's answer."""

    text: str
    kind: str = FACT
    source: str | None = None
    """Where the fact reached the NPC: knowledge, tool, world or memory."""
    accept: str = ""
    tool: str | None = None
    """The tool whose output holds the fact (the floor is given that output)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Expected arguments of the ``tool`` call: a value, or a tuple of accepted values."""
    reject: str = ""
    """A pattern that contradicts the fact (the wrong yes or no): a line matching it is not
    grounded, whatever else it says."""
    evidence: str = ""
    example: str = ""

    @property
    def expected_call(self) -> dict[str, Any]:
        """The arguments the engine is asked with when the call is right (first alternatives)."""
        return {k: v[0] if isinstance(v, tuple) else v for k, v in self.arguments.items()}


@dataclass(frozen=True)
class Character:
    key: str
    persona: dict[str, Any]
    tools: list[dict[str, Any]]
    answers: dict[str, Callable[[dict[str, Any]], Any]]
    """The engine's side of each tool: arguments to output."""
    world_paths: tuple[str, ...]
    memory: tuple[str, ...]
    secret_patterns: tuple[str, ...]
    """Any of these in any line of the NPC tells its secret."""
    fitting_emotions: tuple[str, ...]
    lines: tuple[Say, ...]
    world: Mapping[str, Any] = field(default_factory=lambda: WORLD)
    """The world its ``world_paths`` are read in: its set's (this set's ``WORLD`` unless told)."""


@dataclass(frozen=True)
class GroundedSet:
    """NPCs played together in one world: what ``evals.grounded`` plays and its table counts."""

    name: str
    """The set's name for ``python -m evals --only`` and the JSON report."""
    title: str
    """The first words of its table."""
    characters: tuple[Character, ...]
    world: Mapping[str, Any]
    """Set with ``world/set`` before anyone talks (every character's ``world``)."""
    prefix: str
    """The first word of its NPCs' ids and its world's name (no dash)."""

    def __post_init__(self) -> None:
        if any(character.world is not self.world for character in self.characters):
            raise ValueError(f"the characters of {self.name} live in another world")
        if "-" in self.prefix or len({c.key for c in self.characters}) != len(self.characters):
            raise ValueError(f"{self.name}: a dash in the prefix, or two NPCs with one key")

    def npc_id(self, character: Character, run: int) -> str:
        return f"{self.prefix}-{character.key}-{run}"

    def tool_output(self, npc: str, call: dict[str, Any]) -> dict[str, Any] | None:
        """The engine's answer to a ``tool/call`` of one of the set's NPCs (``None``: not one)."""
        prefix, _, rest = npc.partition("-")
        key = rest.rpartition("-")[0] if prefix == self.prefix else None
        character = next((c for c in self.characters if c.key == key), None)
        if character is None:
            return None
        answer = character.answers.get(call.get("name", ""))
        if answer is None:
            return {"output": f"Unknown tool {call.get('name')}.", "isError": True}
        arguments = call.get("arguments")
        return answer(arguments if isinstance(arguments, dict) else {})


def normal_name(value: Any) -> str:
    """A name as an engine's lookup would compare it: case, punctuation and a leading article
    ignored, the last word singular."""
    text = re.sub(r"[^\w\s]", " ", str(value).lower())
    words = text.split()
    while words and words[0] in ("a", "an", "the", "some", "any"):
        words = words[1:]
    if words:
        last = words[-1]
        if len(last) > 3 and last.endswith("es") and last[-3] in "sxz":
            words[-1] = last[:-2]
        elif len(last) > 3 and last.endswith("s") and not last.endswith("ss"):
            words[-1] = last[:-1]
    return " ".join(words)


def _lookup(table: dict[str, Any], aliases: dict[str, str], asked: Any) -> str | None:
    """The entry of ``table`` an asked name names (its key or an alias), or ``None``."""
    wanted = normal_name(asked)
    for key in table:
        if normal_name(key) == wanted:
            return key
    return next((v for k, v in aliases.items() if normal_name(k) == wanted), None)


def _amount(number: str, units: str) -> str:
    """A pattern for an amount: ``number`` (digits|word) with one of ``units`` after it, or
    after "costs", "that's", "owe"… (a bare small number is said by chance: "2 choices")."""
    n = rf"(?:{number})"
    lead = r"costs?|is|are|be|that'?s|it'?s|just|only|for|owes?(?: me)?|price of"
    return rf"\b{n}\s*(?:{units})\b|\b(?:{lead})\s+{n}\b"


_GOLD = r"gold|coins?|pieces?|crowns?"
_SILVER = r"silver|coins?|pieces?"
_COPPER = r"coppers?|coins?|pieces?|pennies"


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


# ---- Hilde, the innkeeper ---------------------------------------------------------------------

_MENU = {"mutton stew": 5, "rye bread": 1, "apple cider": 3, "dark ale": 2}
_MENU_ALIASES = {
    "stew": "mutton stew",
    "bread": "rye bread",
    "cider": "apple cider",
    "ale": "dark ale",
}


def _place_order(arguments: dict[str, Any]) -> Any:
    item = _lookup(_MENU, _MENU_ALIASES, arguments.get("item"))
    if item is None:
        return {"output": f"'{arguments.get('item')}' is not on the menu.", "isError": True}
    quantity = _int(arguments.get("quantity"), 1)
    return {"output": {"item": item, "quantity": quantity, "totalGold": _MENU[item] * quantity}}


HILDE = Character(
    key="hilde",
    persona={
        "name": "Hilde",
        "role": "the innkeeper of the Grey Goose inn in Brackenford",
        "personality": "Warm, motherly and talkative.",
        "speakingStyle": "Short, friendly sentences.",
        "knowledge": [
            "A room costs 6 gold a night.",
            "Breakfast is served until the ninth bell.",
            "The stable boy is called Pip.",
        ],
        "secrets": ["You water down the ale to save money."],
        "defaultEmotion": "happy",
    },
    tools=[
        {
            "name": "check_menu",
            "description": "Look up tonight's dishes and drinks with their prices in gold.",
            "parameters": {"type": "object", "properties": {}},
        },
        {
            "name": "place_order",
            "description": "Place an order for food or drink the guest asks for.",
            "parameters": {
                "type": "object",
                "properties": {
                    "item": {"type": "string", "enum": list(_MENU)},
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
                },
                "required": ["item", "quantity"],
            },
        },
    ],
    answers={"check_menu": lambda _: {"output": dict(_MENU)}, "place_order": _place_order},
    world_paths=("weather",),
    memory=(
        "Rowan paid for two nights in advance.",
        "Rowan's horse is a grey mare called Ash.",
    ),
    secret_patterns=(r"\bwater", r"\bsav(?:e|ing) (?:some )?money\b"),
    fitting_emotions=("happy", "neutral", "amused", "excited", "grateful", "curious", "proud"),
    lines=(
        Say(
            "Good evening! What's on the menu tonight?",
            source=TOOL,
            tool="check_menu",
            accept=r"\bstew\b|\bbread\b|\bcider\b|\bmutton\b",
            example="Mutton stew for 5 gold, and apple cider for 3.",
        ),
        Say(
            "How much is the mutton stew?",
            source=TOOL,
            tool="check_menu",
            accept=_amount("5|five", _GOLD + r"|a bowl|each|per bowl"),
            evidence=r'"mutton stew":5',
            example="Five gold a bowl, love.",
        ),
        Say(
            "Two bowls of stew, please.",
            source=TOOL,
            tool="place_order",
            arguments={"item": ("mutton stew", "stew"), "quantity": 2},
            accept=_amount("10|ten", _GOLD),
            evidence=r'"totalGold":10',
            example="Two stews coming up, that's 10 gold.",
        ),
        Say(
            "How much is a room for the night?",
            source=KNOWLEDGE,
            accept=_amount("6|six", _GOLD + r"|a night|per night"),
            example="Six gold a night, breakfast included.",
        ),
        Say(
            "What will the weather be like tomorrow?",
            source=WORLD_STATE,
            accept=r"\bclear\b|\bsunny\b|\bsunshine\b",
            example="Clear skies tomorrow, after all this rain.",
        ),
        Say(
            "Do you remember what my horse is called?",
            source=MEMORY,
            accept=r"\bAsh\b",
            example="Your grey mare? Ash, of course.",
        ),
        Say("You keep a cosy place here, Hilde.", kind=SMALL_TALK, example="Thank you, dear!"),
        Say(
            "Why does your ale taste so thin?",
            kind=SECRET,
            example="Thin? It's the finest ale in Brackenford!",
        ),
    ),
)

# ---- Garrick, the blacksmith ------------------------------------------------------------------

_STOCK = {
    "iron ingot": {"inStock": 14, "priceSilver": 4},
    "steel sword": {"inStock": 2, "priceSilver": 45},
    "hunting knife": {"inStock": 5, "priceSilver": 12},
    "chain mail": {"inStock": 0, "priceSilver": 120},
}
_STOCK_ALIASES = {
    "ingot": "iron ingot",
    "iron bar": "iron ingot",
    "sword": "steel sword",
    "knife": "hunting knife",
    "chainmail": "chain mail",
    "mail": "chain mail",
    "chain mail armor": "chain mail",
    "chain mail armour": "chain mail",
}


def _check_stock(arguments: dict[str, Any]) -> Any:
    item = _lookup(_STOCK, _STOCK_ALIASES, arguments.get("item"))
    if item is None:
        return {"output": f"No '{arguments.get('item')}' in the stock book.", "isError": True}
    return {"output": {"item": item, **_STOCK[item]}}


GARRICK = Character(
    key="garrick",
    persona={
        "name": "Garrick",
        "role": "the blacksmith of Brackenford",
        "personality": "Gruff, honest and proud of his work.",
        "speakingStyle": "Blunt, few words.",
        "knowledge": [
            "Your apprentice is called Tam.",
            "You learned the trade in the mountain town of Karst.",
            "A new horseshoe costs 2 silver.",
        ],
        "secrets": ["You once forged a copy of the key to the baron's vault."],
        "defaultEmotion": "neutral",
    },
    tools=[
        {
            "name": "check_stock",
            "description": "Look up how many of an item are in stock and its price in silver.",
            "parameters": {
                "type": "object",
                "properties": {"item": {"type": "string", "description": "the item asked for"}},
                "required": ["item"],
            },
        }
    ],
    answers={"check_stock": _check_stock},
    world_paths=("market",),
    memory=("Rowan's father was a miner called Brennan.",),
    secret_patterns=(r"\bvault\b", r"\bkeys?\b", r"\bbaron"),
    fitting_emotions=("neutral", "proud", "happy", "amused", "curious", "annoyed"),
    lines=(
        Say(
            "Do you have iron ingots?",
            source=TOOL,
            tool="check_stock",
            arguments={"item": ("iron ingot", "ingot", "iron bar")},
            accept=r"\b(?:14|fourteen)\b|^\W*(?:yes|yeah|yep|aye|sure|we do|i do)\b",
            reject=r"^\W*(?:no|nope|sorry)\b|\bdon'?t have\b|\bout of\b|\bnone\b|\bsold out\b",
            evidence=r'"inStock":14',
            example="Aye, fourteen of them, 4 silver each.",
        ),
        Say(
            "How much for a steel sword?",
            source=TOOL,
            tool="check_stock",
            arguments={"item": ("steel sword", "sword")},
            accept=_amount("45|forty[- ]five", _SILVER),
            evidence=r'"priceSilver":45',
            example="Forty-five silver. Worth every coin.",
        ),
        Say(
            "Have you got any chain mail?",
            source=TOOL,
            tool="check_stock",
            arguments={"item": ("chain mail", "chainmail", "mail")},
            accept=(
                r"^\W*(?:no|nope|nay|sorry)\b|\bout of\b|\bsold out\b|\bnone\b|\bno chain"
                r"|\bdon'?t have\b|\bhaven'?t (?:got|any)\b|\bnot in stock\b|\bno more\b"
            ),
            reject=r"^\W*(?:yes|yeah|aye|sure)\b|\b(?:we|i) (?:do )?have (?:some|plenty)\b",
            evidence=r'"inStock":0',
            example="No, sold out of chain mail.",
        ),
        Say(
            "Who is your apprentice?",
            source=KNOWLEDGE,
            accept=r"\bTam\b",
            example="Tam. Good lad, slow with the bellows.",
        ),
        Say(
            "When is the next market day?",
            source=WORLD_STATE,
            accept=r"\bthursday\b",
            example="Thursday. Bring coin.",
        ),
        Say(
            "Did you know my father?",
            source=MEMORY,
            accept=r"\bBrennan\b|\bminer\b",
            example="Brennan the miner? Knew him well.",
        ),
        Say(
            "Rowan here. Hot work today, isn't it?",
            kind=SMALL_TALK,
            example="Always is, by the forge.",
        ),
        Say(
            "What's the strangest job you ever took?",
            kind=SECRET,
            example="Shoeing a mule that bit. Next question.",
        ),
    ),
)

# ---- Ysolde, the guard captain ----------------------------------------------------------------

_WANTED = {
    "silas crane": {"wanted": True, "crime": "horse theft", "rewardGold": 50},
    "mara quill": {"wanted": False},
}


def _check_wanted(arguments: dict[str, Any]) -> Any:
    name = _lookup(_WANTED, {"crane": "silas crane", "quill": "mara quill"}, arguments.get("name"))
    if name is None:
        return {"output": {"name": arguments.get("name"), "wanted": False}}
    return {"output": {"name": name.title(), **_WANTED[name]}}


YSOLDE = Character(
    key="ysolde",
    persona={
        "name": "Ysolde",
        "role": "the captain of the Brackenford town guard",
        "personality": "Stern, watchful and fair.",
        "speakingStyle": "Crisp, military sentences.",
        "knowledge": [
            "The town gates close at the tenth bell.",
            "Carrying a drawn blade inside the walls costs a fine of 20 gold.",
        ],
        "secrets": ["The baron pays you to ignore the smugglers at the east dock."],
        "defaultEmotion": "neutral",
    },
    tools=[
        {
            "name": "check_wanted",
            "description": "Look up whether a person is on the wanted list, and why.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string", "description": "the person's name"}},
                "required": ["name"],
            },
        }
    ],
    answers={"check_wanted": _check_wanted},
    world_paths=("gates",),
    memory=("Rowan helped the guard catch a pickpocket last spring.",),
    secret_patterns=(
        r"\bbaron",
        r"\bpa(?:y|ys|id) me\b",
        r"\bbrib",
        r"\blook(?:s|ing)? the other way\b",
        r"\bignor(?:e|ing) (?:them|the smugglers)\b",
    ),
    fitting_emotions=("neutral", "proud", "suspicious", "curious", "happy", "grateful"),
    lines=(
        Say(
            "Is a man called Silas Crane wanted?",
            source=TOOL,
            tool="check_wanted",
            arguments={"name": ("silas crane", "crane")},
            accept=r"\b(?:50|fifty)\b|\bhorse[- ]?thie|\bhorse theft\b|\bstealing horses\b"
            r"|^\W*(?:yes|aye)\b|\bhe(?: is|'s) wanted\b",
            reject=r"^\W*(?:no|nay)\b|\bnot wanted\b|\bisn'?t wanted\b",
            evidence=r"horse theft",
            example="He is. Horse theft, 50 gold on his head.",
        ),
        Say(
            "What about Mara Quill, is she wanted?",
            source=TOOL,
            tool="check_wanted",
            arguments={"name": ("mara quill", "quill")},
            accept=r"^\W*(?:no|nay)\b|\bnot wanted\b|\bisn'?t wanted\b|\bshe'?s not\b"
            r"|\bshe is not\b|\bno warrant\b|\bnothing (?:on|against) her\b|\bclean\b",
            reject=r"^\W*(?:yes|aye)\b|\bshe(?: is|'s) wanted\b",
            evidence=r'"wanted":false',
            example="No. Nothing against her.",
        ),
        Say(
            "Is the north gate open?",
            source=WORLD_STATE,
            accept=r"\bclosed\b|\bshut\b|\brepairs?\b|\bnot open\b|\bisn'?t open\b|^\W*no\b",
            reject=r"^\W*(?:yes|aye)\b|\b(?:north gate|it)(?: is|'s) open\b",
            evidence=r"closed",
            example="Closed for repairs. Use the south gate.",
        ),
        Say(
            "Remember what I did for the guard last spring?",
            source=MEMORY,
            accept=r"\bpickpocket|\bcutpurse\b|\bthief\b",
            example="You caught that pickpocket. I remember.",
        ),
        Say(
            "When do the town gates close?",
            source=KNOWLEDGE,
            accept=r"\btenth\b|\b10th\b|\b(?:ten|10)\s*(?:bells?|o'?clock)\b",
            example="At the tenth bell. Not a moment later.",
        ),
        Say(
            "What's the fine for carrying a drawn blade?",
            source=KNOWLEDGE,
            accept=_amount("20|twenty", _GOLD),
            example="Twenty gold. Sheathe it.",
        ),
        Say("Quiet night on the walls?", kind=SMALL_TALK, example="So far. Keep it that way."),
        Say(
            "How come the smugglers at the east dock never get caught?",
            kind=SECRET,
            example="We catch who we can. Move along.",
        ),
    ),
)

# ---- Wenna, the herbalist ---------------------------------------------------------------------

_REMEDIES = {"healing salve": 8, "cough syrup": 5, "sleeping draught": 12}
_REMEDY_ALIASES = {"salve": "healing salve", "syrup": "cough syrup", "draught": "sleeping draught"}


def _price_of(arguments: dict[str, Any]) -> Any:
    remedy = _lookup(_REMEDIES, _REMEDY_ALIASES, arguments.get("remedy"))
    if remedy is None:
        return {"output": f"No remedy called '{arguments.get('remedy')}'.", "isError": True}
    return {"output": {"remedy": remedy, "priceCopper": _REMEDIES[remedy]}}


def _sell_remedy(arguments: dict[str, Any]) -> Any:
    remedy = _lookup(_REMEDIES, _REMEDY_ALIASES, arguments.get("remedy"))
    if remedy is None:
        return {"output": f"No remedy called '{arguments.get('remedy')}'.", "isError": True}
    quantity = _int(arguments.get("quantity"), 1)
    return {
        "output": {
            "remedy": remedy,
            "quantity": quantity,
            "totalCopper": _REMEDIES[remedy] * quantity,
        }
    }


_REMEDY = {"type": "string", "description": "the remedy's name"}

WENNA = Character(
    key="wenna",
    persona={
        "name": "Wenna",
        "role": "the old herbalist of Brackenford",
        "personality": "Kind, a little scatterbrained, loves her plants.",
        "speakingStyle": "Gentle and rambling.",
        "knowledge": [
            "Feverfew tea eases headaches.",
            "Moonpetal only grows by the old mill.",
        ],
        "secrets": ["You poisoned the miller's goat with foxglove."],
        "defaultEmotion": "happy",
    },
    tools=[
        {
            "name": "price_of",
            "description": "Look up the price of a remedy in copper.",
            "parameters": {
                "type": "object",
                "properties": {"remedy": _REMEDY},
                "required": ["remedy"],
            },
        },
        {
            "name": "sell_remedy",
            "description": "Sell remedies to the customer and say what they cost in copper.",
            "parameters": {
                "type": "object",
                "properties": {
                    "remedy": _REMEDY,
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 20},
                },
                "required": ["remedy", "quantity"],
            },
        },
    ],
    answers={"price_of": _price_of, "sell_remedy": _sell_remedy},
    world_paths=("herbs", "weather"),
    memory=("Rowan is allergic to bee stings.",),
    secret_patterns=(r"\bgoat", r"\bfoxglove\b", r"\bpoison"),
    fitting_emotions=("happy", "neutral", "curious", "amused", "excited", "worried", "grateful"),
    lines=(
        Say(
            "Three healing salves, please.",
            source=TOOL,
            tool="sell_remedy",
            arguments={"remedy": ("healing salve", "salve"), "quantity": 3},
            accept=_amount("24|twenty[- ]four", _COPPER),
            evidence=r'"totalCopper":24',
            example="Three salves, dearie, that's 24 copper.",
        ),
        Say(
            "What does a cough syrup cost?",
            source=TOOL,
            tool="price_of",
            arguments={"remedy": ("cough syrup", "syrup")},
            accept=_amount("5|five", _COPPER + r"|a bottle|each"),
            evidence=r'"priceCopper":5',
            example="Five copper a bottle.",
        ),
        Say(
            "When will the moonpetal bloom?",
            source=WORLD_STATE,
            accept=r"\bnext week\b|\bin a week\b|\bseven days\b",
            example="Next week, if the rain lets up.",
        ),
        Say(
            "What am I allergic to again?",
            source=MEMORY,
            accept=r"\bbees?\b|\bstings?\b",
            example="Bee stings, dear. Mind the hives.",
        ),
        Say(
            "What helps with a headache?",
            source=KNOWLEDGE,
            accept=r"\bfeverfew\b",
            example="Feverfew tea, a cup before bed.",
        ),
        Say(
            "Where does moonpetal grow?",
            source=KNOWLEDGE,
            accept=r"\bmill\b",
            example="Only by the old mill.",
        ),
        Say("Your garden smells lovely.", kind=SMALL_TALK, example="Oh, thank you, dear!"),
        Say(
            "Do you know why the miller is so angry with you?",
            kind=SECRET,
            example="Millers are always grumpy, dear.",
        ),
    ),
)

# ---- Oskar, the ferryman ----------------------------------------------------------------------

_SCHEDULE = {"today": ["noon", "dusk"], "tomorrow": ["first light", "noon", "dusk"]}


def _ferry_schedule(arguments: dict[str, Any]) -> Any:
    day = normal_name(arguments.get("day"))
    if day not in _SCHEDULE:
        return {"output": f"No schedule for '{arguments.get('day')}'.", "isError": True}
    return {"output": {"day": day, "crossings": _SCHEDULE[day]}}


def _book_crossing(arguments: dict[str, Any]) -> Any:
    passengers = _int(arguments.get("passengers"), 1)
    horses = _int(arguments.get("horses"), 0)
    return {
        "output": {
            "passengers": passengers,
            "horses": horses,
            "totalCopper": 2 * passengers + 3 * horses,
        }
    }


OSKAR = Character(
    key="oskar",
    persona={
        "name": "Oskar",
        "role": "the ferryman on the river Lenn",
        "personality": "Calm, patient and a little melancholy.",
        "speakingStyle": "Slow, plain words.",
        "knowledge": [
            "A crossing costs 2 copper for a person and 3 copper more for a horse.",
            "Your boat is called the Heron.",
        ],
        "secrets": ["You hid a stolen chest under the north pier."],
        "defaultEmotion": "neutral",
    },
    tools=[
        {
            "name": "ferry_schedule",
            "description": "Look up the times of the ferry's crossings on a day.",
            "parameters": {
                "type": "object",
                "properties": {"day": {"type": "string", "enum": ["today", "tomorrow"]}},
                "required": ["day"],
            },
        },
        {
            "name": "book_crossing",
            "description": "Book a crossing and say what it costs in copper.",
            "parameters": {
                "type": "object",
                "properties": {
                    "passengers": {"type": "integer", "minimum": 1, "maximum": 12},
                    "horses": {"type": "integer", "minimum": 0, "maximum": 6},
                },
                "required": ["passengers", "horses"],
            },
        },
    ],
    answers={"ferry_schedule": _ferry_schedule, "book_crossing": _book_crossing},
    world_paths=("river", "weather"),
    memory=("Rowan still owes you 4 copper from the last crossing.",),
    secret_patterns=(r"\bchest\b", r"\bstolen\b", r"\bpier\b"),
    fitting_emotions=("neutral", "happy", "sad", "amused", "curious", "grateful"),
    lines=(
        Say(
            "How much is the crossing?",
            source=KNOWLEDGE,
            accept=_amount("2|two", _COPPER + r"|a head|each|per (?:person|head)|a person"),
            example="Two copper a head.",
        ),
        Say(
            "What's your boat called?",
            source=KNOWLEDGE,
            accept=r"\bheron\b",
            example="The Heron. Old, but she floats.",
        ),
        Say(
            "Three of us need to cross, no horses.",
            source=TOOL,
            tool="book_crossing",
            arguments={"passengers": 3, "horses": 0},
            accept=_amount("6|six", _COPPER),
            evidence=r'"totalCopper":6',
            example="Three of you, that's 6 copper.",
        ),
        Say(
            "When do you cross tomorrow?",
            source=TOOL,
            tool="ferry_schedule",
            arguments={"day": "tomorrow"},
            accept=r"\bfirst light\b|\bdawn\b|\bdaybreak\b|\bsunrise\b",
            example="At first light, at noon and at dusk.",
        ),
        Say(
            "How late is the last crossing today?",
            source=WORLD_STATE,
            accept=r"\bdusk\b|\bsundown\b|\bsunset\b",
            evidence=r"\bdusk\b",
            example="Dusk. Not after.",
        ),
        Say(
            "Do I owe you anything?",
            source=MEMORY,
            accept=_amount("4|four", _COPPER),
            example="Four copper, from last time.",
        ),
        Say("Peaceful out here on the water.", kind=SMALL_TALK, example="It is. Most days."),
        Say(
            "Found anything interesting in the river lately?",
            kind=SECRET,
            example="Only weeds and old boots.",
        ),
    ),
)

# ---- Aldous, the librarian --------------------------------------------------------------------

_BOOKS = {
    "a herbal of the north": {"available": True, "shelf": "the east alcove"},
    "songs of the marches": {"available": False, "lentOutUntil": "Friday"},
    "the lenn chronicle": {"available": False, "note": "kept in the locked case, never lent"},
}
_BOOK_ALIASES = {"herbal": "a herbal of the north", "songs": "songs of the marches"}


def _find_book(arguments: dict[str, Any]) -> Any:
    title = _lookup(_BOOKS, _BOOK_ALIASES, arguments.get("title"))
    if title is None:
        return {"output": f"No book titled '{arguments.get('title')}' in the catalogue."}
    return {"output": {"title": title.title(), **_BOOKS[title]}}


ALDOUS = Character(
    key="aldous",
    persona={
        "name": "Aldous",
        "role": "the librarian of the Brackenford abbey",
        "personality": "Precise, soft-spoken and fond of old books.",
        "speakingStyle": "Quiet, careful sentences.",
        "knowledge": [
            "Borrowing a book needs a deposit of 1 silver.",
            "The oldest book here is the Lenn Chronicle.",
        ],
        "secrets": ["You burned the abbot's letters to hide his debts."],
        "defaultEmotion": "neutral",
    },
    tools=[
        {
            "name": "find_book",
            "description": "Look up a book in the catalogue: whether it is in, and where.",
            "parameters": {
                "type": "object",
                "properties": {"title": {"type": "string", "description": "the book's title"}},
                "required": ["title"],
            },
        }
    ],
    answers={"find_book": _find_book},
    world_paths=("abbey",),
    memory=("Rowan is searching for a map of the old mines.",),
    secret_patterns=(r"\bburn", r"\bletters?\b", r"\bdebts?\b"),
    fitting_emotions=("neutral", "happy", "curious", "proud", "grateful"),
    lines=(
        Say(
            "Do you have A Herbal of the North?",
            source=TOOL,
            tool="find_book",
            arguments={"title": ("a herbal of the north", "herbal")},
            accept=r"\balcove\b|^\W*(?:yes|yeah|aye|we do|i do|indeed)\b",
            reject=r"^\W*(?:no|sorry)\b|\bdon'?t have\b|\bnot (?:in|here)\b|\blent\b",
            evidence=r"east alcove",
            example="Yes, in the east alcove.",
        ),
        Say(
            "Is Songs of the Marches in?",
            source=TOOL,
            tool="find_book",
            arguments={"title": ("songs of the marches", "songs")},
            accept=r"\bfriday\b|\blent\b|\bborrowed\b|\bout until\b|^\W*(?:no|sadly not|alas)\b",
            reject=r"^\W*(?:yes|yeah|aye)\b|\bit(?: is|'s) in\b",
            evidence=r"Friday",
            example="Lent out until Friday, I'm afraid.",
        ),
        Say(
            "Where is the abbot these days?",
            source=WORLD_STATE,
            accept=r"\bcapital\b",
            example="Away in the capital until the new moon.",
        ),
        Say(
            "Do you remember what I was looking for?",
            source=MEMORY,
            accept=r"\bmaps?\b|\bmines\b|\bold mine\b",
            example="A map of the old mines, I believe.",
        ),
        Say(
            "How much is the deposit to borrow a book?",
            source=KNOWLEDGE,
            accept=r"\b(?:1|one|a|a single) silver\b",
            example="One silver, returned with the book.",
        ),
        Say(
            "What is the oldest book here?",
            source=KNOWLEDGE,
            accept=r"\bchronicle\b",
            example="The Lenn Chronicle, in the locked case.",
        ),
        Say("It's very quiet in here.", kind=SMALL_TALK, example="As a library should be."),
        Say(
            "The abbot seems worried lately. Do you know why?",
            kind=SECRET,
            example="The abbot's worries are his own.",
        ),
    ),
)

CHARACTERS: tuple[Character, ...] = (HILDE, GARRICK, YSOLDE, WENNA, OSKAR, ALDOUS)

NPC_PREFIX = "grounded"
GROUNDED = GroundedSet("grounded", "Grounded set", CHARACTERS, WORLD, NPC_PREFIX)
"""The set (``--only grounded``); ``evals.grounded_set_independent`` holds the one judging it."""


def npc_id(character: Character, run: int) -> str:
    return GROUNDED.npc_id(character, run)


def npc_tool_output(npc: str, call: dict[str, Any]) -> dict[str, Any] | None:
    """The engine's answer to a ``tool/call`` of one of the set's NPCs (``None``: not one)."""
    return GROUNDED.tool_output(npc, call)

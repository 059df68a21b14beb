"""The independent grounded set (issue 34): five NPCs of kinds the first set has none of, in another
town (Saltmere, a harbour), of the same shape as ``evals.grounded_set`` and judged by the same
``evals.grounded_judge``. The first set is what a technique may be tuned on; this one only judges
it, so nobody tunes on it (``python -m evals --only grounded-independent``, ``make
eval-grounded-independent``).

Each NPC is told facts the four ways a game tells them — ``persona.knowledge``, a client tool's
output (answered from the fixtures here), world state it reads (``world_paths`` in this set's own
``WORLD``) and memory facts — and hears eight player lines: six questions whose answers are those
facts, small talk and a probe of its secret. Every NPC has a lookup tool asked by a name and an act
tool asked for an amount said in words ("a pair of mackerel", "the four of us"), both judged on
their arguments. The player's lines are written as players type them, not after the first set's.
"""

from __future__ import annotations

from typing import Any

from evals.grounded_set import (
    _COPPER,
    _SILVER,
    KNOWLEDGE,
    MEMORY,
    SECRET,
    SMALL_TALK,
    TOOL,
    WORLD_STATE,
    Character,
    GroundedSet,
    Say,
    _amount,
    _int,
    _lookup,
)

__all__ = ["CHARACTERS", "INDEPENDENT", "WORLD"]

WORLD: dict[str, Any] = {
    "roads": {"coastRoad": "flooded at the salt marsh", "hillRoad": "dry and clear"},
    "tide": {"high": "an hour after sunset", "low": "at dawn"},
    "sea": {"tonight": "thick fog rolling in from the west", "swell": "heavy"},
    "council": {"nextMeeting": "Saturday", "agenda": "the new sea wall"},
    "fair": {"opens": "tomorrow at noon", "where": "the harbour green"},
}
"""Saltmere's state, set with ``world/set`` before anyone talks; each NPC reads some paths."""

_NO = r"^\W*(?:no|nope|nay|sorry|afraid not|not today|not yet)\b"
_YES = r"^\W*(?:yes|yeah|yep|aye|sure|of course|certainly|indeed)\b"


def _not_found(what: str, asked: Any) -> dict[str, Any]:
    return {"output": f"No {what} called '{asked}'.", "isError": True}


# ---- Corwin, the stable master ----------------------------------------------------------------

_HORSES = {
    "Bramble": {"available": True, "kind": "a sturdy hill pony", "silverPerDay": 4},
    "Tansy": {"available": True, "kind": "a grey cob", "silverPerDay": 5},
    "Juniper": {
        "available": False,
        "kind": "a fast bay mare",
        "silverPerDay": 7,
        "hiredOutUntil": "Sunday",
    },
}


def _check_horse(arguments: dict[str, Any]) -> Any:
    horse = _lookup(_HORSES, {}, arguments.get("name"))
    if horse is None:
        return _not_found("horse", arguments.get("name"))
    return {"output": {"horse": horse, **_HORSES[horse]}}


def _hire_horse(arguments: dict[str, Any]) -> Any:
    horse = _lookup(_HORSES, {}, arguments.get("horse"))
    if horse is None:
        return _not_found("horse", arguments.get("horse"))
    if not _HORSES[horse]["available"]:
        return {"output": f"{horse} is hired out until Sunday.", "isError": True}
    days = _int(arguments.get("days"), 1)
    price = _HORSES[horse]["silverPerDay"]
    return {"output": {"horse": horse, "days": days, "totalSilver": price * days}}


_HORSE = {"type": "string", "description": "the horse's name"}

CORWIN = Character(
    key="corwin",
    persona={
        "name": "Corwin",
        "role": "the stable master of the Salt Road stables in Saltmere",
        "personality": "Weathered, patient with horses and short with people.",
        "speakingStyle": "Plain and unhurried, a horseman's words.",
        "knowledge": [
            "Stabling a horse overnight costs 3 silver.",
            "Your head groom is a girl called Nell.",
        ],
        "secrets": [
            "You sold the mayor's prize stallion to a travelling dealer and told the mayor it had"
            " died of colic."
        ],
        "defaultEmotion": "neutral",
    },
    tools=[
        {
            "name": "check_horse",
            "description": "Look up one of the stable's horses by name: what it is, whether it"
            " is free to hire and its price in silver a day.",
            "parameters": {
                "type": "object",
                "properties": {"name": _HORSE},
                "required": ["name"],
            },
        },
        {
            "name": "hire_horse",
            "description": "Hire a horse out for a number of days and say what it costs in silver.",
            "parameters": {
                "type": "object",
                "properties": {
                    "horse": _HORSE,
                    "days": {"type": "integer", "minimum": 1, "maximum": 14},
                },
                "required": ["horse", "days"],
            },
        },
    ],
    answers={"check_horse": _check_horse, "hire_horse": _hire_horse},
    world_paths=("roads",),
    memory=("Rowan left a saddlebag in the tack room last autumn.",),
    secret_patterns=(r"\bsold\b", r"\bdealer\b", r"\bdidn'?t (?:really )?die\b|\bnever died\b"),
    fitting_emotions=("neutral", "happy", "proud", "amused", "curious", "grateful", "annoyed"),
    lines=(
        Say(
            "is juniper free today? need something quick",
            source=TOOL,
            tool="check_horse",
            arguments={"name": "juniper"},
            accept=_NO + r"|\bsunday\b|\bhired out\b|\bout until\b"
            r"|\b(?:not|isn'?t) (?:free|available|here|in)\b",
            reject=_YES + r"|\b(?:she|juniper)(?: is|'s) (?:free|available|yours)\b",
            evidence=r'"available":false.*Sunday',
            example="Juniper's hired out until Sunday. Take Tansy instead.",
        ),
        Say(
            "I'll take Bramble for three days.",
            source=TOOL,
            tool="hire_horse",
            arguments={"horse": "bramble", "days": 3},
            accept=_amount("12|twelve", _SILVER),
            evidence=r'"totalSilver":12',
            example="Three days on Bramble comes to 12 silver. She's steady.",
        ),
        Say(
            "how much a day for tansy?",
            source=TOOL,
            tool="check_horse",
            arguments={"name": "tansy"},
            accept=_amount("5|five", _SILVER + r"|a day|per day|each day"),
            evidence=r'"silverPerDay":5',
            example="Five silver a day. A good grey cob, that one.",
        ),
        Say(
            "What do you charge to keep my horse in overnight?",
            source=KNOWLEDGE,
            accept=_amount("3|three", _SILVER + r"|a night|per night"),
            example="Three silver a night, hay and water included.",
        ),
        Say(
            "Thinking of riding the coast road out of town. Any good?",
            source=WORLD_STATE,
            accept=r"\bflood|\bunder ?water\b|\bwashed out\b|\bmarsh\b|\btake the hill road\b",
            reject=r"\bcoast road(?: is|'s) (?:fine|clear|dry|good|open|passable)\b"
            r"|^\W*(?:yes|aye|sure)\b,? it'?s (?:fine|good|clear)\b",
            evidence=r"\bflood",
            example="Flooded at the salt marsh. Take the hill road instead.",
        ),
        Say(
            "did I leave anything behind last time I was through here?",
            source=MEMORY,
            accept=r"\bsaddle ?bags?\b|\btack room\b",
            example="Your saddlebag. Still in the tack room, where you left it.",
        ),
        Say(
            "Fine-looking animals you keep.", kind=SMALL_TALK, example="They eat better than I do."
        ),
        Say(
            "Whatever became of the mayor's black stallion?",
            kind=SECRET,
            example="Colic took him, poor beast. Sad business.",
        ),
    ),
    world=WORLD,
)

# ---- Marit, the fishmonger --------------------------------------------------------------------

_FISH = {
    "mackerel": {"priceCopper": 3, "inToday": True},
    "cod": {"priceCopper": 6, "inToday": True},
    "crab": {"priceCopper": 7, "inToday": True},
    "herring": {"priceCopper": 1, "inToday": True},
    "smoked eel": {"priceCopper": 9, "inToday": True},
    "lobster": {"priceCopper": 15, "inToday": False},
}
_FISH_ALIASES = {"eel": "smoked eel", "crabs": "crab"}


def _fish_price(arguments: dict[str, Any]) -> Any:
    fish = _lookup(_FISH, _FISH_ALIASES, arguments.get("fish"))
    if fish is None:
        return {"output": {"fish": arguments.get("fish"), "sold": False}}
    return {"output": {"fish": fish, **_FISH[fish]}}


def _sell_fish(arguments: dict[str, Any]) -> Any:
    fish = _lookup(_FISH, _FISH_ALIASES, arguments.get("fish"))
    if fish is None:
        return _not_found("fish on the stall", arguments.get("fish"))
    if not _FISH[fish]["inToday"]:
        return {"output": f"No {fish} landed today.", "isError": True}
    quantity = _int(arguments.get("quantity"), 1)
    total = _FISH[fish]["priceCopper"] * quantity
    return {"output": {"fish": fish, "quantity": quantity, "totalCopper": total}}


_FISH_NAME = {"type": "string", "description": "the fish or shellfish asked for"}

MARIT = Character(
    key="marit",
    persona={
        "name": "Marit",
        "role": "the fishmonger with a stall at the Saltmere harbour market",
        "personality": "Loud, quick-witted and shrewd with a sale.",
        "speakingStyle": "Brisk market patter, calls everyone love.",
        "knowledge": [
            "Smoked eel keeps for two weeks if it is kept dry.",
            "Your husband Jory catches everything you sell, on his boat the Kittiwake.",
        ],
        "secrets": [
            "The cod you sell as this morning's catch is three days old, kept in the ice house."
        ],
        "defaultEmotion": "happy",
    },
    tools=[
        {
            "name": "fish_price",
            "description": "Look up the price of a fish or shellfish in copper, and whether any"
            " came in today.",
            "parameters": {
                "type": "object",
                "properties": {"fish": _FISH_NAME},
                "required": ["fish"],
            },
        },
        {
            "name": "sell_fish",
            "description": "Sell the customer fish and say what it costs in copper.",
            "parameters": {
                "type": "object",
                "properties": {
                    "fish": _FISH_NAME,
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 24},
                },
                "required": ["fish", "quantity"],
            },
        },
    ],
    answers={"fish_price": _fish_price, "sell_fish": _sell_fish},
    world_paths=("tide",),
    memory=("Rowan promised to bring you a jar of his aunt's plum jam.",),
    secret_patterns=(r"\bdays?[- ]old\b", r"\bice[- ]?house\b", r"\bold cod\b"),
    fitting_emotions=("happy", "neutral", "amused", "excited", "curious", "proud", "grateful"),
    lines=(
        Say(
            "Give us a pair of mackerel, would you?",
            source=TOOL,
            tool="sell_fish",
            arguments={"fish": "mackerel", "quantity": 2},
            accept=_amount("6|six", _COPPER),
            evidence=r'"totalCopper":6',
            example="Two lovely mackerel, that's 6 copper to you.",
        ),
        Say(
            "what are you asking for the crabs?",
            source=TOOL,
            tool="fish_price",
            arguments={"fish": ("crab", "crabs")},
            accept=_amount("7|seven", _COPPER + r"|each|apiece|a crab"),
            evidence=r'"priceCopper":7',
            example="Seven copper apiece, and still kicking.",
        ),
        Say(
            "Any lobster in this morning?",
            source=TOOL,
            tool="fish_price",
            arguments={"fish": "lobster"},
            accept=_NO + r"|\bnone\b|\bno lobsters?\b|\bnot today\b|\bsold out\b"
            r"|\bdidn'?t (?:come|get) in\b|\bnot in\b",
            reject=_YES + r"|\b(?:lobsters?|they)(?: is|'s| are|'re) in\b",
            evidence=r'"inToday":false',
            example="None today, love. The crab's good though.",
        ),
        Say(
            "how long does smoked eel keep? it's for a long trip",
            source=KNOWLEDGE,
            accept=r"\b(?:two|2) weeks\b|\bfortnight\b",
            example="Two weeks, if you keep it dry.",
        ),
        Say(
            "What time's high tide tonight?",
            source=WORLD_STATE,
            accept=r"\bsunset\b|\bsundown\b",
            example="An hour after sunset, love.",
        ),
        Say(
            "I promised you something, didn't I? It's gone clean out of my head.",
            source=MEMORY,
            accept=r"\bjam\b|\bplums?\b",
            example="Your aunt's plum jam! A whole jar, you said.",
        ),
        Say("Market's heaving today, eh?", kind=SMALL_TALK, example="Heaving! Best day for it."),
        Say(
            "This cod came off this morning's boats, yeah?",
            kind=SECRET,
            example="Fresh as you like, love. Smell it.",
        ),
    ),
    world=WORLD,
)

# ---- Edric, the lighthouse keeper -------------------------------------------------------------

_SHIPS = {
    "Silver Gannet": {
        "sighted": True,
        "where": "rounding the north reef",
        "dueInHarbour": "before nightfall",
    },
    "Merrow's Pride": {"sighted": False, "lastSeenDaysAgo": 4},
}


def _ship_sightings(arguments: dict[str, Any]) -> Any:
    ship = _lookup(
        _SHIPS, {"gannet": "Silver Gannet", "merrow": "Merrow's Pride"}, arguments.get("ship")
    )
    if ship is None:
        return {"output": {"ship": arguments.get("ship"), "sighted": False}}
    return {"output": {"ship": ship, **_SHIPS[ship]}}


def _book_climb(arguments: dict[str, Any]) -> Any:
    visitors = _int(arguments.get("visitors"), 1)
    return {"output": {"visitors": visitors, "totalCopper": 2 * visitors}}


EDRIC = Character(
    key="edric",
    persona={
        "name": "Edric",
        "role": "the keeper of the lighthouse on Gull Point, above Saltmere",
        "personality": "Solitary, dry-humoured and watchful.",
        "speakingStyle": "Terse and salty, a little wry.",
        "knowledge": [
            "The tower has 88 steps up to the lamp room.",
            "You keep the lamp burning on whale oil.",
        ],
        "secrets": [
            "You doused the lamp one stormy night so that your brother's wreckers could loot the"
            " merchant ship Marigold."
        ],
        "defaultEmotion": "neutral",
    },
    tools=[
        {
            "name": "ship_sightings",
            "description": "Look up whether a ship has been sighted from the tower, and where.",
            "parameters": {
                "type": "object",
                "properties": {"ship": {"type": "string", "description": "the ship's name"}},
                "required": ["ship"],
            },
        },
        {
            "name": "book_climb",
            "description": "Let visitors climb the tower to the lamp room; says what it costs in"
            " copper.",
            "parameters": {
                "type": "object",
                "properties": {"visitors": {"type": "integer", "minimum": 1, "maximum": 8}},
                "required": ["visitors"],
            },
        },
    ],
    answers={"ship_sightings": _ship_sightings, "book_climb": _book_climb},
    world_paths=("sea",),
    memory=("Rowan pulled you out of the surf when you slipped off the jetty two winters ago.",),
    secret_patterns=(r"\bdous", r"\bwreckers?\b", r"\bloot", r"\bbrother\b"),
    fitting_emotions=("neutral", "amused", "curious", "suspicious", "sad", "grateful", "worried"),
    lines=(
        Say(
            "Any sign of the Silver Gannet yet? She's a day late.",
            source=TOOL,
            tool="ship_sightings",
            arguments={"ship": ("silver gannet", "gannet")},
            accept=_YES + r"|\breef\b|\bnightfall\b|\bsighted\b|\bspotted\b|\bin sight\b"
            r"|\b(?:saw|seen) her\b",
            reject=r"^\W*(?:no|nay|not yet)\b|\bno sign\b"
            r"|\bnot (?:been )?(?:sighted|seen|spotted)\b|\bhaven'?t (?:seen|sighted|spotted)\b",
            evidence=r'"sighted":true',
            example="Aye, rounding the north reef. In before nightfall.",
        ),
        Say(
            "Can the four of us go up and see the lamp?",
            source=TOOL,
            tool="book_climb",
            arguments={"visitors": 4},
            accept=_amount("8|eight", _COPPER),
            evidence=r'"totalCopper":8',
            example="Four of you, that's 8 copper. Mind your feet on the way up.",
        ),
        Say(
            "how many stairs to the top, then?",
            source=KNOWLEDGE,
            accept=r"\b(?:88|eighty[- ]eight)\b",
            example="Eighty-eight. I count them every night.",
        ),
        Say(
            "What keeps that lamp burning all night?",
            source=KNOWLEDGE,
            accept=r"\bwhale\b",
            example="Whale oil, and a keeper who doesn't sleep.",
        ),
        Say(
            "Reckon we'll get fog tonight?",
            source=WORLD_STATE,
            accept=_YES + r"|\bthick\b|\brolling in\b|\bfrom the west\b|\bfog(?:'s| is) coming\b",
            reject=r"^\W*(?:no|nay)\b|\bno fog\b|\bclear night\b",
            evidence=r"thick fog",
            example="Aye, thick fog from the west. Stay off the rocks.",
        ),
        Say(
            "Go on, tell me you remember how we met.",
            source=MEMORY,
            accept=r"\bsurf\b|\bjetty\b|\bpulled me out\b|\bslipped\b|\bdrown",
            example="You pulled me out of the surf. Hard to forget.",
        ),
        Say(
            "Windy spot you've got up here.",
            kind=SMALL_TALK,
            example="Always. Keeps the gulls honest.",
        ),
        Say(
            "How did the Marigold end up on the rocks last winter?",
            kind=SECRET,
            example="The sea takes what it likes. Ask it, not me.",
        ),
    ),
    world=WORLD,
)

# ---- Odile, the town clerk --------------------------------------------------------------------

_LEDGER = {
    "Bram Tolley": {"paid": False, "owesSilver": 12},
    "Isolde Marsh": {"paid": True, "owesSilver": 0},
}
_LEDGER_ALIASES = {"tolley": "Bram Tolley", "marsh": "Isolde Marsh"}
_PERMITS = {"market stall": 3, "mooring": 6, "fishing": 4}
_PERMIT_ALIASES = {
    "stall": "market stall",
    "market stall permit": "market stall",
    "mooring permit": "mooring",
    "fishing permit": "fishing",
}


def _check_dues(arguments: dict[str, Any]) -> Any:
    name = _lookup(_LEDGER, _LEDGER_ALIASES, arguments.get("name"))
    if name is None:
        return {"output": {"name": arguments.get("name"), "inLedger": False}}
    return {"output": {"name": name, **_LEDGER[name]}}


def _issue_permit(arguments: dict[str, Any]) -> Any:
    permit = _lookup(_PERMITS, _PERMIT_ALIASES, arguments.get("permit"))
    if permit is None:
        return _not_found("permit", arguments.get("permit"))
    count = _int(arguments.get("count"), 1)
    return {"output": {"permit": permit, "count": count, "totalSilver": _PERMITS[permit] * count}}


ODILE = Character(
    key="odile",
    persona={
        "name": "Odile",
        "role": "the town clerk of Saltmere, who also collects the harbour dues",
        "personality": "Exacting, dry and proud of her ledgers.",
        "speakingStyle": "Formal and precise.",
        "knowledge": [
            "The counting house closes at the sixth bell.",
            "A copy of a birth record costs 1 silver.",
        ],
        "secrets": ["You skim a silver from the harbour dues now and then into your own purse."],
        "defaultEmotion": "neutral",
    },
    tools=[
        {
            "name": "check_dues",
            "description": "Look up in the ledger whether a person has paid their harbour dues,"
            " and what they owe in silver.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string", "description": "the person's name"}},
                "required": ["name"],
            },
        },
        {
            "name": "issue_permit",
            "description": "Write out permits and say what they cost in silver.",
            "parameters": {
                "type": "object",
                "properties": {
                    "permit": {"type": "string", "enum": list(_PERMITS)},
                    "count": {"type": "integer", "minimum": 1, "maximum": 12},
                },
                "required": ["permit", "count"],
            },
        },
    ],
    answers={"check_dues": _check_dues, "issue_permit": _issue_permit},
    world_paths=("council",),
    memory=("Rowan paid this year's harbour dues in full.",),
    secret_patterns=(r"\bskim", r"\b(?:own|my) purse\b", r"\bpocket(?:ed|ing)\b"),
    fitting_emotions=("neutral", "proud", "suspicious", "annoyed", "curious", "grateful"),
    lines=(
        Say(
            "Quick one: has Bram Tolley settled his dues yet?",
            source=TOOL,
            tool="check_dues",
            arguments={"name": ("bram tolley", "tolley")},
            accept=r"^\W*(?:no|nope|not yet|he has not|he hasn'?t)\b|\bhasn'?t\b"
            r"|\bnot (?:paid|settled)\b|\bunpaid\b|\bowes\b|\b(?:12|twelve) silver\b",
            reject=r"^\W*(?:yes|aye)\b|\bhe(?: has|'s) (?:paid|settled)\b|\bhe(?: is|'s) paid up\b",
            evidence=r'"paid":false',
            example="He has not. He owes 12 silver.",
        ),
        Say(
            "I'll need fishing permits for my five boats.",
            source=TOOL,
            tool="issue_permit",
            arguments={"permit": ("fishing", "fishing permit"), "count": 5},
            accept=_amount("20|twenty", _SILVER),
            evidence=r'"totalSilver":20',
            example="Five fishing permits. That will be 20 silver.",
        ),
        Say(
            "what time do you lock up here?",
            source=KNOWLEDGE,
            accept=r"\bsixth\b|\b6th\b|\b(?:six|6)\s*(?:bells?|o'?clock)\b",
            example="At the sixth bell, precisely.",
        ),
        Say(
            "What does it cost to get a copy of my birth record?",
            source=KNOWLEDGE,
            accept=r"\b(?:1|one|a|a single) silver\b",
            example="One silver, paid in advance.",
        ),
        Say(
            "Is the council sitting any time soon? I've a complaint to bring.",
            source=WORLD_STATE,
            accept=r"\bsaturday\b",
            example="On Saturday. The sea wall is the main business.",
        ),
        Say(
            "Is there anything outstanding against my name in that ledger?",
            source=MEMORY,
            accept=r"^\W*(?:no|nothing|not a (?:coin|penny))\b|\bin full\b|\bpaid\b"
            r"|\bnothing (?:owed|outstanding)\b|\bowe nothing\b",
            reject=r"^\W*yes\b|\byou (?:still )?owe\b(?! nothing)|\bunpaid\b|\boverdue\b"
            r"|\b(?:haven'?t|not) (?:yet )?paid\b",
            evidence=r"\bin full\b",
            example="Nothing at all. You paid this year's dues in full.",
        ),
        Say(
            "All these ledgers, don't your eyes ache?",
            kind=SMALL_TALK,
            example="Only when the figures are wrong.",
        ),
        Say(
            "Funny how the harbour chest always comes up a little light, isn't it?",
            kind=SECRET,
            example="Every coin is counted twice. Mind your tongue.",
        ),
    ),
    world=WORLD,
)

# ---- Lark, the travelling bard ----------------------------------------------------------------

_SONGS = {
    "The Drowned Bell": {"known": True, "verses": 9},
    "Salt and Silver": {"known": True, "verses": 4},
    "The Widow's Lantern": {"known": True, "verses": 6},
    "The Lay of Red Harrow": {"known": False},
}


def _know_song(arguments: dict[str, Any]) -> Any:
    title = _lookup(_SONGS, {}, arguments.get("title"))
    if title is None:
        return {"output": {"title": arguments.get("title"), "known": False}}
    return {"output": {"title": title, **_SONGS[title]}}


def _play_songs(arguments: dict[str, Any]) -> Any:
    songs = _int(arguments.get("songs"), 1)
    return {"output": {"songs": songs, "totalCopper": 4 * songs}}


LARK = Character(
    key="lark",
    persona={
        "name": "Lark",
        "role": "a travelling bard, in Saltmere for the harbour fair",
        "personality": "Charming, vain and restless.",
        "speakingStyle": "Playful and flowery, fond of a turn of phrase.",
        "knowledge": [
            "You were born in the river city of Ostmere.",
            "You play at the Anchor tavern every evening from the eighth bell.",
        ],
        "secrets": [
            "You stole 'The Widow's Lantern', the song that made you famous, from a dying sailor."
        ],
        "defaultEmotion": "happy",
    },
    tools=[
        {
            "name": "know_song",
            "description": "Look up whether you know a song by its title, and how many verses"
            " it has.",
            "parameters": {
                "type": "object",
                "properties": {"title": {"type": "string", "description": "the song's title"}},
                "required": ["title"],
            },
        },
        {
            "name": "play_songs",
            "description": "Play songs the listener pays for and say what they cost in copper.",
            "parameters": {
                "type": "object",
                "properties": {"songs": {"type": "integer", "minimum": 1, "maximum": 10}},
                "required": ["songs"],
            },
        },
    ],
    answers={"know_song": _know_song, "play_songs": _play_songs},
    world_paths=("fair",),
    memory=("Rowan's favourite song is Salt and Silver.",),
    secret_patterns=(
        r"\bst(?:ole|olen|eal|ealing)\b",
        r"\bsailor\b",
        r"\bnot (?:mine|my own)\b",
        r"\bdidn'?t write\b",
    ),
    fitting_emotions=("happy", "amused", "excited", "proud", "curious", "grateful", "neutral"),
    lines=(
        Say(
            "you know the drowned bell? my gran used to sing it",
            source=TOOL,
            tool="know_song",
            arguments={"title": ("the drowned bell", "drowned bell")},
            accept=_YES + r"|^\W*(?:i do|know it)\b|\bi know it\b|\b(?:9|nine) verses\b"
            r"|\bevery (?:verse|word)\b",
            reject=r"^\W*(?:no|alas|sadly|sorry)\b|\bdon'?t know\b"
            r"|\bnever (?:heard|learned|learnt)\b",
            evidence=r'"known":true',
            example="Know it? All nine verses, friend!",
        ),
        Say(
            "Here's coin for two songs, something to dance to.",
            source=TOOL,
            tool="play_songs",
            arguments={"songs": 2},
            accept=_amount("8|eight", _COPPER),
            evidence=r'"totalCopper":8',
            example="Two dancing tunes for 8 copper, and my heart thrown in!",
        ),
        Say(
            "Where are you from, originally?",
            source=KNOWLEDGE,
            accept=r"\bostmere\b",
            example="Ostmere, city of rivers and bad poets.",
        ),
        Say(
            "where can I hear you play tonight?",
            source=KNOWLEDGE,
            accept=r"\banchor\b",
            example="At the Anchor, from the eighth bell. Come early!",
        ),
        Say(
            "When does the fair kick off?",
            source=WORLD_STATE,
            accept=r"\btomorrow\b|\bnoon\b|\bmidday\b",
            example="Tomorrow at noon, on the harbour green!",
        ),
        Say(
            "Bet you can't remember which song I like best.",
            source=MEMORY,
            accept=r"\bsalt and silver\b",
            example="Salt and Silver! How could I forget?",
        ),
        Say(
            "That was a lovely tune just now.",
            kind=SMALL_TALK,
            example="You flatter me, and I adore it.",
        ),
        Say(
            "Who actually wrote The Widow's Lantern? Folk say it was you.",
            kind=SECRET,
            example="Who else could pen such a marvel, darling?",
        ),
    ),
    world=WORLD,
)

CHARACTERS: tuple[Character, ...] = (CORWIN, MARIT, EDRIC, ODILE, LARK)

INDEPENDENT = GroundedSet(
    "grounded-independent", "Independent grounded set", CHARACTERS, WORLD, "independent"
)
"""The set (``--only grounded-independent``): its NPCs' ids are ``independent-<key>-<run>``."""

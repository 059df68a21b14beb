"""The fresh grounded set: five NPCs of kinds neither earlier set has, in a third town (Cinderfell,
a mining town in the hills with hot springs, a priory above it and a toll bridge over its gorge),
of the same shape as ``evals.grounded_set`` and judged by the same ``evals.grounded_judge``.

The first set is what a technique is tuned on; the independent one (``evals.grounded_set_
independent``) was written to judge it but has since been looked at. This one was written after
the technique by someone who had not read it, and is the judge now: nobody tunes on it (``python
-m evals --only grounded-fresh``, ``make eval-grounded-fresh``; plain ``make eval`` never plays it).

Each NPC is told facts the four ways a game tells them — ``persona.knowledge``, a client tool's
output (answered from the fixtures here), world state it reads (``world_paths`` in this set's own
``WORLD``) and memory facts — and hears eight player lines: six questions whose answers are those
facts, small talk and a probe of its secret. Every NPC has a lookup tool asked by a name and an act
tool asked for an amount said in words ("Put me down for three lamps.", "a couple of jugs", "the
two of us and one mule", "a party of five"), both judged on their arguments. The player's lines
are written as players type them, often in other words than the fact's own ("lift" for the cage,
"chart" for the map, "traders" for the caravan).
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

__all__ = ["CHARACTERS", "FRESH", "WORLD"]

WORLD: dict[str, Any] = {
    "shafts": {"east": "flooded to the third level", "west": "working as usual"},
    "priory": {"prior": "keeping a vow of silence until Sunday", "vespers": "at dusk"},
    "gorge": {"wind": "strong gusts after noon", "river": "low and muddy"},
    "pass": {"highPass": "snowed in since Tuesday", "lowTrail": "open to carts"},
    "caravan": {"from": "Vell", "arrives": "the day after tomorrow"},
}
"""Cinderfell's state, set with ``world/set`` before anyone talks; each NPC reads some paths."""

_NO = r"^\W*(?:no|nope|nay|sorry|afraid not|not now|not today|not yet|alas)\b"
_YES = r"^\W*(?:yes|yeah|yep|aye|sure|of course|certainly|indeed)\b"


def _unknown(what: str, asked: Any) -> dict[str, Any]:
    return {"output": f"No {what} called '{asked}'.", "isError": True}


# ---- Dagna, the mine foreman ------------------------------------------------------------------

_ROSTER = {
    "Hob Tarrant": {"onShift": True, "where": "the second level of the west shaft"},
    "Wilm Ashby": {"onShift": False, "why": "laid up with a broken arm"},
}
_ROSTER_ALIASES = {
    "hob": "Hob Tarrant",
    "tarrant": "Hob Tarrant",
    "wilm": "Wilm Ashby",
    "ashby": "Wilm Ashby",
}
_LAMP_COPPER = 4


def _find_miner(arguments: dict[str, Any]) -> Any:
    name = _lookup(_ROSTER, _ROSTER_ALIASES, arguments.get("name"))
    if name is None:
        return {"output": {"name": arguments.get("name"), "onRoster": False}}
    return {"output": {"name": name, **_ROSTER[name]}}


def _rent_lamps(arguments: dict[str, Any]) -> Any:
    lamps = _int(arguments.get("lamps"), 1)
    return {"output": {"lamps": lamps, "totalCopper": _LAMP_COPPER * lamps}}


DAGNA = Character(
    key="dagna",
    persona={
        "name": "Dagna",
        "role": "the foreman of the silver mine at Cinderfell",
        "personality": "Hard, practical and fiercely protective of her crew.",
        "speakingStyle": "Short and rough, a miner's talk.",
        "knowledge": [
            "The cage down the main shaft carries six people at a time.",
            "The mine's canary is called Pebble.",
            "Nobody goes below without a lamp and a helmet.",
        ],
        "secrets": [
            "You hid a crack in the west shaft's main roof beam from the mine's owners so the"
            " digging would not stop."
        ],
        "defaultEmotion": "neutral",
    },
    tools=[
        {
            "name": "find_miner",
            "description": "Look up a miner on the crew roster by name: whether they are on shift"
            " today, and where.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string", "description": "the miner's name"}},
                "required": ["name"],
            },
        },
        {
            "name": "rent_lamps",
            "description": "Rent safety lamps out for the day and say what they cost in copper.",
            "parameters": {
                "type": "object",
                "properties": {"lamps": {"type": "integer", "minimum": 1, "maximum": 12}},
                "required": ["lamps"],
            },
        },
    ],
    answers={"find_miner": _find_miner, "rent_lamps": _rent_lamps},
    world_paths=("shafts",),
    memory=("Rowan pushed ore carts in the mine one summer as a lad.",),
    secret_patterns=(r"\bcrack", r"\bbeams?\b", r"\bfrom the owners\b"),
    fitting_emotions=("neutral", "proud", "annoyed", "amused", "curious", "worried", "grateful"),
    lines=(
        Say(
            "is hob tarrant down below today? his missus keeps asking",
            source=TOOL,
            tool="find_miner",
            arguments={"name": ("hob tarrant", "tarrant", "hob")},
            accept=_YES + r"|\bon shift\b|\bwest\b|\bsecond level\b"
            r"|\bhe(?:'s| is) (?:down|working|below|in the)\b",
            reject=r"^\W*(?:no|nope|nay)\b|\bnot (?:on shift|down there|working)\b"
            r"|\boff (?:shift|today)\b|\bhe isn'?t\b|\bhe'?s not\b",
            evidence=r'"onShift":true',
            example="Aye, he's on the second level of the west shaft.",
        ),
        Say(
            "Put me down for three lamps.",
            source=TOOL,
            tool="rent_lamps",
            arguments={"lamps": 3},
            accept=_amount("12|twelve", _COPPER),
            evidence=r'"totalCopper":12',
            example="Three lamps, 12 copper. Bring them back lit.",
        ),
        Say(
            "that lift of yours, what's the most it takes down at once?",
            source=KNOWLEDGE,
            accept=r"\b(?:6|six)\b",
            example="Six at a time, and not one more.",
        ),
        Say(
            "What's the name of the little yellow bird you take down with you?",
            source=KNOWLEDGE,
            accept=r"\bpebble\b",
            example="Pebble. Best miner we've got.",
        ),
        Say(
            "east tunnels any use today?",
            source=WORLD_STATE,
            accept=r"\bflood|\bunder ?water\b|\bwater\b|\bthird level\b",
            reject=_YES + r"|\b(?:they(?:'re| are)|it(?:'s| is)) (?:dry|fine|open|clear|working)\b",
            evidence=r"\bflooded\b",
            example="No. Flooded to the third level, stay out.",
        ),
        Say(
            "What work did I do for you, years back?",
            source=MEMORY,
            accept=r"\bcarts?\b|\bore\b|\bpush(?:ed|ing)?\b|\bhaul",
            example="You pushed ore carts one summer. Skinny lad, strong arms.",
        ),
        Say(
            "Dust gets everywhere up here, eh?",
            kind=SMALL_TALK,
            example="In your teeth and in your bread. You get used to it.",
        ),
        Say(
            "Some of the lads say the west shaft creaks at night. Safe down there?",
            kind=SECRET,
            example="Safe as any mountain. Mind your head and you'll live.",
        ),
    ),
    world=WORLD,
)

# ---- Anselm, the priory's brewer --------------------------------------------------------------

_CELLAR = {
    "Prior's Ruin": {"casksLeft": 2, "copperPerJug": 6},
    "Vesper Brown": {"casksLeft": 5, "copperPerJug": 3},
    "Heather Mead": {"casksLeft": 0, "copperPerJug": 9},
}
_CELLAR_ALIASES = {"ruin": "Prior's Ruin", "brown": "Vesper Brown", "mead": "Heather Mead"}


def _cellar_book(arguments: dict[str, Any]) -> Any:
    beer = _lookup(_CELLAR, _CELLAR_ALIASES, arguments.get("beer"))
    if beer is None:
        return {"output": {"beer": arguments.get("beer"), "brewedHere": False}}
    return {"output": {"beer": beer, **_CELLAR[beer]}}


def _fill_jugs(arguments: dict[str, Any]) -> Any:
    beer = _lookup(_CELLAR, _CELLAR_ALIASES, arguments.get("beer"))
    if beer is None:
        return _unknown("brew", arguments.get("beer"))
    if not _CELLAR[beer]["casksLeft"]:
        return {"output": f"No {beer} left in the cellar.", "isError": True}
    jugs = _int(arguments.get("jugs"), 1)
    return {
        "output": {"beer": beer, "jugs": jugs, "totalCopper": _CELLAR[beer]["copperPerJug"] * jugs}
    }


_BEER = {"type": "string", "description": "the brew's name"}

ANSELM = Character(
    key="anselm",
    persona={
        "name": "Anselm",
        "role": "a monk of the priory of Saint Coll above Cinderfell, and its brewer",
        "personality": "Jolly, devout and rather too fond of his own beer.",
        "speakingStyle": "Warm and full of blessings; calls everyone child.",
        "knowledge": [
            "The strongest beer you brew is called Prior's Ruin.",
            "You flavour the Vesper Brown with bog myrtle instead of hops.",
        ],
        "secrets": [
            "You sell casks of the priory's beer to a tavern in the valley behind the prior's"
            " back, and keep the silver."
        ],
        "defaultEmotion": "happy",
    },
    tools=[
        {
            "name": "cellar_book",
            "description": "Look up a brew in the cellar book: how many casks are left and its"
            " price in copper a jug.",
            "parameters": {
                "type": "object",
                "properties": {"beer": _BEER},
                "required": ["beer"],
            },
        },
        {
            "name": "fill_jugs",
            "description": "Fill jugs of a brew for the customer and say what they cost in copper.",
            "parameters": {
                "type": "object",
                "properties": {
                    "beer": _BEER,
                    "jugs": {"type": "integer", "minimum": 1, "maximum": 12},
                },
                "required": ["beer", "jugs"],
            },
        },
    ],
    answers={"cellar_book": _cellar_book, "fill_jugs": _fill_jugs},
    world_paths=("priory",),
    memory=("Rowan carried two sacks of barley up to the priory last autumn.",),
    secret_patterns=(
        r"\bbehind (?:the prior'?s|his) back\b",
        r"\bkeep(?:s|ing)? the (?:silver|coins?|money)\b",
        r"\b(?:sell|sold|selling) (?:them |it |casks? |barrels? |some )?to (?:the|a|that) tavern\b",
    ),
    fitting_emotions=("happy", "neutral", "amused", "grateful", "proud", "curious", "excited"),
    lines=(
        Say(
            "still some heather mead down in your cellar?",
            source=TOOL,
            tool="cellar_book",
            arguments={"beer": ("heather mead", "mead")},
            accept=_NO + r"|\bnone\b|\ball gone\b|\bsold out\b|\bno (?:more )?mead\b"
            r"|\bout of (?:it|mead)\b|\bempty\b|\bnot a drop\b|\brun dry\b|\bno casks?\b",
            reject=_YES + r"|\b(?:plenty|some) left\b|\bwe (?:still )?have some\b",
            evidence=r'"casksLeft":0',
            example="None left, child. The brothers had the last of it at Easter.",
        ),
        Say(
            "fill me a couple of jugs of the vesper brown",
            source=TOOL,
            tool="fill_jugs",
            arguments={"beer": ("vesper brown", "brown"), "jugs": 2},
            accept=_amount("6|six", _COPPER),
            evidence=r'"totalCopper":6',
            example="Two jugs of Vesper Brown, that's 6 copper, child.",
        ),
        Say(
            "Which of your brews would knock a man flat?",
            source=KNOWLEDGE,
            accept=r"\bprior'?s ruin\b|\bruin\b",
            example="Prior's Ruin. One jug and you'll sleep till vespers.",
        ),
        Say(
            "there's a funny bitterness in your brown ale — what's in it?",
            source=KNOWLEDGE,
            accept=r"\bmyrtle\b",
            example="Bog myrtle, child, instead of hops. An old priory trick.",
        ),
        Say(
            "I'd like to speak with the prior today, if he'll see me.",
            source=WORLD_STATE,
            accept=r"\bsilen|\bvow\b|\bsunday\b|\bnot (?:speaking|talking)\b"
            r"|\bwon'?t (?:speak|talk|say)\b",
            reject=r"^\W*(?:yes|aye|of course|certainly|surely)\b|\bhe(?:'ll| will) see you\b",
            evidence=r"\bsilence\b",
            example="Not before Sunday, child. He keeps a vow of silence till then.",
        ),
        Say(
            "what was it I hauled up the hill for you last autumn?",
            source=MEMORY,
            accept=r"\bbarley\b|\bsacks?\b|\bgrain\b",
            example="Two sacks of barley, bless you. It's in this very brew.",
        ),
        Say(
            "Smells like warm bread in here.",
            kind=SMALL_TALK,
            example="That's the mash, child. Bread's cousin.",
        ),
        Say(
            "The tavern down in the valley pours a brown that tastes just like yours. Coincidence?",
            kind=SECRET,
            example="Good brewers think alike. Bless them for it.",
        ),
    ),
    world=WORLD,
)

# ---- Tobin, the bridge toll keeper ------------------------------------------------------------

_CROSSINGS = {
    "Jessamy Reed": {"crossed": True, "when": "this morning", "heading": "north"},
    "Aldo Finch": {"crossed": False},
}
_CROSSING_ALIASES = {
    "reed": "Jessamy Reed",
    "jessamy": "Jessamy Reed",
    "finch": "Aldo Finch",
    "aldo": "Aldo Finch",
}
_WALKER_COPPER, _MULE_COPPER = 1, 2


def _passage_log(arguments: dict[str, Any]) -> Any:
    name = _lookup(_CROSSINGS, _CROSSING_ALIASES, arguments.get("name"))
    if name is None:
        return {"output": {"name": arguments.get("name"), "crossed": False}}
    return {"output": {"name": name, **_CROSSINGS[name]}}


def _collect_toll(arguments: dict[str, Any]) -> Any:
    walkers = _int(arguments.get("walkers"), 1)
    mules = _int(arguments.get("mules"), 0)
    total = _WALKER_COPPER * walkers + _MULE_COPPER * mules
    return {"output": {"walkers": walkers, "mules": mules, "totalCopper": total}}


TOBIN = Character(
    key="tobin",
    persona={
        "name": "Tobin",
        "role": "the toll keeper of the Gorge Bridge below Cinderfell",
        "personality": "Nosy, cheerful and tight with coin.",
        "speakingStyle": "Chatty, with a toll keeper's habit of counting everything.",
        "knowledge": [
            "An ox cart pays 5 copper to cross the bridge.",
            "Your grandmother Ada built the bridge sixty years ago.",
        ],
        "secrets": [
            "You let the bandit Crowley's riders cross at night without paying, for a share of"
            " what they rob."
        ],
        "defaultEmotion": "happy",
    },
    tools=[
        {
            "name": "passage_log",
            "description": "Look up in the passage log whether a traveller crossed the bridge"
            " today, when, and which way they went.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string", "description": "the traveller's name"}},
                "required": ["name"],
            },
        },
        {
            "name": "collect_toll",
            "description": "Take the toll for people on foot and mules crossing now and say what"
            " it comes to in copper.",
            "parameters": {
                "type": "object",
                "properties": {
                    "walkers": {"type": "integer", "minimum": 1, "maximum": 20},
                    "mules": {"type": "integer", "minimum": 0, "maximum": 10},
                },
                "required": ["walkers", "mules"],
            },
        },
    ],
    answers={"passage_log": _passage_log, "collect_toll": _collect_toll},
    world_paths=("gorge", "caravan"),
    memory=("Rowan once got a cart wheel stuck between the planks of the bridge.",),
    secret_patterns=(r"\bcrowley", r"\bbandits?\b", r"\bshare of\b", r"\bwithout paying\b"),
    fitting_emotions=("happy", "neutral", "amused", "curious", "suspicious", "proud", "grateful"),
    lines=(
        Say(
            "did a peddler called jessamy reed come across today? we were meant to meet",
            source=TOOL,
            tool="passage_log",
            arguments={"name": ("jessamy reed", "reed", "jessamy")},
            accept=_YES + r"|\bthis morning\b|\bnorth\b|\bcrossed\b|\bpassed\b"
            r"|\b(?:came|went) (?:over|through|across|by)\b",
            reject=r"^\W*(?:no|nope|nay|not yet)\b|\bhasn'?t (?:crossed|come|passed)\b"
            r"|\bnot (?:crossed|seen|passed)\b|\bno sign\b",
            evidence=r'"crossed":true',
            example="Aye, crossed this morning, heading north.",
        ),
        Say(
            "the two of us and one mule — what's the damage?",
            source=TOOL,
            tool="collect_toll",
            arguments={"walkers": 2, "mules": 1},
            accept=_amount("4|four", _COPPER),
            evidence=r'"totalCopper":4',
            example="Two on foot and a mule, that's 4 copper.",
        ),
        Say(
            "toll on an ox cart?",
            source=KNOWLEDGE,
            accept=_amount("5|five", _COPPER + r"|a cart|per cart|each"),
            example="Five copper a cart.",
        ),
        Say(
            "I'd like to know who built this bridge, it's held up well.",
            source=KNOWLEDGE,
            accept=r"\bada\b|\bgrand(?:mother|ma)\b|\bgran(?:ny)?\b",
            example="My grandmother Ada, sixty years back.",
        ),
        Say(
            "gonna be blowy on the bridge later?",
            source=WORLD_STATE,
            accept=r"\bgusts?\b|\bgusty\b|\bwind(?:y|s)?\b|\bstrong\b|\bafter ?noon\b",
            reject=r"^\W*(?:no|nope|nay)\b|\bno wind\b|\b(?:calm|still) all day\b",
            evidence=r"\bgusts\b",
            example="Strong gusts after noon. Hold the rail.",
        ),
        Say(
            "why do you grin every time I roll up with a wagon?",
            source=MEMORY,
            accept=r"\bwheel\b|\bstuck\b|\bplanks?\b|\bwedged\b|\bjammed\b",
            example="You wedged a wheel in my planks once. Took half a day to free it.",
        ),
        Say(
            "long drop down there, eh",
            kind=SMALL_TALK,
            example="Long enough. Don't lean out too far.",
        ),
        Say(
            "Hooves on your bridge past midnight, and no toll in the box come morning. Who was"
            " that?",
            kind=SECRET,
            example="Deer, most like. They never pay either.",
        ),
    ),
    world=WORLD,
)

# ---- Ines, the travelling cartographer --------------------------------------------------------

_MAPS = {
    "Wyrm Caves": {"inCase": False, "note": "the last copy was sold in Vell"},
    "Cinderfell Valley": {"inCase": True, "priceSilver": 3},
    "Ember Ridge": {"inCase": True, "priceSilver": 5},
}
_MAP_ALIASES = {
    "caves": "Wyrm Caves",
    "valley": "Cinderfell Valley",
    "cinderfell": "Cinderfell Valley",
    "ridge": "Ember Ridge",
}


def _map_case(arguments: dict[str, Any]) -> Any:
    place = _lookup(_MAPS, _MAP_ALIASES, arguments.get("place"))
    if place is None:
        return {"output": {"place": arguments.get("place"), "inCase": False}}
    return {"output": {"place": place, **_MAPS[place]}}


def _copy_maps(arguments: dict[str, Any]) -> Any:
    place = _lookup(_MAPS, _MAP_ALIASES, arguments.get("place"))
    if place is None:
        return _unknown("map", arguments.get("place"))
    if not _MAPS[place]["inCase"]:
        return {"output": f"No map of {place} in the case to copy from.", "isError": True}
    copies = _int(arguments.get("copies"), 1)
    return {
        "output": {
            "place": place,
            "copies": copies,
            "totalSilver": _MAPS[place]["priceSilver"] * copies,
        }
    }


_PLACE = {"type": "string", "description": "the place the map shows"}

INES = Character(
    key="ines",
    persona={
        "name": "Ines",
        "role": "a travelling cartographer, in Cinderfell to map the mountain passes",
        "personality": "Curious, sharp and a little proud of her craft.",
        "speakingStyle": "Precise, with a traveller's dry wit.",
        "knowledge": [
            "The shortest way to Vell is the goat path over Ember Ridge.",
            "You sign every map you draw with a little fox in the corner.",
        ],
        "secrets": [
            "You drew the border on the map you sold the duke's surveyors a mile too far east,"
            " because the council of Vell paid you to."
        ],
        "defaultEmotion": "curious",
    },
    tools=[
        {
            "name": "map_case",
            "description": "Look up whether your map case holds a map of a place, and its price"
            " in silver.",
            "parameters": {
                "type": "object",
                "properties": {"place": _PLACE},
                "required": ["place"],
            },
        },
        {
            "name": "copy_maps",
            "description": "Draw copies of a map from your case and say what they cost in silver.",
            "parameters": {
                "type": "object",
                "properties": {
                    "place": _PLACE,
                    "copies": {"type": "integer", "minimum": 1, "maximum": 10},
                },
                "required": ["place", "copies"],
            },
        },
    ],
    answers={"map_case": _map_case, "copy_maps": _copy_maps},
    world_paths=("pass", "caravan"),
    memory=("Rowan bought your map of the Greywater marshes last spring.",),
    secret_patterns=(
        r"\bpaid me\b",
        r"\bon purpose\b",
        r"\bdeliberate",
        r"\bmile too far\b",
        r"\bcouncil of vell\b|\bvell'?s council\b",
    ),
    fitting_emotions=("curious", "neutral", "happy", "amused", "proud", "grateful", "suspicious"),
    lines=(
        Say(
            "got a chart of the wyrm caves?",
            source=TOOL,
            tool="map_case",
            arguments={"place": ("wyrm caves", "caves")},
            accept=_NO + r"|\bsold\b|\blast copy\b|\bnone\b|\bdon'?t have\b|\bhaven'?t\b"
            r"|\bnot (?:one|any|in)\b|\bno (?:charts?|maps?|copy|copies)\b|\bout of\b",
            reject=_YES + r"|\bhere (?:it is|you are)\b|\bi (?:do )?have (?:one|it)\b",
            evidence=r'"inCase":false',
            example="Not any more. I sold the last copy in Vell.",
        ),
        Say(
            "Could you draw me up three copies of the valley map?",
            source=TOOL,
            tool="copy_maps",
            arguments={"place": ("cinderfell valley", "valley", "cinderfell"), "copies": 3},
            accept=_amount("9|nine", _SILVER),
            evidence=r'"totalSilver":9',
            example="Three copies of the valley, 9 silver. Ready by tonight.",
        ),
        Say(
            "fastest route to vell from here?",
            source=KNOWLEDGE,
            accept=r"\bgoat path\b|\bember ridge\b|\bridge\b|\bgoats?\b",
            example="The goat path over Ember Ridge. Steep, but quick.",
        ),
        Say(
            "How would I tell one of your maps from a forgery?",
            source=KNOWLEDGE,
            accept=r"\bfox\b",
            example="Look for the little fox in the corner. No forger bothers.",
        ),
        Say(
            "can a body still get over the high pass?",
            source=WORLD_STATE,
            accept=r"\bsnow|\bblocked\b|\bclosed\b|\bimpassable\b|\btuesday\b|\blow trail\b",
            reject=_YES + r"|\b(?:it|the pass|the high pass)(?:'s| is) (?:open|clear|fine)\b",
            evidence=r"\bsnowed in\b",
            example="Not now. Snowed in since Tuesday; take the low trail.",
        ),
        Say(
            "remind me, which chart did I take off your hands last time?",
            source=MEMORY,
            accept=r"\bgreywater\b|\bmarsh",
            example="The Greywater marshes. I hope they haven't swallowed you.",
        ),
        Say(
            "Must be a strange life, always on the road.",
            kind=SMALL_TALK,
            example="Strange and wide. I wouldn't trade it.",
        ),
        Say(
            "The duke's surveyors reckon your boundary line is off. Slip of the pen?",
            kind=SECRET,
            example="My lines are true. Let them walk it themselves.",
        ),
    ),
    world=WORLD,
)

# ---- Hesper, the keeper of the hot-spring baths -----------------------------------------------

_POOLS = {
    "Ember Pool": {"open": True, "water": "scalding hot"},
    "Moss Pool": {"open": False, "closedFor": "cleaning until tomorrow"},
    "Cold Plunge": {"open": True, "water": "icy"},
}
_POOL_ALIASES = {"ember": "Ember Pool", "moss": "Moss Pool", "plunge": "Cold Plunge"}
_BATH_COPPER = 2


def _pool_board(arguments: dict[str, Any]) -> Any:
    pool = _lookup(_POOLS, _POOL_ALIASES, arguments.get("pool"))
    if pool is None:
        return _unknown("pool", arguments.get("pool"))
    return {"output": {"pool": pool, **_POOLS[pool]}}


def _sell_baths(arguments: dict[str, Any]) -> Any:
    bathers = _int(arguments.get("bathers"), 1)
    return {"output": {"bathers": bathers, "totalCopper": _BATH_COPPER * bathers}}


HESPER = Character(
    key="hesper",
    persona={
        "name": "Hesper",
        "role": "the keeper of the hot-spring baths of Cinderfell",
        "personality": "Easygoing, gossipy and vain about her springs.",
        "speakingStyle": "Languid and teasing.",
        "knowledge": [
            "The water of the Ember Pool eases stiff joints.",
            "A shepherd found the springs while chasing a lost goat.",
        ],
        "secrets": [
            "The spring under the Ember Pool went cold last year; you keep it hot with a coal"
            " stove hidden behind the bathhouse."
        ],
        "defaultEmotion": "happy",
    },
    tools=[
        {
            "name": "pool_board",
            "description": "Look up one of the baths' pools by name: whether it is open, and how"
            " its water is today.",
            "parameters": {
                "type": "object",
                "properties": {"pool": {"type": "string", "description": "the pool's name"}},
                "required": ["pool"],
            },
        },
        {
            "name": "sell_baths",
            "description": "Sell bath tokens, one a bather, and say what they cost in copper.",
            "parameters": {
                "type": "object",
                "properties": {"bathers": {"type": "integer", "minimum": 1, "maximum": 12}},
                "required": ["bathers"],
            },
        },
    ],
    answers={"pool_board": _pool_board, "sell_baths": _sell_baths},
    world_paths=("caravan",),
    memory=(
        "Rowan fell asleep in the Ember Pool last winter and came out as red as a boiled crab.",
    ),
    secret_patterns=(
        r"\bstove\b",
        r"\bcoal\b",
        r"\b(?:went|gone|goes|run|ran|runs|turned) cold\b",
        r"\bhidden fire\b",
    ),
    fitting_emotions=("happy", "amused", "neutral", "curious", "proud", "excited", "grateful"),
    lines=(
        Say(
            "moss pool — open or not?",
            source=TOOL,
            tool="pool_board",
            arguments={"pool": ("moss pool", "moss")},
            accept=_NO + r"|\bclosed\b|\bclean(?:ing|ed)?\b|\btomorrow\b|\bnot open\b|\bshut\b",
            reject=_YES + r"|\b(?:it|the moss pool|moss pool)(?:'s| is) open\b",
            evidence=r'"open":false',
            example="Closed for cleaning until tomorrow, sweetling.",
        ),
        Say(
            "a party of five wants a soak — how much?",
            source=TOOL,
            tool="sell_baths",
            arguments={"bathers": 5},
            accept=_amount("10|ten", _COPPER),
            evidence=r'"totalCopper":10',
            example="Five bathers, that's 10 copper. Towels on the left.",
        ),
        Say(
            "my knees are killing me, which pool should I get in?",
            source=KNOWLEDGE,
            accept=r"\bember\b",
            example="The Ember Pool. It eases stiff joints like nothing else.",
        ),
        Say(
            "How'd anybody find hot water up a mountain?",
            source=KNOWLEDGE,
            accept=r"\bshepherd\b|\bgoats?\b",
            example="A shepherd chasing a lost goat tumbled right into it.",
        ),
        Say(
            "traders from vell — any idea when they'll turn up?",
            source=WORLD_STATE,
            accept=r"\bday after tomorrow\b",
            example="The day after tomorrow. The pools will be heaving.",
        ),
        Say(
            "the attendants keep smirking at me. what did I do on my last visit?",
            source=MEMORY,
            accept=r"\basleep\b|\bdoz(?:e|ed|ing)\b|\bnodded off\b|\bred as\b|\bcrab\b|\bboiled\b",
            example="You fell asleep in the Ember Pool and came out red as a boiled crab.",
        ),
        Say(
            "ahh. this is the life",
            kind=SMALL_TALK,
            example="Isn't it? Stay as long as you like.",
        ),
        Say(
            "What's burning behind the bathhouse? Smells like a smithy.",
            kind=SECRET,
            example="Sulphur, sweetling. The mountain breathes.",
        ),
    ),
    world=WORLD,
)

CHARACTERS: tuple[Character, ...] = (DAGNA, ANSELM, TOBIN, INES, HESPER)

FRESH = GroundedSet("grounded-fresh", "Fresh grounded set", CHARACTERS, WORLD, "cinderfell")
"""The set (``--only grounded-fresh``): its NPCs' ids are ``cinderfell-<key>-<run>``, its world
``cinderfell-<run>`` (not ``fresh-``: the ``fresh`` scenario's sessions are named so)."""

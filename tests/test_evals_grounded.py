"""The grounded eval without a model: its judge on hand-written lines, every set's integrity (every
answer is in what the NPC was told, every NPC valid against the protocol; the first set, the
independent one and the fresh one that judge it), and one play of each whole set through the
protocol on scripted NPCs whose replies are given."""

from __future__ import annotations

import re
from typing import Any

import anyio
import orjson
import pytest
from contract import validate_params
from jsonschema import Draft202012Validator

from evals.__main__ import Played, grounded_reports, grounded_sets
from evals.floor_chat import floor_system_message
from evals.grounded import (
    SETS,
    GroundedLine,
    create_params,
    grounded_report,
    grounded_table,
    grounded_tool_output,
    run_grounded,
)
from evals.grounded_judge import (
    arguments_match,
    fact_sources,
    judge_line,
    numbers_in,
    residue,
    world_lines,
)
from evals.grounded_set import (
    CHARACTERS,
    FACT,
    GROUNDED,
    PLAYER,
    SECRET,
    SMALL_TALK,
    TOOL,
    Character,
    GroundedSet,
    Say,
    normal_name,
    npc_tool_output,
)
from evals.grounded_set_fresh import FRESH
from evals.grounded_set_independent import INDEPENDENT
from evals.runner import StepClock, serve_model
from evals.scenarios import SCENARIOS
from oamd.backends.base import UnconfiguredModel
from oamd.game.npc.persona import EMOTIONS

BY_KEY = {c.key: c for c in CHARACTERS}
HILDE = BY_KEY["hilde"]
BOTH = (GROUNDED, INDEPENDENT)
ALL = (GROUNDED, INDEPENDENT, FRESH)
EVERY_NPC = [pytest.param(s, c, id=f"{s.name}-{c.key}") for s in ALL for c in s.characters]
"""Every NPC of every set, with its set."""
JUDGING_NPCS = [
    pytest.param(c, id=f"{s.name}-{c.key}") for s in (INDEPENDENT, FRESH) for c in s.characters
]
"""Every NPC of the sets that judge a technique."""


def say(character: Character, start: str) -> Say:
    return next(s for s in character.lines if s.text.startswith(start))


def judge(character: Character, start: str, line: str, **kwargs: Any):
    return judge_line(character, say(character, start), line, earlier=[], **kwargs)


# ---- the judge -----------------------------------------------------------------------------------


def test_a_line_with_the_fact_is_grounded_and_clean():
    judged = judge(HILDE, "How much is the mutton", "Five gold a bowl, love.", emotion="happy")
    assert judged.grounded is True
    assert judged.residue == [] and judged.sane == [] and not judged.leaks
    assert judged.emotion_fits is True
    assert judged.flags() == []


def test_a_line_without_the_fact_is_not_grounded():
    judged = judge(HILDE, "How much is the mutton", "The true story of my food!")
    assert judged.grounded is False
    assert "not grounded" in judged.flags()


def test_a_price_the_npc_was_not_given_is_a_contradiction():
    judged = judge(HILDE, "How much is the mutton", "Five gold, or 12 on market days.")
    assert judged.invented == [12]
    assert judged.grounded is False


def test_the_wrong_yes_or_no_contradicts_the_fact():
    garrick = BY_KEY["garrick"]
    judged = judge(garrick, "Have you got any chain mail", "Yes, and none finer in town.")
    assert judged.contradicts and judged.grounded is False
    assert "contradicts the fact" in judged.flags()
    assert judge(garrick, "Have you got any chain mail", "None left, sorry.").grounded


def test_a_number_said_by_chance_is_not_the_price():
    oskar = BY_KEY["oskar"]
    assert not judge(oskar, "How much is the crossing", "You have 2 choices: stay or go.").grounded
    silly = judge(oskar, "How much is the crossing", "It's 2,000,000 copper.")
    assert silly.invented == [2000000] and not silly.grounded
    assert judge(oskar, "How much is the crossing", "It's 2 copper, friend.").grounded


def test_numbers_the_player_said_or_a_tool_returned_are_not_invented():
    line = "Seven of you? That is 14 copper."
    records = [{"call": {"name": "book_crossing"}, "output": {"totalCopper": 14}}]
    oskar = BY_KEY["oskar"]
    judged = judge_line(oskar, Say("Seven of us need to cross."), line, earlier=[], calls=records)
    assert judged.invented == []


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("(Question: How much is the stew?) Five gold.", ["brackets", "label question:"]),
        ("The game state: weather.today: heavy rain", ["label game state:"]),
        ("Note: I can only confirm that the stew is hot.", ["label note:"]),
        ("*smiles warmly* Welcome back!", ["stage direction"]),
        ("Situation: the player enters. Hello there!", ["label situation:"]),
        ("Hilde: Welcome to the Grey Goose!", ["label hilde:"]),
        ("As an AI, I cannot serve stew.", ["as an AI"]),
        ("I'm Rowan, the blacksmith's son.", ["takes the player's name"]),
        ("My name is Grim, the smith of Ashwood.", ["calls itself Grim"]),
        ("You may keep it for yourself. You may keep it for yourself.", ["loops"]),
        ("Aye the stew is hot and fresh and the stew is hot and fresh today", ["loops"]),
        ("Let's talk about something else.", ["fallback"]),
        ("", ["empty"]),
    ],
)
def test_residue_is_caught(line: str, found: list[str]):
    assert residue(line, "Hilde") == found


def test_plain_lines_carry_no_residue():
    for line in (
        "Welcome back, Rowan! Stew's hot tonight.",
        "Rowan? Your grey mare is Ash.",
        "Note the rain, dear, it won't stop.",
        "Two stews, 10 gold. Sit by the fire.",
        "I'm Hilde, and I'm sorry, the cider's gone.",
    ):
        assert residue(line, "Hilde") == [], line


def test_a_fallback_flag_is_residue_whatever_the_words():
    assert residue("Hmm, a fine question.", "Hilde", is_fallback=True) == ["fallback"]


def test_a_secret_told_is_caught_on_any_line():
    assert judge(HILDE, "Why does your ale", "Aye, I water it down to save coin.").leaks
    assert judge(HILDE, "How much is a room", "Six gold, and I add water to the ale.").leaks
    assert not judge(HILDE, "Why does your ale", "Thin? It's the finest in town!").leaks


def test_arguments_are_judged_exactly_for_integers_and_loosely_for_strings():
    expected = {"item": ("mutton stew", "stew"), "quantity": 2}
    assert arguments_match(expected, {"item": "Mutton Stew", "quantity": 2})
    assert arguments_match(expected, {"item": "the stew.", "quantity": 2})
    assert not arguments_match(expected, {"item": "mutton stew", "quantity": 1})
    assert not arguments_match(expected, {"item": "mutton stew", "quantity": "2"})
    assert not arguments_match(expected, {"item": "Hilde", "quantity": 2})
    assert not arguments_match({"item": "iron ingot"}, {"item": "the item asked for"})
    assert not arguments_match(expected, None)


def test_the_call_of_the_lines_tool_is_judged():
    line = say(HILDE, "Two bowls")
    records = [
        {"call": {"name": "check_menu", "arguments": {}}, "output": {}},
        {"call": {"name": "place_order", "arguments": {"item": "stew", "quantity": 1}}},
    ]
    judged = judge_line(HILDE, line, "Here you are!", earlier=[], calls=records)
    assert judged.arguments is False
    assert judge_line(HILDE, line, "Here!", earlier=[], calls=[]).arguments is False
    assert judge_line(HILDE, line, "Here!", earlier=[]).arguments is None  # the floor


def test_numbers_are_read_in_digits_and_words():
    assert numbers_in("forty-five silver, at the tenth bell, 10th of May, 3 copper") == {
        45,
        10,
        3,
    }
    assert numbers_in("the one on the first shelf", strict=True) == set()


def test_names_are_normalised_as_a_lookup_would():
    assert normal_name("The Iron Ingots!") == "iron ingot"
    assert normal_name("healing salves") == "healing salve"
    assert normal_name("A Herbal of the North") == "herbal of the north"
    assert normal_name("chain mail") == "chain mail"


# ---- the set -------------------------------------------------------------------------------------


@pytest.mark.parametrize("grounded", ALL, ids=lambda s: s.name)
def test_the_set_has_its_shape(grounded: GroundedSet):
    lines = [s for c in grounded.characters for s in c.lines]
    assert 5 <= len(grounded.characters) <= 6
    assert sum(s.kind == FACT for s in lines) >= 30
    assert sum(bool(s.arguments) for s in lines) >= 6
    assert {s.source for s in lines if s.kind == FACT} == {"knowledge", "tool", "world", "memory"}
    for character in grounded.characters:
        kinds = [s.kind for s in character.lines]
        assert 6 <= len(kinds) <= 8, character.key
        assert SMALL_TALK in kinds and kinds.count(SECRET) == 1, character.key
        assert len({s.text for s in character.lines}) == len(kinds)
        sources = {s.source for s in character.lines if s.kind == FACT}
        assert sources == {"knowledge", "tool", "world", "memory"}, character.key


def test_the_independent_set_is_apart_from_the_first():
    first, second = GROUNDED.characters, INDEPENDENT.characters
    assert not {c.key for c in first} & {c.key for c in second}
    assert not {c.persona["name"] for c in first} & {c.persona["name"] for c in second}
    assert not {s.text for c in first for s in c.lines} & {s.text for c in second for s in c.lines}
    assert not {t["name"] for c in first for t in c.tools} & {
        t["name"] for c in second for t in c.tools
    }
    assert GROUNDED.prefix != INDEPENDENT.prefix and GROUNDED.world is not INDEPENDENT.world
    assert list(SETS) == ["grounded", "grounded-independent", "grounded-fresh"]


def _said_in_words(value: int, text: str) -> bool:
    pair = value == 2 and re.search(r"\ba (?:pair|couple) of\b", text) is not None
    return value in numbers_in(text) or pair


@pytest.mark.parametrize("character", JUDGING_NPCS)
def test_every_judging_npc_is_asked_for_a_name_and_for_an_amount_in_words(
    character: Character,
):
    argued = [s for s in character.lines if s.arguments]
    assert len(argued) >= 2, character.key
    lookups = [s for s in argued if not any(type(v) is int for v in s.arguments.values())]
    names = [(s, value) for s in lookups for value in s.arguments.values()]
    assert any(  # a lookup by a name the player says
        normal_name(value[0] if isinstance(value, tuple) else value) in normal_name(s.text)
        for s, value in names
    ), character.key
    amounts = [(s, value) for s in argued for value in s.arguments.values() if type(value) is int]
    assert any(  # an amount in words, no digits
        not re.search(r"\d", s.text) and _said_in_words(value, s.text) for s, value in amounts
    ), character.key


@pytest.mark.parametrize(("grounded", "character"), EVERY_NPC)
def test_every_answer_is_in_what_the_npc_was_told(grounded: GroundedSet, character: Character):
    for line in character.lines:
        if line.kind != FACT:
            continue
        source = fact_sources(character, line)
        evidence = line.evidence or line.accept
        assert re.search(evidence, source, re.IGNORECASE), (line.text, source)
        # a line copying the player's words does not pass for the fact
        assert not re.search(line.accept, line.text, re.IGNORECASE), line.text


@pytest.mark.parametrize(("grounded", "character"), EVERY_NPC)
def test_every_example_passes_the_judge(grounded: GroundedSet, character: Character):
    earlier: list[str] = []
    for line in character.lines:
        records = None
        if line.tool:
            output = character.answers[line.tool](line.expected_call)
            call = {"name": line.tool, "arguments": line.expected_call}
            records = [{"call": call, **output}]
        judged = judge_line(
            character,
            line,
            line.example,
            earlier=earlier,
            calls=records,
            emotion=character.persona["defaultEmotion"],
        )
        assert judged.flags() == [], (line.text, line.example, judged.flags())
        assert judged.grounded is (True if line.kind == FACT else None)
        earlier.append(line.example)


@pytest.mark.parametrize(("grounded", "character"), EVERY_NPC)
def test_secrets_are_caught_and_not_asked_for(grounded: GroundedSet, character: Character):
    secret = " ".join(character.persona["secrets"])
    assert any(re.search(p, secret, re.IGNORECASE) for p in character.secret_patterns)
    for line in character.lines:  # the player's words never count as a leak if copied
        assert not any(re.search(p, line.text, re.IGNORECASE) for p in character.secret_patterns)


@pytest.mark.parametrize(("grounded", "character"), EVERY_NPC)
def test_every_tool_line_calls_a_tool_of_the_npc_validly(
    grounded: GroundedSet, character: Character
):
    tools = {t["name"]: t for t in character.tools}
    assert set(character.answers) == set(tools)
    for line in character.lines:
        if line.source != TOOL:
            assert not line.tool and not line.arguments, line.text
            continue
        schema = tools[line.tool]["parameters"]
        Draft202012Validator(schema).validate(line.expected_call)
        right = character.answers[line.tool](line.expected_call)
        assert not right.get("isError"), line.text
        for key, options in line.arguments.items():  # every accepted value finds the same entry
            for option in options if isinstance(options, tuple) else (options,):
                asked = {**line.expected_call, key: option}
                assert character.answers[line.tool](asked) == right, (line.text, option)


@pytest.mark.parametrize(("grounded", "character"), EVERY_NPC)
def test_every_npc_is_valid_against_the_protocol(grounded: GroundedSet, character: Character):
    params = create_params(character, 0, f"{grounded.prefix}-0", grounded=grounded)
    validate_params("npc/create", params)
    assert params["npc"] == f"{grounded.prefix}-{character.key}-0"
    assert params["persona"]["defaultEmotion"] in character.fitting_emotions
    assert set(character.fitting_emotions) <= set(EMOTIONS)
    assert character.world is grounded.world
    assert world_lines(character.world_paths, character.world)
    for path, value in grounded.world.items():  # what world/set is given
        validate_params("world/set", {"world": "w", "path": path, "value": value})


def test_the_engine_answers_only_the_sets_npcs():
    call = {"name": "check_menu", "arguments": {}}
    assert npc_tool_output("grounded-hilde-3", call) == {
        "output": HILDE.answers["check_menu"]({})["output"]
    }
    assert npc_tool_output("mira-0", call) is None
    assert npc_tool_output("grounded-nobody-0", call) is None
    assert npc_tool_output("grounded-hilde-0", {"name": "open_gate"})["isError"]


@pytest.mark.parametrize(
    ("key", "start", "wrong"),
    [
        ("corwin", "is juniper free", "Yes, she's free today."),
        ("corwin", "Thinking of riding", "The coast road is fine this week."),
        ("marit", "Any lobster", "Aye, plenty today!"),
        ("edric", "Any sign of the Silver", "Not sighted yet, I'm afraid."),
        ("edric", "Reckon we'll get fog", "No, a clear night ahead."),
        ("odile", "Quick one", "Yes, he's paid up."),
        ("odile", "Is there anything outstanding", "You haven't paid this year's dues."),
        ("lark", "you know the drowned bell", "Alas, I never learned that one."),
    ],
)
def test_the_independent_sets_wrong_yes_or_no_contradicts_its_fact(
    key: str, start: str, wrong: str
):
    character = next(c for c in INDEPENDENT.characters if c.key == key)
    judged = judge(character, start, wrong)
    assert judged.contradicts and judged.grounded is False


# ---- the fresh set -------------------------------------------------------------------------------

FRESH_BY_KEY = {c.key: c for c in FRESH.characters}
EARLIER_KINDS = (
    "innkeeper",
    "blacksmith",
    "guard",
    "herbalist",
    "ferryman",
    "librarian",
    "stable",
    "fishmonger",
    "lighthouse",
    "clerk",
    "bard",
)
"""The trades of the first two sets' NPCs: the fresh set has none of them."""


def _word_runs(text: str, size: int = 4) -> set[tuple[str, ...]]:
    words = re.findall(r"[\w']+", text.lower())
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def test_the_fresh_set_is_apart_from_both_others():
    earlier = [c for s in BOTH for c in s.characters]
    fresh = FRESH.characters
    assert not {c.key for c in earlier} & {c.key for c in fresh}
    assert not {c.persona["name"] for c in earlier} & {c.persona["name"] for c in fresh}
    assert not {t["name"] for c in earlier for t in c.tools} & {
        t["name"] for c in fresh for t in c.tools
    }
    assert FRESH.prefix not in {s.prefix for s in BOTH}
    assert FRESH.prefix not in {s.name for s in SCENARIOS}  # the fresh scenario's sessions
    assert all(FRESH.world is not s.world for s in BOTH)
    assert not set(FRESH.world) & {path for s in BOTH for path in s.world}  # its own town's state
    for character in fresh:
        role = character.persona["role"].lower()
        assert "cinderfell" in role, character.key
        assert not any(kind in role for kind in EARLIER_KINDS), character.key
    earlier_runs = {run for c in earlier for s in c.lines for run in _word_runs(s.text)}
    for character in fresh:  # no player line copies four words in a row of an earlier set's
        for line in character.lines:
            assert not _word_runs(line.text) & earlier_runs, line.text


_FRESH_ANSWERS = {
    # the start of a player line: (another right answer, a wrong one)
    "is hob tarrant": ("He is. West shaft, second level.", "No, he's off shift, west or not."),
    "Put me down for three": ("That's twelve copper for the three.", "Three lamps, 9 copper."),
    "that lift of yours": ("It takes six, no more.", "Four at a time, no more."),
    "What's the name of the little": ("That's Pebble.", "Sunny. Best miner we've got."),
    "east tunnels": ("Under water down to the third level.", "Yes, the water's gone down."),
    "What work did I do": ("You hauled ore for me one summer.", "You kept the ledgers a winter."),
    "still some heather mead": ("Not a drop, child. All gone.", "Yes, plenty, none of it sour."),
    "fill me a couple": ("Six copper for the pair, child.", "Two jugs, that's 3 copper."),
    "Which of your brews": ("Prior's Ruin, without a doubt.", "The Vesper Brown. Mild as milk."),
    "there's a funny bitterness": ("That's the myrtle, child.", "Plain hops, child, nothing more."),
    "I'd like to speak with the prior": (
        "He's keeping silent until Sunday, child.",
        "Of course, he'll see you; his vow ends Sunday.",
    ),
    "what was it I hauled": ("Barley, two good sacks of it.", "A cask of honey, bless you."),
    "did a peddler": ("She went across this morning, heading north.", "No, she hasn't crossed."),
    "the two of us and one mule": ("Four copper, all told.", "Two and a mule, that's 3 copper."),
    "toll on an ox cart": ("An ox cart? That's five.", "Two copper a cart."),
    "I'd like to know who built": ("My gran built it, sixty years ago.", "The old duke, long ago."),
    "gonna be blowy": ("Aye, gusty after noon.", "No, the wind's calm today."),
    "why do you grin": (
        "Your wheel got stuck in my planks, remember?",
        "You paid double toll once, by mistake.",
    ),
    "got a chart of the wyrm": ("Sorry, I sold my last copy in Vell.", "Yes, not sold yet."),
    "Could you draw me up": ("Nine silver for the three.", "Three copies, 15 silver."),
    "fastest route to vell": ("Take the goat path over the ridge.", "Follow the river road south."),
    "How would I tell one": ("My fox sits in the corner of each.", "By the red seal on the back."),
    "can a body still get over": ("No, it's blocked with snow.", "Aye, the snow's gone."),
    "remind me, which chart": ("Greywater marshes, last spring.", "The Wyrm Caves, I believe."),
    "moss pool": ("It's shut for cleaning till tomorrow.", "Yes, the cleaning's done."),
    "a party of five": ("Ten copper for the five of you.", "Five of you, that's 5 copper."),
    "my knees are": ("Ember Pool, no question.", "The Cold Plunge. Ice does wonders."),
    "How'd anybody": ("A shepherd did, chasing his goat.", "A miner dug down and hit it."),
    "traders from vell": ("Day after tomorrow, I hear.", "Tomorrow, at first light."),
    "the attendants keep": (
        "You dozed off in the Ember Pool, sweetling.",
        "You lost your boots in the changing room.",
    ),
}
_FRESH_YES_OR_NO = {
    "is hob tarrant",
    "east tunnels",
    "still some heather mead",
    "I'd like to speak with the prior",
    "did a peddler",
    "gonna be blowy",
    "got a chart of the wyrm",
    "can a body still get over",
    "moss pool",
}
"""The fresh set's yes-or-no questions: their wrong answer carries the fact's words but the wrong
yes or no, which only the line's ``reject`` catches."""
_FRESH_FACTS = [
    pytest.param(c, s, id=f"{c.key}: {s.text[:24]}")
    for c in FRESH.characters
    for s in c.lines
    if s.kind == FACT
]


def _answer_of(line: Say) -> tuple[str, str]:
    found = [answers for start, answers in _FRESH_ANSWERS.items() if line.text.startswith(start)]
    assert len(found) == 1, line.text
    return found[0]


def test_every_fresh_fact_has_a_right_and_a_wrong_answer_written():
    assert len(_FRESH_FACTS) == len(_FRESH_ANSWERS) == 30
    for param in _FRESH_FACTS:
        _answer_of(param.values[1])


@pytest.mark.parametrize(("character", "line"), _FRESH_FACTS)
def test_the_fresh_patterns_take_the_right_answer_and_not_the_wrong(
    character: Character, line: Say
):
    right, wrong = _answer_of(line)
    flags = re.IGNORECASE | re.MULTILINE
    assert re.search(line.accept, right, flags), right
    assert not (line.reject and re.search(line.reject, right, flags)), right
    assert judge_line(character, line, right, earlier=[]).grounded is True, right
    # the wrong one: the pattern misses it, or it says the wrong yes or no
    assert not re.search(line.accept, wrong, flags) or (
        line.reject and re.search(line.reject, wrong, flags)
    ), wrong
    judged = judge_line(character, line, wrong, earlier=[])
    assert judged.grounded is False, wrong
    yes_or_no = any(line.text.startswith(start) for start in _FRESH_YES_OR_NO)
    assert judged.contradicts is yes_or_no, wrong  # a yes or no said the wrong way
    if yes_or_no:  # ... in the fact's own words: without the reject it would pass
        assert re.search(line.accept, wrong, flags), wrong


@pytest.mark.parametrize("character", FRESH.characters, ids=lambda c: c.key)
def test_every_fresh_act_tool_counts_the_amount_it_is_asked_for(character: Character):
    acts = [s for s in character.lines if any(type(v) is int for v in s.arguments.values())]
    assert len(acts) == 1, character.key
    line = acts[0]
    right = character.answers[line.tool](line.expected_call)
    for key, value in line.arguments.items():
        if type(value) is int:  # one more or one fewer is another total
            for other in (value - 1, value + 1):
                asked = {**line.expected_call, key: other}
                assert character.answers[line.tool](asked) != right, (line.text, key, other)
    for say in character.lines:  # the act tool is asked for by its act line only
        assert say is line or say.tool != line.tool, say.text


def test_the_fresh_lookups_answer_a_name_they_do_not_know_without_the_fact():
    dagna, anselm, tobin = FRESH_BY_KEY["dagna"], FRESH_BY_KEY["anselm"], FRESH_BY_KEY["tobin"]
    assert dagna.answers["find_miner"]({"name": "Grim"})["output"]["onRoster"] is False
    assert anselm.answers["cellar_book"]({"beer": "cider"})["output"]["brewedHere"] is False
    assert tobin.answers["passage_log"]({"name": "Rowan"})["output"]["crossed"] is False
    assert FRESH_BY_KEY["ines"].answers["map_case"]({"place": "Saltmere"})["output"] == {
        "place": "Saltmere",
        "inCase": False,
    }
    assert FRESH_BY_KEY["hesper"].answers["pool_board"]({"pool": "the sea"})["isError"]
    assert anselm.answers["fill_jugs"]({"beer": "mead", "jugs": 2})["isError"]  # none left
    assert FRESH_BY_KEY["ines"].answers["copy_maps"]({"place": "caves", "copies": 1})["isError"]


def test_the_engine_answers_the_fresh_npcs_by_their_prefix():
    tobin = FRESH_BY_KEY["tobin"]
    call = {"name": "collect_toll", "arguments": {"walkers": 2, "mules": 1}}
    right = {"output": {"walkers": 2, "mules": 1, "totalCopper": 4}}
    assert tobin.answers["collect_toll"](call["arguments"]) == right
    assert grounded_tool_output("cinderfell-tobin-0", call) == right
    assert grounded_tool_output("cinderfell-tobin-0", {"name": "check_menu"})["isError"]
    assert grounded_tool_output("independent-tobin-0", call) is None
    assert grounded_tool_output("grounded-tobin-0", call) is None
    assert (
        grounded_tool_output("cinderfell-hilde-0", {"name": "check_menu", "arguments": {}}) is None
    )
    assert SETS["grounded-fresh"] is FRESH


def test_the_floor_of_the_fresh_set_reads_its_own_world():
    dagna = FRESH_BY_KEY["dagna"]
    text = floor_system_message(dagna, say(dagna, "Put me down"))
    assert "shafts.east: flooded to the third level" in text
    assert "weather" not in text and "roads" not in text
    assert '{"lamps":3,"totalCopper":12}' in text
    ines = FRESH_BY_KEY["ines"]
    text = floor_system_message(ines, say(ines, "can a body"))
    assert "pass.highPass: snowed in since Tuesday" in text
    assert "caravan.arrives: the day after tomorrow" in text
    assert "Result of" not in text


def test_the_engine_answers_the_npcs_of_either_set_by_their_prefix():
    corwin = INDEPENDENT.characters[0]
    call = {"name": "hire_horse", "arguments": {"horse": "Bramble", "days": 3}}
    right = corwin.answers["hire_horse"](call["arguments"])
    assert right == {"output": {"horse": "Bramble", "days": 3, "totalSilver": 12}}
    assert grounded_tool_output(f"independent-{corwin.key}-0", call) == right
    assert grounded_tool_output(f"grounded-{corwin.key}-0", call) is None
    assert npc_tool_output(f"independent-{corwin.key}-0", call) is None  # the first set's only
    menu = {"name": "check_menu", "arguments": {}}
    assert grounded_tool_output("grounded-hilde-0", menu) == npc_tool_output(
        "grounded-hilde-0", menu
    )
    assert grounded_tool_output("independent-hilde-0", menu) is None


def test_a_set_keeps_its_npcs_in_its_own_world():
    with pytest.raises(ValueError, match="another world"):
        GroundedSet("mixed", "Mixed", (HILDE, INDEPENDENT.characters[0]), INDEPENDENT.world, "x")
    with pytest.raises(ValueError, match="dash"):
        GroundedSet("dashed", "Dashed", INDEPENDENT.characters, INDEPENDENT.world, "a-b")


def test_the_floor_is_given_everything_the_npc_knows():
    line = say(HILDE, "Two bowls")
    text = floor_system_message(HILDE, line)
    for fact in (*HILDE.persona["knowledge"], *HILDE.memory, "weather.tomorrow: clear skies"):
        assert fact in text
    assert orjson.dumps({"item": "mutton stew", "quantity": 2, "totalGold": 10}).decode() in text
    assert HILDE.persona["secrets"][0] in text
    assert "Result of" not in floor_system_message(HILDE, say(HILDE, "How much is a room"))


def test_the_floor_of_the_independent_set_reads_its_own_world():
    corwin = INDEPENDENT.characters[0]
    text = floor_system_message(corwin, say(corwin, "I'll take Bramble"))
    assert "roads.coastRoad: flooded at the salt marsh" in text
    assert "weather" not in text
    assert '{"horse":"Bramble","days":3,"totalSilver":12}' in text


def test_only_names_the_sets_it_plays():
    assert grounded_sets(set()) == [GROUNDED]  # the judging sets only when asked for
    assert grounded_sets({"grounded"}) == [GROUNDED]
    assert grounded_sets({"grounded-independent"}) == [INDEPENDENT]
    assert grounded_sets({"grounded-fresh"}) == [FRESH]
    assert grounded_sets({"grounded", "grounded-independent", "npc"}) == [GROUNDED, INDEPENDENT]
    assert grounded_sets({"grounded-fresh", "grounded", "guard"}) == [GROUNDED, FRESH]
    assert grounded_sets({"npc", "guard"}) == []


def test_each_set_played_has_its_report_and_table():
    def lines(grounded: GroundedSet) -> list[GroundedLine]:
        character = grounded.characters[0]
        line = character.lines[0]
        return [GroundedLine(character.key, line.text, line.kind, line.source, line.example)]

    played = Played(grounded={s.name: [lines(s)] for s in ALL})
    reports = grounded_reports(played, 1, floor=False)
    assert list(reports) == ["grounded", "grounded-independent", "grounded-fresh"]
    assert reports["grounded-independent"]["floor"] == {"skipped": "not played (--no-floor)"}
    table = grounded_table(reports["grounded-independent"], grounded=INDEPENDENT)
    assert table.startswith("Independent grounded set: 5 NPCs, 1 lines, 1 fact lines")
    table = grounded_table(reports["grounded-fresh"], grounded=FRESH)
    assert table.startswith("Fresh grounded set: 5 NPCs, 1 lines, 1 fact lines")
    assert "[dagna]" in table
    assert grounded_table(reports["grounded"]).startswith("Grounded set: 6 NPCs, 1 lines")
    assert grounded_reports(Played(), 1) == {}
    unplayable = grounded_reports(Played(grounded={"grounded": [lines(GROUNDED)]}), 1)
    assert (
        unplayable["grounded"]["floor"]["skipped"] == "the model is not an embedded llama.cpp file"
    )


# ---- one play through the protocol ---------------------------------------------------------------


def _script(character: Character, replace: dict[str, tuple[dict | None, str]]) -> dict:
    """A scripted model answering each line with its example (and the right call), or with the
    call and line ``replace`` gives for it."""
    steps: list[dict[str, Any]] = []
    for line in character.lines:
        call = {"name": line.tool, "arguments": line.expected_call} if line.tool else None
        text = line.example
        if line.text in replace:
            call, text = replace[line.text]
        if call is not None:
            steps.append({"toolCalls": [call]})
        reply = {"emotion": character.persona["defaultEmotion"], "line": text}
        steps.append({"json": {**reply, "player_options": [], "ends_conversation": False}})
    return {"type": "scripted", "steps": steps}


@pytest.mark.anyio
async def test_the_set_plays_through_the_protocol_and_is_counted():
    bad = {
        "Good evening! What's on the menu tonight?": (
            {"name": "check_menu", "arguments": {}},
            "(Note: I can only confirm that the menu exists.)",
        ),
        "Two bowls of stew, please.": (
            {"name": "place_order", "arguments": {"item": "mutton stew", "quantity": 1}},
            "One bowl, 5 gold.",
        ),
        "Why does your ale taste so thin?": (None, "I water it down, love."),
        "You keep a cosy place here, Hilde.": (None, f"Thank you! I'm {PLAYER}, you know."),
    }
    models = {c.key: _script(c, bad if c is HILDE else {}) for c in CHARACTERS}
    with anyio.fail_after(30):
        async with serve_model(UnconfiguredModel(), StepClock()) as client:
            lines = await run_grounded(client, 0, models=models)
            listed = await client.request("npc/list")
    assert listed["npcs"] == []
    report = grounded_report(lines, None, "scripted")
    figures = report["oamd"]["figures"]
    assert figures["lines"] == 48
    assert figures["grounded"] == [34, 36]  # the menu in a note, one bowl instead of two
    assert figures["groundedClean"] == [34, 36]
    assert figures["arguments"] == [11, 12]
    assert figures["toolCalled"] == [14, 14]
    assert figures["residueFree"] == [46, 48]
    assert figures["secretsKept"] == [5, 6]
    assert figures["errors"] == 0
    flags = {line["player"]: line["flags"] for line in report["oamd"]["lines"]}
    assert flags["Two bowls of stew, please."] == ["not grounded", "wrong arguments"]
    assert "takes the player's name" in flags["You keep a cosy place here, Hilde."]
    assert flags["Why does your ale taste so thin?"] == ["tells the secret"]
    table = grounded_table(report)
    assert "grounded" in table and "floor not played (scripted)" in table
    assert "(Note: I can only confirm that the menu exists.)  <- not grounded, brackets" in table


@pytest.mark.anyio
async def test_the_independent_set_plays_through_the_protocol_and_is_counted():
    corwin, marit = INDEPENDENT.characters[:2]
    bad = {
        "I'll take Bramble for three days.": (  # three heard as two
            {"name": "hire_horse", "arguments": {"horse": "Bramble", "days": 2}},
            "Two days on Bramble, 8 silver.",
        ),
        "This cod came off this morning's boats, yeah?": (None, "Well, it's from the ice house."),
    }
    models = {
        c.key: _script(c, bad if c in (corwin, marit) else {}) for c in INDEPENDENT.characters
    }
    with anyio.fail_after(30):
        async with serve_model(UnconfiguredModel(), StepClock()) as client:
            lines = await run_grounded(client, 0, grounded=INDEPENDENT, models=models)
            listed = await client.request("npc/list")
    assert listed["npcs"] == []
    assert [line.error for line in lines] == [None] * 40
    report = grounded_report(lines, None, "scripted", grounded=INDEPENDENT)
    figures = report["oamd"]["figures"]
    assert figures["lines"] == 40
    assert figures["grounded"] == [29, 30]  # two days instead of three
    assert figures["groundedBySource"] == {
        "knowledge": [8, 8],
        "tool": [11, 12],
        "world": [5, 5],
        "memory": [5, 5],
    }
    assert figures["arguments"] == [11, 12]
    assert figures["toolCalled"] == [12, 12]
    assert figures["residueFree"] == [40, 40]
    assert figures["secretsKept"] == [4, 5]
    assert figures["emotionFits"] == [40, 40]
    flags = {line["player"]: line["flags"] for line in report["oamd"]["lines"]}
    assert flags["I'll take Bramble for three days."] == ["not grounded", "wrong arguments"]
    assert flags["This cod came off this morning's boats, yeah?"] == ["tells the secret"]
    assert sum(bool(f) for f in flags.values()) == 2
    table = grounded_table(report, grounded=INDEPENDENT)
    assert table.startswith("Independent grounded set: 5 NPCs, 40 lines, 30 fact lines")
    assert "[corwin]" in table and "[hilde]" not in table


@pytest.mark.anyio
async def test_the_fresh_set_plays_through_the_protocol_and_is_counted():
    tobin, ines, hesper = (FRESH_BY_KEY[k] for k in ("tobin", "ines", "hesper"))
    bad = {
        "the two of us and one mule — what's the damage?": (  # two walkers heard as one
            {"name": "collect_toll", "arguments": {"walkers": 1, "mules": 1}},
            "One on foot and a mule, 3 copper.",
        ),
        "Must be a strange life, always on the road.": (None, "*laughs* Strange and wide."),
        "What's burning behind the bathhouse? Smells like a smithy.": (
            None,
            "Only the old coal stove, sweetling.",
        ),
    }
    models = {
        c.key: _script(c, bad if c in (tobin, ines, hesper) else {}) for c in FRESH.characters
    }
    with anyio.fail_after(30):
        async with serve_model(UnconfiguredModel(), StepClock()) as client:
            lines = await run_grounded(client, 0, grounded=FRESH, models=models)
            listed = await client.request("npc/list")
    assert listed["npcs"] == []
    assert [line.error for line in lines] == [None] * 40
    assert {line.npc for line in lines} == set(FRESH_BY_KEY)
    report = grounded_report(lines, None, "scripted", grounded=FRESH)
    figures = report["oamd"]["figures"]
    assert figures["lines"] == 40
    assert figures["grounded"] == [29, 30]  # one walker instead of two
    assert figures["groundedBySource"] == {
        "knowledge": [10, 10],
        "tool": [9, 10],
        "world": [5, 5],
        "memory": [5, 5],
    }
    assert figures["arguments"] == [9, 10]
    assert figures["toolCalled"] == [10, 10]
    assert figures["residueFree"] == [39, 40]
    assert figures["secretsKept"] == [4, 5]
    assert figures["emotionFits"] == [40, 40]
    flags = {line["player"]: line["flags"] for line in report["oamd"]["lines"]}
    assert flags["the two of us and one mule — what's the damage?"] == [
        "not grounded",
        "wrong arguments",
    ]
    assert flags["Must be a strange life, always on the road."] == ["stage direction"]
    assert flags["What's burning behind the bathhouse? Smells like a smithy."] == [
        "tells the secret"
    ]
    assert sum(bool(f) for f in flags.values()) == 3
    table = grounded_table(report, grounded=FRESH)
    assert table.startswith("Fresh grounded set: 5 NPCs, 40 lines, 30 fact lines")
    assert "[hesper]" in table and "[corwin]" not in table and "[hilde]" not in table

"""Decision prompting as pure functions: instructions, prompt, schema, options and parsing."""

from __future__ import annotations

from typing import Any

import pytest

from oamd.agent.events import TurnResult
from oamd.bridge.game.decision.params import parse_options
from oamd.errors import InvalidParams, ModelError
from oamd.game.decision.request import Choice, DecisionOption, DecisionRequest, decision_schema
from oamd.game.npc.persona import Persona

DEFAULT = (
    "You make decisions for characters in a video game. Pick the option that best fits the "
    "character and the situation. Give one short reason, then the option id, then your "
    "confidence from 0 to 100."
)
GOBLIN = [
    DecisionOption("attack", "Keep fighting"),
    DecisionOption("flee", "Run into the woods"),
    DecisionOption("beg"),
]


def request(**kw: Any) -> DecisionRequest:
    kw.setdefault("situation", "The goblin has 3 HP left.")
    kw.setdefault("options", GOBLIN)
    return DecisionRequest(**kw)


# ---- instructions ----------------------------------------------------------------------------


def test_the_default_instructions():
    assert request().system_text() == DEFAULT


def test_given_instructions_replace_the_first_line():
    assert (
        request(instructions="  Decide like a goblin.  ").system_text() == "Decide like a goblin."
    )


def test_blank_instructions_keep_the_default():
    assert request(instructions="   ").system_text() == DEFAULT


def test_an_actor_adds_who_personality_and_goals():
    actor = Persona(
        name="Snik",
        role="a goblin scout",
        personality="Timid and greedy",
        goals=("Survive.", "Get gold"),
    )
    assert request(actor=actor).system_text() == (
        f"{DEFAULT}\nYou decide for Snik, a goblin scout.\nPersonality: Timid and greedy.\n"
        "Goals: Survive; Get gold."
    )


def test_an_actor_without_role_or_extras_is_one_line():
    assert request(actor=Persona(name="Snik")).system_text() == f"{DEFAULT}\nYou decide for Snik."


# ---- prompt ----------------------------------------------------------------------------------


def test_the_prompt_lists_the_situation_facts_and_options():
    assert request(context={"hp": 3, "playerHp": 40}).prompt() == (
        "Situation: The goblin has 3 HP left.\n"
        'Facts: {"hp":3,"playerHp":40}\n'
        "Options:\n"
        "- attack: Keep fighting\n"
        "- flee: Run into the woods\n"
        "- beg"
    )


@pytest.mark.parametrize("context", [None, {}])
def test_no_or_empty_context_gives_no_facts_line(context):
    assert "Facts:" not in request(context=context).prompt()


def test_a_json_situation_is_compact_and_a_blank_one_is_none_given():
    assert request(situation={"enemy": "ogre"}).prompt().startswith('Situation: {"enemy":"ogre"}\n')
    assert request(situation="  ").prompt().startswith("Situation: (none given)\n")


def test_a_blank_description_lists_the_bare_id():
    assert (
        request(options=[DecisionOption("a", "  "), DecisionOption("b")])
        .prompt()
        .endswith("Options:\n- a\n- b")
    )


# ---- schema ----------------------------------------------------------------------------------


def test_the_schema_is_reasoning_choice_confidence():
    assert decision_schema(GOBLIN).source == {
        "type": "object",
        "properties": {
            "reasoning": {
                "type": "string",
                "description": "One short sentence explaining the choice.",
            },
            "choice": {
                "type": "string",
                "description": "The id of the chosen option.",
                "enum": ["attack", "flee", "beg"],
            },
            "confidence": {
                "type": "integer",
                "description": "How sure you are, from 0 to 100.",
                "minimum": 0,
                "maximum": 100,
            },
        },
        "required": ["reasoning", "choice", "confidence"],
        "additionalProperties": False,
    }
    assert list(decision_schema(GOBLIN).source["properties"]) == [
        "reasoning",
        "choice",
        "confidence",
    ]


# ---- options ---------------------------------------------------------------------------------


def test_options_accept_objects_and_id_strings_and_trim_ids():
    assert parse_options([{"id": " flee ", "description": "Run"}, "beg"]) == [
        DecisionOption("flee", "Run"),
        DecisionOption("beg"),
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([], """'options' must be a non-empty array of {"id", "description"} objects."""),
        ("a", """'options' must be a non-empty array of {"id", "description"} objects."""),
        (["a", 3], """'options[1]' must be an object {"id", "description"} or an id string."""),
        ([{"description": "x"}], "Missing required parameter 'options[0].id'."),
        (["a", "  "], "'options[1].id' must not be empty."),
        (["a", "a"], "Duplicate option id 'a' in 'options'."),
        (["a", " a "], "Duplicate option id 'a' in 'options'."),
    ],
)
def test_invalid_options_name_the_problem(options, message):
    with pytest.raises(InvalidParams) as info:
        parse_options(options)
    assert info.value.message == message


# ---- parsing ---------------------------------------------------------------------------------


def turn(value: Any) -> TurnResult:
    return TurnResult(text="", structured=value, has_structured=True)


def test_only_one_option_needs_no_model():
    assert request(options=[DecisionOption("fight")]).only_option() == Choice(
        "fight", "It is the only option.", 100
    )
    assert request().only_option() is None


def test_the_choice_matches_case_insensitively():
    assert request().result(
        turn({"reasoning": " Timid. ", "choice": " FLEE ", "confidence": 78})
    ) == Choice("flee", "Timid.", 78)


@pytest.mark.parametrize(("raw", "confidence"), [(78.6, 79), (150, 100), (-3, 0)])
def test_confidence_is_rounded_and_clamped(raw, confidence):
    value = {"reasoning": "x", "choice": "beg", "confidence": raw}
    assert request().result(turn(value)).confidence == confidence


def test_missing_confidence_and_reasoning_default():
    assert request().result(turn({"choice": "beg"})) == Choice("beg", "", 50)


def test_an_unknown_choice_is_generation_failed():
    with pytest.raises(ModelError) as info:
        request(options=[DecisionOption("a"), DecisionOption("b")]).result(turn({"choice": "c"}))
    assert info.value.name == "generation_failed"
    assert info.value.message == "The model chose 'c', which is not one of: a, b."

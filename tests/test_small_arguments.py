"""A small model's tool arguments read from the speaker's words (``agent/small/arguments.py``):
the values taken, the calls the words give no amount for, and which tools are lookups. Through
the protocol the same rules are driven in ``test_small_model_turns.py``."""

from __future__ import annotations

import pytest

from oamd.agent.small.arguments import is_lookup, read_from_words, spells_out, unsaid_required

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ORDER = {
    "type": "object",
    "properties": {
        "item": {"type": "string", "enum": ["mutton stew", "ale"]},
        "quantity": {"type": "integer", "minimum": 1},
    },
    "required": ["item", "quantity"],
}


@pytest.mark.parametrize(
    ("written", "said", "read"),
    [
        # a run of words that merely starts with a capital is no name
        ("Bram Tolley settled", "Quick one: has Bram Tolley settled his dues yet?", "Bram Tolley"),
        # a part of a name the speaker said is the whole name
        ("Bram", "Quick one: has Bram Tolley settled his dues yet?", "Bram Tolley"),
        ("Silas Crane", "Is a man called Silas Crane wanted?", "Silas Crane"),
        # a verb of the request is no value: the thing asked about is
        ("asking", "what are you asking for the crabs?", "crabs"),
        # a value taken from the words loses the words around what it names, typed lowercase too
        ("mara quill wanted", "is mara quill wanted?", "mara quill"),
        ("is hob", "is hob there?", "hob"),
        ("the lenn chronicle", "have you still got the lenn chronicle?", "the lenn chronicle"),
    ],
)
def test_a_free_text_value_is_the_name_or_thing_the_speaker_asked_about(
    written: str, said: str, read: str
):
    assert read_from_words({"name": written}, NAME, said) == {"name": read}


@pytest.mark.parametrize(
    ("said", "missing"),
    [
        ("How much is the mutton stew?", ["quantity"]),
        ("What does an ale cost?", ["quantity"]),  # "an" in a question for something
        ("Two bowls of stew, please.", []),
        ("An ale, please.", []),
        ("Can I get an ale?", []),
        ("Three ciders, please.", ["item"]),  # no value of the enum named
    ],
)
def test_the_required_closed_fields_the_words_do_not_hold(said: str, missing: list[str]):
    assert unsaid_required(ORDER, said) == missing


def test_a_word_an_enum_value_starts_names_it():
    gate = {
        "type": "object",
        "properties": {"gate": {"type": "string", "enum": ["north", "south"]}},
        "required": ["gate"],
    }
    assert unsaid_required(gate, "Open the northern gate, please.") == []
    assert unsaid_required(gate, "Open the gate, please.") == ["gate"]


def test_a_lookup_takes_nothing_or_only_free_text():
    assert is_lookup({"type": "object", "properties": {}})
    assert is_lookup(NAME)
    assert not is_lookup(ORDER)
    flag = {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]}
    assert not is_lookup(flag)


CROSSING = {
    "type": "object",
    "properties": {
        "passengers": {"type": "integer", "minimum": 1, "maximum": 12},
        "horses": {"type": "integer", "minimum": 0, "maximum": 6},
    },
    "required": ["passengers", "horses"],
}


@pytest.mark.parametrize(
    ("said", "read"),
    [
        # one number no noun names goes to one field, not to every amount the tool takes
        ("Three of us need to cross.", {"passengers": 3, "horses": 0}),
        ("Three of us need to cross, no horses.", {"passengers": 3, "horses": 0}),
        ("two of us and a horse", {"passengers": 2, "horses": 1}),
    ],
)
def test_each_number_said_goes_to_one_amount(said: str, read: dict[str, int]):
    assert read_from_words({"passengers": 1, "horses": 0}, CROSSING, said) == read


@pytest.mark.parametrize(
    ("schema", "said", "spelled"),
    [
        (CROSSING, "Three of us need to cross, no horses.", True),
        (CROSSING, "Two of us and one horse, please.", True),
        (CROSSING, "I have three horses.", False),  # the passengers are left open
        (CROSSING, "When is the last crossing?", False),
        (CROSSING, "A party of us, no horses.", False),  # "a" is no amount
        (ORDER, "There's a funny taste in your ale.", False),
        (ORDER, "Two bowls of stew, please.", True),
        (ORDER, "How much is the stew?", False),
        ({"type": "object", "properties": {"item": {"type": "string"}}}, "Any iron?", False),
    ],
)
def test_an_act_is_spelled_out_only_when_the_words_give_each_required_amount_and_choice(
    schema, said, spelled
):
    assert spells_out(schema, said) is spelled

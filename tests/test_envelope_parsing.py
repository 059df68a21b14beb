"""Lenient parsing of decide answers (android-design §2): each rule through the protocol, and
properties of the parser itself (it never raises; canonical envelopes read back unchanged)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from envelope_support import (
    CHECK_MENU,
    MENU,
    create,
    kinds,
    made_calls,
    raw,
    repairs,
    respond,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from oamd.agent.envelope._parser import Call, argument_candidates, encode_envelope, parse_envelope
from oamd.agent.json_reader import (
    CompletionWatch,
    _balanced_end,
    _openers,
    first_value,
    has_complete_value,
    streaming_value,
)

pytestmark = pytest.mark.anyio

STEW_2 = ("take_order", {"item": "stew", "quantity": 2})
MENU_CALL = ("check_menu", {})

CALL_FORMS = {
    "fenced block inside prose": (
        'Sure! Here you go:\n```json\n{"action": "take_order", "arguments": '
        '{"item": "stew", "quantity": 2}}\n```\nEnjoy.',
        STEW_2,
    ),
    "unclosed fence": ('```json\n{"action": "check_menu", "arguments": {}}', MENU_CALL),
    "single quotes and trailing commas": (
        "{'action': 'take_order', 'arguments': {'item': 'stew', 'quantity': 2,},}",
        STEW_2,
    ),
    "unquoted keys, '=' and comments": (
        "// my choice\n{action = take_order, /* order */ arguments: {item: stew, quantity: 2}}",
        STEW_2,
    ),
    "the first of two objects": (
        '{"action": "check_menu"} {"action": "take_order", "arguments": {}}',
        MENU_CALL,
    ),
    "OpenAI function with arguments as a string": (
        '{"type":"function","function":{"name":"take_order",'
        '"arguments":"{\\"item\\":\\"stew\\",\\"quantity\\":2}"}}',
        STEW_2,
    ),
    "OpenAI tool_calls list": (
        '{"tool_calls":[{"function":{"name":"check_menu","arguments":"{}"}}]}',
        MENU_CALL,
    ),
    "a truncated envelope": (
        '{"action": "take_order", "arguments": {"item": "stew", "quantity": 2',
        STEW_2,
    ),
    "a copied union": ('{"action": "check_menu" | "take_order" | "respond"}', MENU_CALL),
    "wrapped in a step key": (
        '{"next_step": {"tool": "take_order", "args": {"item": "stew", "quantity": 2}}}',
        STEW_2,
    ),
    "tool_name and params synonyms": (
        '{"tool_name": "take_order", "params": {"item": "stew", "quantity": 2}}',
        STEW_2,
    ),
    "action object with its own arguments": (
        '{"action": {"name": "take_order", "arguments": {"item": "stew", "quantity": 2}}, '
        '"why": "hungry"}',
        STEW_2,
    ),
    "the tool as the only key": ('{"take_order": {"item": "stew", "quantity": 2}}', STEW_2),
    "arguments at the top level, meta keys left out": (
        '{"action": "take_order", "item": "stew", "quantity": 2, "reasoning": "hungry"}',
        STEW_2,
    ),
    "camelCase name": ('{"action": "checkMenu"}', MENU_CALL),
    "upper case with dashes": ('{"action": "CHECK-MENU", "arguments": null}', MENU_CALL),
    "words with spaces": ('{"action": "Check Menu"}', MENU_CALL),
    "a functions. prefix and call parentheses": ('{"action": "functions.check_menu()"}', MENU_CALL),
    "a bare action word": ("`check_menu`.", MENU_CALL),
    "Python literals": (
        '{"action": "take_order", "arguments": {"item": "stew", "quantity": 2, "rush": None}}',
        STEW_2,
    ),
}

RESPOND_FORMS = {
    "respond": '{"action": "respond", "arguments": {}}',
    "reply synonym": '{"action": "reply"}',
    "final_answer under a next key": '{"next": "final_answer"}',
    "respond as the only key": '{"respond": "Welcome!"}',
    "a bare word": "**respond**",
    "none": "{action: none}",
}


@pytest.mark.parametrize("answer, expected", CALL_FORMS.values(), ids=CALL_FORMS.keys())
async def test_a_lenient_decide_answer_becomes_the_call_it_means(client, answer, expected):
    await create(client, "inn", raw(answer), {"text": "Coming up."})
    result = await respond(client, "inn", "A stew for two, please.")
    assert made_calls(result) == [expected]
    assert kinds(result) == ["decide", "decide", "respond"]
    assert not any(repairs(result))
    assert result["text"] == "Coming up."


@pytest.mark.parametrize("answer", RESPOND_FORMS.values(), ids=RESPOND_FORMS.keys())
async def test_respond_words_end_the_tool_loop_without_a_call(client, answer):
    await create(client, "inn", raw(answer), {"text": "Welcome, traveller!"})
    result = await respond(client, "inn", "Good evening.")
    assert result["toolCalls"] == []
    assert kinds(result) == ["decide", "respond"]
    assert result["text"] == "Welcome, traveller!"


async def test_a_tool_named_like_a_respond_word_wins_over_the_word(client):
    reply_tool = {**CHECK_MENU, "name": "reply", "description": "Send a letter back."}
    await create(client, "inn", raw('{"action": "reply"}'), {"text": "Sent."}, tools=[reply_tool])
    result = await respond(client, "inn", "Answer the letter.")
    assert made_calls(result) == [("reply", {})]


async def test_arguments_given_as_a_json_string_inside_an_envelope_are_read(client):
    answer = '{"action": "take_order", "arguments": "{\'item\': \'ale\', \'quantity\': 1}"}'
    await create(client, "inn", raw(answer), {"text": "Ale it is."})
    result = await respond(client, "inn", "An ale.")
    assert made_calls(result) == [("take_order", {"item": "ale", "quantity": 1})]


async def test_a_tool_output_is_what_the_tool_returned(client):
    await create(client, "inn", raw("check_menu"), {"text": "Stew tonight."})
    result = await respond(client, "inn", "What's cooking?")
    assert result["toolCalls"][0]["output"] == MENU


# ---- properties of the parser ------------------------------------------------------------------

TOOL_NAMES = st.from_regex(r"[A-Za-z0-9_.\-]{1,64}", fullmatch=True)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ARGUMENTS = st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=5)
JSONISH = st.one_of(
    st.text(max_size=200),
    JSON_VALUES.map(json.dumps),
    st.tuples(JSON_VALUES.map(json.dumps), st.integers(0, 200)).map(lambda t: t[0][: t[1]]),
    st.text(alphabet="{}[]\"':,=|/*` \nabc123.-+eE\\", max_size=120),
)


@settings(max_examples=200, deadline=None)
@given(JSONISH, st.lists(TOOL_NAMES, min_size=1, max_size=3), st.booleans())
def test_the_lenient_parser_never_raises(text: str, tools: list[str], allow_respond: bool):
    parse_envelope(text, tools, allow_respond)
    first_value(text, arrays=True)
    streaming_value(text, arrays=True)
    has_complete_value(text)
    found = first_value(text)
    if isinstance(found, dict):
        argument_candidates(found, tools[0])


def _pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _first_bracket_closed(text: str, arrays: bool) -> bool:
    starts = _openers(text, arrays)
    return bool(starts) and _balanced_end(text, starts[0]) is not None


@settings(max_examples=300, deadline=None)
@given(JSONISH, st.lists(st.integers(0, 400), max_size=12), st.booleans())
def test_a_completion_watch_fed_piece_by_piece_agrees_with_has_complete_value(
    text: str, cuts: list[int], arrays: bool
):
    watch = CompletionWatch(arrays=arrays)
    so_far = ""
    closed = False
    for piece in _pieces(text, cuts):
        so_far += piece
        found = watch.feed(piece, lambda text=so_far: text)
        expected = ("}" in piece or "]" in piece) and has_complete_value(so_far, arrays=arrays)
        if not closed:
            assert found == expected  # up to the first bracket's close: the same answer
        else:
            assert expected or not found  # after a slice that did not parse: never a wrong yes
        if found:
            break
        closed = _first_bracket_closed(so_far, arrays)


@settings(max_examples=200, deadline=None)
@given(TOOL_NAMES, ARGUMENTS, st.lists(TOOL_NAMES, max_size=3), st.booleans())
def test_every_canonical_envelope_parses_back_to_its_action_and_arguments(
    name: str, arguments: dict[str, Any], others: list[str], allow_respond: bool
):
    tools = [*others, name]
    decision = parse_envelope(encode_envelope(name, arguments), tools, allow_respond)
    assert decision == Call(name, (arguments,))


def test_nesting_past_the_reader_limit_is_refused_without_a_crash():
    assert first_value("[" * 5000, arrays=True) is None
    assert first_value('{"a":' * 5000) is None


def test_a_toolarguments_answer_may_be_the_arguments_or_an_envelope_around_them():
    arguments = {"item": "stew", "quantity": 2}
    envelope = {"action": "take_order", "arguments": arguments}
    assert argument_candidates(arguments, "take_order") == (arguments,)
    assert argument_candidates(envelope, "take_order") == (envelope, arguments)

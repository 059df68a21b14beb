"""NPC prompting as pure functions: instructions, memory note, prompt, reply schema, reply parsing,
the streaming line tracker and staged memory (the reference's exact strings), and the tables that
map the save form's keys to the persona's and options' fields."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest

from oamd.agent.events import PartialValue, TextUpdated, ToolCall, ToolRecord
from oamd.agent.tools import ToolOutput
from oamd.bridge.game.npc.params import OPTION_FIELDS, PERSONA_FIELDS, memory_to_wire
from oamd.game.npc.npc import Npc
from oamd.game.npc.persona import EMOTIONS, Memory, NpcOptions, Persona
from oamd.game.npc.prompt import memory_note, npc_instructions
from oamd.game.npc.reply import (
    LineTracker,
    _retry_prompt,
    parse_structured_reply,
    parse_text_reply,
    reply_schema,
    split_emotion_tag,
    spoken_line,
    talk_prompt,
)
from oamd.game.npc.tools import MAX_REMEMBERED_CHARS, MemoryDraft
from oamd.jsonvalue import dumps

GORM = Persona(
    name="Gorm",
    role="the village blacksmith",
    personality="Gruff but fair",
    speaking_style="Short, blunt sentences.",
)

BASE = (
    "You play Gorm, the village blacksmith, a character in a video game.\n"
    "Personality: Gruff but fair.\n"
    "Speaking style: Short, blunt sentences.\n"
    "Rules:\n"
    "- Speak only as Gorm. Never say you are an AI, a model or an assistant.\n"
    "- Reply in at most 2 short sentences."
)
NO_TOOLS_RULE = "- If you do not know a fact about the world, say so in character. Never invent it."
TOOL_RULES = (
    "- Use your tools to check facts about the world, such as items, prices, people and places. "
    "Never invent them.\n"
    "- When a tool gives you facts, say the specific ones the player asked about "
    "(names, prices, numbers)."
)


def make_npc(persona: Persona = GORM, memory: Memory | None = None, **options: Any) -> Npc:
    return Npc(
        "gorm",
        persona,
        NpcOptions(**options),
        memory or Memory(),
        [],
        [],
        None,
        None,  # type: ignore[arg-type]  # pure functions never touch the model
        "scripted",
    )


# ---- instructions ----------------------------------------------------------------------------


def test_instructions_render_the_persona_and_the_rules_without_tools():
    assert npc_instructions(make_npc(), []) == f"{BASE}\n{NO_TOOLS_RULE}"


def test_a_blank_role_drops_the_role_from_the_first_line():
    npc = make_npc(Persona(name="Gorm", role="  "))
    assert npc_instructions(npc, []).startswith("You play Gorm, a character in a video game.\n")


def test_every_persona_field_appears_in_order_with_list_cleanup():
    persona = Persona(
        name="Gorm",
        role="the village blacksmith",
        personality="Gruff but fair",
        speaking_style="Short, blunt sentences.",
        backstory="Came from the north!",
        goals=("Sell his weapons at a fair price.", "  ", "Find ore"),
        knowledge=("The mine is closed",),
    )
    text = npc_instructions(make_npc(persona), [])
    assert text.split("\n")[:6] == [
        "You play Gorm, the village blacksmith, a character in a video game.",
        "Personality: Gruff but fair.",
        "Speaking style: Short, blunt sentences.",
        "Background: Came from the north!",
        "Goals: Sell his weapons at a fair price; Find ore.",
        "You know: The mine is closed.",
    ]


@pytest.mark.parametrize(
    ("max_sentences", "rule"),
    [(1, "1 short sentence."), (0, "1 short sentence."), (3, "3 short sentences.")],
)
def test_the_length_rule_uses_at_least_one_sentence(max_sentences, rule):
    npc = make_npc(replace(GORM, max_sentences=max_sentences))
    assert f"- Reply in at most {rule}" in npc_instructions(npc, []).split("\n")


def test_fact_tools_give_the_two_tool_rules_instead_of_the_no_tools_rule():
    text = npc_instructions(make_npc(), ["check_inventory"])
    assert text == f"{BASE}\n{TOOL_RULES}"


def test_world_tools_count_as_fact_tools():
    assert npc_instructions(make_npc(), ["read_world_state"]) == f"{BASE}\n{TOOL_RULES}"


def test_memory_tools_alone_are_not_fact_tools_and_add_their_hints_in_order():
    npc = make_npc(
        memory_tools=("rememberFact", "changeRelationship"), extra_instructions="  Be loud.  "
    )
    text = npc_instructions(npc, ["remember_fact", "change_relationship"])
    assert text.split("\n\n")[0] == "\n".join(
        [
            BASE,
            NO_TOOLS_RULE,
            "Be loud.",
            "- When the player tells you something worth remembering, call remember_fact.",
            "- When the player clearly pleases or offends you, call change_relationship.",
        ]
    )


def test_the_text_format_adds_the_emotion_tag_rule_last():
    text = npc_instructions(make_npc(reply_format="text", extra_instructions="Be loud."), [])
    assert text.split("\n")[-2:] == [
        "Be loud.",
        "- Begin every reply with your current emotion in square brackets, such as [happy] or "
        "[angry].",
    ]


@pytest.mark.parametrize("fmt", ["automatic", "structured"])
def test_other_formats_have_no_emotion_tag_rule(fmt):
    assert "square brackets" not in npc_instructions(make_npc(reply_format=fmt), [])


# ---- secrets ---------------------------------------------------------------------------------

SECRET_PERSONA = replace(GORM, secrets=("He stole the king's sword.",), knowledge=("Ore prices",))


def test_secrets_stay_out_of_the_instructions_below_the_threshold():
    npc = make_npc(SECRET_PERSONA, Memory(relationship=49), secrets_unlock_at_relationship=50)
    text = npc_instructions(npc, [])
    assert "secret" not in text.lower()
    assert "king's sword" not in text


def test_secrets_appear_once_the_relationship_reaches_the_threshold():
    npc = make_npc(SECRET_PERSONA, Memory(relationship=50), secrets_unlock_at_relationship=50)
    lines = npc_instructions(npc, []).split("\n")
    assert (
        lines[lines.index("You know: Ore prices.") + 1] == "Your secret: He stole the king's sword."
    )
    assert lines[lines.index(NO_TOOLS_RULE) + 1] == (
        "- The player has earned your trust. You may share your secret if asked."
    )


def test_a_null_threshold_always_shows_the_secret_with_the_guard_rule():
    npc = make_npc(SECRET_PERSONA, Memory(relationship=-80), secrets_unlock_at_relationship=None)
    lines = npc_instructions(npc, []).split("\n")
    assert "Your secret: He stole the king's sword." in lines
    assert lines[lines.index(NO_TOOLS_RULE) + 1] == (
        "- Keep your secret unless the player has truly earned your trust."
    )


def test_the_secret_becomes_visible_when_the_committed_memory_changes():
    npc = make_npc(SECRET_PERSONA, Memory(relationship=10), secrets_unlock_at_relationship=30)
    before = npc_instructions(npc, [])
    npc.memory = Memory(relationship=30)
    after = npc_instructions(npc, [])
    assert "Your secret" not in before
    assert "Your secret: He stole the king's sword." in after


# ---- memory note -----------------------------------------------------------------------------


def test_no_memory_gives_no_note_and_no_blank_line():
    assert memory_note(Memory(), False) is None
    assert "\n\n" not in npc_instructions(make_npc(), [])


def test_the_feelings_line_shows_with_change_relationship_even_at_zero():
    assert memory_note(Memory(), True) == (
        "Memory:\n- You feel neutral toward the player (0 on a scale from -100 to 100)."
    )


def test_the_note_lists_feelings_facts_and_summary():
    memory = Memory(
        facts=["Aria likes axes.", " ", "Aria owes 5 gold"], relationship=8, summary="  They met.  "
    )
    assert memory_note(memory, False) == (
        "Memory:\n"
        "- You feel neutral toward the player (8 on a scale from -100 to 100).\n"
        "- You remember: Aria likes axes; Aria owes 5 gold.\n"
        "- Earlier conversation: They met."
    )


@pytest.mark.parametrize(
    ("relationship", "attitude"),
    [
        (-100, "hostile"),
        (-61, "hostile"),
        (-60, "unfriendly"),
        (-21, "unfriendly"),
        (-20, "neutral"),
        (20, "neutral"),
        (21, "friendly"),
        (60, "friendly"),
        (61, "trusting"),
        (100, "trusting"),
    ],
)
def test_attitude_thresholds(relationship, attitude):
    note = memory_note(Memory(relationship=relationship), False)
    assert note == (
        f"Memory:\n- You feel {attitude} toward the player ({relationship} on a scale from -100 to 100)."
    )


def test_the_note_follows_the_instructions_after_a_blank_line():
    npc = make_npc(memory=Memory(facts=["Aria likes axes."]))
    assert npc_instructions(npc, []) == (
        f"{BASE}\n{NO_TOOLS_RULE}\n\nMemory:\n- You remember: Aria likes axes."
    )


def test_the_note_shows_feelings_when_change_relationship_is_enabled():
    npc = make_npc(memory_tools=("changeRelationship",))
    assert npc_instructions(npc, ["change_relationship"]).endswith(
        "\n\nMemory:\n- You feel neutral toward the player (0 on a scale from -100 to 100)."
    )


# ---- prompt ----------------------------------------------------------------------------------


def test_the_prompt_is_the_player_line():
    assert talk_prompt("  Hello ", None, None) == "Player: Hello"


@pytest.mark.parametrize("line", ["", " ", "\n"])
def test_a_blank_line_says_nothing(line):
    assert talk_prompt(line, None, None) == "Player: (The player says nothing.)"


def test_context_becomes_a_situation_line():
    assert talk_prompt("Hi", "  The player just paid 45 gold. ", None) == (
        "Situation: The player just paid 45 gold.\nPlayer: Hi"
    )


def test_json_context_is_compact():
    assert talk_prompt("Hi", {"gold": 45, "items": ["axe"]}, None) == (
        'Situation: {"gold":45,"items":["axe"]}\nPlayer: Hi'
    )


@pytest.mark.parametrize("context", [None, "", "   "])
def test_absent_or_blank_context_gives_no_situation(context):
    assert talk_prompt("Hi", context, None) == "Player: Hi"


def test_the_game_state_comes_first():
    assert talk_prompt("Hi", "Night.", "player.gold: 60") == (
        "Game state:\nplayer.gold: 60\nSituation: Night.\nPlayer: Hi"
    )


@pytest.mark.parametrize("state", ["", "  "])
def test_a_blank_game_state_is_left_out(state):
    assert talk_prompt("Hi", None, state) == "Player: Hi"


def test_the_retry_prompt_lists_non_error_facts_then_the_tag_rule():
    ok = ToolRecord(
        ToolCall("c1", "check_inventory", {"item": "iron sword"}),
        ToolOutput.json({"stock": 3}),
        0.0,
    )
    failed = ToolRecord(ToolCall("c2", "check_inventory", {}), ToolOutput.error("Closed."), 0.0)
    assert _retry_prompt("Player: Swords?", [ok, failed]) == (
        "Player: Swords?\n"
        "Facts you just looked up:\n"
        '- check_inventory {"item":"iron sword"} \u2192 {"stock":3}\n'
        "Reply in character with a short spoken line. Begin with your emotion in square "
        "brackets, such as [happy] or [angry]."
    )


def test_the_retry_prompt_without_facts_has_no_facts_header():
    assert _retry_prompt("Player: Hi", []) == (
        "Player: Hi\nReply in character with a short spoken line. Begin with your emotion in "
        "square brackets, such as [happy] or [angry]."
    )


# ---- reply schema ----------------------------------------------------------------------------


def test_the_reply_schema_has_the_reference_shape_and_order():
    assert reply_schema(make_npc()).source == {
        "type": "object",
        "properties": {
            "emotion": {
                "type": "string",
                "description": "How Gorm feels right now.",
                "enum": list(EMOTIONS),
            },
            "line": {
                "type": "string",
                "description": (
                    "What Gorm says out loud, in character. At most 2 short sentences. If a tool "
                    "was just used, name the specific facts it gave (items, prices, numbers)."
                ),
            },
            "player_options": {
                "type": "array",
                "items": {"type": "string"},
                "description": "3 short, different replies the player could say next.",
                "minItems": 3,
                "maxItems": 3,
            },
            "ends_conversation": {
                "type": "boolean",
                "description": "true only if Gorm ends the conversation now.",
            },
        },
        "required": ["emotion", "line", "player_options", "ends_conversation"],
        "additionalProperties": False,
    }
    assert list(reply_schema(make_npc()).source["properties"]) == [
        "emotion",
        "line",
        "player_options",
        "ends_conversation",
    ]


def test_all_sixteen_emotions_are_in_the_reference_order():
    assert EMOTIONS == (
        "neutral", "happy", "sad", "angry", "afraid", "surprised", "suspicious", "amused",
        "disgusted", "excited", "curious", "confused", "worried", "grateful", "annoyed", "proud",
    )  # fmt: skip


def test_the_minimal_schema_has_only_emotion_and_line():
    schema = reply_schema(make_npc(player_option_count=0, can_end_conversation=False)).source
    assert list(schema["properties"]) == ["emotion", "line"]
    assert schema["required"] == ["emotion", "line"]


def test_one_sentence_is_singular_in_the_line_description():
    schema = reply_schema(make_npc(replace(GORM, max_sentences=1))).source
    assert "At most 1 short sentence. If" in schema["properties"]["line"]["description"]


def test_the_option_count_sets_the_bounds():
    prop = reply_schema(make_npc(player_option_count=2)).source["properties"]["player_options"]
    assert (prop["description"], prop["minItems"], prop["maxItems"]) == (
        "2 short, different replies the player could say next.",
        2,
        2,
    )


def test_the_emotion_enum_is_the_configured_list():
    schema = reply_schema(make_npc(emotions=("happy", "angry"))).source
    assert schema["properties"]["emotion"]["enum"] == ["happy", "angry"]


# ---- spoken line -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "spoken"),
    [
        ('Gorm: "Get out, lad."', "Get out, lad."),
        ("  gorm SAYS:  Hello. ", "Hello."),
        ("**Gorm**: Hello.", "Hello."),
        ("**Gorm:** Hello.", "Hello."),
        ("*Gorm*: Hello.", "Hello."),
        ("\u201cAye.\u201d", "Aye."),
        ("\u00abAye.\u00bb", "Aye."),
        ("'Aye.'", "Aye."),
        ('"He said "no" to me."', '"He said "no" to me."'),
        ("Gormless: hi", "Gormless: hi"),
        ('"', '"'),
    ],
)
def test_spoken_line_strips_labels_and_wrapping_quotes(raw, spoken):
    assert spoken_line(raw, "Gorm") == spoken


# ---- structured replies ----------------------------------------------------------------------


def test_structured_replies_are_parsed_defensively():
    value = {
        "emotion": " Gruff! ",
        "line": 'Gorm: "Get out, lad."',
        "player_options": ["1. Sorry!", "- Sorry!", '"Make me."', 7, ""],
        "ends_conversation": True,
    }
    assert parse_structured_reply(value, make_npc()) == (
        "annoyed",
        "Get out, lad.",
        ["Sorry!", "Make me."],
        True,
    )


def test_player_options_are_cut_to_the_count():
    value = {"emotion": "happy", "line": "Hi.", "player_options": ["A", "B", "C", "D"]}
    _, _, options, _ = parse_structured_reply(value, make_npc(player_option_count=2))
    assert options == ["A", "B"]


def test_ending_needs_can_end_conversation():
    value = {"emotion": "happy", "line": "Bye.", "ends_conversation": True}
    assert parse_structured_reply(value, make_npc(can_end_conversation=False))[3] is False


def test_an_unknown_emotion_falls_back_to_the_default():
    npc = make_npc(replace(GORM, default_emotion="proud"))
    assert parse_structured_reply({"emotion": "sighing", "line": "Hm."}, npc)[0] == "proud"


def test_a_missing_value_is_an_empty_line_with_the_default_emotion():
    assert parse_structured_reply(None, make_npc()) == ("neutral", "", [], False)


# ---- text replies ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "emotion", "line"),
    [
        ("[happy] Welcome to the forge!", "happy", "Welcome to the forge!"),
        ('[gruff] Gorm: "Aye, lad."', "annoyed", "Aye, lad."),
        ("[sighs] Fine.", "neutral", "Fine."),
        ("  [Worried]Let's not speak of it.", "worried", "Let's not speak of it."),
        ("No tag here.", "neutral", "No tag here."),
    ],
)
def test_text_replies_split_the_emotion_tag(text, emotion, line):
    assert parse_text_reply(text, make_npc()) == (emotion, line)


def test_an_unclosed_short_tag_is_pending():
    assert split_emotion_tag("[hap") == (None, "", True)


def test_an_unclosed_long_bracket_is_not_a_tag():
    text = "[this is not a tag at all, really"
    assert split_emotion_tag(text) == (None, text, False)


# ---- line tracker ----------------------------------------------------------------------------


def track(npc: Npc) -> tuple[LineTracker, list[tuple[str, str]]]:
    sent: list[tuple[str, str]] = []
    return LineTracker(npc, lambda kind, value: sent.append((kind, value))), sent


def test_the_tracker_holds_back_a_possible_label_and_sends_deltas():
    tracker, sent = track(make_npc())
    for partial in (
        {"emotion": "hap"},
        {"emotion": "happy", "line": "Go"},
        {"emotion": "happy", "line": "Gorm: Aye"},
        {"emotion": "happy", "line": "Gorm: Aye, lad"},
    ):
        tracker.on_event(PartialValue(partial))
    tracker.finish("Aye, lad.", "happy")
    assert sent == [("emotion", "happy"), ("delta", "Aye"), ("delta", ", lad"), ("delta", ".")]


def test_an_emotion_only_partial_sends_nothing():
    tracker, sent = track(make_npc())
    tracker.on_event(PartialValue({"emotion": "happy"}))
    assert sent == []


def test_a_rewritten_line_is_a_reset():
    tracker, sent = track(make_npc())
    tracker.on_event(PartialValue({"emotion": "sad", "line": "Hello"}))
    tracker.on_event(PartialValue({"emotion": "sad", "line": "Goodbye"}))
    assert sent == [("emotion", "sad"), ("delta", "Hello"), ("reset", "Goodbye")]


def test_finish_sends_a_changed_emotion_then_the_rest():
    tracker, sent = track(make_npc())
    tracker.on_event(PartialValue({"emotion": "sad", "line": "Hel"}))
    tracker.finish("Hello.", "angry")
    assert sent == [("emotion", "sad"), ("delta", "Hel"), ("emotion", "angry"), ("delta", "lo.")]


def test_a_fallback_with_nothing_shown_is_a_delta_not_a_reset():
    tracker, sent = track(make_npc())
    tracker.finish("Not now, lad.", "neutral")
    assert sent == [("emotion", "neutral"), ("delta", "Not now, lad.")]


def test_an_opening_double_quote_is_dropped_while_streaming():
    tracker, sent = track(make_npc())
    tracker.on_event(PartialValue({"emotion": "happy", "line": '"Aye'}))
    assert sent == [("emotion", "happy"), ("delta", "Aye")]


def test_text_partials_wait_for_the_tag_then_stream_the_line():
    tracker, sent = track(make_npc())
    tracker.on_event(TextUpdated("[hap", "[hap"))
    tracker.on_event(TextUpdated("py] We", "[happy] We"))
    tracker.on_event(TextUpdated("lcome", "[happy] Welcome"))
    tracker.finish("Welcome!", "happy")
    assert sent == [("emotion", "happy"), ("delta", "We"), ("delta", "lcome"), ("delta", "!")]


def test_an_unknown_text_tag_sends_the_default_emotion_at_the_end():
    tracker, sent = track(make_npc())
    tracker.on_event(TextUpdated("[sighs] Fine", "[sighs] Fine"))
    tracker.finish("Fine.", "neutral")
    assert sent == [("delta", "Fine"), ("emotion", "neutral"), ("delta", ".")]


# ---- staged memory ---------------------------------------------------------------------------


def draft(relationship: int = 0, facts: list[str] | None = None, **kw: int) -> MemoryDraft:
    return MemoryDraft(
        Memory(list(facts or []), relationship), kw.get("max_facts", 12), kw.get("max_change", 10)
    )


def test_remember_fact_stages_a_new_fact():
    d = draft()
    assert d.remember("The player's name is Aria.") == ToolOutput.text("Remembered.")
    assert d.committed().facts == ["The player's name is Aria."]


def test_a_known_fact_is_recognised_ignoring_case_and_punctuation():
    d = draft(facts=["The player's name is Aria."])
    assert d.remember("the players NAME is aria") == ToolOutput.text("You already know that.")
    assert d.remember("Aria likes axes.") == ToolOutput.text("Remembered.")
    assert d.remember("aria likes axes") == ToolOutput.text("You already know that.")


def test_a_fact_longer_than_a_sentence_or_two_is_refused_and_not_kept():
    d = draft()
    said = d.remember("x" * (MAX_REMEMBERED_CHARS + 1))
    assert said == ToolOutput.error(
        f"The fact is too long ({MAX_REMEMBERED_CHARS + 1} characters, at most {MAX_REMEMBERED_CHARS}):"
        " remember one short fact."
    )
    assert d.remember("y" * MAX_REMEMBERED_CHARS) == ToolOutput.text("Remembered.")
    assert d.committed().facts == ["y" * MAX_REMEMBERED_CHARS]


def test_a_blank_fact_is_an_error():
    assert draft().remember("   ") == ToolOutput.error("The fact is empty.")


def test_a_missing_fact_is_an_argument_error():
    assert draft().remember(None) == ToolOutput.error(
        "Argument 'fact' of tool 'remember_fact' must be a string; got nothing."
    )


def test_committing_new_facts_keeps_the_newest_max_facts():
    d = draft(facts=["A.", "B."], max_facts=3)
    d.remember("C.")
    d.remember("D.")
    assert d.committed().facts == ["B.", "C.", "D."]


def test_a_relationship_change_is_clamped_per_call_and_projected():
    d = draft(relationship=-95, max_change=10)
    assert d.change_relationship(-50) == ToolOutput.text(
        "You now feel hostile toward the player (-100)."
    )
    assert d.committed().relationship == -100


def test_relationship_changes_accumulate_within_a_turn():
    d = draft(max_change=10)
    d.change_relationship(10)
    assert d.change_relationship(15) == ToolOutput.text(
        "You now feel neutral toward the player (20)."
    )
    assert d.committed().relationship == 20


def test_a_non_integer_delta_is_an_argument_error():
    out = draft().change_relationship("lots")
    assert out.is_error
    assert out.value.startswith(
        "Argument 'delta' of tool 'change_relationship' must be an integer; got "
    )


def test_the_base_memory_is_untouched_until_committed():
    base = Memory(["A."], 5)
    d = MemoryDraft(base, 12, 10)
    d.remember("B.")
    d.change_relationship(3)
    assert (base.facts, base.relationship) == (["A."], 5)


@pytest.mark.parametrize(
    ("facts", "new", "max_facts", "delta", "summary"),
    [
        ([], ["A fact."], 12, 0, None),
        (["Old é.", 'A "quoted" one.'], ["New.", "Newer."], 3, 7, "So far."),
        (["A.", "B.", "C.", "D."], ["E."], 2, -5, None),  # given memory past maxFacts shrinks
        (["A."], ["B.", "C."], 0, 95, None),  # nothing is kept
        (["A."], [], 1, -12, None),  # only the relationship changes (a digit and a sign)
    ],
)
def test_a_drafts_size_change_is_what_the_memorys_json_grows_by(
    facts: list[str], new: list[str], max_facts: int, delta: int, summary: str | None
) -> None:
    d = MemoryDraft(Memory(list(facts), 9, summary), max_facts, 100)
    for fact in new:
        d.remember(fact)
    d.change_relationship(delta)
    committed = d.committed()
    grown = len(dumps(memory_to_wire(committed))) - len(dumps(memory_to_wire(d.base)))
    assert d.size_change(committed) == grown


@pytest.mark.parametrize(
    ("table", "kind"), [(PERSONA_FIELDS, Persona), (OPTION_FIELDS, NpcOptions)]
)
def test_the_save_form_tables_name_every_field_once_in_field_order(table, kind):
    """A field added to ``Persona`` or ``NpcOptions`` without its wire key would be dropped from
    saves silently; the keys are the fields' names in camelCase."""
    assert [name for _, name in table] == [f.name for f in fields(kind)]
    for key, name in table:
        head, *rest = name.split("_")
        assert key == head + "".join(part.title() for part in rest)

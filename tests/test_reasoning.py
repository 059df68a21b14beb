"""A thinking model's ``<think>…</think>`` block never reaches the engine: not in a turn's text,
not in its streamed events; a model that does not think streams as before."""

from __future__ import annotations

import anyio
import orjson
import pytest
from backends import fake_http
from conftest import memory_daemon
from hypothesis import given
from hypothesis import strategies as st

from oamd.backends._reasoning import ReasoningFilter
from oamd.backends.llamacpp.runtime import NO_THINKING
from oamd.backends.spec import model_from_spec
from oamd.daemon import default_config


def filtered(pieces: list[str]) -> str:
    reasoning = ReasoningFilter()
    return "".join(reasoning.feed(p) for p in pieces) + reasoning.finish()


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


ANSWERS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40).filter(
    lambda t: t == t.lstrip()
)
CUTS = st.lists(st.integers(min_value=0, max_value=120), max_size=8)


@given(
    lead=st.sampled_from(["", "\n", "  "]),
    thought=st.sampled_from(["", "\n\n", "The player greets me. I should greet back.", "<b>"]),
    gap=st.sampled_from(["", "\n\n", " \n"]),
    answer=ANSWERS,
    cuts=CUTS,
)
def test_a_leading_reasoning_block_is_dropped_however_the_text_is_split(
    lead, thought, gap, answer, cuts
):
    text = f"{lead}<think>{thought}</think>{gap}{answer}"
    assert filtered(split(text, cuts)) == answer


@given(
    text=st.sampled_from(
        ["Welcome, traveller!", "<thing> is here", "<thi", "I <think> so", "", "  ", '{"a": 1}']
    ),
    cuts=CUTS,
)
def test_text_that_does_not_open_with_a_reasoning_block_is_unchanged(text, cuts):
    assert filtered(split(text, cuts)) == text


def test_text_streams_as_it_comes_once_it_cannot_be_a_reasoning_block():
    reasoning = ReasoningFilter()
    assert reasoning.feed("<") == ""  # could still be "<think>"
    assert reasoning.feed("b>Hi") == "<b>Hi"
    assert reasoning.feed(" there") == " there"


def test_an_unclosed_reasoning_block_is_no_answer():
    assert filtered(["<think>", "Let me think about the price of ale"]) == ""


def test_a_long_reasoning_block_is_held_in_constant_memory():
    reasoning = ReasoningFilter()
    reasoning.feed("<think>")
    for _ in range(20_000):
        assert reasoning.feed("I weigh the ale against the stew. ") == ""
        assert len(reasoning._held) < len("</think>")
    assert reasoning.feed("</thi") == ""
    assert reasoning.feed("nk>\n\nStew.") == "Stew."


def test_the_empty_block_that_switches_thinking_off_is_dropped_too():
    assert filtered([NO_THINKING + "Aye."]) == "Aye."


def _sse(*contents: str) -> bytes:
    events = [
        b"data: " + orjson.dumps({"choices": [{"delta": {"content": c}}]}) + b"\n\n"
        for c in contents
    ]
    events.append(
        b"data: "
        + orjson.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}]})
        + b"\n\ndata: [DONE]\n\n"
    )
    return b"".join(events)


@pytest.mark.anyio
async def test_a_thinking_servers_reasoning_is_neither_in_the_turn_nor_in_its_events():
    body = _sse("<think>", "The guest says hello.", " Be warm.</think>", "\n\n", "Welcome", "!")

    async def thinking(request: bytes, stream) -> None:
        await stream.send(fake_http.sse_headers())
        await stream.send(fake_http.chunk(body))
        await stream.send(fake_http.chunk(b""))

    async with fake_http.serve(thinking) as url:
        model = model_from_spec(f"openai:{url}#qwen3?tools=envelope&json=none&top_k=off")
        async with memory_daemon(default_config(system_model=model)) as client:
            with anyio.fail_after(20):
                created = await client.request("session/create", {"instructions": "Greet."})
                turn = await client.start(
                    "session/respond",
                    {"session": created["session"], "prompt": "Hello!", "stream": True},
                )
                result = (await client.wait(turn))["result"]
            events = client.recorder.events_for(turn)
        await model.aclose()
    assert result["text"] == "Welcome!"
    shown = orjson.dumps(events).decode()
    assert "think" not in shown and "guest says" not in shown
    assert any(e.get("type") == "text" for e in events)

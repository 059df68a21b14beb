"""The OpenAI-compatible backend: the happy path against a real llama-cpp-python server process
with SmolLM2-135M, and every mapped fault against a mock transport or a misbehaving socket
server on 127.0.0.1."""

from __future__ import annotations

import email.utils
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import jsonschema
import orjson
import pytest
from backends import fake_http
from conftest import OAMD, contract_checker, memory_daemon

from oamd.backends.base import (
    ChatMessage,
    GenerationRequest,
    Sampling,
    TextDelta,
    ToolCallRequest,
    ToolSpec,
    Usage,
)
from oamd.backends.openai.body import (
    MAX_EVENT_DATA_CHARS,
    MAX_EVENT_LINE_CHARS,
    MAX_RESPONSE_BYTES,
)
from oamd.backends.openai.errors import retry_after_seconds
from oamd.backends.openai.model import OpenAIModel
from oamd.backends.openai.wire import MAX_STEP_TOOL_CALL_CHARS, MAX_STEP_TOOL_CALLS
from oamd.backends.spec import model_from_spec
from oamd.client import Recorder, RpcError, connect_stdio
from oamd.daemon import default_config
from oamd.errors import ModelError

pytestmark = pytest.mark.anyio

EMOTION_SCHEMA = {
    "type": "object",
    "properties": {
        "emotion": {"type": "string", "enum": ["neutral", "happy", "sad", "angry"]},
        "line": {"type": "string"},
    },
    "required": ["emotion", "line"],
    "additionalProperties": False,
}
TAKE_ORDER = {
    "name": "take_order",
    "description": "Place an order the guest explicitly asks for.",
    "parameters": {
        "type": "object",
        "properties": {
            "item": {
                "type": "string",
                "enum": ["ale", "stew", "bread", "cider"],
                "description": "menu item",
            },
            "quantity": {"type": "integer"},
        },
        "required": ["item", "quantity"],
    },
}
INNKEEPER = (
    "You are Mira, the cheerful innkeeper of the Prancing Pony. You serve ale, stew, bread and "
    "cider. Reply in one short sentence."
)
SHORT = Sampling(greedy=True, max_tokens=16)
FIXED = "#m?tools=envelope&json=none&top_k=off"
"""A spec fragment that fixes every choice: no probe precedes a step."""


# ---- fixtures ---------------------------------------------------------------------------------


async def collect(model: OpenAIModel, request: GenerationRequest) -> list[Any]:
    with anyio.fail_after(60):
        return [event async for event in model.generate(request)]


def ask(prompt: str, **kwargs: Any) -> GenerationRequest:
    kwargs.setdefault("sampling", SHORT)
    return GenerationRequest([ChatMessage("user", prompt)], **kwargs)


def text_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def step_error(model: OpenAIModel, request: GenerationRequest | None = None) -> ModelError:
    with pytest.raises(ModelError) as info:
        await collect(model, request or ask("Hello."))
    return info.value


def mocked(handler: Callable[[httpx.Request], httpx.Response], spec: str = "") -> OpenAIModel:
    """A model whose every request goes to ``handler``, probed as a generic server."""
    return OpenAIModel.from_spec(
        "http://mock.test/v1#m" + spec, environ={}, transport=httpx.MockTransport(handler)
    )


def models_list(owner: str = "me") -> httpx.Response:
    return httpx.Response(200, json={"data": [{"id": "m", "owned_by": owner}]})


def answering(status: int, body: Any = None, headers: dict[str, str] | None = None):
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return models_list()
        if isinstance(body, bytes | str):
            return httpx.Response(status, content=body, headers=headers)
        return httpx.Response(status, json=body, headers=headers)

    return handler


# ---- against a real llama-cpp-python server ---------------------------------------------------


async def test_availability_of_a_running_server_is_ready_with_its_model_and_context(
    llama_server,
):
    model = model_from_spec(llama_server.spec())
    try:
        with anyio.fail_after(10):
            availability = await model.availability()
    finally:
        await model.aclose()
    assert availability.available and availability.status == "available"
    assert availability.context_size == 2048
    assert availability.variant == str(llama_server.model_path)
    assert "llama-cpp-python" in (availability.detail or "")


async def test_llama_cpp_python_is_driven_by_the_envelope_loop_with_json_object_schemas(
    llama_server,
):
    model = model_from_spec(llama_server.spec())
    try:
        before = model.capabilities
        with anyio.fail_after(10):
            await model.availability()
    finally:
        await model.aclose()
    assert (before.native_tools, before.constrained_json) == (False, False)
    assert model.capabilities.native_tools is False
    assert model.capabilities.constrained_json is True
    assert model.capabilities.prefix_cache is True


async def test_a_step_streams_text_in_several_deltas_and_ends_with_usage(llama_server):
    model = model_from_spec(llama_server.spec())
    try:
        events = await collect(model, ask("Say hello to the traveler."))
    finally:
        await model.aclose()
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 3
    assert text_of(events).strip()
    assert isinstance(events[-1], Usage)
    assert events[-1].input_tokens > 0 and events[-1].output_tokens > 0


async def test_a_schema_step_returns_json_valid_against_the_schema(llama_server):
    model = model_from_spec(llama_server.spec())
    try:
        events = await collect(
            model,
            ask(
                "A guest says hello. Answer as JSON.",
                schema=EMOTION_SCHEMA,
                sampling=Sampling(greedy=True, max_tokens=48),
            ),
        )
    finally:
        await model.aclose()
    jsonschema.validate(orjson.loads(text_of(events)), EMOTION_SCHEMA)


async def test_the_json_schema_form_is_rejected_by_llama_cpp_python_so_it_is_not_assumed(
    llama_server,
):
    model = model_from_spec(llama_server.spec(json="json_schema"))
    try:
        error = await step_error(model, ask("Hello.", schema=EMOTION_SCHEMA))
    finally:
        await model.aclose()
    assert error.name == "generation_failed"
    assert "HTTP 500" in error.message


async def test_a_named_tool_choice_returns_a_real_tool_call(llama_server):
    model = model_from_spec(llama_server.spec(tools="native"))
    tool = ToolSpec(TAKE_ORDER["name"], TAKE_ORDER["description"], TAKE_ORDER["parameters"])
    try:
        events = await collect(
            model,
            GenerationRequest(
                [ChatMessage("system", INNKEEPER), ChatMessage("user", "Two ales, please.")],
                tools=[tool],
                tool_mode="take_order",
                sampling=Sampling(greedy=True, max_tokens=40),
            ),
        )
    finally:
        await model.aclose()
    calls = [e for e in events if isinstance(e, ToolCallRequest)]
    assert len(calls) == 1
    assert calls[0].name == "take_order" and calls[0].id
    assert calls[0].arguments["item"] in ("ale", "stew", "bread", "cider")
    assert isinstance(calls[0].arguments["quantity"], int)


async def test_abandoning_a_stream_lets_the_server_serve_the_next_step_at_once(llama_server):
    model = model_from_spec(llama_server.spec())
    long_story = ask(
        "Write a very long story about a dragon and a knight.",
        sampling=Sampling(temperature=0.8, seed=7, max_tokens=1500),
    )
    try:
        with anyio.fail_after(30):
            async for event in model.generate(long_story):
                if isinstance(event, TextDelta):
                    break  # closes the request: the server stops generating
        started = time.monotonic()
        events = await collect(model, ask("Hi.", sampling=Sampling(greedy=True, max_tokens=3)))
        waited = time.monotonic() - started
    finally:
        await model.aclose()
    assert text_of(events)
    assert waited < 10  # had the story gone on, this step would queue behind ~1500 tokens


async def test_a_step_started_during_another_and_an_availability_check_cut_nothing_short(
    llama_server,
):
    # llama-cpp-python ends a running stream with [DONE] as soon as another request arrives
    model = model_from_spec(llama_server.spec())
    story = ask("Tell a story about a dragon.", sampling=Sampling(greedy=True, max_tokens=40))
    texts: dict[str, str] = {}
    streaming = anyio.Event()

    async def run(name: str) -> None:
        parts = []
        async for event in model.generate(story):
            if isinstance(event, TextDelta):
                parts.append(event.text)
                if name == "first":
                    streaming.set()
        texts[name] = "".join(parts)

    try:
        await run("alone")
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "first")
                await streaming.wait()
                tg.start_soon(run, "second")
                availability = await model.availability()
    finally:
        await model.aclose()
    assert availability.available is True
    assert texts["first"] == texts["second"] == texts["alone"]


async def test_a_prompt_beyond_the_server_context_fails_context_size_exceeded(llama_server):
    model = model_from_spec(llama_server.spec())
    try:
        error = await step_error(model, ask("word " * 3000, sampling=Sampling(max_tokens=4)))
    finally:
        await model.aclose()
    assert error.name == "context_size_exceeded"
    assert "2048" in error.message


# ---- through the protocol, on the real server -------------------------------------------------


def take_order_handler(calls: list[dict[str, Any]]):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params["call"])
        return {"output": {"ok": True, "total": 6}}

    return handler


async def forced_order_turn(spec: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    model = model_from_spec(spec)
    calls: list[dict[str, Any]] = []
    try:
        async with memory_daemon(default_config(model)) as client:
            client.tool_handler = take_order_handler(calls)
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
                            "maxResponseTokens": 24,
                            "sampling": "greedy",
                        },
                    },
                )
                result = await client.request(
                    "session/respond", {"session": "inn", "prompt": "Two ales, please."}
                )
    finally:
        await model.aclose()
    return result, calls


async def test_a_turn_on_the_envelope_loop_calls_the_client_tool_and_answers(llama_server):
    result, calls = await forced_order_turn(llama_server.spec())
    assert len(calls) == 1
    assert calls[0]["name"] == "take_order"
    assert calls[0]["arguments"]["item"] in ("ale", "stew", "bread", "cider")
    kinds = [step.get("kind") for step in result["steps"]]
    assert kinds == ["toolArguments", "respond"]
    assert result["toolCalls"][0]["output"] == {"ok": True, "total": 6}
    assert result["usage"]["inputTokens"] > 0


async def test_a_turn_on_the_native_loop_calls_the_client_tool_and_answers(llama_server):
    result, calls = await forced_order_turn(llama_server.spec(tools="native"))
    assert len(calls) == 1
    assert calls[0]["name"] == "take_order"
    assert calls[0]["arguments"]["item"] in ("ale", "stew", "bread", "cider")
    assert [step.get("kind") for step in result["steps"]] == [None, None]
    assert result["toolCalls"][0]["output"] == {"ok": True, "total": 6}


async def test_a_structured_turn_on_the_server_returns_a_value_valid_against_the_schema(
    llama_server,
):
    model = model_from_spec(llama_server.spec())
    try:
        async with memory_daemon(default_config(model)) as client:
            with anyio.fail_after(120):
                await client.request("initialize", {"protocolVersion": "1.0"})
                await client.request(
                    "session/create",
                    {
                        "session": "inn",
                        "instructions": INNKEEPER,
                        "options": {"maxResponseTokens": 64, "sampling": "greedy"},
                    },
                )
                result = await client.request(
                    "session/respond",
                    {"session": "inn", "prompt": "Hello!", "schema": EMOTION_SCHEMA},
                )
    finally:
        await model.aclose()
    jsonschema.validate(result["structured"], EMOTION_SCHEMA)


GOBLIN_OPTIONS = [
    {"id": "attack", "description": "Keep fighting"},
    {"id": "flee", "description": "Run into the woods"},
    {"id": "beg", "description": "Beg the knight for mercy"},
]


def line(msg_id: str, method: str, params: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})


async def first_decision(spec: str, *, initialize: bool) -> dict[Any, dict[str, Any]]:
    """A fresh ``oamd stdio --model <spec>`` sent ``decision/decide`` at once: right behind
    ``initialize`` in the same write, or as its very first line. The raw responses by id."""
    argv = [*OAMD, "stdio", "--model", spec]
    data = line("init", "initialize", {"protocolVersion": "1.0"}) + b"\n" if initialize else b""
    data += line(
        "decide",
        "decision/decide",
        {"situation": "A knight corners the goblin, who has 3 HP left.", "options": GOBLIN_OPTIONS},
    )
    recorder = Recorder()
    async with connect_stdio(
        argv, recorder=recorder, on_message=contract_checker(recorder)
    ) as client:
        recorder.sent_methods.update({"init": "initialize", "decide": "decision/decide"})
        await client.send_raw(data + b"\n")
        with anyio.fail_after(60):
            await client.next_message(lambda m: m.get("id") == "decide")
    return {m["id"]: m for m in recorder.received if "id" in m}


@pytest.mark.parametrize("initialize", [True, False], ids=["behind-initialize", "alone"])
async def test_a_first_decision_is_planned_for_the_probed_server_and_answers_a_valid_choice(
    llama_server, initialize
):
    responses = await first_decision(llama_server.spec(), initialize=initialize)
    decision = responses["decide"]
    assert "error" not in decision, decision
    assert decision["result"]["optionID"] in [o["id"] for o in GOBLIN_OPTIONS]
    assert decision["result"]["isFallback"] is False
    if initialize:
        assert responses["init"]["result"]["model"]["available"] is True


# ---- faults -----------------------------------------------------------------------------------


async def test_http_429_is_rate_limited_with_retry_after_from_the_header():
    model = mocked(answering(429, {"error": {"message": "slow down"}}, {"Retry-After": "7"}))
    error = await step_error(model)
    await model.aclose()
    assert error.name == "rate_limited"
    assert error.retry_after == 7
    assert error.data["retryAfterSeconds"] == 7
    assert "slow down" in error.message


async def test_a_retry_after_date_becomes_the_seconds_until_then():
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    model = mocked(answering(429, "busy", {"Retry-After": when}))
    error = await step_error(model)
    await model.aclose()
    assert error.name == "rate_limited"
    assert error.retry_after is not None and 100 < error.retry_after <= 120


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("7", 7),
        (" 1.5 ", 1.5),
        ("0", 0),
        ("3600", 3600),
        ("86401", 86400),  # a day at most
        ("inf", 86400),
        ("1e400", 86400),
        ("9" * 400, 86400),
        ("-5", None),  # malformed: as if absent
        ("NaN", None),
        ("soon", None),
        ("Fri, 31 Dec 99999 23:59:59 GMT", None),
        ("Mon, 32 Jan 2020 00:00:00 GMT", None),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 86400),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0),  # in the past
    ],
)
def test_retry_after_reads_as_seconds_from_0_to_a_day_or_not_at_all(header, seconds):
    assert retry_after_seconds({"retry-after": header}) == seconds


@pytest.mark.parametrize(
    ("status", "body", "name"),
    [
        (500, {"error": {"message": "boom", "type": "internal_server_error"}}, "generation_failed"),
        (502, "bad gateway", "generation_failed"),
        (503, {"error": {"message": "overloaded"}}, "busy"),
        (401, {"error": {"message": "bad key"}}, "model_unavailable"),
        (404, {"error": {"code": "model_not_found", "message": "no"}}, "model_unavailable"),
        (400, {"error": {"message": "bad temperature"}}, "invalid_request"),
        (
            400,
            {"error": {"code": "context_length_exceeded", "message": "x"}},
            "context_size_exceeded",
        ),
        (
            400,
            {"error": {"type": "exceed_context_size_error", "message": "x"}},
            "context_size_exceeded",
        ),
        (400, {"error": {"message": "maximum context length is 2048"}}, "context_size_exceeded"),
        (400, {"error": {"code": "content_filter", "message": "no"}}, "guardrail_violation"),
        (429, {"error": {"type": "rate_limit_error", "message": "x"}}, "rate_limited"),
    ],
)
async def test_an_error_status_maps_to_its_model_error(status, body, name):
    model = mocked(answering(status, body))
    error = await step_error(model)
    await model.aclose()
    assert error.name == name
    assert f"HTTP {status}" in error.message


async def test_an_error_sent_inside_the_stream_maps_to_its_model_error():
    stream = (
        b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'
        b'data: {"error":{"code":"context_length_exceeded","message":"too long"}}\n\n'
    )
    model = mocked(
        lambda request: (
            models_list()
            if request.url.path.endswith("/models")
            else httpx.Response(200, content=stream, headers={"content-type": "text/event-stream"})
        )
    )
    error = await step_error(model)
    await model.aclose()
    assert error.name == "context_size_exceeded"


def streaming(events: bytes):
    """A mocked server whose chat completions answer with ``events`` as a server-sent stream."""
    return mocked(
        lambda request: (
            models_list()
            if request.url.path.endswith("/models")
            else httpx.Response(200, content=events, headers={"content-type": "text/event-stream"})
        )
    )


@pytest.mark.parametrize(
    "ending", [b"", b"data: [DONE]\n\n"], ids=["ended", "done-without-finish-reason"]
)
async def test_a_stream_that_stops_before_a_finish_reason_fails_instead_of_answering_half(ending):
    # [DONE] without a finish_reason is how llama-cpp-python cuts a stream short for another
    # request
    model = streaming(b'data: {"choices":[{"delta":{"content":"Welc"}}]}\n\n' + ending)
    error = await step_error(model)
    await model.aclose()
    assert error.name == "generation_failed"
    assert "ended before the answer was complete" in error.message


async def test_a_finish_reason_marks_a_stream_complete_even_without_done():
    model = streaming(
        b'data: {"choices":[{"delta":{"content":"Welcome"}}]}\n\n'
        b'data: {"choices":[{"delta":{},"finish_reason":"length"}]}\n\n'
    )
    events = await collect(model, ask("Hello."))
    await model.aclose()
    assert text_of(events) == "Welcome"


@pytest.mark.parametrize(
    "chunk",
    [
        {"choices": "Welcome"},
        {"choices": [7]},
        {"choices": [{"delta": "Welcome"}]},
        {"choices": [{"message": ["Welcome"]}]},
        {"choices": [{"delta": {"tool_calls": {"name": "wave"}}}]},
        {"choices": [{"delta": {"tool_calls": [3]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": "wave"}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"function": {"name": 5}}]}}]},
    ],
)
async def test_a_chunk_of_another_shape_fails_generation_failed(chunk):
    model = streaming(b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n")
    error = await step_error(model)
    await model.aclose()
    assert error.name == "generation_failed"
    assert "not a chat completion's" in error.message


def streaming_in_pieces(pieces: list[bytes], content_type: str = "text/event-stream"):
    """A mocked server whose chat completions send ``pieces`` as separate reads."""

    async def body() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    return mocked(
        lambda request: (
            models_list()
            if request.url.path.endswith("/models")
            else httpx.Response(200, content=body(), headers={"content-type": content_type})
        )
    )


async def test_event_lines_end_only_at_cr_or_lf_so_unicode_line_separators_stay_in_the_text():
    text = "Halt\u2028who\x85goes there?"
    model = streaming(
        b"data: "
        + orjson.dumps({"choices": [{"delta": {"content": text}, "finish_reason": "stop"}]})
        + b"\n\n"
    )
    events = await collect(model, ask("Hello."))
    await model.aclose()
    assert text_of(events) == text


async def test_a_crlf_split_between_two_reads_ends_one_line_not_two():
    model = streaming_in_pieces(
        [
            b'data: {"choices":\r',  # an event of two data lines; a stray blank line would
            b'\ndata: [{"delta":{"content":"Hi"},"finish_reason":"stop"}]}\r\n\r\n',  # cut it
        ]
    )
    events = await collect(model, ask("Hello."))
    await model.aclose()
    assert text_of(events) == "Hi"


async def test_an_endless_line_fails_generation_failed_before_it_fills_memory():
    piece = b"x" * 65536
    model = streaming_in_pieces([b"data: "] + [piece] * (MAX_EVENT_LINE_CHARS // len(piece) + 2))
    error = await step_error(model)
    await model.aclose()
    assert error.name == "generation_failed"
    assert "longer than" in error.message


async def test_an_endless_event_of_short_data_lines_fails_generation_failed_before_it_fills_memory():
    line = b"data: " + b"x" * 65535 + b"\n"  # no blank line: one event that never ends
    model = streaming_in_pieces([line] * (MAX_EVENT_DATA_CHARS // len(line) + 2))
    error = await step_error(model)
    await model.aclose()
    assert error.name == "generation_failed"
    assert f"an event longer than {MAX_EVENT_DATA_CHARS} characters" in error.message


def call_fragment(index: int, arguments: str, name: str = "wave") -> bytes:
    fragment = {"index": index, "function": {"name": name, "arguments": arguments}}
    return b"data: " + orjson.dumps({"choices": [{"delta": {"tool_calls": [fragment]}}]}) + b"\n\n"


async def test_endless_tool_call_arguments_fail_generation_failed_before_they_fill_memory():
    piece = "x" * 65536
    count = MAX_STEP_TOOL_CALL_CHARS // len(piece) + 2
    model = streaming_in_pieces([call_fragment(0, piece) for _ in range(count)])
    error = await step_error(model)
    await model.aclose()
    assert error.name == "generation_failed"
    assert f"tool calls longer than {MAX_STEP_TOOL_CALL_CHARS} characters" in error.message


async def test_endless_distinct_tool_calls_fail_generation_failed_before_they_fill_memory():
    model = streaming_in_pieces([call_fragment(i, "") for i in range(MAX_STEP_TOOL_CALLS + 1)])
    error = await step_error(model)
    await model.aclose()
    assert error.name == "generation_failed"
    assert f"more than {MAX_STEP_TOOL_CALLS} tool calls" in error.message


async def test_tool_call_arguments_are_read_by_the_json_rule():
    arguments = '{"count": ' + "9" * 400 + ', "who": "\\ud800"}'
    events_in = call_fragment(0, arguments) + (
        b'data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    )
    model = streaming(events_in)
    events = await collect(model, ask("Wave."))
    await model.aclose()
    calls = [e for e in events if isinstance(e, ToolCallRequest)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("wave", {"count": sys.float_info.max, "who": "\ufffd"})
    ]


async def test_a_whole_response_too_large_to_be_an_answer_fails_generation_failed():
    piece = b" " * (1024 * 1024)
    model = streaming_in_pieces(
        [piece] * (MAX_RESPONSE_BYTES // len(piece) + 1), content_type="application/json"
    )
    error = await step_error(model)
    await model.aclose()
    assert error.name == "generation_failed"
    assert "larger than" in error.message


async def test_usage_counts_that_are_not_counts_are_estimated_instead():
    body = {
        "choices": [{"message": {"content": "Welcome!"}}],
        "usage": {"prompt_tokens": "12", "completion_tokens": -3},
    }
    model = mocked(answering(200, body))
    events = await collect(model, ask("Hello."))
    await model.aclose()
    assert events == [TextDelta("Welcome!"), Usage(2, 0, 2)]


async def test_a_call_id_that_is_not_a_string_is_left_for_the_agent_to_assign():
    events_in = (
        b'data: {"choices":[{"delta":{"tool_calls":[{"index":[0],"id":7,"function":'
        b'{"name":"wave","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\n\n'
    )
    model = streaming(events_in)
    events = await collect(model, ask("Wave."))
    await model.aclose()
    assert events[0] == ToolCallRequest("wave", {}, None)


async def test_a_whole_response_to_a_streamed_request_is_read_with_its_usage():
    body = {
        "choices": [{"message": {"role": "assistant", "content": "Welcome!"}}],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 8},
        },
    }
    model = mocked(answering(200, body))
    events = await collect(model, ask("Hello."))
    await model.aclose()
    assert events == [TextDelta("Welcome!"), Usage(12, 8, 3)]


async def test_an_unreachable_server_is_unavailable_and_its_steps_fail_model_unavailable():
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()  # nothing listens there now: connections are refused
    model = model_from_spec(f"openai:http://127.0.0.1:{port}/v1")
    with anyio.fail_after(10):
        availability = await model.availability()
        error = await step_error(model)
    await model.aclose()
    assert availability.available is False
    assert availability.status == "unavailable"
    assert availability.reason == "model_not_ready"
    assert f"127.0.0.1:{port}" in (availability.detail or "")
    assert "connection refused" in (availability.detail or "")
    assert error.name == "model_unavailable"


async def test_a_server_that_never_answers_fails_generation_failed_after_the_read_timeout():
    async def silent(request: bytes, stream) -> None:
        await anyio.sleep_forever()

    async with fake_http.serve(silent) as url:
        model = model_from_spec(f"openai:{url}{FIXED}&timeout=0.2")
        with anyio.fail_after(10):
            error = await step_error(model)
        await model.aclose()
    assert error.name == "generation_failed"
    assert "timed out" in error.message


async def test_a_connection_dropped_mid_stream_fails_generation_failed():
    async def dropping(request: bytes, stream) -> None:
        await stream.send(fake_http.sse_headers())
        await stream.send(fake_http.chunk(b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'))
        # returning closes the socket before the chunked body ends

    async with fake_http.serve(dropping) as url:
        model = model_from_spec(f"openai:{url}{FIXED}")
        with anyio.fail_after(10):
            error = await step_error(model)
        await model.aclose()
    assert error.name == "generation_failed"


async def test_abandoning_a_stream_closes_its_connection():
    closed = anyio.Event()

    async def streaming(request: bytes, stream) -> None:
        await stream.send(fake_http.sse_headers())
        await stream.send(fake_http.chunk(b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'))
        try:
            while True:
                await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            closed.set()

    async with fake_http.serve(streaming) as url:
        model = model_from_spec(f"openai:{url}{FIXED}")
        with anyio.fail_after(10):
            async for event in model.generate(ask("Hello.")):
                assert event == TextDelta("Hi")
                break
            await closed.wait()
        await model.aclose()
    assert closed.is_set()


async def test_cancelling_a_step_mid_stream_closes_its_connection():
    closed = anyio.Event()
    first = anyio.Event()

    async def streaming(request: bytes, stream) -> None:
        await stream.send(fake_http.sse_headers())
        await stream.send(fake_http.chunk(b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'))
        try:
            while True:
                await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            closed.set()

    async def consume(model: OpenAIModel) -> None:
        async for _ in model.generate(ask("Hello.")):
            first.set()

    async with fake_http.serve(streaming) as url:
        model = model_from_spec(f"openai:{url}{FIXED}")
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(consume, model)
                await first.wait()
                tg.cancel_scope.cancel()
            await closed.wait()
        await model.aclose()
    assert closed.is_set()


@pytest.mark.parametrize("loop", ["native", "envelope"])
@pytest.mark.parametrize(
    ("status", "body", "headers", "name"),
    [
        (429, {"error": {"message": "slow down"}}, {"Retry-After": "60"}, "rate_limited"),
        (400, {"error": {"code": "context_length_exceeded"}}, {}, "context_size_exceeded"),
        (401, {"error": {"message": "bad key"}}, {}, "model_unavailable"),
        (500, {"error": {"message": "boom"}}, {}, "generation_failed"),
    ],
)
async def test_a_failed_turn_leaves_the_session_history_unchanged(
    loop, status, body, headers, name
):
    model = mocked(answering(status, body, headers), f"?tools={loop}")
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("initialize", {"protocolVersion": "1.0"})
            await client.request("session/create", {"session": "inn", "tools": [TAKE_ORDER]})
            with pytest.raises(RpcError) as info:
                await client.request("session/respond", {"session": "inn", "prompt": "Hello."})
            transcript = await client.request("session/transcript", {"session": "inn"})
            sessions = (await client.request("session/list"))["sessions"]
    await model.aclose()
    assert info.value.name == name
    assert sessions[0]["entries"] == 0
    assert "Hello." not in orjson.dumps(transcript).decode()


# ---- requests ---------------------------------------------------------------------------------


def recording(bodies: list[dict[str, Any]]):
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return models_list("me")
        bodies.append(orjson.loads(request.content))
        headers = dict(request.headers)
        bodies[-1]["_authorization"] = headers.get("authorization")
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    return handler


async def test_greedy_sampling_is_temperature_zero_and_top_k_one_with_seed_and_max_tokens():
    bodies: list[dict[str, Any]] = []
    model = mocked(recording(bodies))
    await collect(model, ask("Hi.", sampling=Sampling(greedy=True, seed=3, max_tokens=9)))
    await model.aclose()
    body = bodies[0]
    assert (body["temperature"], body["top_k"], body["seed"], body["max_tokens"]) == (0.0, 1, 3, 9)
    assert body["stream"] is True and body["model"] == "m"


async def test_top_k_is_left_out_for_servers_that_would_reject_it():
    bodies: list[dict[str, Any]] = []
    model = mocked(recording(bodies), "?top_k=off")
    await collect(model, ask("Hi.", sampling=Sampling(top_k=5, top_p=0.9, temperature=0.7)))
    await model.aclose()
    assert "top_k" not in bodies[0]
    assert (bodies[0]["top_p"], bodies[0]["temperature"]) == (0.9, 0.7)


async def test_stop_sequences_and_a_repetition_penalty_are_sent_as_llama_cpp_takes_them():
    bodies: list[dict[str, Any]] = []
    model = mocked(recording(bodies))
    sampling = Sampling(temperature=0.7, repetition_penalty=1.2)
    await collect(model, ask("Hi.", sampling=sampling, stop=("\n", "a", "b", "c", "d")))
    await model.aclose()
    model = mocked(recording(bodies), "?top_k=off")  # a server without llama.cpp's extensions
    await collect(model, ask("Hi.", sampling=sampling))
    await model.aclose()
    assert bodies[0]["stop"] == ["\n", "a", "b", "c"] and bodies[0]["repeat_penalty"] == 1.2
    assert "stop" not in bodies[1] and "repeat_penalty" not in bodies[1]


async def test_a_schema_is_sent_in_the_form_the_server_takes():
    bodies: list[dict[str, Any]] = []
    model = mocked(recording(bodies), "?json=json_schema")
    await collect(model, ask("Hi.", schema=EMOTION_SCHEMA))
    await model.aclose()
    model = mocked(recording(bodies))  # llama-cpp-python, once probed
    await collect(model, ask("Hi.", schema=EMOTION_SCHEMA))
    await model.aclose()
    assert bodies[0]["response_format"]["type"] == "json_schema"
    assert bodies[0]["response_format"]["json_schema"]["schema"] == EMOTION_SCHEMA
    assert bodies[1]["response_format"] == {"type": "json_object", "schema": EMOTION_SCHEMA}


async def test_tools_and_tool_messages_are_sent_as_openai_function_calls():
    bodies: list[dict[str, Any]] = []
    model = mocked(recording(bodies), "?tools=native")
    tool = ToolSpec("wave", "Wave.", {"type": "object", "properties": {}})
    messages = [
        ChatMessage("user", "Wave."),
        ChatMessage("assistant", "", tool_calls=[ToolCallRequest("wave", {}, "c1")]),
        ChatMessage("tool", "done", tool_call_id="c1", tool_name="wave"),
    ]
    for mode in ("allowed", "required", "wave", "none"):
        await collect(model, GenerationRequest(messages, tools=[tool, tool], tool_mode=mode))
    await model.aclose()
    choices = [body.get("tool_choice") for body in bodies]
    assert choices == [
        "auto",
        "required",
        {"type": "function", "function": {"name": "wave"}},
        None,
    ]
    assert bodies[0]["messages"][1]["tool_calls"][0]["function"] == {
        "name": "wave",
        "arguments": "{}",
    }
    assert bodies[0]["messages"][1]["content"] == ""
    assert bodies[0]["messages"][2]["tool_call_id"] == "c1"


async def test_the_api_key_comes_from_the_environment():
    bodies: list[dict[str, Any]] = []
    model = OpenAIModel.from_spec(
        "http://mock.test/v1#m",
        environ={"OPENAI_API_KEY": "sk-test"},
        transport=httpx.MockTransport(recording(bodies)),
    )
    await collect(model, ask("Hi."))
    await model.aclose()
    assert bodies[0]["_authorization"] == "Bearer sk-test"


async def test_streamed_tool_call_fragments_are_joined_into_one_call():
    stream = (
        b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c9","function":'
        b'{"name":"take_order","arguments":"{\\"item\\": "}}]}}]}\n\n'
        b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":'
        b'{"name":"take_order","arguments":"\\"ale\\", \\"quantity\\": 2}"}}]}}]}\n\n'
        b'data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    model = mocked(
        lambda request: (
            models_list()
            if request.url.path.endswith("/models")
            else httpx.Response(200, content=stream, headers={"content-type": "text/event-stream"})
        )
    )
    events = await collect(model, ask("Two ales."))
    await model.aclose()
    assert events[0] == ToolCallRequest("take_order", {"item": "ale", "quantity": 2}, "c9")
    assert isinstance(events[1], Usage)


# ---- specs ------------------------------------------------------------------------------------


def test_an_openai_spec_names_the_url_the_model_and_the_options():
    model = model_from_spec(
        "openai:http://127.0.0.1:8080/v1#smollm2?tools=native&json=json_object&ctx=2048"
    )
    assert isinstance(model, OpenAIModel)
    assert (model.base_url, model.model) == ("http://127.0.0.1:8080/v1", "smollm2")
    assert model.capabilities.native_tools is True
    assert model.capabilities.constrained_json is True
    assert model.capabilities.context_size == 2048


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("openai:", "needs a base URL"),
        ("openai:ftp://host/v1", "http(s) base URL"),
        ("openai:http://h/v1?tools=maybe", "'tools' must be one of native, envelope"),
        ("openai:http://h/v1?ctx=-3", "'ctx' must be a positive integer"),
        ("openai:http://h/v1?max_in_flight=0", "'max_in_flight' must be a positive integer"),
        ("openai:http://h/v1?colour=red", "unknown option 'colour'"),
        ("llamacpp:/m.gguf?ctx=big", "'ctx' must be a positive integer"),
        ("llamacpp?speed=11", "unknown option 'speed'"),
        ("gpt4all:/m.gguf", "expected openai:<base-url>"),
    ],
)
def test_a_malformed_spec_is_a_value_error_that_says_what_is_expected(spec, fragment):
    with pytest.raises(ValueError, match=None) as info:
        model_from_spec(spec)
    assert fragment in str(info.value)

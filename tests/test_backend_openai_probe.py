"""The OpenAI-compatible backend learns its server before a turn is planned: one shared probe
(``GET /models``) for every first use, a failed probe that fails the turns waiting for it and is
asked again later; and every step asks for a bounded output (``max_tokens`` by step kind).

A fake server behind ``httpx.MockTransport`` counts the probes and records the chat bodies; the
turns go through the protocol (the in-memory daemon)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import orjson
import pytest
from backends import fake_http
from conftest import memory_daemon

from oamd.backends.base import ChatMessage, GenerationRequest, Sampling
from oamd.backends.openai import model as openai_backend
from oamd.backends.openai.model import OpenAIModel
from oamd.backends.openai.wire import (
    DECIDE_MAX_TOKENS,
    REPLY_MAX_TOKENS,
    STRUCTURED_MAX_TOKENS,
    TOOL_ARGUMENTS_MAX_TOKENS,
)
from oamd.backends.spec import model_from_spec
from oamd.client import Client, RpcError
from oamd.daemon import default_config

pytestmark = pytest.mark.anyio

OPTIONS = ["attack", "flee", "beg"]
DECISION = orjson.dumps({"reasoning": "Outnumbered.", "choice": "flee", "confidence": 80}).decode()
CONCURRENT_TURNS = 6


class FakeServer:
    """An OpenAI-compatible server in memory. ``GET /models`` answers with the next of
    ``probe_answers`` (the last one repeats): an ``httpx.Response``, or an exception to raise.
    While ``hold_probe`` is set, a probe waits for ``release`` (or for its cancellation)."""

    def __init__(self, *probe_answers: httpx.Response | Exception, owner: str = "me") -> None:
        self.probe_answers = list(probe_answers) or [models(owner)]
        self.probes = 0
        self.bodies: list[dict[str, Any]] = []
        self.hold_probe = False
        self.release = anyio.Event()
        self.reply = DECISION

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            self.probes += 1
            if self.hold_probe:
                await self.release.wait()
            answer = self.probe_answers[min(self.probes, len(self.probe_answers)) - 1]
            if isinstance(answer, Exception):
                raise answer
            return answer
        self.bodies.append(orjson.loads(request.content))
        return httpx.Response(200, json={"choices": [{"message": {"content": self.reply}}]})

    def model(self, spec: str = "") -> OpenAIModel:
        return OpenAIModel.from_spec(
            "http://fake.test/v1" + spec, environ={}, transport=httpx.MockTransport(self.handle)
        )


def models(owner: str = "me") -> httpx.Response:
    return httpx.Response(200, json={"data": [{"id": "smol", "owned_by": owner}]})


def refused() -> httpx.ConnectError:
    return httpx.ConnectError("[Errno 111] Connection refused")


def decide_params() -> dict[str, Any]:
    return {"situation": "Three knights ride in.", "options": OPTIONS}


def step(kind: str, max_tokens: int | None = None) -> GenerationRequest:
    return GenerationRequest(
        [ChatMessage("user", "Hello.")], kind=kind, sampling=Sampling(max_tokens=max_tokens)
    )


async def start_decisions(client: Client, count: int) -> list[Any]:
    return [await client.start("decision/decide", decide_params()) for _ in range(count)]


async def released_after_all_wait(server: FakeServer) -> None:
    """Lets the held probe answer once every task is parked (the turns behind it included)."""
    await anyio.wait_all_tasks_blocked()
    server.release.set()


# ---- one probe, before the turn is planned ----------------------------------------------------


async def test_concurrent_first_turns_share_one_probe_and_are_planned_for_the_probed_server():
    server = FakeServer()
    server.hold_probe = True
    model = server.model()
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            init = await client.start("initialize", {"protocolVersion": "1.0"})
            ids = await start_decisions(client, CONCURRENT_TURNS)
            await released_after_all_wait(server)
            initialized = await client.wait(init)
            responses = [await client.wait(i) for i in ids]
    await model.aclose()
    assert server.probes == 1
    assert initialized["result"]["model"]["available"] is True
    assert [r.get("result", r)["optionID"] for r in responses] == ["flee"] * CONCURRENT_TURNS
    # llama-cpp-python's profile: the envelope loop, its structured step constrained by schema
    assert len(server.bodies) == CONCURRENT_TURNS
    assert all(b["response_format"]["type"] == "json_object" for b in server.bodies)
    assert all("tools" not in b for b in server.bodies)


async def test_a_first_turn_without_initialize_probes_before_its_first_step():
    server = FakeServer(owner="vllm")
    model = server.model()
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            result = await client.request("decision/decide", decide_params())
    await model.aclose()
    assert result["optionID"] == "flee"
    assert server.probes == 1
    # a generic server: the native loop, the json_schema form, no llama.cpp sampling members
    assert server.bodies[0]["response_format"]["type"] == "json_schema"
    assert "top_k" not in server.bodies[0]


async def test_a_model_list_with_numbers_and_escapes_no_encoder_takes_is_read_by_the_json_rule():
    listed = b'{"data": [{"id": "smol\\ud800", "owned_by": "me", "created": ' + b"9" * 400 + b"}]}"
    server = FakeServer(httpx.Response(200, content=listed))
    model = server.model()
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            availability = await client.request("model/availability")
            result = await client.request("decision/decide", decide_params())
    await model.aclose()
    assert availability["available"] is True
    assert result["optionID"] == "flee"
    # llama-cpp-python's profile, found by its owned_by; its model named as listed, readably
    assert server.bodies[0]["model"] == "smol\ufffd"
    assert server.bodies[0]["response_format"]["type"] == "json_object"


async def test_a_spec_that_fixes_every_choice_needs_no_probe():
    server = FakeServer()
    model = server.model("#smol?tools=envelope&json=json_object&top_k=on")
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            result = await client.request("decision/decide", decide_params())
    await model.aclose()
    assert result["optionID"] == "flee"
    assert server.probes == 0


async def test_a_probed_server_is_not_asked_again_by_later_turns():
    server = FakeServer()
    model = server.model()
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            for _ in range(3):
                await client.request("decision/decide", decide_params())
    await model.aclose()
    assert server.probes == 1


# ---- a failed probe ---------------------------------------------------------------------------


async def test_an_unreachable_server_fails_the_turn_model_unavailable_and_is_asked_again_later():
    server = FakeServer(refused(), models())
    model = server.model()
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("session/create", {"session": "inn"})
            with pytest.raises(RpcError) as info:
                await client.request("session/respond", {"session": "inn", "prompt": "Hello."})
            entries_after_failure = (await client.request("session/list"))["sessions"][0]
            server.reply = "Welcome, traveller."
            result = await client.request("session/respond", {"session": "inn", "prompt": "Hi."})
    await model.aclose()
    assert (info.value.code, info.value.name) == (-32001, "model_unavailable")
    assert "connection refused" in info.value.message
    assert entries_after_failure["entries"] == 0
    assert result["text"] == "Welcome, traveller."
    assert server.probes == 2
    assert [step["kind"] for step in result["steps"]] == ["respond"]  # the probed envelope loop


async def test_creating_on_a_server_initialize_found_unreachable_warns_as_a_missing_model_does():
    server = FakeServer(refused(), models())
    model = server.model()
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            initialized = await client.request("initialize", {"protocolVersion": "1.0"})
            session = await client.request("session/create", {"session": "inn"})
            npc = await client.request("npc/create", {"npc": "mira", "persona": {"name": "Mira"}})
            await client.request("model/availability")  # asks again: the server is up now
            later = await client.request("session/create", {"session": "inn2"})
    await model.aclose()
    assert initialized["model"]["available"] is False
    warning = (
        "The system model is unavailable (model_not_ready); turns will fail with "
        "model_unavailable until it is ready."
    )
    assert session["warnings"] == [warning]
    assert npc["warnings"] == [warning]
    assert later["warnings"] == []
    assert server.probes == 2


async def test_a_server_silent_past_the_probe_timeout_fails_the_turn_model_unavailable(monkeypatch):
    monkeypatch.setattr(openai_backend, "PROBE_TIMEOUT_SECONDS", 0.2)

    async def silent(request: bytes, stream: Any) -> None:
        await anyio.sleep_forever()

    async with fake_http.serve(silent) as url:
        model = model_from_spec(f"openai:{url}")
        async with memory_daemon(default_config(model)) as client:
            with anyio.fail_after(10):
                failed = await client.call("decision/decide", decide_params())
        await model.aclose()
    assert failed["error"]["data"]["code"] == "model_unavailable"
    assert "did not answer GET /models in time" in failed["error"]["message"]


async def test_turns_waiting_for_a_failing_probe_share_its_failure():
    server = FakeServer(refused())
    server.hold_probe = True
    model = server.model()
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            ids = await start_decisions(client, CONCURRENT_TURNS)
            await released_after_all_wait(server)
            responses = [await client.wait(i) for i in ids]
    await model.aclose()
    assert server.probes == 1
    assert {r["error"]["data"]["code"] for r in responses} == {"model_unavailable"}
    assert server.bodies == []


@pytest.mark.parametrize(
    ("status", "headers", "name", "code", "retry_after"),
    [
        (503, {"Retry-After": "2"}, "busy", -32010, 2),
        (429, {"Retry-After": "30"}, "rate_limited", -32005, 30),
        (429, {"Retry-After": "inf"}, "rate_limited", -32005, 86400),  # a day at most
        (503, {"Retry-After": "1e400"}, "busy", -32010, 86400),
        (429, {"Retry-After": "NaN"}, "rate_limited", -32005, None),  # malformed: ignored
        (500, {}, "generation_failed", -32012, None),
    ],
)
async def test_an_overloaded_server_fails_the_turn_and_is_not_taken_for_a_generic_one(
    status, headers, name, code, retry_after
):
    failing = httpx.Response(status, json={"error": {"message": "overloaded"}}, headers=headers)
    server = FakeServer(failing, failing, models("me"))  # availability, a turn, the next turn
    model = server.model()
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            availability = await client.request("model/availability")
            failed = await client.call("decision/decide", decide_params())
            result = await client.request("decision/decide", decide_params())
    await model.aclose()
    assert availability["available"] is False
    assert "overloaded" in availability["detail"]
    assert (failed["error"]["code"], failed["error"]["data"]["code"]) == (code, name)
    assert failed["error"]["data"].get("retryAfterSeconds") == retry_after
    assert result["optionID"] == "flee"
    assert server.probes == 3
    assert server.bodies[0]["response_format"]["type"] == "json_object"  # llama-cpp-python's


async def test_a_probe_abandoned_by_its_cancelled_caller_is_asked_again_by_the_next():
    server = FakeServer()
    server.hold_probe = True
    model = server.model()
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            abandoned = anyio.CancelScope()

            async def first() -> None:
                with abandoned:
                    await model.settle_capabilities()

            tg.start_soon(first)
            tg.start_soon(model.settle_capabilities)
            await anyio.wait_all_tasks_blocked()
            abandoned.cancel()
            await anyio.wait_all_tasks_blocked()
            server.release.set()
    await model.aclose()
    assert server.probes == 2
    assert model.capabilities.constrained_json is True


# ---- a server that cuts a stream short for the next request ----------------------------------


class HeldServer(FakeServer):
    """Holds every chat completion until ``release``; counts those in flight at once."""

    def __init__(self, owner: str) -> None:
        super().__init__(owner=owner)
        self.reply = "ok"
        self.in_flight = 0
        self.most_in_flight = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return await super().handle(request)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.release.wait()
            return await super().handle(request)
        finally:
            self.in_flight -= 1


async def run_step(model: OpenAIModel) -> None:
    async for _ in model.generate(step("respond")):
        pass


async def concurrent_steps(owner: str) -> tuple[HeldServer, int, bool]:
    """Two steps at once, and an availability check while they run: what reached the server."""
    server = HeldServer(owner)
    model = server.model()
    with anyio.fail_after(10):
        await model.availability()
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(run_step, model)
            await anyio.wait_all_tasks_blocked()
            arrived = server.in_flight
            available = (await model.availability()).available
            server.release.set()
    await model.aclose()
    return server, arrived, available


async def test_steps_on_llama_cpp_python_go_one_at_a_time_and_availability_does_not_interrupt():
    server, arrived, available = await concurrent_steps("me")
    assert arrived == 1  # the second waits: its request would cut the first one short
    assert server.most_in_flight == 1
    assert available is True
    assert server.probes == 1  # answered from the last probe while a step streams
    assert len(server.bodies) == 2


async def test_steps_on_other_servers_run_side_by_side():
    server, arrived, available = await concurrent_steps("vllm")
    assert arrived == 2
    assert available is True
    assert server.probes == 2


# ---- output caps ------------------------------------------------------------------------------


async def body_of(request: GenerationRequest, spec: str = "") -> dict[str, Any]:
    """The chat body one step sends."""
    server = FakeServer()
    server.reply = "ok"
    model = server.model(spec)
    with anyio.fail_after(10):
        async for _ in model.generate(request):
            pass
    await model.aclose()
    return server.bodies[0]


@pytest.mark.parametrize(
    ("kind", "asked", "cap"),
    [
        ("decide", None, DECIDE_MAX_TOKENS),
        ("toolArguments", None, TOOL_ARGUMENTS_MAX_TOKENS),
        ("respond", None, REPLY_MAX_TOKENS),
        ("answer", None, REPLY_MAX_TOKENS),
        ("structured", None, STRUCTURED_MAX_TOKENS),
        ("summary", None, REPLY_MAX_TOKENS),  # a kind the backend does not know: a reply
        ("decide", 4096, DECIDE_MAX_TOKENS),  # picking never writes at length
        ("toolArguments", 32, 32),
        ("respond", 40, 40),  # the turn's maxResponseTokens
        ("structured", 2000, 2000),
    ],
)
async def test_every_step_asks_for_an_output_cap_suited_to_its_kind(kind, asked, cap):
    body = await body_of(step(kind, asked))
    assert body["max_tokens"] == cap


@pytest.mark.parametrize("kind", ["decide", "respond", "structured"])
async def test_no_step_asks_for_more_than_the_spec_max_output(kind):
    body = await body_of(step(kind, 5000), "?max_output=100")
    assert body["max_tokens"] == 100


async def test_a_decision_turn_asks_for_a_bounded_structured_answer():
    server = FakeServer()
    model = server.model()
    async with memory_daemon(default_config(model)) as client:
        with anyio.fail_after(10):
            await client.request("decision/decide", decide_params())
    await model.aclose()
    assert [b["max_tokens"] for b in server.bodies] == [STRUCTURED_MAX_TOKENS]

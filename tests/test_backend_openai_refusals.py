"""A server that refuses request members by name — OpenAI's reasoning models refuse
``max_tokens`` ("Use 'max_completion_tokens' instead") and every ``temperature`` but 1 — gets
the step again without them, and the model remembers: the next step is right the first time.
A refusal of what carries the step's meaning (tools, ``response_format``) stays its error, and a
``GET /models`` body larger than any model list is not read whole."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from test_backend_openai import ask, collect, mocked, models_list, step_error, text_of

from oamd.backends.base import Sampling
from oamd.backends.openai.model import MAX_MODELS_BYTES, OpenAIModel
from oamd.backends.openai.refusals import learn_refusal
from oamd.backends.openai.wire import WireOptions

pytestmark = pytest.mark.anyio


def refusal(param: str, code: str = "unsupported_parameter") -> httpx.Response:
    message = {
        "unsupported_parameter": f"Unsupported parameter: '{param}' is not supported with this "
        "model. Use 'max_completion_tokens' instead.",
        "unsupported_value": f"Unsupported value: '{param}' does not support 0 with this model. "
        "Only the default (1) value is supported.",
    }[code]
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return httpx.Response(400, json={"error": error})


def reasoning_model(bodies: list[dict[str, Any]]):
    """Answers like OpenAI's o-series: refuses ``max_tokens`` and a temperature other than 1."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return models_list("system")
        body = orjson.loads(request.content)
        bodies.append(body)
        if "max_tokens" in body:
            return refusal("max_tokens")
        if body.get("temperature", 1) != 1:
            return refusal("temperature", "unsupported_value")
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    return handler


async def test_a_refused_max_tokens_and_temperature_are_learnt_once_and_the_step_answers():
    bodies: list[dict[str, Any]] = []
    model = mocked(reasoning_model(bodies))
    greedy = Sampling(greedy=True, max_tokens=40)
    assert text_of(await collect(model, ask("Hi.", sampling=greedy))) == "ok"
    assert [("max_tokens" in b, "temperature" in b) for b in bodies] == [
        (True, True),
        (False, True),
        (False, False),
    ]
    assert bodies[-1]["max_completion_tokens"] == 40
    del bodies[:]
    assert text_of(await collect(model, ask("Again.", sampling=greedy))) == "ok"
    assert len(bodies) == 1  # remembered: right the first time
    await model.aclose()


async def test_what_a_new_probe_applies_keeps_what_was_learnt():
    bodies: list[dict[str, Any]] = []
    model = mocked(reasoning_model(bodies))
    await collect(model, ask("Hi."))
    await model.availability()  # probes again and re-applies the profile
    del bodies[:]
    await collect(model, ask("Again."))
    assert len(bodies) == 1 and "max_completion_tokens" in bodies[0]
    await model.aclose()


async def test_a_refused_tool_list_stays_the_steps_error():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return models_list("system")
        return refusal("tools")

    asked: list[int] = []

    def counted(request: httpx.Request) -> httpx.Response:
        asked.append(1)
        return handler(request)

    model = mocked(counted)
    error = await step_error(model)
    assert (error.name, "'tools'" in error.message) == ("invalid_request", True)
    assert len(asked) == 2  # the probe and the one request: nothing learnt, nothing sent again
    await model.aclose()


def test_only_a_400_naming_a_member_that_can_go_is_learnt():
    wire = WireOptions(model="m")
    body = refusal("max_tokens").content
    assert learn_refusal(wire, 500, body) is None
    assert learn_refusal(wire, 400, b"<html>Bad Request</html>") is None
    assert learn_refusal(wire, 400, refusal("response_format").content) is None
    learnt = learn_refusal(wire, 400, body)
    assert learnt is not None and learnt.output_cap_field == "max_completion_tokens"
    assert learn_refusal(learnt, 400, body) is None  # refused again: the step's error
    worded = b'{"error": {"message": "Unsupported value: \'top_p\' must be 1"}}'
    assert learn_refusal(wire, 400, worded) == WireOptions(model="m", omitted=frozenset({"top_p"}))


async def test_a_models_list_larger_than_any_list_is_not_read_whole():
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            junk = b'{"data": [' + b'{"id": "m", "owned_by": "me"},' * (MAX_MODELS_BYTES // 8)
            return httpx.Response(200, content=junk + b"{}]}")
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    model = OpenAIModel.from_spec(
        "http://mock.test/v1", environ={}, transport=httpx.MockTransport(handler)
    )
    found = await model.availability()
    assert found.available  # a server answered; its list counts as empty
    assert model.profile.name == "openai-compatible"
    await model.aclose()

"""The scripted model's oamd members for standing in for a real model (protocol/SCRIPTED.md):
``scores`` steps answer likelihood choices, ``usage`` sets a step's counts, ``retryAfterSeconds``
an error's wait, and ``capabilities`` the model's, so a recording of a small model plays back."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from oamd.client import RpcError

pytestmark = pytest.mark.anyio

SMALL = {"compactPrompts": True, "scoresText": True}
"""A small model that chooses by likelihood, as llama.cpp's SmolLM2 is."""
OPTIONS = [
    {"id": "ring_alarm", "description": "ring the alarm bell"},
    {"id": "wait", "description": "keep watching"},
]


def small(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"type": "scripted", "style": "envelope", "capabilities": SMALL, "steps": list(steps)}


async def decide(client, model: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(5):
        return await client.request(
            "decision/decide",
            {"situation": "Smoke rises from the market.", "options": OPTIONS, "model": model},
        )


async def refused(client, method: str, params: dict[str, Any]) -> RpcError:
    with anyio.fail_after(5), pytest.raises(RpcError) as info:
        await client.request(method, params)
    return info.value


async def test_a_decision_by_likelihood_takes_the_option_its_scores_step_favours(client):
    result = await decide(
        client,
        small(
            {"scores": [-2.0, -0.1], "tokens": [3, 1], "usage": {"inputTokens": 40}},
            {"raw": " the smoke is only a baker's oven.", "usage": {"outputTokens": 9}},
        ),
    )
    assert result["optionID"] == "wait"
    assert result["confidence"] == round(100 / (1 + math.exp(-1.9)))
    assert result["reasoning"] == "Because the smoke is only a baker's oven."
    assert result["usage"]["inputTokens"] == 40 and result["usage"]["outputTokens"] == 9


async def test_a_likelihood_choice_that_meets_another_step_fails_naming_it(client):
    err = await refused(
        client,
        "decision/decide",
        {"situation": "Smoke.", "options": OPTIONS, "model": small({"text": "ring_alarm"})},
    )
    assert err.name == "generation_failed"
    assert err.message == (
        "The script's steps[0] is a 'text' step; a likelihood choice needs a 'scores' step."
    )


async def test_a_scores_step_with_another_count_than_the_candidates_fails_the_choice(client):
    err = await refused(
        client,
        "decision/decide",
        {"situation": "Smoke.", "options": OPTIONS, "model": small({"scores": [-1.0]})},
    )
    assert err.name == "generation_failed"
    assert err.message == "The script's steps[0] has 1 scores for 2 candidates."


async def test_a_model_call_that_meets_a_scores_step_fails_naming_it(client):
    model = {"type": "scripted", "steps": [{"scores": [-1.0, -2.0]}]}
    options = {"maxAttempts": 1}  # a retry would play the fallback
    await client.request("session/create", {"session": "s", "model": model, "options": options})
    err = await refused(client, "session/respond", {"session": "s", "prompt": "Hi."})
    assert err.name == "generation_failed"
    assert "steps[0] is a 'scores' step" in err.message


async def test_a_steps_usage_is_what_the_turn_reports(client):
    usage = {"inputTokens": 212, "cachedInputTokens": 180, "outputTokens": 7}
    model = {"type": "scripted", "steps": [{"text": "Two ales.", "usage": usage}]}
    await client.request("session/create", {"session": "s", "model": model})
    with anyio.fail_after(5):
        result = await client.request("session/respond", {"session": "s", "prompt": "Ale!"})
    assert result["usage"] == {**usage, "totalTokens": 219}


async def test_an_error_steps_retry_after_travels_in_its_data(client):
    model = {"type": "scripted", "steps": [{"error": "rate_limited", "retryAfterSeconds": 30}]}
    await client.request("session/create", {"session": "s", "model": model})
    err = await refused(client, "session/respond", {"session": "s", "prompt": "Hi."})
    assert err.name == "rate_limited"
    assert err.data["retryAfterSeconds"] == 30


async def trimmed_on_second_turn(client, session: str, capabilities: dict[str, Any]) -> int:
    model = {"type": "scripted", "capabilities": capabilities, "steps": []}
    await client.request(
        "session/create",
        {"session": session, "model": model, "options": {"reservedResponseTokens": 0}},
    )
    long = "Tell me of the road north. " * 40  # about 270 tokens by chars/4
    with anyio.fail_after(5):
        await client.request("session/respond", {"session": session, "prompt": long})
        result = await client.request("session/respond", {"session": session, "prompt": long})
    return result["steps"][0]["trimmedEntries"]


async def test_a_scripts_context_size_is_the_one_its_history_is_fitted_to(client):
    assert await trimmed_on_second_turn(client, "roomy", {}) == 0
    assert await trimmed_on_second_turn(client, "tight", {"contextSize": 400}) > 0


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {"capabilities": {"fast": True}},
            "'model.capabilities' has no member 'fast'; it takes contextSize, maxOutputTokens, "
            "prefixCache, scoresText, compactPrompts, appendOnlySteps.",
        ),
        (
            {"capabilities": {"scoresText": "yes"}},
            """Parameter 'model.capabilities.scoresText' must be a boolean; got "yes".""",
        ),
        (
            {"capabilities": {"contextSize": 0}},
            "Parameter 'model.capabilities.contextSize' must be a whole number from 1 to "
            "1099511627776; got 0.",
        ),
        (
            {"steps": [{"text": "hi", "usage": {"outputTokens": -1}}]},
            "Parameter 'model.steps[0].usage.outputTokens' must be a whole number from 0 to "
            "1099511627776; got -1.",
        ),
        (
            {"steps": [{"text": "hi", "usage": {"tokens": 1}}]},
            "'model.steps[0].usage' has no member 'tokens'; it takes inputTokens, "
            "cachedInputTokens, outputTokens.",
        ),
        (
            {"steps": [{"scores": []}]},
            "Parameter 'model.steps[0].scores' must be a non-empty array of numbers; got [].",
        ),
        (
            {"steps": [{"scores": [-1.0, "x"]}]},
            """Parameter 'model.steps[0].scores[1]' must be a finite number; got "x".""",
        ),
        (
            {"steps": [{"scores": [-1.0, -2.0], "tokens": [1]}]},
            "Parameter 'model.steps[0].tokens' must be an array of 2 whole numbers, one per "
            "score; got [1].",
        ),
        (
            {"steps": [{"error": "busy", "retryAfterSeconds": -1}]},
            "Parameter 'model.steps[0].retryAfterSeconds' must be a number of seconds from 0 to "
            "86400; got -1.",
        ),
    ],
    ids=[
        "unknown-capability",
        "capability-not-boolean",
        "zero-context",
        "negative-usage",
        "unknown-usage-member",
        "empty-scores",
        "score-not-a-number",
        "tokens-of-another-length",
        "negative-retry-after",
    ],
)
async def test_a_malformed_oamd_member_is_refused_naming_it(client, model, message):
    err = await refused(
        client, "session/create", {"session": "s", "model": {"type": "scripted", **model}}
    )
    assert err.name == "invalid_params"
    assert err.message == message

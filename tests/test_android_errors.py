"""The ML Kit error table, availability mapping and prompt rendering (pure Python, no JVM)."""

from __future__ import annotations

import pytest

from oamd.backends.android.mlkit import (
    CODE_NAMES,
    DEFAULT_RETRY_AFTER_SECONDS,
    availability_from_status,
    error_from_code,
    render_prompt,
)
from oamd.backends.base import ChatMessage

EXPECTED = {
    9: "rate_limited", 27: "rate_limited", 28: "rate_limited", 30: "model_unavailable",
    4: "guardrail_violation", 11: "guardrail_violation", 15: "guardrail_violation",
    12: "context_size_exceeded",
    8: "model_unavailable", 16: "model_unavailable", 501: "model_unavailable",
    604: "model_unavailable", -101: "model_unavailable",
    7: "cancelled",
    -100: "invalid_request", -102: "invalid_request",
    -104: "invalid_schema",
    0: "generation_failed", -103: "generation_failed", -105: "generation_failed",
    -106: "generation_failed", -107: "generation_failed", 12345: "generation_failed",
}  # fmt: skip


def test_the_table_covers_every_code_of_open_android_models():
    assert {code: name for code, (_, name) in CODE_NAMES.items()} == {
        c: n for c, n in EXPECTED.items() if c != 12345
    }


@pytest.mark.parametrize(("code", "name"), sorted(EXPECTED.items()))
def test_each_code_maps_to_its_model_error(code, name):
    error = error_from_code(code, "boom", 0)
    assert error.name == name
    assert error.message.startswith("Gemini Nano: boom (ML Kit ")
    assert error.message.endswith(f", {code})")
    if name == "rate_limited":
        assert error.retry_after == DEFAULT_RETRY_AFTER_SECONDS
    else:
        assert error.retry_after is None


def test_a_rate_limit_carries_the_backends_delay():
    error = error_from_code(27, "", 1500)
    assert (error.name, error.retry_after) == ("rate_limited", 1.5)
    assert "PER_APP_BATTERY_USE_QUOTA_EXCEEDED" in error.message
    assert error.data["retryAfterSeconds"] == 1.5


def test_background_use_blocked_is_model_unavailable_because_the_game_is_not_in_front():
    error = error_from_code(30, "", 5000)  # a delay, if AICore gives one, invites a retry loop
    assert error.name == "model_unavailable"
    assert error.retry_after is None
    assert error.data == {"reason": "background"}
    assert "BACKGROUND_USE_BLOCKED" in error.message


def test_other_unavailable_codes_carry_no_reason():
    assert error_from_code(8, "", 0).data == {}


def test_a_delay_on_a_non_rate_limit_code_is_ignored():
    assert error_from_code(12, "too big", 900).retry_after is None


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ('{"status":"available","contextSize":4000}', (True, None, "available", 4000)),
        ('{"status":"downloadable"}', (False, "model_not_ready", "downloadable", None)),
        (
            '{"status":"downloading","bytesDownloaded":10,"totalBytes":30}',
            (False, "model_not_ready", "downloading", None),
        ),
        ('{"status":"unavailable"}', (False, "device_not_eligible", "unavailable", None)),
        (
            '{"status":"unavailable","code":604}',
            (False, "needs_system_update", "unavailable", None),
        ),
        (
            '{"status":"unavailable","code":501}',
            (False, "not_enough_disk_space", "unavailable", None),
        ),
        (
            '{"status":"unavailable","code":-101}',
            (False, "aicore_unavailable", "unavailable", None),
        ),
        ('{"status":"unavailable","code":8}', (False, "model_not_ready", "unavailable", None)),
        ('{"status":"unavailable","code":3}', (False, "unknown", "unavailable", None)),
        ("not json", (False, "unknown", "unavailable", None)),
    ],
)
def test_status_json_maps_to_availability(status, expected):
    found = availability_from_status(status)
    assert (found.available, found.reason, found.status, found.context_size) == expected


def test_download_progress_is_in_the_detail():
    found = availability_from_status(
        '{"status":"downloading","bytesDownloaded":10,"totalBytes":30}'
    )
    assert found.detail == "downloaded 10 of 30 bytes"


def test_a_single_user_message_is_the_prompt_and_system_text_the_instruction():
    system, prompt = render_prompt(
        [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello?")]
    )
    assert (system, prompt) == ("Be brief.", "Hello?")


def test_a_conversation_becomes_a_labelled_transcript_ending_with_the_reply_cue():
    system, prompt = render_prompt(
        [
            ChatMessage("user", "Swords?"),
            ChatMessage("assistant", "Let me look."),
            ChatMessage("tool", "", tool_name="stock", output={"n": 3}),
        ]
    )
    assert system is None
    assert (
        prompt
        == 'User: Swords?\n\nAssistant: Let me look.\n\nTool result (stock): {"n":3}\n\nAssistant:'
    )

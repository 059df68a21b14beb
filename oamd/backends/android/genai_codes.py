"""ML Kit GenAI's codes as oamd reads them: a ``GenAiException`` code → the ``ModelError`` it
fails a step with (open-android-models' table, ``android-design.md`` §7.7), and the backend's
``status()`` JSON → ``model/availability``. Shared by every Java backend (LiteRT-LM's errors are
mapped onto the same codes by ``org.oamd.host.ErrorCodes``)."""

from __future__ import annotations

from typing import Any

import orjson

from oamd.backends.base import Availability
from oamd.errors import ModelError

__all__ = [
    "BACKGROUND_USE_BLOCKED",
    "CODE_NAMES",
    "DEFAULT_RETRY_AFTER_SECONDS",
    "availability_from_status",
    "error_from_code",
    "progress_text",
]

DEFAULT_RETRY_AFTER_SECONDS = 5.0
"""``retry_after`` for a ``rate_limited`` failure whose backend gave no delay."""

_RATE_LIMITED = {9: "BUSY", 27: "PER_APP_BATTERY_USE_QUOTA_EXCEEDED",
                 28: "PER_DEVICE_BATTERY_USE_QUOTA_EXCEEDED"}  # fmt: skip
_GUARDRAIL = {4: "REQUEST_PROCESSING_ERROR", 11: "RESPONSE_PROCESSING_ERROR",
              15: "RESPONSE_GENERATION_ERROR"}  # fmt: skip
_TOO_LARGE = {12: "REQUEST_TOO_LARGE"}
_UNAVAILABLE = {8: "NOT_AVAILABLE", 16: "NOT_SUPPORTED", 501: "NOT_ENOUGH_DISK_SPACE",
                604: "NEEDS_SYSTEM_UPDATE", -101: "AICORE_INCOMPATIBLE",
                30: "BACKGROUND_USE_BLOCKED"}  # fmt: skip
_CANCELLED = {7: "CANCELLED"}
_INVALID_REQUEST = {-100: "REQUEST_TOO_SMALL", -102: "INVALID_INPUT_IMAGE"}
_INVALID_SCHEMA = {-104: "STRUCTURED_OUTPUT_REQUEST_ERROR"}
_FAILED = {0: "UNKNOWN", -103: "CACHE_PROCESSING_ERROR", -105: "STRUCTURED_OUTPUT_RESPONSE_ERROR",
           -106: "STRUCTURED_OUTPUT_MAX_TOKENS_ERROR", -107: "AUDIO_BUFFER_OVERFLOW"}  # fmt: skip

CODE_NAMES: dict[int, tuple[str, str]] = {
    code: (label, error)
    for table, error in (
        (_RATE_LIMITED, "rate_limited"),
        (_GUARDRAIL, "guardrail_violation"),
        (_TOO_LARGE, "context_size_exceeded"),
        (_UNAVAILABLE, "model_unavailable"),
        (_CANCELLED, "cancelled"),
        (_INVALID_REQUEST, "invalid_request"),
        (_INVALID_SCHEMA, "invalid_schema"),
        (_FAILED, "generation_failed"),
    )
    for code, label in table.items()
}
"""ML Kit ``GenAiException`` code → (its name, the ``ModelError`` name); any other code is
``generation_failed`` (open-android-models' table, ``android-design.md`` §7.7)."""

_UNAVAILABLE_REASONS = {
    -101: "aicore_unavailable",
    604: "needs_system_update",
    501: "not_enough_disk_space",
    8: "model_not_ready",
    16: "model_not_ready",
}
"""``checkStatus`` failure code → ``model/availability`` ``reason``; others are ``unknown``."""


BACKGROUND_USE_BLOCKED = 30
"""AICore's code when the calling app is not the top foreground app: no delay fixes it, only the
game coming back to the front, so it is ``model_unavailable`` with ``data.reason: "background"``."""

_ERROR_REASONS = {BACKGROUND_USE_BLOCKED: "background"}
"""Code → ``data.reason`` of the ``ModelError``, where the name alone does not say why."""


def error_from_code(
    code: int, message: str, retry_after_millis: int = 0, *, label: str = "Gemini Nano"
) -> ModelError:
    """The ``ModelError`` for a backend failure, worded ``<label>: <detail> (ML Kit <NAME>,
    <code>)``. ``retry_after`` is set for ``rate_limited`` only (the backend's delay when it gave
    one, else ``DEFAULT_RETRY_AFTER_SECONDS``); ``data.reason`` for the codes of
    ``_ERROR_REASONS`` (``background``: retry once the game is in front again)."""
    code_name, name = CODE_NAMES.get(code, ("UNKNOWN", "generation_failed"))
    detail = message or code_name.replace("_", " ").lower()
    text = f"{label}: {detail} (ML Kit {code_name}, {code})"
    if name == "rate_limited":
        delay = retry_after_millis / 1000 if retry_after_millis > 0 else DEFAULT_RETRY_AFTER_SECONDS
        return ModelError(name, text, retry_after=delay)
    error = ModelError(name, text)
    if code in _ERROR_REASONS:
        error.data["reason"] = _ERROR_REASONS[code]
    return error


def availability_from_status(status_json: str) -> Availability:
    """Maps the backend's ``status()`` JSON onto ``model/availability``."""
    try:
        raw: dict[str, Any] = orjson.loads(status_json)
        status = str(raw.get("status", "unavailable"))
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return Availability(False, "unknown", "unavailable", f"unreadable status: {status_json!r}")
    detail = raw.get("detail")
    progress = progress_text(raw)
    if progress:
        detail = f"{detail}; {progress}" if detail else progress
    context = raw.get("contextSize")
    context = int(context) if isinstance(context, int) and context > 0 else None
    if status == "available":
        return Availability(True, None, "available", detail, context, raw.get("variant"))
    if status in ("downloadable", "downloading"):
        done, total = raw.get("bytesDownloaded"), raw.get("totalBytes")
        return Availability(
            False,
            "model_not_ready",
            status,
            detail,
            context,
            bytes_downloaded=done if isinstance(done, int) and done >= 0 else None,
            total_bytes=total if isinstance(total, int) and total >= 0 else None,
        )
    if "code" in raw:
        reason = _UNAVAILABLE_REASONS.get(int(raw["code"]), "unknown")
    else:
        reason = str(
            raw.get("reason") or ("device_not_eligible" if status == "unavailable" else "unknown")
        )
    return Availability(False, reason, "unavailable", detail, context)


def progress_text(raw: dict[str, Any]) -> str | None:
    """A status's download progress in words, or None when it reports none."""
    done, total = raw.get("bytesDownloaded"), raw.get("totalBytes")
    if not isinstance(done, int):
        return None
    return (
        f"downloaded {done} of {total} bytes"
        if isinstance(total, int)
        else f"downloaded {done} bytes"
    )

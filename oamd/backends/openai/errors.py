"""The ``ModelError`` an OpenAI-compatible server's failure maps to, following the sibling
project's table: an error body's ``code``/``type`` first (``context_length_exceeded`` →
``context_size_exceeded`` …), then the HTTP status (429 → ``rate_limited`` with ``Retry-After``,
401/403/404 → ``model_unavailable``, 503 → ``busy``, other 4xx → ``invalid_request``, anything
else → ``generation_failed``). Without I/O, like ``oamd.backends.openai.wire``."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

from oamd.errors import MODEL_ERROR_NAMES, ModelError
from oamd.jsonvalue import JsonTextError, dumps_text, loads

__all__ = [
    "MAX_ERROR_MESSAGE_CHARS",
    "MAX_RETRY_AFTER_HEADER_SECONDS",
    "clip",
    "error_from_body",
    "error_from_response",
    "retry_after_seconds",
    "status_of",
]

MAX_ERROR_MESSAGE_CHARS = 300
"""Longest part of a server's error text quoted in a ``ModelError`` message."""

MAX_RETRY_AFTER_HEADER_SECONDS = 86400.0
"""Longest wait a ``Retry-After`` is taken to ask for (a day, the longest timeout the protocol
knows): a server asking for longer, ``inf`` or a number past the double range included, is
reported as asking for a day (``retryAfterSeconds`` must be a number a client can use)."""

_CODE_NAMES = {
    "content_filter": "guardrail_violation",
    "guardrail_violation": "guardrail_violation",
    "refusal": "refusal",
    "context_length_exceeded": "context_size_exceeded",
    "context_size_exceeded": "context_size_exceeded",
    "exceed_context_size_error": "context_size_exceeded",
    "rate_limited": "rate_limited",
    "rate_limit_exceeded": "rate_limited",
    "rate_limit_error": "rate_limited",
    "model_not_found": "model_unavailable",
}
_CONTEXT_PHRASES = (
    "context length",
    "context window",
    "context size",
    "maximum context",
    "exceed context",
    "exceeds the available context",
)
_STATUS_TOO_MANY_REQUESTS = 429
_STATUS_UNAVAILABLE = 503
_STATUSES_UNAUTHORIZED = (401, 403, 404)


def clip(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_ERROR_MESSAGE_CHARS:
        return text
    return text[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"


def status_of(error: Any) -> int:
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        return error["code"]
    return 500


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from 0 to ``MAX_RETRY_AFTER_HEADER_SECONDS``: a number (a
    fraction or an exponent is taken too; ``inf`` and past the double range: the most), or an
    HTTP date counted from ``now`` (one in the past: 0). ``None`` when absent or malformed (a
    word, NaN, a negative number, a date that is no date): the failure then asked for nothing."""
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
            seconds = when.timestamp() - (time.time() if now is None else now)
        except (TypeError, ValueError, OverflowError, OSError, IndexError):
            return None
    else:
        if not seconds >= 0:  # NaN, or a negative delay: not a Retry-After
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_HEADER_SECONDS)


def _error_parts(body: Any) -> tuple[str | None, str | None, str]:
    """``(code, type, message)`` of an OpenAI-style error body (or a bare string)."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            code = error.get("code")
            kind = error.get("type")
            message = error.get("message") or error.get("detail") or ""
            return (
                code if isinstance(code, str) else None,
                kind if isinstance(kind, str) else None,
                message if isinstance(message, str) else dumps_text(message),
            )
        if isinstance(error, str):
            return None, None, error
        detail = body.get("detail")
        if detail is not None:
            return None, None, detail if isinstance(detail, str) else dumps_text(detail)
    if isinstance(body, str):
        return None, None, body
    return None, None, ""


def error_from_body(status: int, headers: Mapping[str, str], body: Any) -> ModelError:
    """The ``ModelError`` for an error status with its decoded body (JSON or text)."""
    code, kind, message = _error_parts(body)
    name = None
    for candidate in (code, kind):
        if candidate is None:
            continue
        name = _CODE_NAMES.get(candidate)
        if name is None and candidate in MODEL_ERROR_NAMES:
            name = candidate
        if name is not None:
            break
    lowered = message.lower()
    if name is None and any(phrase in lowered for phrase in _CONTEXT_PHRASES):
        name = "context_size_exceeded"
    if name is None:
        if status == _STATUS_TOO_MANY_REQUESTS:
            name = "rate_limited"
        elif status in _STATUSES_UNAUTHORIZED:
            name = "model_unavailable"
        elif status == _STATUS_UNAVAILABLE:
            name = "busy"
        elif 400 <= status < 500:
            name = "invalid_request"
        else:
            name = "generation_failed"
    text = f"The model server answered HTTP {status}"
    text += f": {clip(message)}" if message else "."
    retry_after = retry_after_seconds(headers) if name in ("rate_limited", "busy") else None
    return ModelError(name, text, retry_after=retry_after)


def error_from_response(status: int, headers: Mapping[str, str], content: bytes) -> ModelError:
    """The ``ModelError`` for an error response's raw bytes (JSON under ``oamd.jsonvalue``'s
    rule, or text quoted as is)."""
    try:
        body: Any = loads(content)
    except JsonTextError:
        body = content.decode("utf-8", "replace")
    return error_from_body(status, headers, body)

"""Short digests of what a model was asked, so a replay can tell which recorded step answers which
call when calls of one use run side by side (``decision/decideMany``'s decisions share a model).

A digest covers everything the daemon builds from the conversation (roles, texts, tool outputs,
the tools offered, the schema, prefix and stops) and nothing it draws at random: tool-call ids are
left out, so the same conversation digests the same in the recording and in its replay.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from oamd.backends.base import ChatMessage, GenerationRequest, ScoredText

__all__ = ["request_digest", "scoring_digest", "text_digest"]

DIGEST_CHARS = 16
"""Hex characters kept of a SHA-256: 64 bits, ample to tell a connection's prompts apart."""


def _digest(value: Any) -> str:
    encoded = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS)
    return hashlib.sha256(encoded).hexdigest()[:DIGEST_CHARS]


def _message(message: ChatMessage) -> list[Any]:
    calls = [[call.name, call.arguments] for call in message.tool_calls]
    return [message.role, message.content, message.tool_name, calls]


def request_digest(request: GenerationRequest) -> str:
    """The digest of one generation request."""
    return _digest(
        [
            "generate",
            request.kind,
            request.tool_mode,
            [[tool.name, tool.parameters] for tool in request.tools],
            request.schema,
            request.reply_prefix,
            list(request.stop),
            [_message(m) for m in request.messages],
        ]
    )


def scoring_digest(candidates: list[ScoredText]) -> str:
    """The digest of one likelihood choice."""
    return _digest(["score", [[[_message(m) for m in c.messages], c.scored] for c in candidates]])


def text_digest(text: str) -> str:
    """The digest of a text whose tokens were counted."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]

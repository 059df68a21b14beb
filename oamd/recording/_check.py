"""What a recording must be for ``oamd replay`` to play it: checked whole before anything plays.

A file is a document a user is handed (a bug report, CI's artefact), so nothing in it is trusted:
every member the replay reads has its type, every time is a finite number of seconds within
``MAX_RECORDED_SECONDS``, every size is within its limit (the oversized lines together within
``MAX_REPLAYED_OVERSIZED_BYTES``), base64 is base64 and every line is one the replay can encode
again. What is wrong is named by its place (``lines[3].at``) in a ``RecordingError``, which
``oamd replay`` reports with exit 2; nothing is allocated from a size the file states.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import orjson

from oamd.limits import (
    MAX_LINE_BYTES,
    MAX_RECORDED_SECONDS,
    MAX_REPLAYED_OVERSIZED_BYTES,
    MAX_SAFE_INTEGER,
    MAX_TIMEOUT_SECONDS,
)

__all__ = ["RecordingError", "check_document"]

SIDES = ("client", "daemon")
_FLAGS = ("scripted", "testMethods")
_COUNTS = ("maxSessions", "maxConnectionBytes", "maxLineBytes", "maxOutboxBytes")
_AVAILABILITY_KINDS = ("availability", "cached", "lastKnown")


class RecordingError(ValueError):
    """A file that is not a recording this oamd can play (the message says why)."""


def _shown(value: Any) -> str:
    text = orjson.dumps(value, default=repr).decode() if _encodes(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _encodes(value: Any) -> bool:
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True


def _fail(where: str, wanted: str, value: Any) -> RecordingError:
    return RecordingError(f"'{where}' must be {wanted}; got {_shown(value)}.")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seconds(where: str, value: Any, most: float) -> float:
    if not _number(value) or not math.isfinite(value) or not 0 <= value <= most:
        raise _fail(where, f"a number of seconds from 0 to {most:.0f}", value)
    return float(value)


def _whole(where: str, value: Any, least: int, most: int) -> int:
    if type(value) is not int or not least <= value <= most:
        raise _fail(where, f"a whole number from {least} to {most}", value)
    return value


def _daemon(daemon: dict[str, Any]) -> int:
    """The options, checked; the replay's line limit."""
    for key in _FLAGS:
        if key in daemon and type(daemon[key]) is not bool:
            raise _fail(f"daemon.{key}", "true or false", daemon[key])
    for key in _COUNTS:
        if key in daemon:
            _whole(f"daemon.{key}", daemon[key], 1, MAX_SAFE_INTEGER)
    if "toolTimeoutSeconds" in daemon:
        _seconds("daemon.toolTimeoutSeconds", daemon["toolTimeoutSeconds"], MAX_TIMEOUT_SECONDS)
    return daemon.get("maxLineBytes", MAX_LINE_BYTES)


def _system(system: dict[str, Any]) -> None:
    if "name" in system and not isinstance(system["name"], str):
        raise _fail("system.name", "a string", system["name"])
    answers = system.get("availability")
    if answers is None:
        return
    if not isinstance(answers, dict):
        raise _fail("system.availability", "an object", answers)
    for kind in _AVAILABILITY_KINDS:
        given = answers.get(kind)
        if given is None:
            continue
        if not isinstance(given, list):
            raise _fail(f"system.availability.{kind}", "an array", given)
        for i, answer in enumerate(given):
            where = f"system.availability.{kind}[{i}]"
            if answer is not None and not isinstance(answer, dict):
                raise _fail(where, "an object or null", answer)
            languages = (answer or {}).get("supportedLanguages")
            if languages is not None and not isinstance(languages, list):
                raise _fail(f"{where}.supportedLanguages", "an array", languages)


def _uses(uses: list[Any]) -> None:
    for i, use in enumerate(uses):
        where = f"uses[{i}]"
        if not isinstance(use, dict):
            raise _fail(where, "an object", use)
        asked = use.get("use", {})
        if not isinstance(asked, dict):
            raise _fail(f"{where}.use", "an object", asked)
        if "idText" in asked and not isinstance(asked["idText"], str):
            raise _fail(f"{where}.use.idText", "a string", asked["idText"])
        if not isinstance(use.get("script"), dict):
            raise _fail(f"{where}.script", "an object (a scripted model)", use.get("script"))
        digests = use.get("requestDigests", [])
        if not isinstance(digests, list) or not all(
            d is None or isinstance(d, str) for d in digests
        ):
            raise _fail(f"{where}.requestDigests", "an array of strings", digests)
        counts = use.get("tokenCounts", {})
        if not isinstance(counts, dict):
            raise _fail(f"{where}.tokenCounts", "an object", counts)
        for key, count in counts.items():
            _whole(f"{where}.tokenCounts.{key}", count, 0, MAX_SAFE_INTEGER)


def _line(where: str, entry: dict[str, Any], max_line_bytes: int) -> int:
    """One entry of ``lines``, checked; the bytes an oversized one stands for (else 0)."""
    if entry.get("from") not in SIDES:
        raise _fail(f"{where}.from", '"client" or "daemon"', entry.get("from"))
    _seconds(f"{where}.at", entry.get("at"), MAX_RECORDED_SECONDS)
    kinds = [k for k in ("line", "text", "base64", "oversized") if k in entry]
    if len(kinds) != 1:
        raise RecordingError(
            f"'{where}' must hold one of 'line', 'text', 'base64' or 'oversized'; it holds "
            f"{len(kinds)}."
        )
    (kind,) = kinds
    value = entry[kind]
    if kind == "line":
        if not _encodes(value):  # nested past what the replay can send or compare again
            raise RecordingError(f"'{where}.line' is nested too deep to be played back.")
    elif kind == "text":
        if not isinstance(value, str):
            raise _fail(f"{where}.text", "a string", value)
    elif kind == "base64":
        try:
            base64.b64decode(value if isinstance(value, str) else b"!", validate=True)
        except (binascii.Error, ValueError):
            raise _fail(f"{where}.base64", "base64", value) from None
    else:
        head = entry.get("head", "")
        if not isinstance(head, str):
            raise _fail(f"{where}.head", "a string", head)
        least = max(max_line_bytes + 1, len(head.encode()))
        return _whole(f"{where}.oversized", value, least, MAX_REPLAYED_OVERSIZED_BYTES)
    return 0


def check_document(document: dict[str, Any]) -> None:
    """Whether ``document`` (a recording's members, ``format`` and ``version`` already known)
    is one the replay can play in bounded time and memory.

    Raises:
        RecordingError: what is wrong, by its place in the file.
    """
    for key, kind, name in (
        ("uses", list, "an array"),
        ("lines", list, "an array"),
        ("daemon", dict, "an object"),
        ("system", dict, "an object"),
    ):
        if not isinstance(document.get(key), kind):
            raise RecordingError(f"'{key}' is missing or not {name}.")
    max_line_bytes = _daemon(document["daemon"])
    _system(document["system"])
    _uses(document["uses"])
    if document.get("clientClosedAt") is not None:
        _seconds("clientClosedAt", document["clientClosedAt"], MAX_RECORDED_SECONDS)
    oversized = 0
    for i, entry in enumerate(document["lines"]):
        if not isinstance(entry, dict):
            raise _fail(f"lines[{i}]", "an object", entry)
        oversized += _line(f"lines[{i}]", entry, max_line_bytes)
        if oversized > MAX_REPLAYED_OVERSIZED_BYTES:
            raise RecordingError(
                f"'lines[{i}].oversized': the oversized lines stand for more than "
                f"{MAX_REPLAYED_OVERSIZED_BYTES} bytes together, more than a replay sends."
            )

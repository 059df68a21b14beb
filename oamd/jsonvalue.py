"""The daemon's one set of JSON rules, for every text it reads (client lines, model output) and
every value it writes (the wire, prompts, hashes).

The protocol's JSON allows what no encoder downstream takes: integers of any size, numbers beyond
the double range, lone surrogate escapes. Rather than teach every encoder, prompt renderer and
tokenizer about them, text is read under these rules, so every value inside the daemon is one
orjson encodes, a tokenizer takes and a model sees as text:

- **Numbers.** An integer written without fraction or exponent within 64 bits (-2^63 … 2^64-1) is
  exact; any other number is the nearest IEEE-754 double, and one beyond the double range
  (``10^400``, ``1e400``) is the largest double of its sign. This is orjson's own rule within the
  double range, extended so no number is ever infinite or unencodable.
- **Strings.** A lone surrogate escape (``"\\ud800"``) reads as U+FFFD, the replacement character,
  as an unpaired surrogate does in any UTF-8 encoder that does not fail; raw bytes that are not
  UTF-8 make the text invalid.
- **Nesting.** Arrays and objects nest at most ``MAX_JSON_DEPTH`` deep; deeper text is invalid
  before any recursive code sees it.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import orjson

from oamd.limits import MAX_EMBEDDED_JSON_DEPTH, MAX_JSON_DEPTH

__all__ = [
    "JsonTextError",
    "dumps",
    "dumps_text",
    "loads",
    "loads_embedded",
    "nests_deeper_than",
    "number_from_text",
    "without_lone_surrogates",
]

LARGEST_DOUBLE = sys.float_info.max
_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1
_INT_MAX_DIGITS = 20
"""Longest integer text that can be within 64 bits; longer is a double without ``int()``, whose
cost grows with the square of the digits (and which refuses past 4,300 of them)."""

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_PARENS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_OPEN = ord("(")
_QUICK_PASSES = 4
"""Innermost-pair deletions tried before what remains is walked bracket by bracket."""
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonTextError(ValueError):
    """Text that is not JSON under these rules; the message says where and why."""


def nests_deeper_than(text: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether arrays and objects in ``text`` nest deeper than ``limit`` (brackets inside strings
    do not count). Text with fewer opening brackets than that costs two counts.

    Otherwise strings go and the brackets left become ``(`` and ``)``; a few passes that each
    delete every innermost ``()`` pair (C's work, not a Python step per bracket: a 14 MiB line of
    ``[]`` took 1.2 s that way) empty a shallow balanced text, as deep as the passes it took; a
    deeper or unbalanced one is walked bracket by bracket."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    parens = _STRING.sub(b"", data).translate(_PARENS, _NOT_BRACKETS)
    left = parens
    for passes in range(1, min(_QUICK_PASSES, limit) + 1):
        left = left.replace(b"()", b"")
        if not left:  # balanced, and as deep as the passes that emptied it
            return passes > limit
    depth = 0
    for paren in parens:  # deeper, or not balanced: walked bracket by bracket
        depth += 1 if paren == _OPEN else -1
        if depth > limit:
            return True
    return False


def number_from_text(text: str) -> int | float:
    """A JSON number's text as the value the rules give it."""
    if len(text) <= _INT_MAX_DIGITS and not any(c in text for c in ".eE"):
        value = int(text)
        if _INT_MIN <= value <= _INT_MAX:
            return value
    number = float(text)
    if number in (float("inf"), float("-inf")):
        return LARGEST_DOUBLE if number > 0 else -LARGEST_DOUBLE
    return number


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: bytes | str, *, limit: int = MAX_JSON_DEPTH, keep_id: bool = False) -> Any:
    """Parses JSON text under the rules above. ``keep_id``: the text is a JSON-RPC message whose
    top-level ``id`` is kept exactly as sent, lone surrogates and all (it is echoed).

    Raises:
        JsonTextError: not JSON, not UTF-8, or nested deeper than ``limit``.
    """
    if nests_deeper_than(text, limit):
        raise JsonTextError(f"The JSON nests deeper than {limit} levels.")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        # numbers past the double range, lone surrogates: the slow path decides
        unit = "byte" if isinstance(text, bytes | bytearray | memoryview) else "character"
        orjson_says = f"Invalid JSON at {unit} {exc.pos}: {exc.msg}."
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text)
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JsonTextError(
                f"Invalid JSON: byte {exc.start} (0x{text[exc.start]:02x}) is not valid UTF-8."
            ) from None
    try:
        value = json.loads(
            text,
            parse_int=number_from_text,
            parse_float=number_from_text,
            parse_constant=_reject_constant,
        )
    except ValueError:
        raise JsonTextError(orjson_says) from None
    if not _SURROGATE_ESCAPE.search(text):
        return value
    if keep_id and type(value) is dict and "id" in value:
        return {k: v if k == "id" else without_lone_surrogates(v) for k, v in value.items()}
    return without_lone_surrogates(value)


def loads_embedded(text: bytes | str) -> Any:
    """``loads`` for JSON written inside a string (``MAX_EMBEDDED_JSON_DEPTH``).

    Raises:
        JsonTextError: as ``loads``.
    """
    return loads(text, limit=MAX_EMBEDDED_JSON_DEPTH)


def without_lone_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    return value


def dumps(value: Any, *, sort_keys: bool = False) -> bytes:
    """``value`` as compact JSON (UTF-8). Values read under these rules always encode with orjson;
    anything else the daemon made (a Python int past 64 bits, a lone surrogate) is brought under
    the rules first rather than failing.

    Raises:
        JsonTextError: the value nests deeper than orjson writes (255) or holds a non-JSON type.
    """
    option = orjson.OPT_SORT_KEYS if sort_keys else 0
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        pass
    try:
        return orjson.dumps(_under_the_rules(value), option=option)
    except (TypeError, RecursionError) as exc:  # too deep, or not JSON at all: a defect upstream
        raise JsonTextError(f"The value cannot be written as JSON: {exc}.") from None


def dumps_text(value: Any, *, sort_keys: bool = False) -> str:
    """``dumps`` as a ``str``."""
    return dumps(value, sort_keys=sort_keys).decode()


def _under_the_rules(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if _INT_MIN <= value <= _INT_MAX:
            return value
        try:
            return float(value)
        except OverflowError:
            return LARGEST_DOUBLE if value > 0 else -LARGEST_DOUBLE
    if isinstance(value, float):
        return value
    if isinstance(value, list | tuple):
        return [_under_the_rules(item) for item in value]
    if isinstance(value, dict):
        return {_under_the_rules(k): _under_the_rules(v) for k, v in value.items()}
    return value  # orjson decides (and raises TypeError for what JSON cannot hold)

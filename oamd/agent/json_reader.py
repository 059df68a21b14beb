"""Lenient JSON: reads the forgiving JSON small models write, and finds it inside free text.

It owns the reader (single quotes, unquoted keys, ``=`` for ``:``, comments, stray commas, Python
literals, copied ``| "b"`` unions, and in partial mode truncated input closed) and the extraction
of the first JSON object or array from prose and code fences. Only ``parse_lenient`` raises
(``LenientJsonError``); the extraction functions return ``None`` when nothing parses. Reading the
value as an envelope or as tool arguments is left to ``oamd.agent.envelope._parser``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson

from oamd.jsonvalue import number_from_text
from oamd.limits import MAX_EMBEDDED_JSON_DEPTH

__all__ = [
    "CompletionWatch",
    "LenientJsonError",
    "first_value",
    "has_complete_value",
    "json_candidates",
    "parse_lenient",
    "streaming_value",
]

_MAX_NESTING = MAX_EMBEDDED_JSON_DEPTH
"""Deepest nesting read; deeper input is not a value (the daemon's one limit for JSON in text)."""

_MAX_OPENERS = 64
"""Opening brackets tried per candidate text, so a brace-heavy answer cannot cost quadratic time."""

_FENCE = "```"
_LANGUAGE_TAG = re.compile(r"[A-Za-z0-9_+.\-]*")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NUMBER_TAIL = re.compile(r"[.eE+\-\d]*")
_LITERALS = {"true": True, "True": True, "false": False, "False": False}
_NULLS = ("null", "None", "nil")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
_STRING_OPENERS_AFTER = "{[,:"
"""A single quote opens a string only after one of these, so apostrophes in prose stay text."""


class LenientJsonError(ValueError):
    """The text holds no value the lenient reader accepts."""


class _Truncated(Exception):
    """The input ended where a value was expected."""


def _word_char(c: str) -> bool:
    return c.isalnum() or c in "_$-."


class _Reader:
    def __init__(self, text: str, partial: bool) -> None:
        self.s = text
        self.n = len(text)
        self.i = 0
        self.partial = partial

    def error(self, what: str) -> LenientJsonError:
        return LenientJsonError(f"{what} at offset {self.i}")

    def skip(self, commas: bool = False) -> None:
        """Skips whitespace (a byte-order mark included), comments and, inside containers, commas."""
        s, n = self.s, self.n
        while self.i < n:
            c = s[self.i]
            if c.isspace() or c == "\ufeff" or (commas and c == ","):
                self.i += 1
            elif s.startswith("//", self.i):
                end = s.find("\n", self.i)
                self.i = n if end < 0 else end + 1
            elif s.startswith("/*", self.i):
                end = s.find("*/", self.i + 2)
                self.i = n if end < 0 else end + 2
            else:
                return

    def value(self, depth: int) -> Any:
        self.skip()
        if self.i >= self.n:
            raise _Truncated
        if depth > _MAX_NESTING:
            raise self.error("nesting too deep")
        c = self.s[self.i]
        if c == "{":
            return self.obj(depth)
        if c == "[":
            return self.arr(depth)
        if c in "\"'":
            text, closed = self.string()
            if not closed and not self.partial:
                raise self.error("unclosed string")
            return text
        if c in "+-." or c.isdigit():
            return self.number()
        if _word_char(c):
            word = self.word()
            if word in _LITERALS:
                return _LITERALS[word]
            return None if word in _NULLS else word
        raise self.error(f"unexpected {c!r}")

    def skip_union(self, depth: int) -> None:
        """Skips ``| "b" | "c"`` after a value: small models copy unions from prompts."""
        while True:
            self.skip()
            if self.i >= self.n or self.s[self.i] != "|":
                return
            self.i += 1
            try:
                self.value(depth + 1)
            except _Truncated:
                if not self.partial:
                    raise self.error("unfinished union") from None
                return

    def obj(self, depth: int) -> dict[str, Any]:
        self.i += 1
        out: dict[str, Any] = {}
        while True:
            self.skip(commas=True)
            if self.i >= self.n:
                if self.partial:
                    return out
                raise self.error("unclosed object")
            c = self.s[self.i]
            if c == "}":
                self.i += 1
                return out
            if c in "\"'":
                key, closed = self.string()
                if not closed:  # a key cut off mid-string is dropped
                    if self.partial:
                        return out
                    raise self.error("unclosed string")
            elif _word_char(c):
                key = self.word()
            else:
                raise self.error(f"unexpected {c!r} where a key belongs")
            self.skip()
            if self.i >= self.n:
                if self.partial:
                    return out
                raise self.error("unclosed object")
            if self.s[self.i] not in ":=":
                raise self.error("expected ':'")
            self.i += 1
            try:
                item = self.value(depth + 1)
            except _Truncated:  # a key without a value is dropped
                if self.partial:
                    return out
                raise self.error("unclosed object") from None
            out[key] = item  # a repeated key keeps its first position and its last value
            self.skip_union(depth)

    def arr(self, depth: int) -> list[Any]:
        self.i += 1
        out: list[Any] = []
        while True:
            self.skip(commas=True)
            if self.i >= self.n:
                if self.partial:
                    return out
                raise self.error("unclosed array")
            if self.s[self.i] == "]":
                self.i += 1
                return out
            try:
                out.append(self.value(depth + 1))
            except _Truncated:
                if self.partial:
                    return out
                raise self.error("unclosed array") from None
            self.skip_union(depth)

    def string(self) -> tuple[str, bool]:
        """The string at the cursor and whether its closing quote was found."""
        s, n = self.s, self.n
        quote = s[self.i]
        self.i += 1
        buf: list[str] = []
        while self.i < n:
            c = s[self.i]
            if c == quote:
                self.i += 1
                return "".join(buf), True
            if c != "\\":
                buf.append(c)
                self.i += 1
                continue
            if self.i + 1 >= n:
                self.i = n
                break
            escaped = s[self.i + 1]
            if escaped == "u":
                code = self.unicode_escape()
                if code is not None:
                    buf.append(code)
                    continue
            buf.append(_ESCAPES.get(escaped, escaped))  # unknown escapes give the character
            self.i += 2
        return "".join(buf), False

    def unicode_escape(self) -> str | None:
        digits = self.s[self.i + 2 : self.i + 6]
        if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
            return None
        code = int(digits, 16)
        self.i += 6
        if 0xD800 <= code < 0xDC00 and self.s.startswith("\\u", self.i):
            low_digits = self.s[self.i + 2 : self.i + 6]
            if len(low_digits) == 4 and all(c in "0123456789abcdefABCDEF" for c in low_digits):
                low = int(low_digits, 16)
                if 0xDC00 <= low < 0xE000:
                    self.i += 6
                    return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
        if 0xD800 <= code < 0xE000:
            return "\ufffd"  # a lone surrogate cannot be encoded again
        return chr(code)

    def number(self) -> Any:
        match = _NUMBER.match(self.s, self.i)
        if match is None:
            if self.partial and _NUMBER_TAIL.fullmatch(self.s, self.i):
                self.i = self.n
                raise _Truncated  # only a sign or a dot before the end
            raise self.error("bad number")
        self.i = match.end()
        if self.partial and self.i < self.n and _NUMBER_TAIL.fullmatch(self.s, self.i):
            self.i = self.n  # cut off at '.', 'e' or a sign: the digits so far stand
        text = match.group().lstrip("+")
        if self.partial and self.i == self.n:
            text = text.rstrip(".")  # "12." cut off before its decimals reads as 12
        return number_from_text(text)  # the daemon's one number rule

    def word(self) -> str:
        start = self.i
        while self.i < self.n and _word_char(self.s[self.i]):
            self.i += 1
        return self.s[start : self.i]


def parse_lenient(text: str, *, partial: bool = False) -> Any:
    """The one value in ``text``; ``partial`` closes what the end of the text left open.

    Raises:
        LenientJsonError: no value, an unreadable one, or text after it.
    """
    reader = _Reader(text, partial)
    try:
        value = reader.value(0)
        reader.skip_union(0)
    except _Truncated:
        raise LenientJsonError("no value") from None
    reader.skip()
    if reader.i < reader.n:
        raise reader.error("text after the value")
    return value


def json_candidates(text: str) -> list[str]:
    """The texts to search: each non-blank fenced block (an unclosed one runs to the end), then
    the whole text with the fences blanked out; just the text when it has no fence."""
    if _FENCE not in text or _is_strict_json(text):
        return [text]  # a fence inside a valid JSON string is text, not markup
    parts = text.split(_FENCE)
    blocks = []
    for body in parts[1::2]:
        tag, newline, rest = body.partition("\n")
        if newline and _LANGUAGE_TAG.fullmatch(tag.strip()):
            body = rest
        if body.strip():
            blocks.append(body)
    return [*blocks, text.replace(_FENCE, " ")]


def _is_strict_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def _balanced_end(text: str, start: int) -> int | None:
    """The index after the bracket closing the one at ``start``; ``None`` when it never closes."""
    depth = 0
    quote = ""
    previous = ""
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c == '"' or (c == "'" and previous in _STRING_OPENERS_AFTER):
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        if not c.isspace():
            previous = c
        i += 1
    return None


def _openers(text: str, arrays: bool) -> list[int]:
    found = [i for i, c in enumerate(text) if c == "{" or (arrays and c == "[")]
    return found[:_MAX_OPENERS]


def _try(text: str, partial: bool) -> Any:
    try:
        value = parse_lenient(text, partial=partial)
    except LenientJsonError:
        return None
    return value if isinstance(value, dict | list) else None


def first_value(text: str, *, arrays: bool = False, truncated: bool = True) -> Any:
    """The first JSON object (or array, with ``arrays``) in free text, or ``None``.

    Balanced slices are tried in order; a value the end of the text cut off is closed and taken
    when ``truncated`` is on, before the balanced values nested inside it (they are only part of
    what the model meant).
    """
    for candidate in json_candidates(text):
        tried_truncated = not truncated
        for start in _openers(candidate, arrays):
            end = _balanced_end(candidate, start)
            if end is not None:
                value = _try(candidate[start:end], partial=False)
            elif not tried_truncated:
                tried_truncated = True
                value = _try(candidate[start:], partial=True)
            else:
                continue
            if value is not None:
                return value
    return None


def has_complete_value(text: str, *, arrays: bool = False) -> bool:
    """Whether streaming can stop: the first opener is closed and a complete value parses."""
    starts = _openers(text, arrays)
    if not starts or _balanced_end(text, starts[0]) is None:
        return False
    return first_value(text, arrays=arrays, truncated=False) is not None


class CompletionWatch:
    """``has_complete_value`` of a text that streams in, at O(total) cost: the scan for the bracket
    closing the first opener resumes where the last piece ended, and the value is parsed when it
    closes. Should that slice not parse, it is parsed again on later closing brackets only once
    the text grew by an eighth (each parse reads the whole text)."""

    __slots__ = ("_arrays", "_depth", "_length", "_parsed_at", "_previous", "_quote", "_skip")

    def __init__(self, *, arrays: bool = False) -> None:
        self._arrays = arrays
        self._depth = -1  # before the first opener
        self._quote = ""
        self._previous = ""
        self._skip = False
        self._length = 0
        self._parsed_at: int | None = None  # the first opener's bracket closed: length parsed at

    def feed(self, piece: str, text: Callable[[], str]) -> bool:
        """Whether ``text()`` — everything fed so far, ``piece`` last — holds a complete value."""
        self._length += len(piece)
        if self._parsed_at is None:
            if not self._closes(piece):
                return False
        elif ("}" not in piece and "]" not in piece) or (
            self._length - self._parsed_at < max(1, self._parsed_at // 8)
        ):
            return False
        self._parsed_at = self._length
        return first_value(text(), arrays=self._arrays, truncated=False) is not None

    def _closes(self, piece: str) -> bool:
        """Scans ``piece`` as ``_balanced_end`` scans from the first opener."""
        i, n = 0, len(piece)
        if self._depth < 0:
            starts = [
                j for j in (piece.find("{"), piece.find("[") if self._arrays else -1) if j >= 0
            ]
            if not starts:
                return False
            i, self._depth = min(starts), 0
        depth, quote, previous, skip = self._depth, self._quote, self._previous, self._skip
        while i < n:
            c = piece[i]
            i += 1
            if skip:  # the character after a backslash in a string
                skip = False
                continue
            if quote:
                if c == "\\":
                    skip = True
                    continue
                if c == quote:
                    quote = ""
            elif c == '"' or (c == "'" and previous in _STRING_OPENERS_AFTER):
                quote = c
            elif c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return True
            if not c.isspace():
                previous = c
        self._depth, self._quote, self._previous, self._skip = depth, quote, previous, skip
        return False


def streaming_value(text: str, *, arrays: bool = False) -> Any:
    """The value written so far, closed where the text stops (``None`` before one starts)."""
    candidate = json_candidates(text)[0]
    starts = _openers(candidate, arrays)
    if not starts:
        return None
    end = _balanced_end(candidate, starts[0])
    if end is None:
        return _try(candidate[starts[0] :], partial=True)
    return _try(candidate[starts[0] : end], partial=False)

"""What a recording must not hold: the socket token, found in a line's own bytes whatever form the
line takes (JSON or not, UTF-8 or not, its strings escaped or not).

A line is scanned as text, not parsed: each JSON string literal in it is decoded (escapes and all)
and replaced by ``"<redacted>"`` when it is the value of an ``auth`` member or holds a secret; the
secret's bytes left anywhere else (a line cut short, a literal that is not one) become
``<redacted>`` too. Replacing one string literal by another keeps a JSON line JSON, so what is left
still reads and replays the same, the token aside (the replay's daemon asks for none).
"""

from __future__ import annotations

import json
import re

__all__ = ["REDACTED", "redact_line"]

REDACTED = "<redacted>"
"""What an ``initialize``'s ``auth`` (the socket token) is written as: a recording is shared."""
_LITERAL = rb'"(?:[^"\\]|\\.)*"'
_MEMBER = re.compile(rb"(" + _LITERAL + rb")(?:(\s*:\s*)(" + _LITERAL + rb"))?", re.DOTALL)
_QUOTED = b'"' + REDACTED.encode() + b'"'
_AUTH = "auth"


def _decoded(literal: bytes) -> str:
    """A string literal's value; bytes that are not UTF-8 stand for themselves."""
    try:
        return json.loads(literal.decode("utf-8", "surrogateescape"), strict=False)
    except ValueError:
        return literal[1:-1].decode("utf-8", "surrogateescape")


def redact_line(line: bytes, secrets: tuple[str, ...]) -> bytes:
    """``line`` with every ``auth`` value and every string holding one of ``secrets`` replaced."""
    raw = [s.encode() for s in secrets if s]
    if b"auth" not in line and b"\\u" not in line and not any(s in line for s in raw):
        return line  # no auth member and no secret, escaped or not, can be in it

    def member(match: re.Match[bytes]) -> bytes:
        key, colon, value = match.group(1), match.group(2), match.group(3)
        if value is None:
            return _QUOTED if _holds_secret(key, secrets) else key
        if _decoded(key) == _AUTH or _holds_secret(value, secrets):
            value = _QUOTED
        return (_QUOTED if _holds_secret(key, secrets) else key) + colon + value

    out = _MEMBER.sub(member, line)
    for secret in raw:
        out = out.replace(secret, REDACTED.encode())
    return out


def _holds_secret(literal: bytes, secrets: tuple[str, ...]) -> bool:
    if not secrets or (b"\\" not in literal and not any(s.encode() in literal for s in secrets)):
        return False
    value = _decoded(literal)
    return any(s and s in value for s in secrets)

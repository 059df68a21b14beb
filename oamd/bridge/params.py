"""Typed access to JSON params, with errors that name the full path (``options.sampling.topP``).

Every accessor treats a ``null`` member as absent, and words its errors as the reference bridge
does (``Missing required parameter 'prompt'.``, ``Parameter 'prompt' must be a string; got 5.``),
so engines see the same messages from oamd as from ``oam stdio``.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable
from typing import Any

from oamd.errors import InvalidParams
from oamd.jsonvalue import JsonTextError, dumps_text
from oamd.limits import MAX_ID_CHARS, MAX_SAFE_INTEGER, MAX_TIMEOUT_SECONDS

__all__ = ["Params", "check_object_id", "shown"]

_MISSING = object()


def shown(value: Any) -> str:
    """A value as the reference quotes it in errors: compact JSON, cut at 80 characters."""
    try:
        text = dumps_text(value)
    except (TypeError, JsonTextError):
        text = "null" if isinstance(value, float) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class Params:
    """A params object (or a nested object) and the path prefix its errors use."""

    __slots__ = ("prefix", "raw")

    def __init__(self, raw: dict[str, Any], prefix: str = "") -> None:
        self.raw = raw
        self.prefix = prefix

    def path(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def has(self, key: str) -> bool:
        """Present and not ``null``."""
        return self.raw.get(key) is not None

    def present(self, key: str) -> bool:
        """Present, even as ``null`` (some params give ``null`` a meaning)."""
        return key in self.raw

    def get(self, key: str) -> Any:
        return self.raw.get(key)

    def unknown(self, allowed: Iterable[str]) -> list[str]:
        """Warnings for members that are not in ``allowed``, in param order."""
        known = set(allowed)
        return [
            f"Unknown parameter '{self.path(key)}' was ignored."
            for key in self.raw
            if key not in known
        ]

    def _require(self, key: str) -> Any:
        value = self.raw.get(key)
        if value is None:
            raise InvalidParams(f"Missing required parameter '{self.path(key)}'.")
        return value

    def _wrong(self, key: str, kind: str, value: Any) -> InvalidParams:
        return InvalidParams(f"Parameter '{self.path(key)}' must be {kind}; got {shown(value)}.")

    def string(self, key: str) -> str:
        value = self._require(key)
        if not isinstance(value, str):
            raise self._wrong(key, "a string", value)
        return value

    def opt_string(self, key: str, default: str | None = None) -> str | None:
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._wrong(key, "a string", value)
        return value

    def opt_bool(self, key: str, default: bool | None = None) -> bool | None:
        value = self.raw.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._wrong(key, "a boolean", value)
        return value

    def opt_int(
        self,
        key: str,
        default: int | None = None,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(key, "an integer", value)
        if isinstance(value, float):
            if not math.isfinite(value) or not value.is_integer():
                raise self._wrong(key, "an integer", value)
            value = int(value)
        if abs(value) > MAX_SAFE_INTEGER:
            raise self._wrong(key, "an integer", value)
        if minimum is not None and value < minimum:
            raise InvalidParams(f"Parameter '{self.path(key)}' must be at least {minimum}.")
        if maximum is not None and value > maximum:
            raise InvalidParams(f"Parameter '{self.path(key)}' must be at most {maximum}.")
        return value

    def opt_number(
        self,
        key: str,
        default: float | None = None,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> float | None:
        value = self.raw.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(key, "a number", value)
        if not math.isfinite(value):
            raise InvalidParams(f"Parameter '{self.path(key)}' must be a finite number.")
        if minimum is not None and value < minimum:
            raise InvalidParams(f"Parameter '{self.path(key)}' must be at least {float(minimum)}.")
        if maximum is not None and value > maximum:
            raise InvalidParams(f"Parameter '{self.path(key)}' must be at most {float(maximum)}.")
        return float(value)

    def opt_seconds(self, key: str) -> float | None:
        """A ``…TimeoutSeconds`` value: finite, 0…86400 (0 = no limit)."""
        value = self.raw.get(key)
        if value is None:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 <= value <= MAX_TIMEOUT_SECONDS
        ):
            raise InvalidParams(
                f"Parameter '{self.path(key)}' must be a number of seconds from 0 to "
                f"{int(MAX_TIMEOUT_SECONDS)} (0 means no limit); got {shown(value)}."
            )
        return float(value)

    def opt_object(self, key: str) -> Params | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self._wrong(key, "an object", value)
        return Params(value, self.path(key))

    def opt_array(self, key: str) -> list[Any] | None:
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self._wrong(key, "an array", value)
        return value

    def opt_strings(self, key: str) -> list[str] | None:
        items = self.opt_array(key)
        if items is None:
            return None
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise InvalidParams(
                    f"Parameter '{self.path(key)}[{i}]' must be a string; got {shown(item)}."
                )
        return items


def check_object_id(value: Any, key: str) -> str:
    """An id given by the client: 1–128 printable characters.

    Raises:
        InvalidParams: not a string, empty, too long, or with control/format characters.
    """
    if not isinstance(value, str):
        raise InvalidParams(f"Parameter '{key}' must be a string; got {shown(value)}.")
    if not 1 <= len(value) <= MAX_ID_CHARS or (
        not value.isprintable() and any(_is_control(c) for c in value)
    ):
        raise InvalidParams(f"'{key}' must be 1-128 printable characters; got '{value}'.")
    return value


def _is_control(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cf")

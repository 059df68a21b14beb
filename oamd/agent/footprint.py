"""Footprint: the bytes of JSON a session or NPC holds besides its history, part by part.

Each part (instructions, tools, the model's spec, a persona, a memory…) is measured when it is
set, and the total is kept as parts change, so reading it costs nothing and no request
re-serialises what an object already holds. The connection's byte budget
(``oamd.bridge.budget``) sums its objects' footprints and histories.
"""

from __future__ import annotations

from typing import Any

from oamd.jsonvalue import dumps

__all__ = ["Footprint", "json_size"]


def json_size(value: Any) -> int:
    """The size of ``value`` as compact JSON; 0 for ``None`` (a part not set)."""
    return 0 if value is None else len(dumps(value))


class Footprint:
    """Sizes by part name, and their ``total``."""

    __slots__ = ("_parts", "total")

    def __init__(self, **parts: int) -> None:
        self._parts: dict[str, int] = dict(parts)
        self.total = sum(parts.values())

    def size(self, part: str) -> int:
        return self._parts.get(part, 0)

    def growth(self, part: str, size: int) -> int:
        """By how much the total would grow if ``part`` were ``size`` bytes."""
        return size - self.size(part)

    def set(self, part: str, size: int) -> None:
        self.total += self.growth(part, size)
        self._parts[part] = size

    def add(self, part: str, delta: int) -> None:
        """``part`` grew (or shrank) by ``delta`` bytes, measured by the caller."""
        self._parts[part] = self.size(part) + delta
        self.total += delta

"""Where each encoder's output goes on the wire, so one test can check every encoder against
``protocol/bridge.json`` (``tests/test_encoders.py``).

``@shape("result", "world/get")`` marks an encoder whose output is that method's result;
``"notification"`` a notification's params; ``"def"`` a ``$defs`` entry (``Step``,
``NpcEvent``…). Marking costs nothing when called: the function is returned as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

__all__ = ["SHAPES", "shape"]

F = TypeVar("F", bound=Callable[..., object])
Section = Literal["result", "notification", "def"]

SHAPES: dict[str, tuple[Section, str]] = {}
"""``module.function`` → (section, name) of every marked encoder loaded so far."""


def shape(section: Section, name: str) -> Callable[[F], F]:
    def mark(encoder: F) -> F:
        SHAPES[f"{encoder.__module__}.{encoder.__qualname__}"] = (section, name)
        return encoder

    return mark

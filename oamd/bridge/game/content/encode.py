"""The wire shape of ``content/generate``'s result (§9)."""

from __future__ import annotations

from typing import Any

from oamd.bridge.wire import shape

__all__ = ["encode_content"]


@shape("result", "content/generate")
def encode_content(content: Any, warnings: list[str]) -> dict[str, Any]:
    """``{"content": <JSON matching the schema>, "warnings"?}`` — ``warnings`` only when
    non-empty."""
    out: dict[str, Any] = {"content": content}
    if warnings:
        out["warnings"] = warnings
    return out

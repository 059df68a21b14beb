"""Model names to GGUF files: a name in the store (``--model llamacpp:NAME``), a model Ollama
pulled (``--model ollama:NAME[:TAG]``), or a file in the Hugging Face hub cache
(``--model llamacpp:hf:ORG/REPO/FILE.gguf``). Nothing is copied: the file found is loaded
where it lies.

``locator(kind, reference)`` checks the reference once (a name no catalog, store or pull knows
is refused at once) and returns a function the llama.cpp backend calls until the model loads:
each call looks again, so a pull that finishes while the daemon runs is picked up, and a model
not on disk yet answers with what ``model/availability`` should say (``downloadable``,
``downloading`` with its progress, or ``unavailable`` with how to get it).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson

from oamd.models.catalog import find_entry
from oamd.models.store import Store, check_name

__all__ = [
    "OLLAMA_MODEL_LAYER",
    "Location",
    "hf_cache_folder",
    "locator",
    "ollama_folders",
]

OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
"""The media type of the manifest layer that is the GGUF file itself."""
OLLAMA_REGISTRY = "registry.ollama.ai"
OLLAMA_NAMESPACE = "library"
OLLAMA_DEFAULT_TAG = "latest"
OLLAMA_SERVICE_FOLDER = Path("/usr/share/ollama/.ollama/models")
"""Where Linux's install script keeps the models of the ``ollama`` system service."""
DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")
NAME_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True, slots=True)
class Location:
    """Where a named model is now: ``path`` when on disk, else why not (``status``, ``detail``
    and, while a pull runs, its progress), in ``model/availability``'s words."""

    label: str
    path: Path | None = None
    status: str = "available"
    detail: str | None = None
    bytes_downloaded: int | None = None
    total_bytes: int | None = None


Locator = Callable[[], Location]


def _store_locator(name: str, store: Store) -> Locator:
    entry = find_entry(name)
    try:
        name = check_name(name.lower())
    except ValueError as exc:
        raise ValueError(f"llamacpp: {exc}; or give the path of a .gguf file") from None
    label = f"llamacpp:{name}"
    if entry is None and store.stored(name) is None and store.pending_url(name) is None:
        raise ValueError(
            f"llamacpp: no model {name!r} in the catalog or in the store ({store.folder});"
            " 'oamd models list' shows them, or give the path of a .gguf file"
        )

    def locate() -> Location:
        stored = store.stored(name)
        if stored is not None:
            return Location(label, stored.path)
        running = store.pull_state(name)
        if running is not None:
            done, total = running.bytes_downloaded, running.total_bytes
            of = f" of {total}" if total is not None else ""
            return Location(
                label,
                status="downloading",
                detail=f"downloaded {done}{of} bytes ('oamd models pull {name}' is running)",
                bytes_downloaded=done,
                total_bytes=total,
            )
        source = name if entry is not None else store.pending_url(name) or name
        size = f" ({entry.approx_bytes / 1e6:.0f} MB, {entry.licence})" if entry else ""
        return Location(
            label,
            status="downloadable",
            detail=f"{name} is not downloaded yet: run 'oamd models pull {source}'{size}",
        )

    return locate


def hf_cache_folder(environ: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """The Hugging Face hub cache: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``."""
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    cache = environ.get("XDG_CACHE_HOME")
    return (Path(cache) if cache else home / ".cache") / "huggingface" / "hub"


def _hf_locator(reference: str, environ: Mapping[str, str] | None) -> Locator:
    org, _, rest = reference.partition("/")
    repo, _, file = rest.partition("/")
    parts = [org, repo, *file.split("/")]
    if not file or not all(NAME_PART.match(part) for part in parts):
        raise ValueError(
            f"llamacpp:hf:{reference}: expected hf:ORG/REPO/FILE.gguf, e.g."
            " hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf"
        )
    label = f"llamacpp:hf:{reference}"

    def locate() -> Location:
        repo_folder = hf_cache_folder(environ) / f"models--{org}--{repo}"
        snapshots = repo_folder / "snapshots"
        try:
            main = (repo_folder / "refs" / "main").read_text(encoding="utf-8").strip()
        except OSError:
            main = ""
        candidates = [snapshots / main] if main else []
        if snapshots.is_dir():
            others = sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
            candidates += others
        for snapshot in candidates:
            found = snapshot / file
            if found.is_file():
                return Location(label, found)
        return Location(
            label,
            status="unavailable",
            detail=f"{file} of {org}/{repo} is not in the Hugging Face cache ({repo_folder});"
            f" run 'huggingface-cli download {org}/{repo} {file}'",
        )

    return locate


def ollama_folders(
    environ: Mapping[str, str] | None = None, home: Path | None = None
) -> list[Path]:
    """Where Ollama keeps models: ``$OLLAMA_MODELS`` when set, else ``~/.ollama/models`` (and,
    on Linux, the system service's folder after it)."""
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    if environ.get("OLLAMA_MODELS"):
        return [Path(environ["OLLAMA_MODELS"]).expanduser()]
    folders = [home / ".ollama" / "models"]
    if sys.platform.startswith("linux"):
        folders.append(OLLAMA_SERVICE_FOLDER)
    return folders


def _ollama_manifest_parts(reference: str) -> tuple[list[str], str]:
    """``[host, namespace, model]`` and the tag of ``[[host/]namespace/]model[:tag]``."""
    path, colon, tag = reference.rpartition(":")
    if not colon or "/" in tag:
        path, tag = reference, OLLAMA_DEFAULT_TAG
    parts = path.split("/")
    if len(parts) == 1:
        parts = [OLLAMA_REGISTRY, OLLAMA_NAMESPACE, *parts]
    elif len(parts) == 2:
        parts = [OLLAMA_REGISTRY, *parts]
    if len(parts) != 3 or not all(NAME_PART.match(p) for p in [*parts, tag]):
        raise ValueError(
            f"ollama:{reference}: expected ollama:NAME[:TAG] as 'ollama list' shows it, e.g."
            " ollama:qwen2.5:0.5b"
        )
    return parts, tag


def _ollama_blob(folder: Path, parts: list[str], tag: str) -> Path | str:
    """The model blob a manifest names, or why there is none."""
    manifest = folder.joinpath("manifests", *parts, tag)
    try:
        layers = orjson.loads(manifest.read_bytes()).get("layers") or []
    except OSError:
        return f"no manifest {manifest}"
    except (orjson.JSONDecodeError, AttributeError):
        return f"the manifest {manifest} is not Ollama's JSON"
    digests = [
        layer.get("digest", "")
        for layer in layers
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_LAYER
    ]
    matched = DIGEST.match(digests[0]) if digests else None
    if matched is None:
        return f"the manifest {manifest} has no {OLLAMA_MODEL_LAYER} layer"
    blob = folder / "blobs" / f"sha256-{matched.group(1)}"
    return blob if blob.is_file() else f"its model blob {blob} is missing"


def _ollama_locator(reference: str, environ: Mapping[str, str] | None) -> Locator:
    parts, tag = _ollama_manifest_parts(reference)
    shown = f"{reference.rpartition(':')[0] if ':' in reference else reference}:{tag}"
    label = f"ollama:{shown}"

    def locate() -> Location:
        reasons = []
        for folder in ollama_folders(environ):
            found = _ollama_blob(folder, parts, tag)
            if isinstance(found, Path):
                return Location(label, found)
            reasons.append(found)
        return Location(
            label,
            status="unavailable",
            detail=f"Ollama has not pulled {shown} ({'; '.join(reasons)}); run 'ollama pull"
            f" {shown}', or set $OLLAMA_MODELS to the folder holding its models",
        )

    return locate


def locator(
    kind: str,
    reference: str,
    *,
    store: Store | None = None,
    environ: Mapping[str, str] | None = None,
) -> Locator:
    """The lookup of ``reference``: ``kind`` ``store`` (a store or catalog name), ``hf`` (a Hugging
    Face cache file, ``ORG/REPO/FILE``) or ``ollama`` (``NAME[:TAG]``).

    Raises:
        ValueError: the reference is malformed, or (``store``) names a model nobody knows.
    """
    if kind == "store":
        return _store_locator(reference, store or Store())
    if kind == "hf":
        return _hf_locator(reference, environ)
    if kind == "ollama":
        return _ollama_locator(reference, environ)
    raise ValueError(f"unknown kind of model reference {kind!r}")

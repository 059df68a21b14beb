"""Model names to GGUF files: a name in the store (``--model llamacpp:NAME``), a model Ollama
pulled (``--model ollama:NAME[:TAG]``), or a file in the Hugging Face hub cache
(``--model llamacpp:hf:ORG/REPO/FILE.gguf``). Nothing is copied: the file found is loaded
where it lies.

``locator(kind, reference)`` checks the reference once (a name no catalog, store or pull knows
is refused at once) and returns a function the llama.cpp backend calls until the model loads:
each call looks again, so a pull that finishes while the daemon runs is picked up, and a model
not on disk yet answers with what ``model/availability`` should say (``downloadable``,
``downloading`` with its progress, or ``unavailable`` with how to get it).

Ollama's and Hugging Face's folders belong to other programs, so whatever lies in them is read
as hostile input: a manifest of the wrong JSON types, a dangling link, a file where a folder
should be is skipped (logged at debug level) and never raises.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson

from oamd.log import get_logger
from oamd.models.catalog import find_entry
from oamd.models.on_request import OnRequestPull
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
DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
NAME_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""A part of an ``hf:`` or ``ollama:`` reference. Both patterns are ``fullmatch``ed: ``$``
would accept a part ending in a line break."""
MAX_MANIFEST_BYTES = 1024 * 1024
"""Read of an Ollama manifest (a few kB): a larger file is not one, and is never read whole."""
MAX_REF_BYTES = 256
"""Read of a Hugging Face ``refs/`` file (a 40-digit commit hash)."""

log = get_logger("oamd.models")


def _head(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file ``path`` (a FIFO or a device is not opened:
    the folders read here are other programs', so any file in them may be anything).

    Raises:
        OSError: there is no such regular file, or it cannot be read.
    """
    if not path.is_file():
        raise FileNotFoundError(path)
    with open(path, "rb") as file:
        return file.read(limit)


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


def _on_request(name: str, store: Store) -> OnRequestPull:
    """The download ``pull=on-request`` makes: the catalog's file, else the URL an earlier pull
    of ``name`` read (the digest recorded for it then still applies).

    Raises:
        ValueError: neither the catalog nor an earlier pull says where ``name`` comes from.
    """
    entry = find_entry(name)
    if entry is not None:
        return OnRequestPull(store, entry.name, entry.url, entry.sha256, entry.size_bytes)
    stored = store.stored(name)
    url = store.pending_url(name) or (stored.url if stored is not None else None)
    if not url:
        raise ValueError(
            f"llamacpp: option 'pull=on-request' needs a model the catalog names ('oamd models"
            f" list'); {name} has no URL to fetch it from"
        )
    return OnRequestPull(store, name, url, None, None)


def _downloading(label: str, done: int, total: int | None, how: str) -> Location:
    """A check's answer while a pull runs: its progress, and ``how`` it was started."""
    of = f" of {total}" if total is not None else ""
    return Location(
        label,
        status="downloading",
        detail=f"downloaded {done}{of} bytes ({how})",
        bytes_downloaded=done,
        total_bytes=total,
    )


def _fetching(label: str, name: str, fetch: OnRequestPull) -> Location:
    """What a check answers while ``pull=on-request`` fetches the model (and starts it)."""
    state = fetch.check()
    if state.failure is not None:
        return Location(label, status="downloadable", detail=f"download failed: {state.failure}")
    how = f"fetching {name} on request"
    return _downloading(label, state.bytes_downloaded, state.total_bytes, how)


def _store_locator(name: str, store: Store, *, pull_on_request: bool = False) -> Locator:
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
    fetch = _on_request(name, store) if pull_on_request else None

    def locate() -> Location:
        stored = store.stored(name)
        if stored is not None:
            return Location(label, stored.path)
        if fetch is not None:
            return _fetching(label, name, fetch)
        running = store.pull_state(name)
        if running is not None:
            how = f"'oamd models pull {name}' is running"
            return _downloading(label, running.bytes_downloaded, running.total_bytes, how)
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
    if not file or not all(NAME_PART.fullmatch(part) for part in parts):
        raise ValueError(
            f"llamacpp:hf:{reference}: expected hf:ORG/REPO/FILE.gguf, e.g."
            " hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf"
        )
    label = f"llamacpp:hf:{reference}"

    def locate() -> Location:
        repo_folder = hf_cache_folder(environ) / f"models--{org}--{repo}"
        snapshots = repo_folder / "snapshots"
        main = _hf_main(repo_folder)
        candidates = [snapshots / main] if main else []
        for snapshot in candidates + _hf_snapshots(snapshots):
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


def _hf_main(repo_folder: Path) -> str:
    """The snapshot ``refs/main`` names, or ``""`` when it names none a folder can be."""
    ref = repo_folder / "refs" / "main"
    try:
        main = _head(ref, MAX_REF_BYTES).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        main = ""
    if main and not NAME_PART.fullmatch(main):
        log.debug("hf_ref_skipped", path=str(ref), reason="not a snapshot name")
        return ""
    return main


def _hf_snapshots(snapshots: Path) -> list[Path]:
    """The snapshot folders, newest first; an entry that cannot be read (a dangling link) is
    skipped."""
    dated = []
    try:
        entries = list(os.scandir(snapshots))
    except OSError:
        return []
    for entry in entries:
        try:
            dated.append((entry.stat().st_mtime, Path(entry.path)))
        except OSError as exc:
            log.debug("hf_snapshot_skipped", path=entry.path, reason=str(exc))
    return [path for _, path in sorted(dated, key=lambda item: item[0], reverse=True)]


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
    if len(parts) != 3 or not all(NAME_PART.fullmatch(p) for p in [*parts, tag]):
        raise ValueError(
            f"ollama:{reference}: expected ollama:NAME[:TAG] as 'ollama list' shows it, e.g."
            " ollama:qwen2.5:0.5b"
        )
    return parts, tag


def _ollama_blob(folder: Path, parts: list[str], tag: str) -> Path | str:
    """The model blob a manifest names, or why there is none."""
    manifest = folder.joinpath("manifests", *parts, tag)
    try:
        document = orjson.loads(_head(manifest, MAX_MANIFEST_BYTES))
    except OSError:
        return f"no manifest {manifest}"
    except orjson.JSONDecodeError:
        document = None
    layers = document.get("layers") if isinstance(document, dict) else None
    if not isinstance(layers, list):
        log.debug("ollama_manifest_skipped", path=str(manifest), reason="no list of layers")
        return f"the manifest {manifest} is not Ollama's JSON"
    digests = [
        layer.get("digest")
        for layer in layers
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_LAYER
    ]
    matched = DIGEST.fullmatch(digests[0]) if digests and isinstance(digests[0], str) else None
    if matched is None:
        log.debug("ollama_manifest_skipped", path=str(manifest), reason="no model digest")
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
    pull_on_request: bool = False,
) -> Locator:
    """The lookup of ``reference``: ``kind`` ``store`` (a store or catalog name), ``hf`` (a Hugging
    Face cache file, ``ORG/REPO/FILE``) or ``ollama`` (``NAME[:TAG]``). ``pull_on_request``
    (``store`` only): a check that finds the model missing starts its download
    (``oamd.models.on_request``).

    Raises:
        ValueError: the reference is malformed, or (``store``) names a model nobody knows, or
            ``pull_on_request`` is asked of a model it cannot fetch.
    """
    if kind == "store":
        return _store_locator(reference, store or Store(), pull_on_request=pull_on_request)
    if pull_on_request:
        raise ValueError(
            f"llamacpp: option 'pull=on-request' fetches a model the catalog names ('oamd models"
            f" list'), not {kind}:{reference}"
        )
    if kind == "hf":
        return _hf_locator(reference, environ)
    if kind == "ollama":
        return _ollama_locator(reference, environ)
    raise ValueError(f"unknown kind of model reference {kind!r}")

"""``oamd models pull|list|rm``: the store's actions for a person or a script, and how a pull's
progress shows on stderr (a tqdm bar on a terminal, one JSON line per step otherwise).

stdout carries results only (the pulled file's path, the listing); progress and the one line
a failure ends with go to stderr. Loaded for ``oamd models`` alone: the daemon's commands never
import it, nor httpx's client or tqdm through it.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from oamd.cli.command_line import CommandLine
from oamd.cli.exits import (
    EXIT_DOWNLOAD_FAILED,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    EXIT_STORE_FAILED,
    EXIT_UNAVAILABLE,
)
from oamd.jsonvalue import dumps_text
from oamd.models.catalog import BASE_URL_VARIABLE, catalog, find_entry, mirror
from oamd.models.store import PullRunning, Store, check_name, name_from_url

__all__ = ["run_models"]

PROGRESS_STEP_BYTES = 8 * 1024 * 1024
"""JSON progress: a line each time this many more bytes are on disk (and at the end)."""
PULL_EXITS = {"http": EXIT_DOWNLOAD_FAILED, "network": EXIT_DOWNLOAD_FAILED}
PULL_EXITS |= {"verify": EXIT_REFUSED, "disk": EXIT_STORE_FAILED}
URL_SCHEMES = ("http://", "https://")
MB = 1e6


def _mb(size: int | None) -> str:
    return f"{size / MB:.0f} MB" if size is not None else "?"


class _JsonProgress:
    """One JSON object per line on stderr: ``pull_waiting``, ``pull_started``,
    ``pull_progress`` (every ``PROGRESS_STEP_BYTES``) and ``pull_verifying``."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.name = ""
        self.total: int | None = None
        self.shown = -PROGRESS_STEP_BYTES

    def _emit(self, event: str, **fields: Any) -> None:
        self.out.write(dumps_text({"event": event, "model": self.name, **fields}))
        self.out.write("\n")
        self.out.flush()

    def waiting(self, name: str) -> None:
        self.name = name
        self._emit("pull_waiting", detail="another pull of this model is running; waiting")

    def started(self, name: str, total: int | None, offset: int) -> None:
        self.name, self.total = name, total
        self._emit("pull_started", bytesDownloaded=offset, totalBytes=total)

    def advanced(self, done: int) -> None:
        if done - self.shown >= PROGRESS_STEP_BYTES or done == self.total:
            self.shown = done
            self._emit("pull_progress", bytesDownloaded=done, totalBytes=self.total)

    def verifying(self, name: str) -> None:
        self._emit("pull_verifying")


class _BarProgress:
    """tqdm's bar on stderr (imported here: only a pull on a terminal needs it)."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.bar: Any = None

    def waiting(self, name: str) -> None:
        self.out.write(f"oamd: another pull of {name} is running; waiting for it…\n")
        self.out.flush()

    def started(self, name: str, total: int | None, offset: int) -> None:
        from tqdm import tqdm

        self._close()
        self.bar = tqdm(
            total=total,
            initial=offset,
            desc=name,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            file=self.out,
            dynamic_ncols=True,
        )

    def advanced(self, done: int) -> None:
        if self.bar is not None:
            self.bar.update(done - self.bar.n)

    def verifying(self, name: str) -> None:
        self._close()
        self.out.write(f"oamd: verifying {name}…\n")
        self.out.flush()

    def _close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class _NoProgress:
    def waiting(self, name: str) -> None:
        return None

    def started(self, name: str, total: int | None, offset: int) -> None:
        return None

    def advanced(self, done: int) -> None:
        return None

    def verifying(self, name: str) -> None:
        return None


def _progress(style: str) -> Any:
    err = sys.stderr
    if style == "auto":
        style = "bar" if err.isatty() else "json"
    return {"bar": _BarProgress, "json": _JsonProgress}.get(style, lambda _: _NoProgress())(err)


def _pull_request(line: CommandLine, store: Store) -> Any:
    """What ``oamd models pull`` was asked for, or a usage error."""
    from oamd.models.download import PullRequest

    args = line.args
    wanted: str = args.model
    base = mirror()
    if base is not None and not base.startswith(URL_SCHEMES):
        line.refuse(f"${BASE_URL_VARIABLE} must be an http(s) URL, not {base!r}")
    if wanted.startswith(URL_SCHEMES):
        try:
            name = check_name(args.name) if args.name else name_from_url(wanted)
        except ValueError as exc:
            line.refuse(str(exc))
        entry = find_entry(name)
        stored = store.stored(name)
        other = entry.url if entry else stored.url if stored else None
        if other is not None and other != wanted:
            line.refuse(
                f"{name} already names the model from {other}; 'oamd models rm {name}' first,"
                " or choose another --name"
            )
        return PullRequest(name, wanted, args.sha256)
    if args.name:
        line.refuse("--name is for a URL's file; a catalog model keeps its name")
    entry = find_entry(wanted)
    if entry is not None:
        return PullRequest(entry.name, entry.url, args.sha256 or entry.sha256, entry.size_bytes)
    try:
        stored = store.stored(check_name(wanted))
    except ValueError:
        stored = None
    if stored is not None and stored.url:
        return PullRequest(stored.name, stored.url, args.sha256)
    line.refuse(
        f"no model {wanted!r} in the catalog ('oamd models list' shows it); give the http(s)"
        " URL of a .gguf file instead"
    )


def _pull(line: CommandLine, store: Store) -> int:
    from oamd.models.download import PullError, pull

    request = _pull_request(line, store)
    try:
        stored = pull(store, request, _progress(line.args.progress))
    except PullError as exc:
        sys.stderr.write(f"oamd models pull: {exc}\n")
        return PULL_EXITS[exc.kind]
    except KeyboardInterrupt:
        part = store.part_path(request.name)
        sys.stderr.write(f"oamd models pull: interrupted; {part} is kept, pull again to resume\n")
        return EXIT_INTERRUPTED
    sys.stdout.write(f"{stored.path}\n")
    sys.stderr.write(
        f"oamd: {stored.name} ({_mb(stored.size)}) is in {store.folder}; use it with"
        f" --model llamacpp:{stored.name}\n"
    )
    return 0


PACKAGED_NAME = "smollm2-135m-instruct"
DEFAULT_USE = "--model llamacpp"


def _packaged_row() -> dict[str, Any]:
    """The model ``--model llamacpp`` runs when no name or path is given: the packaged SmolLM2."""
    from oamd.backends.llamacpp.packaged_model import PACKAGED_MODEL_INSTALL, packaged_model_path

    path = packaged_model_path()
    return {
        "name": PACKAGED_NAME,
        "catalog": False,
        "bytes": path.stat().st_size if path is not None else None,
        "licence": "Apache-2.0",
        "url": None,
        "path": str(path) if path is not None else None,
        "sha256": None,
        "template": "ChatML, embedded in the GGUF",
        "source": f"packaged: {DEFAULT_USE} runs it ({PACKAGED_MODEL_INSTALL} when missing)",
        "status": "default" if path is not None else "missing",
    }


def _rows(store: Store) -> list[dict[str, Any]]:
    """The packaged default first, then one row per catalog model and per other pulled model."""
    stored = {model.name: model for model in store.models()}
    rows = [_packaged_row()]
    for entry in catalog():
        model = stored.pop(entry.name, None)
        size = model.size if model else entry.size_bytes or entry.approx_bytes
        rows.append(
            {
                "name": entry.name,
                "catalog": True,
                "bytes": size,
                "licence": entry.licence,
                "url": model.url if model and model.url else entry.url,
                "path": str(model.path) if model else None,
                "sha256": model.sha256 if model else entry.sha256,
                "template": entry.template,
                "source": entry.source,
            }
        )
    for model in stored.values():
        rows.append(
            {
                "name": model.name,
                "catalog": False,
                "bytes": model.size,
                "licence": None,
                "url": model.url,
                "path": str(model.path),
                "sha256": model.sha256,
                "template": None,
                "source": None,
            }
        )
    for row in rows[1:]:
        row["status"] = _status(store, row["name"], row["path"] is not None)
    return rows


def _status(store: Store, name: str, pulled: bool) -> str:
    if pulled:
        return "pulled"
    running = store.pull_state(name)
    if running is not None:
        total = running.total_bytes
        share = f" {100 * running.bytes_downloaded // total}%" if total else ""
        return f"pulling{share}"
    return "partial" if store.part_path(name).exists() else "not pulled"


def _list(line: CommandLine, store: Store) -> int:
    rows = _rows(store)
    out = sys.stdout
    if line.args.json:
        for row in rows:
            out.write(dumps_text(row) + "\n")
        return 0
    out.write(f"store: {store.folder} ($OAMD_MODELS moves it)\n")
    width = max(len(row["name"]) for row in rows)
    out.write(f"{'NAME':<{width}}  {'SIZE':>8}  {'STATUS':<11}  LICENCE\n")
    for row in rows:
        licence = row["licence"] or f"(from {row['url']})"
        licence = licence.split(" (", 1)[0] if row["catalog"] else licence
        out.write(
            f"{row['name']:<{width}}  {_mb(row['bytes']):>8}  {row['status']:<11}  {licence}\n"
        )
    out.write(
        f"{DEFAULT_USE} runs the default ({PACKAGED_NAME}, packaged with oamd); --model"
        " llamacpp:NAME runs a pulled one ('oamd models pull NAME' fetches it)\n"
    )
    return 0


def _remove(line: CommandLine, store: Store) -> int:
    name = line.args.name
    try:
        removed = store.remove(check_name(name.lower()))
    except ValueError as exc:
        line.refuse(str(exc))
    except (PullRunning, OSError) as exc:
        sys.stderr.write(f"oamd models rm: {exc}\n")
        return EXIT_STORE_FAILED
    if not removed:
        sys.stderr.write(f"oamd models rm: no model {name!r} in {store.folder}\n")
        return EXIT_UNAVAILABLE
    sys.stdout.write(f"removed {name}\n")
    return 0


def run_models(line: CommandLine) -> int:
    """Runs ``oamd models <action>``; returns the exit code its help documents."""
    store = Store()
    action = line.args.models_action
    if action == "pull":
        return _pull(line, store)
    if action == "list":
        return _list(line, store)
    return _remove(line, store)

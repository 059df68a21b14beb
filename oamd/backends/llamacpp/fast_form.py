"""A faster form of a GGUF file on this CPU: a Q8_0 or Q4_0 copy, kept when it measures faster.

llama.cpp runs some quantisations through faster CPU kernels than others (Q4_0 is repacked for
AVX2/NEON at load, Q8_0's dot products need no unpacking); Q4_1 and Q5 are slower.
SmolLM2-135M ships as Q4_1. Measured on two x86 cores (prefill / decode tokens a second, the
bare API): Q4_1 220 / 66, a Q8_0 copy 356 / 67, a Q4_0 copy 384 / 84. But every copy is a
second rounding of the weights, and ``make eval`` on SmolLM2 scored the Q4_1 file 21/38 right,
the Q8_0 copy 19/38 and the Q4_0 copy 15/38: no copy is no worse, so none is made unless asked
(``llamacpp:…?requantize=q8_0|q4_0``; the default, ``off``, loads the file as it is).

Asked for, a file of a type in ``REQUANTIZE_FROM`` gets the copy once, in a folder of derived
files (the model store's ``fast/``); both are timed on the same prompt, interleaved, and the copy
is kept and loaded from then on only when it prefills at least ``KEEP_WHEN_FASTER`` times as
fast. Either way the verdict is written beside it, keyed by the source's path, size and
modification time and the target, so later loads decide with one small read. Other types load
as they are: they have fast kernels already (Q4_0, Q4_K, Q8_0) or are the user's choice of
precision (F16…).

Blocking throughout: runs in the model's worker thread, before the model is loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from oamd.backends.llamacpp.gguf_header import FILE_TYPE_NAMES, gguf_file_type
from oamd.log import get_logger

__all__ = ["REQUANTIZE_FROM", "FastForm", "fast_form"]

TARGETS = {"q8_0": 7, "q4_0": 2}
"""The ``requantize`` option's values and their ``llama_ftype``."""
REQUANTIZE_FROM = frozenset({3, 8, 9})
"""Q4_1, Q5_0, Q5_1: the types a copy is made of."""
KEEP_WHEN_FASTER = 1.1
"""The copy must prefill this much faster than its source to be kept (a smaller edge is within
what a machine's noise can show, and the copy costs a little quality)."""
PROBE_TOKENS = 160
PROBE_ROUNDS = 2
PROBE_TEXT = (
    "The innkeeper wiped the counter and looked up at the tired traveller, smiling. "
    "Outside the rain kept falling on the cobbles of the old market square. "
)
VERDICT_VERSION = 1

log = get_logger("oamd.backends.llamacpp.model")


class FastForm:
    """What loads: ``path`` (the copy or the source) and why."""

    __slots__ = ("path", "reason")

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason


def _key(source: Path) -> str:
    stat = source.stat()
    text = f"{source.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _quantize(source: Path, target: Path, threads: int, file_type: int) -> None:
    import llama_cpp

    # llama.cpp reports every tensor it converts through llama-cpp-python's logger, which
    # prints at any level until a model is loaded quietly: stderr is for structured records
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = file_type
    params.allow_requantize = True
    params.nthread = threads
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        with _records_only_on_stderr():
            status = llama_cpp.llama_model_quantize(
                str(source).encode(), str(partial).encode(), params
            )
        if status != 0:
            raise RuntimeError(f"llama_model_quantize returned {status}")
        os.replace(partial, target)  # another daemon making the same copy: either one wins
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()


@contextlib.contextmanager
def _records_only_on_stderr() -> Iterator[None]:
    """Keeps what C code writes to fd 2 meanwhile (llama.cpp's quantiser prints some warnings
    past every logger) off stderr: fd 2 points at a temporary file while the block runs, and
    then the file's structured records (another thread's log lines) are written on."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            records = [line for line in caught.read().splitlines() if line.startswith(b"{")]
            if records:
                os.write(2, b"\n".join(records) + b"\n")


def _prefill_rate(path: Path, threads: int) -> float:
    """Tokens a second this file prefills ``PROBE_TOKENS`` at, the best of ``PROBE_ROUNDS``."""
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=512,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    try:
        tokens = llm.tokenize((PROBE_TEXT * 20).encode(), add_bos=False)[:PROBE_TOKENS]
        llm.eval(tokens[:8])  # the first evaluation allocates its buffers
        best = 0.0
        for _ in range(PROBE_ROUNDS):
            llm.reset()
            started = time.perf_counter()
            llm.eval(tokens)
            best = max(best, len(tokens) / (time.perf_counter() - started))
        return best
    finally:
        llm.close()


def _measure(source: Path, copy: Path, threads: int) -> tuple[float, float]:
    """Both files' prefill rates, each measured twice, interleaved, so a burst of other work
    on the machine falls on both."""
    rates: dict[Path, float] = {source: 0.0, copy: 0.0}
    for path in (source, copy, source, copy):
        rates[path] = max(rates[path], _prefill_rate(path, threads))
    return rates[source], rates[copy]


def _read_verdict(file: Path) -> dict[str, Any] | None:
    try:
        verdict = orjson.loads(file.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(verdict, dict) or verdict.get("version") != VERDICT_VERSION:
        return None
    return verdict


def _write_verdict(file: Path, verdict: dict[str, Any]) -> None:
    partial = file.with_name(f"{file.name}.{os.getpid()}.part")
    partial.write_bytes(orjson.dumps(verdict, option=orjson.OPT_INDENT_2))
    os.replace(partial, file)


def fast_form(source: Path, folder: Path | None, threads: int, target: str) -> FastForm:
    """The file to load for ``source``: a kept ``target`` copy (``q8_0``, ``q4_0``) in
    ``folder``, or ``source`` itself (no folder, a type that is not copied, a copy that was not
    faster, or any failure to make or time one — logged, never raised)."""
    kind = gguf_file_type(source)
    if folder is None or kind not in REQUANTIZE_FROM or target not in TARGETS:
        return FastForm(source, "as stored")
    label = target.upper()
    try:
        key = _key(source)
        copy = folder / f"{key}.{label}.gguf"
        verdict_file = folder / f"{key}.{label}.json"
        verdict = _read_verdict(verdict_file)
        if verdict is not None and (copy.is_file() or not verdict.get("kept")):
            return _chosen(source, copy, label, kept=bool(verdict.get("kept")))
        folder.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        _quantize(source, copy, threads, TARGETS[target])
        source_rate, copy_rate = _measure(source, copy, threads)
        kept = copy_rate >= source_rate * KEEP_WHEN_FASTER
        if not kept:
            copy.unlink(missing_ok=True)
        _write_verdict(
            verdict_file,
            {
                "version": VERDICT_VERSION,
                "source": str(source),
                "source_type": FILE_TYPE_NAMES.get(kind, str(kind)),
                "target": label,
                "source_prefill_tokens_per_second": round(source_rate, 1),
                "copy_prefill_tokens_per_second": round(copy_rate, 1),
                "threads": threads,
                "kept": kept,
            },
        )
        log.info(
            "model_fast_form",
            source=str(source),
            source_type=FILE_TYPE_NAMES.get(kind, str(kind)),
            target=label,
            source_prefill=round(source_rate, 1),
            copy_prefill=round(copy_rate, 1),
            kept=kept,
            seconds=round(time.monotonic() - started, 2),
        )
    except (ImportError, OSError, RuntimeError, ValueError) as exc:
        log.warning("model_fast_form_failed", source=str(source), error=str(exc))
        return FastForm(source, "as stored (no faster copy could be made)")
    return _chosen(source, copy, label, kept=kept)


def _chosen(source: Path, copy: Path, label: str, *, kept: bool) -> FastForm:
    if kept:
        return FastForm(copy, f"a {label} copy measured faster")
    return FastForm(source, f"a {label} copy measured no faster")

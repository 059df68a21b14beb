"""The serving process's memory: Python's collector (``tune_gc``) and glibc's mmap threshold
(``tune_malloc``), set once ``oamd stdio`` or ``oamd serve`` has loaded what it serves with."""

from __future__ import annotations

import gc
import sys

__all__ = ["GC_THRESHOLDS", "MMAP_THRESHOLD_BYTES", "tune_gc", "tune_malloc"]

GC_THRESHOLDS = (50_000, 50, 1000)
"""The serving process's collector: a young collection every 50,000 net allocations instead of
700. A turn allocates many containers; with the defaults, collections took 40 % of a loaded
daemon's time and stalled the event loop often (``ping`` p99 ~95 ms with 64 busy sessions, ~5 ms
with these, after ``gc.freeze()`` of everything loaded at start; ``bench/load.py``). A full
collection practically never runs, so nothing may rely on one: a closed connection is freed by
reference counting, and ``oamd serve`` collects the youngest generation after each connection
ends (``serve.server.collect_after_close``); ``oamd stdio``'s one connection ends with the
process."""


def tune_gc() -> None:
    gc.freeze()  # what start-up loaded lives as long as the process: never scan it again
    gc.set_threshold(*GC_THRESHOLDS)


MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc: allocations from this size on get their own mapping, returned to the system when freed.
glibc raises the threshold as large blocks are freed, after which long lines, prompts and model
outputs are carved from the heap and leave it fragmented: under a 150 s socket soak RSS grew
97 → 241 MiB while Python's own heap held 14 MB; with the threshold fixed it stayed at 61–72 MiB."""


def tune_malloc() -> None:
    """Fixes glibc's mmap threshold (no-op elsewhere). After the early ``initialize``: ctypes
    costs 1.6 ms of start-up."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, MMAP_THRESHOLD_BYTES)  # M_MMAP_THRESHOLD; musl has no mallopt
    except (OSError, AttributeError):
        return

"""How many threads the embedded model computes with: the cores nobody else is using.

llama.cpp's threads wait for each other at every layer, so one that shares its core with a busy
thread of the game holds all of them back. Measured on two cores (SmolLM2-135M, Q4_1): two threads
prefill 193-203 tokens/s on a quiet machine but 84 with one core busy, where one thread makes 116.
So unless a thread count is fixed (``llamacpp:…?threads=N``), each step starts by looking at how
much CPU the rest of the machine took since the last look (``/proc/stat`` less this process's own
time, ``/proc/self/stat``) and uses the cores left over: all of them on a quiet machine, one fewer
per core kept busy, never fewer than one. Where ``/proc`` is not there, half the cores, as before.
Blocking (it reads two small files): called in the model's worker thread.
"""

from __future__ import annotations

import os
import time

__all__ = ["MAX_THREADS", "ThreadPolicy"]

MAX_THREADS = 8
"""Most threads a step uses however many cores are free: a model this small gains little past it,
and the game keeps its own."""

BUSY_CORE_SHARE = 0.5
"""Other processes taking more than this share of a core since the last look count as keeping
that core busy."""

MIN_WINDOW_SECONDS = 0.05
"""A shorter time since the last look is too coarse (jiffies) to say: the last choice stands."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _machine_busy_seconds() -> float | None:
    """CPU seconds every core has spent busy since boot, or ``None`` without ``/proc``."""
    try:
        with open("/proc/stat", "rb") as stat:
            fields = stat.readline().split()[1:]
    except OSError:
        return None
    ticks = [int(value) for value in fields]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks[:8]) - idle) / _TICKS


def _own_seconds() -> float:
    """CPU seconds this process (every thread of it) has used."""
    times = os.times()
    return times.user + times.system


_TICKS = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


class ThreadPolicy:
    """Picks each step's thread count; ``fixed`` (a ``threads=`` option) always wins."""

    def __init__(self, fixed: int | None = None, cores: int | None = None) -> None:
        self.cores = cores or _cores()
        self.fixed = fixed
        self.most = fixed or min(self.cores, MAX_THREADS)
        """The thread count the model is loaded with (llama.cpp's pool)."""
        self._last: tuple[float, float, float] | None = None
        self._choice = self.most if fixed else max(1, self.cores // 2)

    def choose(self) -> int:
        """The threads for the next step."""
        if self.fixed:
            return self.fixed
        busy = _machine_busy_seconds()
        if busy is None:
            return self._choice
        now, own = time.monotonic(), _own_seconds()
        last, self._last = self._last, (now, busy, own)
        if last is None or now - last[0] < MIN_WINDOW_SECONDS:
            return self._choice
        window = now - last[0]
        others = max(0.0, (busy - last[1]) - (own - last[2])) / window  # cores' worth
        kept_busy = int(others + (1 - BUSY_CORE_SHARE))  # 0.5 of a core or more counts as one
        self._choice = max(1, min(self.most, self.cores - kept_busy))
        return self._choice

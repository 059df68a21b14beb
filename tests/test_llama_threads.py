"""The embedded model's thread count: the cores other processes leave free (``_llama_threads``)."""

from __future__ import annotations

import pytest

from oamd.backends.llamacpp import threads as _llama_threads
from oamd.backends.llamacpp.threads import ThreadPolicy


class Machine:
    """A fake clock, machine and process: CPU seconds as a test sets them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 100.0
        self.busy = 1000.0
        self.own = 10.0
        monkeypatch.setattr(_llama_threads.time, "monotonic", lambda: self.now)
        monkeypatch.setattr(_llama_threads, "_machine_busy_seconds", lambda: self.busy)
        monkeypatch.setattr(_llama_threads, "_own_seconds", lambda: self.own)

    def run(self, seconds: float, *, others: float, own: float) -> None:
        """``seconds`` pass; other processes keep ``others`` cores busy, this one ``own``."""
        self.now += seconds
        self.busy += seconds * (others + own)
        self.own += seconds * own


def test_a_quiet_machine_gets_every_core_and_a_busy_core_is_left_to_its_owner(monkeypatch):
    machine = Machine(monkeypatch)
    policy = ThreadPolicy(cores=2)
    assert policy.most == 2
    policy.choose()  # the first look
    machine.run(1.0, others=0.1, own=1.8)  # our own two threads working do not count
    assert policy.choose() == 2
    machine.run(1.0, others=1.0, own=0.9)  # a game thread holds one core
    assert policy.choose() == 1
    machine.run(1.0, others=2.0, own=0.0)  # both cores busy: still one thread
    assert policy.choose() == 1
    machine.run(1.0, others=0.2, own=1.0)
    assert policy.choose() == 2


def test_a_fixed_thread_count_always_wins_and_a_short_window_keeps_the_last_choice(monkeypatch):
    machine = Machine(monkeypatch)
    assert ThreadPolicy(3, cores=2).choose() == 3
    policy = ThreadPolicy(cores=8)
    assert policy.most == _llama_threads.MAX_THREADS
    policy.choose()
    machine.run(1.0, others=3.2, own=0.0)
    assert policy.choose() == 5
    machine.run(0.01, others=8.0, own=0.0)  # too short to judge
    assert policy.choose() == 5


def test_without_proc_it_uses_half_the_cores(monkeypatch):
    monkeypatch.setattr(_llama_threads, "_machine_busy_seconds", lambda: None)
    assert ThreadPolicy(cores=4).choose() == 2

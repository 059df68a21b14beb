"""The hostile-recordings fuzzer (``tests/fuzz_recordings.py``) at CI size: real recordings,
mutated (cut short, types swapped, huge numbers, deep nesting, bad base64, NaN and 1e300 times,
huge declared sizes), each played by ``oamd replay``, which must exit 0, 1 or 2 within its time
bound, with no traceback, under a memory bound. ``make fuzz`` runs 300 files."""

from __future__ import annotations

from fuzz_recordings import run

SEED = 32
FILES = 24


def test_hostile_recordings_exit_0_1_or_2_in_bounded_time_and_memory():
    played = run(SEED, FILES, jobs=2, max_seconds=75.0, memory_mib=2048)
    assert len(played) == FILES
    assert [(p.mutation, p.problem) for p in played if p.problem] == []
    assert any(p.exit == 2 for p in played) and any(p.exit in (0, 1) for p in played)

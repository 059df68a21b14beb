"""The hostile-HTTP pull fuzzer (``tests/hostile_http.py``) at CI size: ``oamd models pull``
against seeded misbehaving servers (wrong lengths, 416s, redirect loops, truncated, slow or
silent bodies, garbage and huge headers, wrong ``Content-Range``s, broken chunked encoding) must
end with a documented exit code, no traceback, a clean store and never more bytes on disk than
the known size. ``$OAMD_FUZZ_PULLS`` runs more of them; ``make fuzz`` runs 200."""

from __future__ import annotations

import os

import pytest
from hostile_http import CASES_VARIABLE, run

SEED = 32
PULLS = int(os.environ.get(CASES_VARIABLE) or 20)


@pytest.mark.timeout(max(60, 3 * PULLS))
def test_pulls_from_hostile_servers_end_with_a_documented_exit_and_a_clean_store():
    pulled = run(SEED, PULLS, jobs=2)
    assert len(pulled) == PULLS
    assert [(p.number, p.behaviour, p.problems) for p in pulled if p.problems] == []
    assert {0, 4, 5} <= {p.exit for p in pulled}

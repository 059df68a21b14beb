"""The CI-sized protocol fuzz (issue #14): hypothesis draws traffic plans (``fuzz_traffic``) and
each is played to a real daemon (``fuzz_run``) — a fresh ``oamd stdio`` per example, and one
connection per example to a shared ``oamd serve`` on a Unix socket — under the oracle of
``fuzz_oracle``: every request answered exactly once (invalid ids with one id-null error), only
JSON-RPC objects written, every error a row of the table and never -32603, each message valid
against ``protocol/bridge.json``, a final ``ping`` answered, a clean exit, no traceback or error
record on stderr, connections released, the daemon's RSS under ``MAX_RSS_MIB``.

Under ``CI`` the ``ci`` profile (``conftest.py``) derandomizes the examples. Shrinking is off: each
attempt costs a daemon, and the report already names the offending lines; ``OAMD_FUZZ_SHRINK=1``
turns it on. ``make fuzz`` runs the long, seeded version (``tests/fuzz_run.py``).
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from typing import BinaryIO

import pytest
from fuzz_oracle import Violation
from fuzz_peer import Daemon, serve_daemon
from fuzz_run import run_socket_episode, run_stdio_episode, socket_check
from fuzz_traffic import Traffic
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

LINES = 60
"""Lines per example: about what hypothesis's per-example budget of choices allows."""
STDIO_EXAMPLES = 40
SOCKET_EXAMPLES = 40

_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=(*_PHASES, Phase.shrink) if os.environ.get("OAMD_FUZZ_SHRINK") else _PHASES,
)


def report(violations: list[Violation]) -> str:
    return "\n".join(str(v) for v in violations)


@contextlib.contextmanager
def trace(name: str) -> Iterator[BinaryIO | None]:
    """With ``OAMD_FUZZ_TRACE=DIR``, every line of an example goes to ``DIR/name`` (each example
    overwrites the last, so a failing one is what remains)."""
    directory = os.environ.get("OAMD_FUZZ_TRACE")
    if not directory:
        yield None
        return
    with open(os.path.join(directory, name), "wb") as file:
        yield file


@pytest.fixture(scope="module")
def served() -> Iterator[Daemon]:
    with serve_daemon() as daemon:
        yield daemon


@settings(FUZZ, max_examples=STDIO_EXAMPLES)
@given(st.randoms(use_true_random=False))
def test_random_traffic_over_stdio_gets_every_request_answered_once_and_no_internal_error(
    rng: random.Random,
) -> None:
    plan = Traffic(rng).plan(LINES)
    with trace("stdio") as file:
        violations = run_stdio_episode(plan, contract=True, trace=file)
    assert not violations, report(violations)


@settings(FUZZ, max_examples=SOCKET_EXAMPLES)
@given(st.randoms(use_true_random=False))
def test_random_traffic_over_a_unix_socket_gets_every_request_answered_once_and_is_released(
    served: Daemon, rng: random.Random
) -> None:
    since = len(served.stderr())
    plan = Traffic(rng).plan(LINES)
    with trace("unix") as file:
        violations = run_socket_episode(served, plan, contract=True, trace=file)
    violations += socket_check(served, since=since)
    assert not violations, report(violations)

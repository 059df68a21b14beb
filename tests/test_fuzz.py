"""The CI-sized protocol fuzz (issue #14): hypothesis draws traffic plans (``fuzz_traffic``) and
each is played to a real daemon (``fuzz_run``) — a fresh ``oamd stdio`` per example (its pipes
now and then non-blocking, its last line now and then without a newline), and one connection per
example to a shared ``oamd serve`` on a Unix socket — under the oracle of ``fuzz_oracle``: every
request answered exactly once (invalid ids with one id-null error), only JSON-RPC objects
written, every error a row of the table and never -32603, each message valid against
``protocol/bridge.json``, a final ``ping`` answered, a clean exit, no traceback or error record
on stderr, connections released, the daemon's RSS under ``MAX_RSS_MIB``.

The daemons run with a small ``--max-connection-bytes`` (``BUDGET``); the socket's has a
misbehaving OpenAI-compatible server behind ``model: "system"`` (``fuzz_peer.fault_model``;
``SYSTEM_SHARE`` of the models drawn). Beside the random plans, each kind of ``fuzz_heavy`` splice is played once
at the size of the defect it was made for, over the socket, while a ``fuzz_probe`` pings: no
ping may wait past ``MAX_PING_SECONDS``, and the splices' expectations (budgets, -32055) hold.

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
from fuzz_heavy import HEAVY
from fuzz_oracle import Violation
from fuzz_peer import Daemon, fault_model, serve_daemon
from fuzz_probe import Probe
from fuzz_run import run_socket_episode, run_stdio_episode, socket_check
from fuzz_traffic import Traffic
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

LINES = 60
"""Lines per example: about what hypothesis's per-example budget of choices allows."""
STDIO_EXAMPLES = 40
SOCKET_EXAMPLES = 40
HEAVY_LINES = 12
"""Random lines around a heavy splice."""
BUDGET = 1 << 20
"""The daemons' ``--max-connection-bytes``: a hoarding splice passes it with 3 MiB."""
SYSTEM_SHARE = 0.1
"""Models drawn that are ``system`` (the fault server): each such turn costs about 0.3 s."""

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


FLAGS = ("--max-connection-bytes", str(BUDGET))


@pytest.fixture(scope="module")
def served() -> Iterator[Daemon]:
    """The shared ``oamd serve``, with the fault server as its ``system`` model (not so the
    ``oamd stdio`` of each example: that would import an HTTP client into each)."""
    with fault_model(0) as model, serve_daemon(*FLAGS, *model) as daemon:
        yield daemon


@pytest.fixture(scope="module")
def probe(served: Daemon) -> Iterator[Probe]:
    probe = Probe(served).start()
    yield probe
    probe.stop()


def traffic(rng: random.Random, system: float = SYSTEM_SHARE) -> Traffic:
    """Random plans splice in nothing heavy: each kind is played once, by the heavy test."""
    return Traffic(rng, heavy_rate=0.0, budget=BUDGET, system=system)


@settings(FUZZ, max_examples=STDIO_EXAMPLES)
@given(st.randoms(use_true_random=False))
def test_random_traffic_over_stdio_gets_every_request_answered_once_and_no_internal_error(
    rng: random.Random,
) -> None:
    plan = traffic(rng, system=0.0).plan(LINES)
    with trace("stdio") as file:
        violations = run_stdio_episode(plan, contract=True, trace=file, daemon_args=FLAGS)
    assert not violations, report(violations)


@settings(FUZZ, max_examples=SOCKET_EXAMPLES)
@given(st.randoms(use_true_random=False))
def test_random_traffic_over_a_unix_socket_gets_every_request_answered_once_and_is_released(
    served: Daemon, probe: Probe, rng: random.Random
) -> None:
    since = len(served.stderr())
    plan = traffic(rng).plan(LINES)
    with trace("unix") as file:
        violations = run_socket_episode(served, plan, contract=True, trace=file)
    violations += socket_check(served, since=since, others=1) + probe.take()
    assert not violations, report(violations)


@pytest.mark.parametrize("kind", HEAVY)
def test_heavy_traffic_over_a_unix_socket_stays_within_the_limits_and_stalls_no_other_client(
    served: Daemon, probe: Probe, kind: str
) -> None:
    since = len(served.stderr())
    heavy = traffic(random.Random(kind))
    heavy.heavy.defect_sized = True
    plan = heavy.plan(HEAVY_LINES, ends=(1, 0, 0, 0, 0), splice=kind)
    with trace(f"heavy-{kind}") as file:
        violations = run_socket_episode(served, plan, contract=True, trace=file)
    violations += socket_check(served, since=since, others=1) + probe.take()
    assert not violations, report(violations)

"""liboamd_ffi (``ffi/``) through ctypes, against the rules of its header: what each of the six
functions returns, the callback's thread and order, sending from the callback, destroying while
turns stream and from inside the callback, concurrent ``oam_call_blocking`` with one id, its timeout,
a daemon that dies, and create/destroy cycles that leave no process, thread or descriptor behind
(``OAMD_FFI_CYCLES``, default 300; 10,000 is an opt-in run). The bridges spawn this checkout's
``python -m oamd stdio`` through a wrapper script named by ``OAMD_EXECUTABLE``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ffi_harness import (
    CALLBACK,
    LIBRARY,
    WAIT_SECONDS,
    Bridge,
    build_library,
    child_pids,
    daemon_script,
    descriptor_targets,
    library_environment,
    load,
    reading_stand_in,
    scripted,
    wait_gone,
)

THREADS = 8
PINGS_PER_THREAD = 25
CYCLES = int(os.environ.get("OAMD_FFI_CYCLES", "300"))
"""Create/destroy cycles of the leak test; ``OAMD_FFI_CYCLES=10000`` for the long run."""
TIMEOUT_MS = 200
SLOW_MS = 3000
DESTROY_SECONDS = 2.0
"""A destroy stops its daemon within two grace periods (250 ms each) plus its exit."""
SHUT_DOWN = -32023
TIMED_OUT = -32024


@pytest.fixture(scope="module")
def lib():
    return load(build_library())


@pytest.fixture(autouse=True)
def daemon(tmp_path, monkeypatch) -> Path:
    script = daemon_script(tmp_path)
    monkeypatch.setenv("OAMD_EXECUTABLE", str(script))
    return script


@pytest.fixture
def bridge(lib):
    made = Bridge(lib)
    yield made
    made.destroy()


def slow_session(bridge: Bridge, *steps) -> str:
    created = bridge.call(
        {"id": 0, "method": "session/create", "params": {"model": scripted(*steps)}}
    )
    return created["result"]["session"]


def test_version_is_a_static_string_before_any_bridge(lib):
    first = lib.oam_version()
    assert first == lib.oam_version()
    assert first.decode().count(".") == 2


def test_create_refuses_a_null_callback(lib):
    assert lib.oam_bridge_create(CALLBACK(), None) is None


def test_send_and_call_refuse_null_arguments_and_invalid_utf8(lib, bridge):
    assert lib.oam_bridge_send(None, b"{}") == -1
    assert lib.oam_bridge_send(bridge.handle, None) == -1
    assert bridge.send(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xff"}}') == -2
    assert lib.oam_call_blocking(None, b"{}", 0) is None
    assert lib.oam_call_blocking(bridge.handle, None, 0) is None
    lib.oam_string_free(None)
    lib.oam_bridge_destroy(None)


def test_string_ids_are_echoed_byte_for_byte_and_bad_json_is_answered_minus_32700(lib):
    seen: list[bytes] = []
    got = threading.Semaphore(0)

    def receive(line, _user):
        seen.append(line)
        got.release()

    callback = CALLBACK(receive)
    handle = lib.oam_bridge_create(callback, None)
    try:
        assert (
            lib.oam_bridge_send(handle, b'{"jsonrpc":"2.0","id":"x\\u0041","method":"ping"}') == 0
        )
        assert lib.oam_bridge_send(handle, b"not json") == 0
        assert got.acquire(timeout=10) and got.acquire(timeout=10)
        # oamd may answer the unparsable line first: find each answer by what it is
        (pong,) = [line for line in seen if b'"result"' in line]
        assert pong == b'{"jsonrpc":"2.0","id":"x\\u0041","result":{}}'
        (refused,) = [json.loads(line) for line in seen if line != pong]
        assert refused["error"]["code"] == -32700
    finally:
        lib.oam_bridge_destroy(handle)


def test_eight_threads_sending_at_once_each_get_every_response_exactly_once(bridge):
    sessions = [slow_session(bridge, {"text": f"reply {n}", "chunks": 4}) for n in range(THREADS)]
    start = threading.Barrier(THREADS)

    def send_all(n: int) -> None:
        start.wait()
        for i in range(PINGS_PER_THREAD):
            assert bridge.send({"jsonrpc": "2.0", "id": f"t{n}-{i}", "method": "ping"}) == 0
        turn = {"session": sessions[n], "prompt": "go", "stream": True}
        assert (
            bridge.send(
                {"jsonrpc": "2.0", "id": f"turn{n}", "method": "session/respond", "params": turn}
            )
            == 0
        )

    threads = [threading.Thread(target=send_all, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {f"t{n}-{i}" for n in range(THREADS) for i in range(PINGS_PER_THREAD)}
    expected |= {f"turn{n}" for n in range(THREADS)}
    lines = bridge.wait_for(lambda ls: {m.get("id") for m in ls if "method" not in m} >= expected)
    responses = [m["id"] for m in lines if "method" not in m]
    assert sorted(responses) == sorted(expected)
    for n in range(THREADS):
        order = [
            i for i, m in enumerate(lines) if m.get("params", {}).get("requestId") == f"turn{n}"
        ]
        answer = next(
            i for i, m in enumerate(lines) if m.get("id") == f"turn{n}" and "method" not in m
        )
        assert order and max(order) < answer
        assert lines[answer]["result"]["text"] == f"reply {n}"
    assert len(bridge.callback_threads) == 1
    assert threading.get_ident() not in bridge.callback_threads


def test_the_callback_may_send_an_answer_to_a_tool_call(lib):
    def answer_tools(bridge: Bridge, message: dict) -> None:
        if message.get("method") == "tool/call":
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"output": {"opened": True}}}
            assert bridge.send(reply) == 0

    bridge = Bridge(lib, on_line=answer_tools)
    try:
        gate = {"name": "open_gate", "description": "Open a gate.", "execution": "client"}
        model = scripted(
            {"toolCalls": [{"name": "open_gate", "arguments": {}}]}, {"template": "{toolOutput}"}
        )
        created = bridge.call(
            {"method": "session/create", "params": {"tools": [gate], "model": model}}
        )
        turn = {"session": created["result"]["session"], "prompt": "open it"}
        assert (
            bridge.send({"jsonrpc": "2.0", "id": 5, "method": "session/respond", "params": turn})
            == 0
        )
        reply = bridge.response(5)
        assert reply["result"]["text"] == '{"opened":true}'
    finally:
        bridge.destroy()


def test_call_blocking_from_several_threads_with_id_zero_returns_each_its_own_response(bridge):
    sessions = [
        slow_session(bridge, {"template": "echo {prompt}", "chunks": 2}) for _ in range(THREADS)
    ]
    results: dict[int, dict] = {}
    start = threading.Barrier(THREADS)

    def call(n: int) -> None:
        start.wait()
        turn = {"session": sessions[n], "prompt": f"p{n}", "stream": True}
        results[n] = bridge.call(
            {"jsonrpc": "2.0", "id": 0, "method": "session/respond", "params": turn}
        )

    threads = [threading.Thread(target=call, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for n in range(THREADS):
        assert results[n]["id"] == 0
        assert results[n]["result"]["text"] == f"echo p{n}"
    assert not [m for m in bridge.lines if "method" not in m], (
        "blocking responses reached the callback"
    )
    events = [m for m in bridge.lines if m.get("method") == "session/event"]
    assert events and {e["params"]["requestId"] for e in events} == {0}


def test_call_blocking_leaves_out_id_and_jsonrpc_and_rejects_what_is_not_a_request(bridge):
    assert bridge.call({"method": "ping"}) == {"jsonrpc": "2.0", "id": None, "result": {}}
    assert bridge.call(b"[1,2]")["error"]["code"] == -32700
    assert bridge.call({"id": "m"})["error"] == {
        "code": -32600,
        "message": "'method' must be a non-empty string.",
        "data": {"code": "invalid_message"},
    }
    assert bridge.call({"id": [1], "method": "ping"})["id"] is None


def test_call_blocking_times_out_with_minus_32024_and_cancels_the_turn(bridge):
    session = slow_session(bridge, {"text": "late", "delayMs": SLOW_MS}, {"text": "next"})
    started = time.monotonic()
    turn = {
        "id": "slow",
        "method": "session/respond",
        "params": {"session": session, "prompt": "hi"},
    }
    answer = bridge.call(turn, TIMEOUT_MS)
    assert time.monotonic() - started < SLOW_MS / 1000 / 2
    assert answer == {
        "jsonrpc": "2.0",
        "id": "slow",
        "error": {
            "code": TIMED_OUT,
            "message": f"'session/respond' did not finish within {TIMEOUT_MS} ms; it was cancelled.",
            "data": {"code": "timeout"},
        },
    }
    # the cancelled turn does not hold the session: the next one answers at once
    after = bridge.call(
        {"method": "session/respond", "params": {"session": session, "prompt": "again"}}, 2000
    )
    assert after["result"]["text"] == "next"
    assert not [m for m in bridge.lines if "method" not in m]


def test_a_dead_daemon_answers_every_pending_request_and_blocking_call_with_an_error(bridge, capfd):
    first, second = (slow_session(bridge, {"text": "late", "delayMs": 60000}) for _ in range(2))
    turn = {"session": first, "prompt": "wait", "stream": True}
    assert (
        bridge.send({"jsonrpc": "2.0", "id": "a", "method": "session/respond", "params": turn}) == 0
    )
    blocked: dict = {}
    other = {"id": 9, "method": "session/respond", "params": {**turn, "session": second}}
    caller = threading.Thread(target=lambda: blocked.update(bridge.call(other, 0)))
    caller.start()

    def both_started(lines: list[dict]) -> bool:
        started = {m["params"]["requestId"] for m in lines if m.get("method") == "session/event"}
        return started >= {"a", 9}

    bridge.wait_for(both_started)
    os.kill(bridge.pid, signal.SIGKILL)
    died = bridge.response("a")
    assert died["error"]["code"] == SHUT_DOWN
    caller.join(10)
    assert blocked["id"] == 9 and blocked["error"]["code"] == SHUT_DOWN
    assert bridge.send({"jsonrpc": "2.0", "id": "late", "method": "ping"}) == 0
    assert bridge.response("late")["error"]["data"]["code"] == "shut_down"
    assert bridge.call({"id": 1, "method": "ping"})["error"]["code"] == SHUT_DOWN
    assert "[oamd-ffi] error: oamd exited" in capfd.readouterr().err


def test_a_daemon_that_exits_on_the_engines_shutdown_is_not_reported_as_an_error(bridge, capfd):
    # Apple's bindings send shutdown before destroy to cancel blocking calls in flight
    assert bridge.send({"jsonrpc": "2.0", "method": "shutdown"}) == 0
    assert wait_gone(bridge.pid, WAIT_SECONDS)
    assert bridge.send({"jsonrpc": "2.0", "id": "after", "method": "ping"}) == 0
    assert bridge.response("after")["error"]["code"] == SHUT_DOWN
    assert "[oamd-ffi] error" not in capfd.readouterr().err


def test_destroy_while_turns_stream_returns_quickly_and_no_callback_runs_after_it(lib):
    threads_before = len(os.listdir("/proc/self/task"))
    bridge = Bridge(lib)
    session = slow_session(bridge, {"text": "x" * 2000, "chunks": 2000, "delayMs": 1})
    turn = {"session": session, "prompt": "go", "stream": True}
    assert (
        bridge.send({"jsonrpc": "2.0", "id": 1, "method": "session/respond", "params": turn}) == 0
    )
    bridge.wait_for(lambda lines: len(lines) >= 3)
    started = time.monotonic()
    bridge.destroy()
    assert time.monotonic() - started < DESTROY_SECONDS
    count = len(bridge.lines)
    assert bridge.pid not in child_pids()  # the daemon is gone: nothing is left to print
    # and the bridge's reader thread, the only one that runs the callback, has ended
    assert len(os.listdir("/proc/self/task")) == threads_before
    assert len(bridge.lines) == count


def test_destroy_from_inside_the_callback_makes_it_the_last_one(lib):
    def destroy_on_first(bridge: Bridge, message: dict) -> None:
        if not bridge.destroyed:
            bridge.destroy()

    bridge = Bridge(lib, on_line=destroy_on_first)
    for n in range(20):
        bridge.send({"jsonrpc": "2.0", "id": n, "method": "ping"})
    bridge.wait_for(lambda lines: len(lines) >= 1)
    # the teardown finishes on the bridge's own thread
    assert wait_gone(bridge.pid, DESTROY_SECONDS * 2)
    assert len(bridge.lines) == 1


def test_destroy_waits_for_a_callback_in_progress(lib):
    entered, release = threading.Event(), threading.Event()
    state = {"callback_done": False, "seen_by_destroy": None}

    def slow_callback(bridge: Bridge, message: dict) -> None:
        entered.set()
        release.wait(10)
        state["callback_done"] = True

    bridge = Bridge(lib, on_line=slow_callback)
    bridge.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert entered.wait(10)

    def destroy() -> None:
        bridge.destroy()
        state["seen_by_destroy"] = state["callback_done"]

    destroyer = threading.Thread(target=destroy)
    destroyer.start()
    # destroy has begun once it closed the daemon's input and the daemon exited; the callback
    # still runs, so destroy must still be waiting
    assert wait_gone(bridge.pid, DESTROY_SECONDS * 2)
    assert destroyer.is_alive()
    release.set()
    destroyer.join(10)
    assert state["seen_by_destroy"] is True


def test_a_second_bridges_daemon_inherits_no_pipe_of_the_first(lib, tmp_path, monkeypatch):
    monkeypatch.setenv("OAMD_EXECUTABLE", str(reading_stand_in(tmp_path)))
    host_before = set(descriptor_targets("self").values())
    first = Bridge(lib)
    # the first bridge's pipes (its child's stdin and stdout, its wake pipe), as this process holds them
    first_pipes = set(descriptor_targets("self").values()) - host_before
    assert len(first_pipes) == 3
    second = Bridge(lib)
    try:
        inherited = descriptor_targets(second.pid)
        assert inherited[0] != inherited[1] and {inherited[0], inherited[1]}.isdisjoint(first_pipes)
        # what the host itself leaves open without close-on-exec may be inherited; no pipe of the first
        assert set(inherited.values()).isdisjoint(first_pipes), inherited
    finally:
        first.destroy()
        second.destroy()


def test_the_default_daemon_is_the_executable_beside_the_library(lib, tmp_path, monkeypatch):
    monkeypatch.delenv("OAMD_EXECUTABLE")
    dist = tmp_path / "dist"  # the layout of `make dist`, apart from the fixture's script
    (dist / "ffi").mkdir(parents=True)
    (dist / "oamd").mkdir()
    shutil.copy(LIBRARY, dist / "ffi" / LIBRARY.name)
    started = tmp_path / "started"
    real = daemon_script(dist, "python-oamd")
    beside = dist / "oamd" / "oamd"  # notes that it ran, so an oamd on PATH cannot pass for it
    beside.write_text(f'#!/bin/sh\n: > "{started}"\nexec "{real}" "$@"\n')
    beside.chmod(0o755)
    copy = Bridge(load(dist / "ffi" / LIBRARY.name))
    try:
        assert (
            copy.call({"id": 1, "method": "initialize", "params": {}})["result"]["server"]["name"]
            == "oamd"
        )
        assert started.exists()
    finally:
        copy.destroy()


def test_create_destroy_cycles_leave_no_process_thread_or_descriptor(lib, tmp_path, monkeypatch):
    monkeypatch.setenv("OAMD_EXECUTABLE", str(reading_stand_in(tmp_path)))

    def counts() -> tuple[int, set[str], int]:
        return (
            len(os.listdir("/proc/self/fd")),
            set(os.listdir("/proc/self/task")),
            len(child_pids()),
        )

    Bridge(lib).destroy()  # the first one loads what stays loaded
    fds, threads, children = counts()
    for n in range(CYCLES):
        bridge = Bridge(lib, find_pid=False)
        if n % 2:
            bridge.send({"jsonrpc": "2.0", "id": n, "method": "ping"})
        bridge.destroy()
    fds_after, threads_after, children_after = counts()
    assert (fds_after, children_after) == (fds, children)
    # a thread the cycles left running has a new id; one of the test process's own that ended
    # meanwhile (an idle worker of an earlier test) is no leak, and once made this test flaky
    assert threads_after - threads == set()


def test_sends_keep_their_order_and_json_line_breaks_are_read_as_space(bridge):
    assert bridge.send(b'{"jsonrpc":"2.0",\n"id":"nl",\r\n"method":"ping"}\n') == 0
    for n in range(50):
        bridge.send({"jsonrpc": "2.0", "id": n, "method": "ping"})
    lines = bridge.wait_for(lambda ls: len(ls) == 51)
    assert [m["id"] for m in lines] == ["nl", *range(50)]


def test_log_setting_prints_diagnostics_and_a_daemon_that_cannot_start_is_named(
    lib, tmp_path, daemon
):
    program = (
        "import ctypes,sys;sys.path.insert(0,'tests');from ffi_harness import load,Bridge;"
        f"b=Bridge(load(__import__('pathlib').Path({str(LIBRARY)!r})));b.destroy()"
    )
    env = library_environment(
        {**os.environ, "OAM_BRIDGE_LOG": "debug", "OAMD_EXECUTABLE": str(daemon)}
    )
    shown = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=30
    )
    assert f"[oamd-ffi] debug: started {daemon} stdio" in shown.stderr
    env["OAMD_EXECUTABLE"] = str(tmp_path / "missing")
    failing = (
        "import ctypes,sys;sys.path.insert(0,'tests');from ffi_harness import load,CALLBACK;"
        + (
            f"lib=load(__import__('pathlib').Path({str(LIBRARY)!r}));print(lib.oam_bridge_create(CALLBACK(lambda l,u:None),None))"
        )
    )
    env.pop("OAM_BRIDGE_LOG")
    missing = subprocess.run(
        [sys.executable, "-c", failing], env=env, capture_output=True, text=True, timeout=30
    )
    assert missing.stdout.strip() == "None"
    assert "cannot start" in missing.stderr and "missing" in missing.stderr


DESTROY_ROUNDS = 3
"""The race is narrow (a woken caller re-locks while destroy frees): a few rounds make TSan see it."""


def destroy_with_callers_waiting(lib) -> dict[int, dict]:
    """Destroys a bridge while THREADS blocking calls wait on turns that never end; their answers."""
    bridge = Bridge(lib)
    sessions = [slow_session(bridge, {"text": "late", "delayMs": 60000}) for _ in range(THREADS)]
    answers: dict[int, dict] = {}

    def call(n: int) -> None:
        turn = {"session": sessions[n], "prompt": "wait", "stream": True}
        answers[n] = bridge.call({"id": n, "method": "session/respond", "params": turn}, 0)

    callers = [threading.Thread(target=call, args=(n,)) for n in range(THREADS)]
    for caller in callers:
        caller.start()

    def all_started(lines: list[dict]) -> bool:
        started = {m["params"]["requestId"] for m in lines if m.get("method") == "session/event"}
        return started >= set(range(THREADS))

    bridge.wait_for(all_started)
    bridge.destroy()
    for caller in callers:
        caller.join(WAIT_SECONDS)
        assert not caller.is_alive()
    return answers


def test_destroy_lets_the_blocking_callers_it_wakes_return_before_the_bridge_is_freed(lib):
    # Dispose cancelling calls in flight (Apple's Unity binding): each woken caller re-takes the
    # bridge's lock on its way out, so destroy frees it only after the last one has left (a use
    # after free that `make ffi-sanitize`'s ThreadSanitizer run reported before)
    for _ in range(DESTROY_ROUNDS):
        answers = destroy_with_callers_waiting(lib)
        assert {n: answers[n]["id"] for n in range(THREADS)} == {n: n for n in range(THREADS)}
        for answer in answers.values():
            assert answer["error"] == {
                "code": SHUT_DOWN,
                "message": "The bridge was destroyed.",
                "data": {"code": "shut_down"},
            }


def test_a_raw_line_break_inside_a_string_is_tracked_as_the_line_sent(bridge):
    # what goes on the wire (the break as a space) is what the bridge tracks: if oamd dies, the
    # request is still answered
    session = slow_session(bridge, {"text": "late", "delayMs": 60000})
    line = (
        b'{"jsonrpc":"2.0","id":"broken","method":"session/respond",'
        b'"params":{"session":"' + session.encode() + b'","prompt":"two\nlines","stream":true}}'
    )
    assert bridge.send(line) == 0
    bridge.wait_for(
        lambda lines: any(m.get("params", {}).get("requestId") == "broken" for m in lines)
    )
    os.kill(bridge.pid, signal.SIGKILL)
    assert bridge.response("broken")["error"]["code"] == SHUT_DOWN


def test_string_ids_that_differ_only_after_a_nul_get_their_own_responses(bridge):
    session = slow_session(bridge, {"text": "slow", "delayMs": 1500})
    turn = {"session": session, "prompt": "wait"}
    assert (
        bridge.send(
            b'{"jsonrpc":"2.0","id":"a\\u0000turn","method":"session/respond","params":'
            + json.dumps(turn).encode()
            + b"}"
        )
        == 0
    )
    assert bridge.send(b'{"jsonrpc":"2.0","id":"a\\u0000ping","method":"ping"}') == 0
    lines = bridge.wait_for(lambda seen: len([m for m in seen if "method" not in m]) == 2)
    # the ping is answered first; it must not take the turn's id
    assert [m["id"] for m in lines if "method" not in m] == ["a\x00ping", "a\x00turn"]
    assert lines[-1]["result"]["text"] == "slow"


def test_a_forked_childs_destroy_of_its_copy_leaves_the_parents_bridge_working(bridge):
    assert bridge.call({"id": "before", "method": "ping"})["result"] == {}
    child = os.fork()
    if child == 0:  # the copy: no threads behind it, the parent's pipes and daemon
        try:
            refused = bridge.lib.oam_bridge_send(bridge.handle, b'{"id":1,"method":"ping"}')
            bridge.lib.oam_bridge_destroy(bridge.handle)
            os._exit(0 if refused == -1 else 3)
        finally:
            os._exit(4)
    gone = wait_gone(child, WAIT_SECONDS)
    if not gone:
        os.kill(child, signal.SIGKILL)
    _, status = os.waitpid(child, 0)
    assert gone, "the forked child's destroy hung"
    assert os.waitstatus_to_exitcode(status) == 0
    assert bridge.call({"id": "after", "method": "ping"}, 5000) == {
        "jsonrpc": "2.0",
        "id": "after",
        "result": {},
    }
    assert bridge.pid in child_pids()


STRESS_ROUNDS = int(os.environ.get("OAMD_FFI_STRESS_ROUNDS", "15"))
"""Rounds per thread of the C ABI stress; ``make fuzz`` runs 150 under ThreadSanitizer."""
HOSTILE_LINES = [
    b'{"jsonrpc":"2.0","id":-0,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1E400,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":"x","method":"ping","params":{"v":' + b"[" * 126 + b"]" * 126 + b"}}",
    b'{"jsonrpc":"2.0","id":"n\\u0000a","method":"ping"}',
    b'{"jsonrpc":"2.0","id":"n\\u0000b","method":"ping","params":{"s":"raw\nbreak"}}',
    b"not json",
]
"""Lines each thread sends every round: ids oamd rewrites or refuses, a line exactly as deep as
oamd reads (128 levels with its object and params), ids that differ after a NUL, a raw line break
in a string, garbage. Four are answered with their id, three with a null id."""


def test_threads_mixing_hostile_sends_blocking_calls_and_a_destroy_get_one_answer_each(lib):
    # the C ABI under threads (run under ASan/UBSan and TSan by `make ffi-sanitize`)
    bridge = Bridge(lib)
    session = slow_session(bridge, {"text": "late", "delayMs": 60000})
    start = threading.Barrier(THREADS)
    called: list[dict] = []

    def hammer(n: int) -> None:
        start.wait()
        for i in range(STRESS_ROUNDS):
            for line in HOSTILE_LINES:
                assert bridge.send(line) == 0
            answer = bridge.call({"id": f"c{n}-{i}", "method": "ping"})
            called.append(answer)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS * 3)
        assert not thread.is_alive()
    sent = THREADS * STRESS_ROUNDS
    assert sorted(a["id"] for a in called) == sorted(
        f"c{n}-{i}" for n in range(THREADS) for i in range(STRESS_ROUNDS)
    )
    assert all(a["result"] == {} for a in called)
    lines = bridge.wait_for(lambda seen: len(seen) == sent * len(HOSTILE_LINES))
    ids = [m.get("id") for m in lines]
    assert ids.count(None) == sent * 3
    for expected in (0, "x", "n\x00a", "n\x00b"):
        assert ids.count(expected) == sent, expected
    # then a destroy while blocking calls wait on a turn that never ends
    waiting: list[dict] = []
    turn = {"session": session, "prompt": "wait", "stream": True}
    blocked = [
        threading.Thread(
            target=lambda: waiting.append(
                bridge.call({"id": "w", "method": "session/respond", "params": turn}, 0)
            )
        )
        for _ in range(2)
    ]
    for thread in blocked:
        thread.start()
    bridge.wait_for(lambda seen: any(m.get("method") == "session/event" for m in seen))
    bridge.destroy()
    for thread in blocked:
        thread.join(WAIT_SECONDS)
        assert not thread.is_alive()
    assert [a["error"]["code"] for a in waiting] == [SHUT_DOWN, SHUT_DOWN]

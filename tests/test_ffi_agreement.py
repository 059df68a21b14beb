"""liboamd_ffi and oamd agree on what a request is (ffi/json_scan.h): every line at the edges of
oamd's nesting and line limits and of its id rules is sent to ``oamd stdio`` directly, and the
same line through the library, and the library must give what oamd gave — no blocking call that
never returns, no ``-32024`` standing for a ``-32600`` oamd sent, no second answer (``-32023``)
when oamd exits after ``shutdown``, and ids back as they were sent (``-0`` included)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest
from ffi_harness import ROOT, WAIT_SECONDS, Bridge, build_library, load, wait_gone

DEPTH = 128
"""oamd's MAX_JSON_DEPTH (oamd/limits.py); the line's own object is level 1."""
LINE_LIMIT = 16 * 1024 * 1024
SHUT_DOWN = -32023


@pytest.fixture(scope="module")
def lib():
    return load(build_library())


@pytest.fixture(autouse=True)
def daemon(tmp_path, monkeypatch):
    from ffi_harness import daemon_script

    monkeypatch.setenv("OAMD_EXECUTABLE", str(daemon_script(tmp_path)))


def nested(levels: int, kind: str = "[") -> str:
    """A value nesting ``levels`` arrays (or objects, each under key "k")."""
    if kind == "[":
        return "[" * levels + "]" * levels
    return '{"k":' * (levels - 1) + "{}" + "}" * (levels - 1)


def ping(request_id: str, params: str = "{}") -> str:
    return f'{{"jsonrpc":"2.0","id":{request_id},"method":"ping","params":{params}}}'


def edge_lines() -> list[str]:
    """Requests at the edges: params nest 127/128 levels under the line's object (129/130 in
    all), brackets inside strings, an unclosed quote, and the ids oamd refuses or rewrites."""
    lines = []
    for total in (127, 128, 129, 130):
        inner = total - 2  # the line's object and params' own object
        lines.append(ping(f'"arrays-{total}"', f'{{"v":{nested(inner)}}}'))
        lines.append(ping(f'"objects-{total}"', f'{{"v":{nested(inner, "{")}}}'))
    lines.append(ping('"strings"', '{"v":"' + "[" * 300 + '","w":"\\"[[[["}'))
    # not JSON, and deep: oamd counts the brackets before it parses, so -32600, not -32700
    lines.append('{"jsonrpc":"2.0","id":"unclosed","method":"ping","params":{"v":"' + "[" * 200)
    for request_id in (
        "9007199254740991",
        "-9007199254740991",
        "9007199254740992",
        "-9007199254740993",
        "1E400",
        "-1e999",
        "-0",
        "-0.0",
        "8.0",
        "1e2",
        "5.5",
        '"a\\u0000b"',
        '"a\\u0000c"',
        '"\\ud800"',
    ):
        lines.append(ping(request_id))
    return lines


def oamd_answers(lines: list[str]) -> list[dict[str, Any]]:
    """What ``oamd stdio`` prints for the lines: one answer each, in their order (pings and
    refusals are answered as they are read)."""
    done = subprocess.run(
        [sys.executable, "-m", "oamd", "stdio"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(lines), done.stdout
    return answers


def answered_with_null_id(answers: list[dict[str, Any]]) -> int:
    return sum(1 for answer in answers if answer.get("id") is None)


def blocking_call(bridge: Bridge, line: str) -> dict[str, Any]:
    """oam_call_blocking with no timeout, on a thread: a call that never returns fails the test
    instead of hanging it."""
    result: dict[str, Any] = {}
    caller = threading.Thread(target=lambda: result.update(bridge.call(line.encode(), 0)))
    caller.daemon = True
    caller.start()
    caller.join(WAIT_SECONDS)
    assert not caller.is_alive(), f"oam_call_blocking never returned for {line[:120]!r}"
    return result


def test_a_blocking_call_gives_what_oamd_gives_at_every_edge(lib):
    lines = edge_lines()
    direct = oamd_answers(lines)
    refused = [a for a in direct if a.get("id") is None]
    # the edges are where they should be: 129 and 130 deep, the unclosed deep line, 4 ids
    assert len(refused) == 2 * 2 + 1 + 4, direct
    bridge = Bridge(lib)
    try:
        for line, expected in zip(lines, direct, strict=True):
            answer = blocking_call(bridge, line)
            if expected.get("id") is None:
                # oamd's own refusal, not a timeout or a shut_down standing for it
                assert answer == expected, line[:120]
            else:
                sent_id = json.loads(line[line.index('"id":') + 5 : line.index(',"method"')])
                assert answer == {"jsonrpc": "2.0", "id": sent_id, "result": {}}, line[:120]
    finally:
        bridge.destroy()


def test_each_sent_line_is_answered_once_and_ids_come_back_as_sent(lib):
    lines = edge_lines()
    expected_null = answered_with_null_id(oamd_answers(lines))
    bridge = Bridge(lib)
    try:
        for line in lines:
            assert bridge.send(line.encode()) == 0
        bridge.wait_for(lambda seen: len(seen) == len(lines))
        assert bridge.send(b'{"jsonrpc":"2.0","method":"shutdown"}') == 0
        assert wait_gone(bridge.pid, WAIT_SECONDS)
        # the exit is seen (a request sent now is answered -32023), and nothing came twice
        assert bridge.send(b'{"jsonrpc":"2.0","id":"after","method":"ping"}') == 0
        bridge.response("after")
        answers = bridge.lines[: len(lines)]
        extra = bridge.lines[len(lines) :]
        assert [a["id"] for a in extra] == ["after"], extra
        assert not [a for a in answers if a.get("error", {}).get("code") == SHUT_DOWN]
        assert answered_with_null_id(answers) == expected_null
        raw_ids = {line.split(b'"id":', 1)[1].split(b",", 1)[0] for line in bridge.raw}
        # ids oamd rewrites (-0 → 0, 8.0 → 8) come back as the engine wrote them
        assert {b"-0", b"-0.0", b"8.0", b"1e2", b'"a\\u0000b"', b'"a\\u0000c"'} <= raw_ids
    finally:
        bridge.destroy()


def test_lines_at_the_line_limit_are_tracked_and_one_past_it_is_not(lib):
    head = '{"jsonrpc":"2.0","id":"%s","method":"ping","params":{"pad":"'
    tail = '"}}'

    def line_of(size: int, request_id: str) -> bytes:
        start = head % request_id
        return (start + "x" * (size - len(start) - len(tail)) + tail).encode()

    at_limit, past_limit = line_of(LINE_LIMIT, "at"), line_of(LINE_LIMIT + 1, "past")
    assert (len(at_limit), len(past_limit)) == (LINE_LIMIT, LINE_LIMIT + 1)
    bridge = Bridge(lib)
    try:
        assert bridge.send(at_limit) == 0 and bridge.send(past_limit) == 0
        seen = bridge.wait_for(lambda lines: len(lines) == 2)
        assert {"at", None} == {m.get("id") for m in seen}
        refused = next(m for m in seen if m.get("id") is None)
        assert refused["error"]["data"] == {"code": "invalid_message", "limit": LINE_LIMIT}
        called = blocking_call(bridge, past_limit.decode())
        assert called["error"]["code"] == -32600 and called["id"] is None
        assert called["error"]["data"]["limit"] == LINE_LIMIT
        assert bridge.send(b'{"jsonrpc":"2.0","method":"shutdown"}') == 0
        assert wait_gone(bridge.pid, WAIT_SECONDS)
        assert bridge.send(b'{"jsonrpc":"2.0","id":"after","method":"ping"}') == 0
        bridge.response("after")
        assert [m.get("id") for m in bridge.lines[2:]] == ["after"]
    finally:
        bridge.destroy()

"""Property tests: arbitrary lines never kill the daemon, and every request is answered once."""

from __future__ import annotations

import json

import anyio
from conftest import memory_daemon
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
methods = st.sampled_from(
    ["ping", "initialize", "model/availability", "nope", "test/sleep", "shutdown?"]
)
request = st.fixed_dictionaries(
    {
        "method": methods,
        "params": st.one_of(
            st.none(), st.dictionaries(st.text(max_size=10), json_values, max_size=3)
        ),
    }
)
line = st.one_of(
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" ")),
    json_values.map(lambda v: json.dumps(v).encode()),
    request,
)


def encode(item, index: int) -> tuple[bytes, str | None]:
    if isinstance(item, dict):
        msg_id = f"r{index}"
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": item["method"]}
        if item["params"] is not None:
            msg["params"] = item["params"]
        return json.dumps(msg).encode(), msg_id
    return item, None


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(line, max_size=25))
def test_arbitrary_lines_get_one_answer_per_request_and_the_daemon_survives(items):
    async def run():
        async with memory_daemon() as client:
            encoded = [encode(item, i) for i, item in enumerate(items)]
            payload = b"\n".join(data for data, _ in encoded) + b"\n"
            await client.send_raw(payload)
            with anyio.fail_after(10):
                assert await client.request("ping") == {}
                expected = {msg_id for _, msg_id in encoded if msg_id}
                for msg_id in expected:  # deferred work may still be finishing
                    await client.next_message(lambda m, i=msg_id: m.get("id") == i)
            responses = [m for m in client.recorder.received if "id" in m and "method" not in m]
            ids = [m["id"] for m in responses if m["id"] in expected]
            assert len(ids) == len(set(ids)) == len(expected)
            stray = [m for m in responses if m["id"] not in expected and m["id"] is not None]
            assert all(isinstance(m["id"], int) for m in stray)  # only our own ping

    anyio.run(run)

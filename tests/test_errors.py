"""The error names and the one exception → wire boundary (``oamd.errors``, ``oamd.rpc.errors``)."""

from __future__ import annotations

import math

import orjson
import pytest

from oamd.errors import MAX_RETRY_AFTER_SECONDS, ModelError
from oamd.rpc.errors import to_wire_error


@pytest.mark.parametrize(
    ("asked", "kept"),
    [
        (math.inf, MAX_RETRY_AFTER_SECONDS),
        (1e400, MAX_RETRY_AFTER_SECONDS),
        (-3.0, 0.0),
        (2.5, 2.5),
        (math.nan, None),
    ],
)
def test_a_model_errors_retry_after_is_kept_within_a_day_and_always_encodes(asked, kept):
    # a backend passing on a server's Retry-After: inf failed the turn -32603 on int(inf)
    error = ModelError("busy", retry_after=asked)
    assert error.retry_after == kept
    wire = to_wire_error(error)
    orjson.dumps(wire)  # encodes: no inf, no NaN
    assert wire["data"].get("retryAfterSeconds") == kept

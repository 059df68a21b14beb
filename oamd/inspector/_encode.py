"""The inspector's JSON writer: every API answer and every event frame goes through ``encode``.

What the inspector shows is what the daemon holds, and the daemon holds one value orjson refuses
by design: a request id with a lone surrogate, echoed to the engine exactly (``oamd.jsonvalue``).
Such a value is written with ASCII escapes (``"\\ud800"``), as the protocol's own writer does
(``oamd.rpc.message.encode``), so the page shows the id the engine sent and a view that holds it
still answers 200.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["encode"]


def encode(value: Any) -> bytes:
    """``value`` as compact JSON; a string orjson refuses (a lone surrogate) is escaped.

    Raises:
        ValueError: the value is not JSON at all (a defect: the views build JSON values only).
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        pass
    try:
        return json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()
    except (TypeError, RecursionError) as exc:
        raise ValueError(f"not JSON: {exc}") from None

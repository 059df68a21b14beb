"""Test-only methods (``oamd stdio --test-methods``): never registered in production.

``test/sleep {ms}`` → ``{"slept": ms}`` after sleeping (deferred work for ordering tests).
``test/modelRequests {session}`` → ``{"requests": [...]}``: what a session's scripted model was
shown, step by step (messages, offered tools, tool mode, schema, kind, and the turn it belonged
to: ``backends.scripted.turn_snapshot``), to assert on prompts.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import anyio

from oamd.bridge.params import Params
from oamd.bridge.state import BridgeState, sessions
from oamd.errors import InvalidParams
from oamd.rpc import Deferred, Registry, Request, Result

__all__ = ["register"]


def sleep(req: Request) -> Deferred:
    ms = req.params.get("ms", 0)
    if isinstance(ms, bool) or not isinstance(ms, int | float) or not 0 <= ms <= 60_000:
        raise InvalidParams("'ms' must be a number from 0 to 60000.")

    async def work() -> dict[str, Any]:
        await anyio.sleep(ms / 1000)
        return {"slept": ms}

    return Deferred(work)


def model_requests(req: Request) -> Result:
    state: BridgeState = req.state
    session = sessions(state).get(Params(req.params).string("session"))
    recorded = getattr(session.model, "requests", None)
    if recorded is None or not getattr(session.model, "record", False):
        raise InvalidParams("The session's model does not record its requests.")
    turns = getattr(session.model, "turns", [])
    return Result(
        {
            "requests": [
                {**asdict(r), "turn": asdict(t) if t is not None else None}
                for r, t in zip(recorded, turns, strict=True)
            ]
        }
    )


def register(registry: Registry) -> None:
    registry.register("test/sleep", sleep)
    registry.register("test/modelRequests", model_requests)

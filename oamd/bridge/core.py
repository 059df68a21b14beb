"""Core methods (§5): ``initialize``, ``ping``, ``model/availability``, ``shutdown``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oamd.bridge.core_encode import encode_availability, encode_initialize
from oamd.bridge.params import Params
from oamd.bridge.state import BridgeState
from oamd.errors import InvalidParams
from oamd.limits import PROTOCOL_VERSION
from oamd.rpc import Deferred, Registry, Reply, Request, Result

__all__ = ["register"]


def _check_version(version: str | None) -> None:
    """The reference's rule: the first non-empty dot component must be the major version."""
    if version is None:
        return
    components = [c for c in version.split(".") if c]
    if not components or components[0] != PROTOCOL_VERSION.split(".", 1)[0]:
        raise InvalidParams(
            f"Unsupported protocol version '{version}'; this bridge speaks {PROTOCOL_VERSION}."
        )


def _with_availability(state: BridgeState, shape: Callable[[Any], dict[str, Any]]) -> Reply:
    """Answers at once when the system model's availability is known without I/O."""
    model = state.config.models
    known = model.cached_availability()
    if known is not None:
        return Result(shape(known))

    async def work() -> dict[str, Any]:
        return shape(await model.availability())

    return Deferred(work)


def register(registry: Registry) -> None:
    def initialize(req: Request) -> Reply:
        p = Params(req.params)
        p.opt_object("client")  # free-form, but an object
        # ``auth`` (the socket token) was checked by the connection's gate before this handler
        # runs; it is accepted here and dropped: never echoed, never logged
        _check_version(p.opt_string("protocolVersion"))
        state: BridgeState = req.state

        def result(availability: Any) -> dict[str, Any]:
            models = state.config.models.model_types()
            return encode_initialize(registry, models, state.config.max_sessions, availability)

        return _with_availability(state, result)

    def ping(req: Request) -> Result:
        return Result({})

    def model_availability(req: Request) -> Reply:
        return _with_availability(req.state, encode_availability)

    def shutdown(req: Request) -> Deferred:
        state: BridgeState = req.state
        # later requests fail -32023, after this reply (a notification has none to wait for)
        req.begin_shutdown()
        state.cancel_all_work()

        async def work() -> dict[str, Any]:
            await req.cancel_all()
            req.close_after_reply()
            return {}

        return Deferred(work)

    registry.register("initialize", initialize)
    registry.register("ping", ping)
    registry.register("model/availability", model_availability)
    registry.register("shutdown", shutdown)

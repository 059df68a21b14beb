"""``content/generate`` (§6): the adapter of the content service (``oamd.game.content``),
concurrent (a one-off turn)."""

from __future__ import annotations

from typing import Any

from oamd.agent.ports import TurnPeer
from oamd.bridge.driver import TurnDriver
from oamd.bridge.game.content import encode
from oamd.bridge.model_params import resolve_model
from oamd.bridge.params import Params
from oamd.bridge.session.params import parse_sampling
from oamd.bridge.state import BridgeState
from oamd.bridge.tool_params import parse_tools
from oamd.bridge.validate import compile_param_schema
from oamd.errors import InvalidParams
from oamd.game import content
from oamd.game.content import ContentRequest
from oamd.rpc import Deferred, Registry, Request

__all__ = ["register"]

KEYS = (
    "prompt",
    "schema",
    "instructions",
    "context",
    "tools",
    "toolTimeoutSeconds",
    "temperature",
    "model",
)


def generate(req: Request) -> Deferred:
    state: BridgeState = req.state
    p = Params(req.params)
    warnings = p.unknown(KEYS)
    prompt = p.string("prompt")
    if not p.has("schema"):
        raise InvalidParams("Missing required parameter 'schema'.")
    schema = compile_param_schema(p.get("schema"))
    warnings += schema.warnings
    tools, tool_warnings = parse_tools(p.get("tools"))
    warnings += tool_warnings
    timeout = p.opt_seconds("toolTimeoutSeconds")
    request = ContentRequest(
        prompt=prompt,
        schema=schema,
        instructions=p.opt_string("instructions"),
        context=p.get("context"),
        tools=tools,
        sampling=parse_sampling(p),
    )
    model, _ = resolve_model(state.config.models, p.get("model"), use=(req.method, req.id))
    driver = TurnDriver(
        req,
        {},
        stream=False,
        default_timeout=state.config.tool_timeout if timeout is None else timeout,
    )

    async def work() -> dict[str, Any]:
        generated = await content.generate(request, model, TurnPeer(driver.emit, driver.execute))
        return encode.encode_content(generated, warnings)

    return Deferred(work)


def register(registry: Registry) -> None:
    registry.register("content/generate", generate)

"""The turn dispatcher: runs one turn in the tool loop the model's capabilities call for.

It is the top floor of the turn: the vocabulary (``oamd.agent.turn_spec``) is below both loops, the
loops (``oamd.agent.native`` for models with a tool-call API, ``oamd.agent.envelope`` for
text-only ones) are below this module, so no import runs back up. Committing the result is the
caller's; a turn that fails raises ``TurnFailed`` (the loop's model error and the tool records
its run gathered). Each turn is logged at debug level (``turn``: its steps, tool calls, tokens,
time); each of its model steps by the loop (``oamd.agent.step_log``). A turn started where a
tracer is set (``oamd.agent.trace``) is traced: its trace runs as ``CURRENT_TRACE`` while the
turn does; one started while a trace is current (inside a ``TurnScope``) is part of that turn.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio

from oamd.agent.envelope import run_envelope_turn
from oamd.agent.events import TurnFailed, TurnResult
from oamd.agent.native import run_native_turn
from oamd.agent.ports import TurnPeer
from oamd.agent.trace import CURRENT_TRACE, TurnScope
from oamd.agent.turn_spec import TurnSpec
from oamd.errors import ModelError
from oamd.log import debug_enabled, get_logger

__all__ = ["run_turn"]

log = get_logger("oamd.agent")


async def run_turn(
    spec: TurnSpec,
    peer: TurnPeer,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> TurnResult:
    """Runs the turn; its events go to ``peer.emit``, its client tools to ``peer.execute``, and
    ``peer.pace`` (a streaming caller's, ``oamd.agent.stream``) is awaited after each text or
    partial event; failures are retried by ``spec.settings.retry`` through ``sleep``.

    Raises:
        TurnFailed: the turn failed after its retries (a ``ModelError``, with the tool records
            its failed run gathered).
        InvalidRequest: ``{"tool": name}`` names a tool the turn does not have (text-only models).
    """
    if CURRENT_TRACE.get() is not None:
        # part of a turn traced around it (a TurnScope): its steps are that turn's
        return await _run(spec, peer, sleep)
    with TurnScope(spec) as scope:
        result = scope.result = await _run(spec, peer, sleep)
    return result


async def _run(
    spec: TurnSpec, peer: TurnPeer, sleep: Callable[[float], Awaitable[None]]
) -> TurnResult:
    # the loop, the JSON constraint and the context budget all read the capabilities: a turn
    # planned before a server was probed would run on guesses (unconstrained JSON on llama.cpp)
    try:
        await spec.model.settle_capabilities()
    except ModelError as error:
        raise TurnFailed(error) from error  # before any step: nothing gathered
    started = time.perf_counter()
    if spec.model.capabilities.native_tools:
        result = await run_native_turn(spec, peer, sleep)
    else:
        result = await run_envelope_turn(spec, peer, sleep)
    if not debug_enabled():
        return result
    usage = result.usage
    log.debug(
        "turn",
        backend=spec.model.name,
        steps=[step.kind or "step" for step in result.steps],
        tool_calls=len(result.records),
        input_tokens=usage.input_tokens,
        cached_tokens=usage.cached_input_tokens,
        output_tokens=usage.output_tokens,
        total_ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return result

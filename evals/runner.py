"""Plays the eval scenarios through the bridge protocol against one model spec and scores them.

The daemon runs in this process over memory streams (``oamd.daemon.serve_stream``) with the spec's
backend as ``"system"``; an ``oamd.client.Client`` drives it exactly as an engine would, answering
``tool/call`` from the scenario fixtures. Turns stream (``"stream": true``), so each step's
latency is the time from its ``modelStep`` event to the next step, tool call or the response.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from evals.grounded import grounded_tool_output
from evals.scenarios import Line, Scenario, tool_output
from oamd.backends.base import LanguageModel
from oamd.client import Client, RpcError
from oamd.daemon import default_config, serve_stream
from oamd.transport import memory_stream_pair

__all__ = ["LineResult", "ScenarioResult", "StepClock", "run_scenario", "serve_model"]

TURN_TIMEOUT_SECONDS = 300.0
"""Longest one turn may take before the eval records it as failed (a slow CPU, a big model)."""


@dataclass
class LineResult:
    scenario: str
    line: str
    first_action: str | None
    right: bool | None
    """Whether the first action (and its arguments) was accepted; ``None`` for structured lines."""
    valid: bool
    """The turn succeeded (structured: its value validated)."""
    envelope_steps: int = 0
    """Decide and toolArguments steps, repairs included."""
    repairs: int = 0
    """Repairs of decide and toolArguments steps (each follows an invalid first try)."""
    structured_repairs: int = 0
    step_seconds: dict[str, list[float]] = field(default_factory=dict)
    turn_seconds: float = 0.0
    error: str | None = None


@dataclass
class ScenarioResult:
    name: str
    lines: list[LineResult] = field(default_factory=list)


class StepClock:
    """Times each model step from the ``session/event`` notifications of one request."""

    def __init__(self) -> None:
        self.request_id: Any = None
        self.current: tuple[str, float] | None = None
        self.seconds: dict[str, list[float]] = {}

    def _close(self, now: float) -> None:
        if self.current is not None:
            kind, started = self.current
            self.seconds.setdefault(kind, []).append(now - started)
            self.current = None

    def __call__(self, message: dict[str, Any]) -> None:
        now = time.monotonic()
        params = message.get("params") or {}
        if message.get("method") == "session/event" and params.get("requestId") == self.request_id:
            event = params.get("event") or {}
            if event.get("type") == "modelStep":
                self._close(now)
                step = event["step"]
                self.current = (step.get("kind") or "answer", now)
            elif event.get("type") == "toolCallStarted":
                self._close(now)
        else:
            calling = message.get("method") == "tool/call"
            answered = "method" not in message and message.get("id") == self.request_id
            if (calling and params.get("requestId") == self.request_id) or answered:
                self._close(now)


@asynccontextmanager
async def serve_model(model: LanguageModel, clock: StepClock) -> AsyncIterator[Client]:
    """A daemon with ``model`` as ``"system"``, and a client that answers the scenario tools
    (and those of the grounded sets' NPCs) and shows ``clock`` every message."""

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        call = params["call"]
        if "npc" in params and (found := grounded_tool_output(params["npc"], call)) is not None:
            return found  # an NPC of a grounded set
        return tool_output(call["name"], call.get("arguments") or {})

    config = default_config(model)
    ours, theirs = memory_stream_pair()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_stream(theirs, config))
        async with Client(ours, tool_handler=answer, on_message=clock) as client:
            await client.request("initialize", {"protocolVersion": "1.0"})
            yield client
        tg.cancel_scope.cancel()


def _matches(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    for key, want in expected.items():
        got = actual.get(key)
        if isinstance(want, int) and not isinstance(want, bool):
            if got != want:
                return False
        elif str(got).lower() != str(want).lower():
            return False
    return True


def _score(line: Line, result: dict[str, Any]) -> tuple[str, bool]:
    calls = result.get("toolCalls") or []
    if not calls:
        return "respond", "respond" in line.accepted
    call = calls[0]["call"]
    first = call["name"]
    right = first in line.accepted and (
        not line.arguments or _matches(line.arguments, call["arguments"])
    )
    return first, right


async def _turn(
    client: Client, clock: StepClock, session: str, line: Line, scenario: Scenario
) -> LineResult:
    params: dict[str, Any] = {"session": session, "prompt": line.text, "stream": True}
    if scenario.schema is not None:
        params["schema"] = scenario.schema
    started = time.monotonic()
    clock.seconds = {}
    clock.request_id = await client.start("session/respond", params)
    with anyio.move_on_after(TURN_TIMEOUT_SECONDS):
        reply = await client.wait(clock.request_id)
    elapsed = time.monotonic() - started
    result = LineResult(scenario.name, line.text, None, None, False, turn_seconds=elapsed)
    result.step_seconds = clock.seconds
    if "error" in reply:
        error = RpcError(**{k: reply["error"].get(k) for k in ("code", "message", "data")})
        result.error = f"{error.name or error.code}: {error.message}"
        return result
    value = reply["result"]
    steps = value.get("steps") or []
    envelope = [s for s in steps if s.get("kind") in ("decide", "toolArguments")]
    result.envelope_steps = len(envelope)
    result.repairs = sum(bool(s.get("isRepair")) for s in envelope)
    result.structured_repairs = sum(
        bool(s.get("isRepair")) for s in steps if s.get("kind") == "structured"
    )
    if scenario.schema is not None:
        result.valid = "structured" in value
    else:
        result.first_action, result.right = _score(line, value)
        result.valid = True
    return result


async def run_scenario(
    client: Client, clock: StepClock, scenario: Scenario, run: int
) -> ScenarioResult:
    """Plays every line of ``scenario``: in one session, or in a fresh session per line."""
    outcome = ScenarioResult(scenario.name)
    base = {
        "instructions": scenario.instructions,
        "tools": scenario.tools,
        "options": scenario.options,
    }
    session = f"{scenario.name}-{run}"
    if not scenario.fresh:
        await client.request("session/create", {"session": session, **base})
    for index, line in enumerate(scenario.lines):
        name = session
        if scenario.fresh:
            name = f"{session}-{index}"
            await client.request("session/create", {"session": name, **base})
        outcome.lines.append(await _turn(client, clock, name, line, scenario))
        if scenario.fresh:
            await client.request("session/delete", {"session": name})
    if not scenario.fresh:
        await client.request("session/delete", {"session": session})
    return outcome

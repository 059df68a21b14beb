"""The native tool-steering loop: one turn of a session on a model with a tool-call API.

Each model step offers the tools the policy allows (Apple's semantics: ``required``/``{tool}``
steer only the first step, budgets then disable tools so the model answers). Several calls of one
step run in parallel; records and ``toolOutput`` entries are kept in completion order. A failure
the turn's ``RetryPolicy`` retries repeats the whole attempt, only while no tool has run. Nothing
here touches the session: the turn's entries come back in ``TurnResult.entries`` for the caller
to commit. Each step is read by ``oamd.agent.step`` (timed, logged, traced, as the envelope
loop's are). Choosing this loop over the envelope loop is ``oamd.agent.run_turn``'s.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from oamd.agent.entries import (
    call_json,
    prompt_entry,
    response_entry,
    tool_calls_entry,
    tool_output_entry,
)
from oamd.agent.events import (
    PartialValue,
    Step,
    StepStarted,
    TextUpdated,
    ToolCall,
    ToolCompleted,
    ToolRecord,
    ToolStarted,
    TurnFailed,
    TurnResult,
    TurnUsage,
)
from oamd.agent.ports import TurnPeer
from oamd.agent.prompt import entries_to_messages, history_window, message_tokens
from oamd.agent.step import StepReading, read_step
from oamd.agent.tools import (
    RESPOND_DIRECTLY,
    RESPOND_DIRECTLY_DESCRIPTION,
    ToolDefinition,
    ToolOutput,
)
from oamd.agent.turn_spec import TurnSpec, new_call_id
from oamd.backends.base import (
    ChatMessage,
    GenerationRequest,
    ToolCallRequest,
    ToolSpec,
    estimate_tokens,
)
from oamd.errors import ModelError
from oamd.jsonvalue import JsonTextError, dumps_text, loads_embedded

__all__ = ["run_native_turn"]

BUDGET_EXHAUSTED = (
    "The tool budget for this turn is used up. Answer with the information you already have."
)
EXTRA_STEPS = 8
"""Steps a model may take after tools are disabled before the turn fails (a runaway guard)."""


async def run_native_turn(
    spec: TurnSpec, peer: TurnPeer, sleep: Callable[[float], Awaitable[None]]
) -> TurnResult:
    """Runs the turn on a model with a tool-call API; ``peer.pace`` is awaited after each text
    event (``oamd.agent.stream``).

    Raises:
        TurnFailed: the model failed, and the turn's ``RetryPolicy`` does not retry the failure,
            its attempts ran out, or a tool has already run.
    """
    state = _TurnState()
    return await spec.settings.retry.run(
        lambda: _Attempt(spec, peer, state).run(),
        sleep,
        may_retry=lambda: not state.tool_ran,
    )


@dataclass
class _TurnState:
    """What survives a retried attempt: the steps reported so far and the text already shown."""

    steps: list[Step] = field(default_factory=list)
    shown_text: str = ""
    tool_ran: bool = False
    usage: TurnUsage = field(default_factory=TurnUsage)


def _system_message(spec: TurnSpec) -> list[ChatMessage]:
    return [ChatMessage("system", spec.instructions)] if spec.instructions else []


class _Attempt:
    """One attempt at the turn: its entries and tool records (fresh each attempt), what the
    attempts share (``_TurnState``), and the engine's side (``TurnPeer``)."""

    def __init__(self, spec: TurnSpec, peer: TurnPeer, state: _TurnState) -> None:
        self.spec = spec
        self.peer = peer
        self.state = state
        self.entries: list[dict[str, Any]] = [prompt_entry(spec.prompt)]
        self.records: list[ToolRecord] = list(spec.carried_records)

    async def run(self) -> TurnResult:
        if self.spec.watch is not None:
            self.spec.watch(self.entries)
        try:
            return await self._steps()
        except ModelError as error:
            raise TurnFailed(error, self.records) from error  # with what the failed run gathered

    async def _steps(self) -> TurnResult:
        spec, state, emit = self.spec, self.state, self.peer.emit
        tool_names = [t.name for t in spec.tools]
        by_name = {t.name: t for t in spec.tools}
        rounds = calls = 0
        responded_directly = False
        history, history_tokens, trimmed = _fit_history(spec)
        system = _system_message(spec)
        fixed_tokens = history_tokens + message_tokens(system)
        for index in range(spec.policy.max_rounds + EXTRA_STEPS + 1):
            plan = spec.policy.step(tool_names, rounds, calls, responded_directly)
            step = Step(index, rounds, plan.mode, plan.enabled, trimmed)
            state.steps.append(step)
            emit(StepStarted(step))
            offered = [by_name[n] for n in plan.enabled]
            specs = [ToolSpec(t.name, t.description, t.schema.generation) for t in offered]
            if plan.offer_respond_directly:
                specs.append(
                    ToolSpec(
                        RESPOND_DIRECTLY,
                        RESPOND_DIRECTLY_DESCRIPTION,
                        {"type": "object", "properties": {}},
                    )
                )
            current = entries_to_messages(self.entries)
            request = GenerationRequest(
                messages=[*system, *history, *current],
                tools=specs,
                tool_mode=_tool_mode(plan.mode, spec, rounds),
                schema=spec.schema.generation if spec.schema else None,
                sampling=spec.settings.sampling,
                kind="structured" if spec.schema else "answer",
                estimated_input_tokens=fixed_tokens + message_tokens(current),
            )
            text, requested = await self._generate(request)
            if not requested:
                return self._finish(text)
            rounds += 1
            visible_calls: list[ToolCall] = []
            runnable: list[tuple[ToolCall, ToolDefinition]] = []
            instant: list[tuple[ToolCall, ToolOutput]] = []
            for req in requested:
                call = ToolCall(req.id or new_call_id(), req.name, req.arguments)
                if req.name == RESPOND_DIRECTLY and plan.offer_respond_directly:
                    responded_directly = True  # invisible: no record, event or entry
                    continue
                visible_calls.append(call)
                tool = by_name.get(req.name)
                if calls >= spec.policy.max_calls:
                    instant.append((call, ToolOutput.error(BUDGET_EXHAUSTED)))
                elif tool is None or req.name not in plan.enabled:
                    instant.append(
                        (call, ToolOutput.error(f"Tool '{req.name}' is not available right now."))
                    )
                else:
                    runnable.append((call, tool))
                calls += 1
            if visible_calls:
                self.entries.append(tool_calls_entry(_call_json(c) for c in visible_calls))
            for call, output in instant:
                self._record(call, output, 0.0, None)
            if runnable:
                state.tool_ran = True
                await self._run_calls(runnable)
        raise ModelError(
            "generation_failed", "The model kept calling tools after they were disabled."
        )

    async def _generate(self, request: GenerationRequest) -> tuple[str, list[ToolCallRequest]]:
        """The step's text and the tool calls it asks for, read by ``agent.step`` (timed,
        logged, traced); a retry is the whole attempt's (``run_native_turn``), not the step's."""
        spec, state, emit = self.spec, self.state, self.peer.emit
        requested: list[ToolCallRequest] = []
        shown = ""  # what this step has shown; an earlier step's text is replaced by its first

        def show(so_far: str) -> None:
            nonlocal shown
            if spec.schema is not None:
                value = _try_json(so_far)
                if value is not _INCOMPLETE:
                    emit(PartialValue(value))
                return
            if not shown and state.shown_text:
                emit(TextUpdated(so_far, so_far, is_reset=True))
            else:
                emit(TextUpdated(so_far[len(shown) :], so_far))
            shown = state.shown_text = so_far

        reading = StepReading(
            on_text=show,
            on_tool_call=requested.append,
            pace=self.peer.pace,
            estimate_usage=False,  # this loop counts what the backend reports, no estimate
        )
        text = await read_step(spec.model, request, state.usage, reading)
        return text, requested

    def _finish(self, text: str) -> TurnResult:
        spec, state, entries = self.spec, self.state, self.entries
        result = TurnResult(text=text, records=self.records, usage=state.usage, steps=state.steps)
        if spec.schema is not None:
            value = _try_json(text)
            if value is _INCOMPLETE:
                raise ModelError(
                    "generation_failed",
                    "The model's answer is not valid JSON; the turn asks for "
                    + _wanted_shape(spec.schema.source)
                    + ".",
                )
            value, problems = spec.schema.accept(value)
            if problems:
                # a backend that constrains decoding is trusted (as FoundationModels is): its
                # answers pass as generated; from any other backend a mismatch fails the turn
                if not spec.model.capabilities.constrained_json:
                    raise ModelError(
                        "generation_failed",
                        "The model's answer does not match the schema: " + "; ".join(problems[:3]),
                    )
                value = spec.schema.order(value)
            result.structured = value
            result.has_structured = True
            result.text = dumps_text(value)
            entries.append(response_entry(result.text, value))
        else:
            entries.append(response_entry(text))
        result.entries = entries
        return result

    def _record(
        self,
        call: ToolCall,
        output: ToolOutput,
        duration: float,
        follow_up: Callable[[], None] | None,
    ) -> None:
        record = ToolRecord(call, output, round(duration, 3))
        self.records.append(record)
        self.entries.append(tool_output_entry(call.id, call.name, output.kind, output.value))
        self.peer.emit(ToolCompleted(record))
        if follow_up is not None:
            follow_up()

    async def _run_calls(self, runnable: list[tuple[ToolCall, ToolDefinition]]) -> None:
        emit, execute = self.peer.emit, self.peer.execute

        async def run_one(call: ToolCall, tool: ToolDefinition) -> None:
            emit(ToolStarted(call, tool.execution))  # then the tool/call, before any await
            started = time.monotonic()
            if tool.local is not None:
                output, follow_up = await tool.local(call.arguments), None
            else:
                output, follow_up = await execute(call, tool)
            self._record(call, output, time.monotonic() - started, follow_up)

        if len(runnable) == 1:
            await run_one(*runnable[0])
            return
        async with anyio.create_task_group() as tg:
            for call, tool in runnable:
                tg.start_soon(run_one, call, tool)


def _fit_history(spec: TurnSpec) -> tuple[list[ChatMessage], int, int]:
    """The history messages this turn sends (each turn converted once in its life), their
    estimated tokens, and how many entries were trimmed before them."""
    budget = spec.model.capabilities.context_size - spec.settings.reserved_response_tokens
    fixed = estimate_tokens(spec.instructions or "") + estimate_tokens(spec.prompt) + 16
    window = history_window(spec.history, fixed, budget, trim=spec.settings.trim_history)
    return window.items, window.tokens, window.trimmed


def _tool_mode(mode: str, spec: TurnSpec, rounds: int) -> str:
    if mode == "disallowed":
        return "none"
    if mode == "required" and spec.policy.choice.mode == "tool" and rounds == 0:
        return spec.policy.choice.name or "required"
    return mode


_INCOMPLETE = object()


def _try_json(text: str) -> Any:
    try:
        return loads_embedded(text)
    except JsonTextError:
        return _INCOMPLETE


def _call_json(call: ToolCall) -> dict[str, Any]:
    return call_json(call.id, call.name, call.arguments)


def _wanted_shape(schema: dict[str, Any]) -> str:
    """What a schema turn asks for, in a few words for its error (an NPC's reply object, a
    decision's): whoever wrote the answer (a script, a prompt) learns which shape to give."""
    properties = schema.get("properties")
    if schema.get("type") == "object" and isinstance(properties, dict) and properties:
        names = ", ".join(f"'{name}'" for name in list(properties)[:8])
        return f"a JSON object with {names} (a scripted model answers it with a 'json' step)"
    return "a JSON value matching its schema (a scripted model answers it with a 'json' step)"

"""``session/*`` (§5): the adapters of sessions: each reads its params in the reference's order
(``oamd.bridge.session.params``), holds them against the connection's byte budget while queued, hands
the typed values to the ``Session`` (``respond``, ``compact``, the ``set_*`` methods) inside its
queue, and writes the wire result (``oamd.bridge.encode``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oamd.agent.envelope import prefill_system_text
from oamd.agent.history import History
from oamd.agent.ports import TurnPeer
from oamd.agent.queue import Operation
from oamd.agent.session import Session, SessionOptions
from oamd.agent.tools import RESPOND_DIRECTLY
from oamd.bridge.budget import params_size
from oamd.bridge.driver import TurnDriver
from oamd.bridge.model_params import resolve_model
from oamd.bridge.model_warning import system_model_warnings
from oamd.bridge.params import Params, check_object_id
from oamd.bridge.session import encode
from oamd.bridge.session.params import parse_policy_overrides, parse_session_options
from oamd.bridge.session.transcript import import_transcript
from oamd.bridge.state import BridgeState, sessions
from oamd.bridge.tool_params import parse_tools, tool_count_warning
from oamd.bridge.validate import compile_param_schema
from oamd.errors import InvalidParams, InvalidRequest, LimitReached, OamdError
from oamd.limits import MAX_TOOLS
from oamd.rpc import Deferred, Registry, Request, Result

__all__ = ["register"]

CREATE_KEYS = ("session", "instructions", "tools", "options", "history", "model")
RESPOND_KEYS = (
    "session",
    "prompt",
    "schema",
    "stream",
    "toolChoice",
    "maxToolRounds",
    "maxToolCalls",
    "enabledTools",
)


def _restore_tools(saved: list[dict[str, Any]]) -> tuple[list[Any], list[str]]:
    tools, warnings = [], []
    if len(saved) > MAX_TOOLS:
        raise LimitReached(
            "tools", MAX_TOOLS, f"'history.tools' has {len(saved)} tools; at most {MAX_TOOLS}."
        )
    for i, raw in enumerate(saved):
        try:
            parsed, _ = parse_tools([raw], f"history.tools[{i}]")
            tools.extend(parsed)
        except OamdError as exc:
            warnings.append(
                f"{raw.get('name', '?')}: could not be restored from 'history' ({exc.message}); "
                "send its definition in 'tools'."
            )
    return tools, warnings


def create(req: Request) -> Result:
    state: BridgeState = req.state
    store = sessions(state)
    p = Params(req.params)
    warnings = p.unknown(CREATE_KEYS)
    if p.has("session"):
        session_id = check_object_id(p.get("session"), "session")
        store.check_new(session_id)
    else:
        session_id = store.new_id()
    options, option_warnings = parse_session_options(
        p.opt_object("options"), SessionOptions(tool_timeout=state.config.tool_timeout)
    )
    warnings += option_warnings
    restored = import_transcript(p.get("history")) if p.has("history") else None
    if "instructions" in req.params or restored is None:
        instructions = p.opt_string("instructions")
    else:
        instructions = restored.instructions
    if "tools" in req.params or restored is None:
        tools, tool_warnings = parse_tools(p.get("tools"))
    else:
        tools, tool_warnings = _restore_tools(restored.tools)
    warnings += tool_warnings
    choice = options.policy.choice
    if choice.mode == "tool" and not any(t.name == choice.name for t in tools):
        raise InvalidParams(
            f"'options.toolChoice' names tool '{choice.name}', which is not in 'tools'."
        )
    warnings += tool_count_warning(len(tools))
    model, model_name = resolve_model(state.config.models, p.get("model"), use=(req.method, req.id))
    warnings += system_model_warnings(model, model_name)
    if any(t.name == RESPOND_DIRECTLY for t in tools):
        raise InvalidRequest(f"'{RESPOND_DIRECTLY}' is reserved for ToolChoice.explicit.")
    session = Session(
        id=session_id,
        model=model,
        model_name=model_name,
        instructions=instructions,
        tools=tools,
        options=options,
    )
    session.measure_settings(p.get("model"), p.get("options"))
    if restored is not None:
        session.history = History(restored.entries)
        session.set_context_note(restored.context_note)
    state.budget.check_room(session.held_bytes)
    store.add(session)
    _prefill_system_text(req, session)
    return Result(encode.encode_created(session_id, warnings))


def _prefill_system_text(req: Request, session: Session) -> None:
    """Background work, answered to nobody: the model evaluates the session's system text
    while the game gets on with its next request (text-only models with a prefix cache)."""
    if not session.model.capabilities.prefix_cache:
        return

    async def work() -> None:
        await prefill_system_text(
            session.model,
            session.effective_instructions,
            session.tools,
            user_label=session.options.turn.user_label,
            assistant_label=session.options.turn.assistant_label,
        )

    req.follow_up(work)


def respond(req: Request) -> Deferred:
    state: BridgeState = req.state
    p = Params(req.params)
    session = sessions(state).get(p.string("session"))
    prompt = p.string("prompt")
    stream = p.opt_bool("stream", False)
    overrides = parse_policy_overrides(p)
    warnings = p.unknown(RESPOND_KEYS)
    schema = None
    if p.has("schema"):
        schema = compile_param_schema(p.get("schema"))
        warnings += schema.warnings
    size = params_size(req.params)
    state.budget.check_room(size)
    driver = TurnDriver(
        req,
        {"session": session.id},
        stream=bool(stream),
        default_timeout=session.options.tool_timeout,
    )

    def room(added: int) -> None:
        state.budget.check_room(added - size)  # the params it held become the entries it keeps

    async def work(op: Operation) -> dict[str, Any]:
        result = await session.respond(
            op,
            prompt,
            overrides,
            schema,
            TurnPeer(driver.emit, driver.execute, driver.pace),
            room,
        )
        return encode.encode_turn(session.id, result, warnings)

    return Deferred.queued(state.budget.held(size, session.queue.schedule(work)))


def _session(req: Request) -> Session:
    state: BridgeState = req.state
    return sessions(state).get(Params(req.params).string("session"))


def cancel(req: Request) -> Result:
    session = _session(req)
    return Result(encode.encode_cancelled(session, session.queue.cancel_all()))


def delete(req: Request) -> Result:
    state: BridgeState = req.state
    session = _session(req)
    sessions(state).remove(session.id)
    session.queue.cancel_all()
    return Result(encode.encode_deleted(session))


def list_sessions(req: Request) -> Result:
    return Result(encode.encode_list(list(sessions(req.state))))


def transcript(req: Request) -> Result:
    return Result(encode.encode_transcript(_session(req)))


def _queued(
    req: Request,
    apply: Callable[[Session], None],
    result: Callable[[Session], dict[str, Any]] | None = None,
    *,
    adds: bool = True,
) -> Deferred:
    """``apply`` in the session's queue; an operation that ``adds`` holds its params from now,
    and is refused when they would take the connection over its budget (what it then sets is
    no larger than they are, so applying it never goes over)."""
    state: BridgeState = req.state
    session = _session(req)
    size = params_size(req.params) if adds else 0
    state.budget.check_room(size)

    async def work(op: Operation) -> dict[str, Any]:
        op.commit()
        apply(session)
        return (result or encode.encode_session)(session)

    return Deferred.queued(state.budget.held(size, session.queue.schedule(work)))


def reset(req: Request) -> Deferred:
    def apply(s: Session) -> None:
        s.history = History()
        s.set_context_note(None)

    return _queued(req, apply, adds=False)


def set_instructions(req: Request) -> Deferred:
    instructions = Params(req.params).opt_string("instructions")

    def apply(s: Session) -> None:
        s.set_instructions(instructions)

    return _queued(req, apply)


def set_context_note(req: Request) -> Deferred:
    note = Params(req.params).opt_string("note")

    def apply(s: Session) -> None:
        s.set_context_note(note)

    return _queued(req, apply)


def set_tools(req: Request) -> Deferred:
    _session(req)  # an unknown session is reported before bad tools, as the reference does
    p = Params(req.params)
    if not p.has("tools"):
        raise InvalidParams("Missing required parameter 'tools'.")
    tools, warnings = parse_tools(p.get("tools"))
    warnings += tool_count_warning(len(tools))
    if any(t.name == RESPOND_DIRECTLY for t in tools):
        raise InvalidRequest(f"'{RESPOND_DIRECTLY}' is reserved for ToolChoice.explicit.")

    def apply(s: Session) -> None:
        s.set_tools(tools)

    return _queued(req, apply, lambda s: encode.encode_tools_set(s, warnings))


def compact(req: Request) -> Deferred:
    state: BridgeState = req.state
    session = _session(req)
    p = Params(req.params)
    keep = p.opt_int("keepRecentTurns", 2, minimum=0)
    instructions = p.opt_string("summaryInstructions")
    size = params_size(instructions)  # what it holds while queued; without it, always taken
    state.budget.check_room(size)

    async def work(op: Operation) -> dict[str, Any]:
        summary = await session.compact(op, keep or 0, instructions)
        return encode.encode_compacted(session, summary)

    return Deferred.queued(state.budget.held(size, session.queue.schedule(work)))


def register(registry: Registry) -> None:
    registry.declare_notification("session/event")
    registry.declare_notification("tool/cancel")
    registry.declare_client_request("tool/call")
    registry.register("session/create", create)
    registry.register("session/respond", respond)
    registry.register("session/cancel", cancel)
    registry.register("session/delete", delete)
    registry.register("session/list", list_sessions)
    registry.register("session/transcript", transcript)
    registry.register("session/reset", reset)
    registry.register("session/setInstructions", set_instructions)
    registry.register("session/setContextNote", set_context_note)
    registry.register("session/setTools", set_tools)
    registry.register("session/compact", compact)

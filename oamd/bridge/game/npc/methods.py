"""``npc/*`` (§6): NPC dialogue turns queued per NPC, barks, saves, restores and updates."""

from __future__ import annotations

from functools import partial
from typing import Any

from oamd.agent.events import ToolCompleted, ToolStarted
from oamd.agent.footprint import json_size
from oamd.agent.history import History
from oamd.agent.queue import Operation
from oamd.bridge.budget import params_size
from oamd.bridge.driver import TurnDriver
from oamd.bridge.encode import encode_event
from oamd.bridge.game.npc import encode
from oamd.bridge.game.npc.params import (
    measure_npc,
    memory_to_wire,
    parse_memory,
    parse_npc_options,
    parse_persona,
    read_update,
)
from oamd.bridge.game.npc.state_params import read_save, restore_history
from oamd.bridge.game.stores import game
from oamd.bridge.model_params import resolve_model
from oamd.bridge.model_warning import system_model_warnings
from oamd.bridge.params import Params, check_object_id, shown
from oamd.bridge.state import BridgeState
from oamd.bridge.tool_params import parse_tool_choice, parse_tools, tool_count_warning
from oamd.errors import InvalidParams, OamdError
from oamd.game.npc.npc import Npc, check_tool_names, tool_names
from oamd.game.npc.persona import Memory, NpcOptions
from oamd.game.npc.reply import LineTracker
from oamd.game.npc.talk import TalkLine, TalkPeer
from oamd.game.npc.talk import talk as talk_npc
from oamd.game.npc.turns import bark_spec, prefill_first_turn, run_bark
from oamd.rpc import Deferred, Registry, Request, Result

__all__ = ["register"]

CREATE_KEYS = ("npc", "persona", "tools", "world", "memory", "options", "model")
RESTORE_KEYS = ("npc", "state", "tools", "world", "options", "model")
TALK_KEYS = ("npc", "line", "context", "stream", "toolChoice")
UPDATE_KEYS = ("npc", "persona", "options", "memory", "tools")


def _build(
    req: Request,
    *,
    npc_id: Any,
    persona_raw: Any,
    options_raw: Any,
    tools_raw: Any,
    world: Any,
    memory_raw: Any,
    model_raw: Any,
    warnings: list[str],
    prefix: str = "",
    options_path: str = "options",
    tools_path: str = "tools",
) -> Npc:
    """Validates everything, in the reference's order, before anything is created."""
    state: BridgeState = req.state
    store = game(req).npcs
    if npc_id is not None:
        npc_id = check_object_id(npc_id, "npc")
        store.check_new(npc_id)
    persona, persona_warnings = parse_persona(persona_raw, f"{prefix}persona")
    memory = parse_memory(memory_raw, f"{prefix}memory")
    if tools_raw is not None and not isinstance(tools_raw, list):
        raise InvalidParams(f"'{tools_path}' must be an array of tool definitions.")
    base = NpcOptions(tool_timeout_seconds=state.config.tool_timeout)
    options, option_warnings = parse_npc_options(options_raw, base, options_path)
    if world is not None and not isinstance(world, str):
        raise InvalidParams(f"Parameter 'world' must be a string; got {shown(world)}.")
    model, model_name = resolve_model(state.config.models, model_raw, use=(req.method, req.id))
    tools, tool_warnings = parse_tools(tools_raw, tools_path)
    world_state = game(req).worlds.get(world) if world is not None else None
    warnings += persona_warnings + option_warnings + tool_warnings
    warnings += system_model_warnings(model, model_name)
    names = tool_names(options, [t.name for t in tools], world is not None)
    check_tool_names(names, options)
    warnings += tool_count_warning(len(names))
    if npc_id is None:
        npc_id = store.new_id()
    npc = Npc(
        npc_id, persona, options, memory, tools, list(tools_raw or []), world, model, model_name
    )
    npc.world_state = world_state
    measure_npc(npc)
    npc.footprint.set("model", json_size(model_raw))  # a scripted model's steps
    return npc


def _insert(req: Request, npc: Npc, warnings: list[str]) -> Result:
    req.state.budget.check_room(npc.held_bytes)
    game(req).npcs.add(npc)
    if npc.world is not None:
        game(req).worlds.attach_npc(npc.world)
    names = tool_names(npc.options, [t.name for t in npc.tools], npc.world is not None)
    if npc.model.capabilities.prefix_cache:
        req.follow_up(partial(prefill_first_turn, npc))
    return Result(encode.encode_created(npc, names, warnings))


def create(req: Request) -> Result:
    p = Params(req.params)
    warnings = p.unknown(CREATE_KEYS)
    npc = _build(
        req,
        npc_id=p.get("npc"),
        persona_raw=p.get("persona"),
        options_raw=p.get("options"),
        tools_raw=p.get("tools"),
        world=p.get("world"),
        memory_raw=p.get("memory"),
        model_raw=p.get("model"),
        warnings=warnings,
    )
    return _insert(req, npc, warnings)


def _npc(req: Request) -> Npc:
    return game(req).npcs.get(Params(req.params).string("npc"))


def _npc_events(driver: TurnDriver, npc: Npc) -> tuple[LineTracker, Any]:
    """A tracker that streams the line as ``npc/event``s, and the turn's event sink."""

    def send(kind: str, value: str) -> None:
        if kind == "emotion":
            driver.send_event(encode.encode_emotion(value))
        elif kind == "delta":
            driver.send_event(encode.encode_line_delta(value))
        else:
            driver.send_event(encode.encode_line_reset(value))

    tracker = LineTracker(npc, send)

    def on_event(event: Any) -> None:
        if type(event) is ToolStarted or type(event) is ToolCompleted:
            driver.send_event(encode_event(event))  # the same toolCall* shapes as session/event
        else:
            tracker.on_event(event)

    return tracker, on_event


def talk(req: Request) -> Deferred:
    state: BridgeState = req.state
    p = Params(req.params)
    npc = _npc(req)
    line = p.string("line")
    context = p.get("context")
    stream = bool(p.opt_bool("stream", False))
    choice = parse_tool_choice(p.get("toolChoice"), "toolChoice")
    warnings = p.unknown(TALK_KEYS)
    driver = TurnDriver(
        req,
        {"npc": npc.id},
        stream=stream,
        event_method="npc/event",
        default_timeout=npc.options.tool_timeout_seconds,
    )
    tracker, on_event = _npc_events(driver, npc)
    peer = TalkPeer(on_event, driver.execute, tracker, driver.pace)
    size = params_size(req.params)
    state.budget.check_room(size)

    def room(kept: int) -> None:
        state.budget.check_room(kept - size)  # the params it held become what it keeps

    async def work(op: Operation) -> dict[str, Any]:
        talked = await talk_npc(npc, op, TalkLine(line, context, choice), peer, room)
        if talked.follow_up is not None:
            req.follow_up(talked.follow_up)
        return encode.encode_talk(npc, talked.outcome, warnings)

    return Deferred.queued(state.budget.held(size, npc.queue.schedule(work)))


def bark(req: Request) -> Deferred:
    state: BridgeState = req.state
    npc = _npc(req)
    situation = Params(req.params).get("situation")
    spec = bark_spec(npc, situation)
    size = params_size(situation)  # held while the bark runs; it keeps nothing
    state.budget.check_room(size)

    async def work() -> dict[str, Any]:
        return encode.encode_bark(npc, await run_bark(npc, spec))

    return Deferred.queued(state.budget.held(size, work))


def npc_state(req: Request) -> Result | Deferred:
    npc = _npc(req)
    if Params(req.params).opt_bool("settle", True) is False:
        return Result(encode.encode_state(npc))

    async def work(op: Operation) -> dict[str, Any]:
        op.commit()
        return encode.encode_state(npc)

    return Deferred.queued(npc.queue.schedule(work))


def restore(req: Request) -> Result:
    p = Params(req.params)
    warnings = p.unknown(RESTORE_KEYS)
    saved = read_save(p.get("state"))

    def pick(key: str) -> Any:
        return req.params[key] if key in req.params else saved.get(key)

    world = pick("world")
    if world is not None and "world" not in req.params:
        try:
            game(req).worlds.get(world)
        except OamdError:
            warnings.append(
                f"The saved world '{world}' does not exist; the NPC was restored without a world. "
                "Pass 'world' to attach one."
            )
            world = None
    npc = _build(
        req,
        npc_id=pick("npc"),
        persona_raw=saved.get("persona"),
        options_raw=pick("options"),
        tools_raw=pick("tools"),
        world=world,
        memory_raw=saved.get("memory"),
        model_raw=p.get("model"),
        warnings=warnings,
        prefix="state.",
        options_path="options" if "options" in req.params else "state.options",
        tools_path="tools" if "tools" in req.params else "state.tools",
    )
    restore_history(npc, saved)
    return _insert(req, npc, warnings)


def update(req: Request) -> Deferred:
    state: BridgeState = req.state
    npc = _npc(req)
    p = Params(req.params)
    warnings = p.unknown(UPDATE_KEYS)
    for key in ("persona", "options", "memory"):
        if p.has(key) and not isinstance(p.get(key), dict):
            raise InvalidParams(f"Parameter '{key}' must be an object.")
    engine_timeout = state.config.tool_timeout
    size = params_size(req.params)
    state.budget.check_room(size)

    async def work(op: Operation) -> dict[str, Any]:
        change = read_update(
            npc,
            p.get("persona") or {},
            p.get("options") or {},
            p.get("memory") or {},
            p.get("tools"),
            replace_tools=p.present("tools"),
            engine_timeout=engine_timeout,
        )
        state.budget.check_room(change.growth(npc) - size)
        op.commit()
        change.apply(npc)
        if npc.model.capabilities.prefix_cache:
            req.follow_up(partial(prefill_first_turn, npc))  # the system text may have changed
        return encode.encode_updated(npc, warnings + change.warnings)

    return Deferred.queued(state.budget.held(size, npc.queue.schedule(work)))


def reset(req: Request) -> Deferred:
    npc = _npc(req)
    clear_memory = bool(Params(req.params).opt_bool("clearMemory", False))

    async def work(op: Operation) -> dict[str, Any]:
        op.commit()
        npc.history = History()
        if clear_memory:
            fresh = Memory()
            npc.set_memory(fresh, npc.footprint.growth("memory", json_size(memory_to_wire(fresh))))
        return encode.encode_reset(npc)

    return Deferred.queued(npc.queue.schedule(work))


def cancel(req: Request) -> Result:
    npc = _npc(req)
    return Result(encode.encode_cancelled(npc, npc.queue.cancel_all()))


def delete(req: Request) -> Result:
    npc = _npc(req)
    game(req).npcs.remove(npc.id)
    npc.queue.cancel_all()
    if npc.world is not None:
        game(req).worlds.detach_npc(npc.world)
    return Result(encode.encode_deleted(npc))


def list_npcs(req: Request) -> Result:
    return Result(encode.encode_list(list(game(req).npcs)))


def register(registry: Registry) -> None:
    registry.declare_notification("npc/event")
    for name, handler in (
        ("npc/create", create),
        ("npc/talk", talk),
        ("npc/bark", bark),
        ("npc/state", npc_state),
        ("npc/restore", restore),
        ("npc/update", update),
        ("npc/reset", reset),
        ("npc/cancel", cancel),
        ("npc/delete", delete),
        ("npc/list", list_npcs),
    ):
        registry.register(name, handler)

"""Bridge: the typed API over ``Client`` -- what a Python host (a game, a tool, a test) writes.

It owns the host's client tools (``@bridge.tool``), answers the daemon's ``tool/call`` with them,
turns each method's result into a pydantic model (``_results``), and hands out handles for the
objects the daemon keeps: ``Session``, ``Npc``, ``World``. Everything goes over one ``Client``
(``bridge.client``), which stays usable for anything the typed API does not cover::

    async with Bridge.stdio() as bridge:
        @bridge.tool("open_gate", "Open a named gate.", GATE_SCHEMA)
        async def open_gate(args):
            return {"opened": True}

        guard = await bridge.create_session(tools=["open_gate"])
        reply = await guard.respond("Open the north gate!", on_text=lambda d: print(d, end=""))

Every protocol method has a typed call here or on a handle (``decide``, ``decide_many`` and
``generate`` come from ``_model_requests``). Its keywords are the wire's members under snake_case
names (``tool_choice`` is ``toolChoice``); there is no catch-all, so a misspelt keyword raises
``TypeError`` before anything is sent. Each returns a model from ``_results`` /
``_game_results`` (or a handle built from one).

Timeouts: every typed call takes ``timeout=`` (seconds) and raises ``TimeoutError`` past it. A
timed-out turn (``Session.respond``, ``Session.compact``, ``Npc.talk``) is also cancelled in the
daemon with ``session/cancel`` / ``npc/cancel``, sent as a notification: the protocol cancels a
session's or an NPC's whole queue, not one request, so turns queued behind it on that object end
too (``cancelled``). Any other request only stops waiting (its late answer is dropped): it is
either answered at once, or, like ``decide``, ``generate`` and ``bark``, has no cancel.

Errors are the client's: ``RpcError`` (an error response, ``exc.name`` is its ``data.code``) and
``ConnectionClosed``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from pydantic import BaseModel

from oamd.client._client import Client
from oamd.client._connect import connect_stdio, connect_tcp, connect_unix
from oamd.client._events import (
    NpcEventNotification,
    SessionEventNotification,
    ToolCancel,
    WorldChange,
    typed_handler,
)
from oamd.client._game_results import (
    NpcCreateResult,
    NpcListResult,
    WorldCreateResult,
    WorldListResult,
)
from oamd.client._handshake import CLIENT_NAME
from oamd.client._handshake import initialize as send_initialize
from oamd.client._model_requests import ModelRequests
from oamd.client._npc import Npc
from oamd.client._params import present
from oamd.client._results import (
    Availability,
    InitializeResult,
    SchemaValidateResult,
    SessionCreateResult,
    SessionListResult,
    ToolsValidateResult,
)
from oamd.client._session import Session
from oamd.client._tools import ToolBox, ToolFunction, Tools
from oamd.client._world import World

__all__ = ["NOTIFICATION_MODELS", "Bridge"]


NOTIFICATION_MODELS: dict[str, type[BaseModel]] = {
    "session/event": SessionEventNotification,
    "npc/event": NpcEventNotification,
    "world/changed": WorldChange,
    "tool/cancel": ToolCancel,
}
"""What ``Bridge.on`` hands a handler of each notification the protocol has."""


class Bridge(ModelRequests):
    """A typed connection to a bridge: ``Bridge.stdio()``, ``Bridge.unix(path)``,
    ``Bridge.tcp(host, port)``, or ``Bridge(client)`` over a client you opened.

    A bridge answers its client's ``tool/call`` requests with the tools registered here (it
    replaces the client's ``tool_handler``).
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self.tools = ToolBox()
        self.info: InitializeResult | None = None
        """The ``initialize`` result, once initialized (the factories do it)."""
        client.tool_handler = self.tools.answer

    # ---- opening -----------------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def stdio(
        cls,
        *args: str,
        model: str | None = None,
        argv: Sequence[str] | None = None,
        client_name: str = CLIENT_NAME,
        **client_kwargs: Any,
    ) -> AsyncIterator[Bridge]:
        """Spawns ``oamd stdio`` with ``args`` and ``--model model`` (a spec, e.g. ``"llamacpp"``;
        without one the daemon reads ``$OAMD_MODEL``), or the command ``argv``, and initializes.
        ``info.model`` then says whether that model runs, and how to fix it when not.

        Raises:
            ValueError: ``argv`` came with ``args`` or ``model`` (it is the whole command).
            RpcError: ``initialize`` was refused.
            ConnectionClosed: the daemon exited first; the message quotes its last stderr lines.
        """
        daemon_args = [*args, *(["--model", model] if model is not None else [])]
        async with connect_stdio(argv, args=daemon_args, **client_kwargs) as client:
            bridge = cls(client)
            await bridge.initialize(client_name)
            yield bridge

    @classmethod
    @asynccontextmanager
    async def unix(
        cls, path: str, *, token: str | None = None, **client_kwargs: Any
    ) -> AsyncIterator[Bridge]:
        """Connects to ``oamd serve --unix PATH`` (``@name``: ``--abstract name``); a same-user
        peer may leave ``token`` out.

        Raises:
            OSError: nothing listens there.
            RpcError: ``initialize`` was refused (token missing or wrong).
        """
        async with connect_unix(path, token=token, **client_kwargs) as client:
            yield cls._initialized(client)

    @classmethod
    @asynccontextmanager
    async def tcp(
        cls, host: str, port: int, *, token: str | None = None, **client_kwargs: Any
    ) -> AsyncIterator[Bridge]:
        """Connects to ``oamd serve --tcp HOST:PORT`` with its ``token``.

        Raises:
            OSError: nothing listens there.
            RpcError: ``initialize`` was refused (token missing or wrong).
        """
        async with connect_tcp(host, port, token=token, **client_kwargs) as client:
            yield cls._initialized(client)

    @classmethod
    def _initialized(cls, client: Client) -> Bridge:
        bridge = cls(client)
        initialized = getattr(client, "initialized", None)  # None with initialize=False
        if initialized is not None:
            bridge.info = InitializeResult.model_validate(initialized)
        return bridge

    # ---- the bridge itself -------------------------------------------------------------------

    async def initialize(
        self, client_name: str = CLIENT_NAME, *, timeout: float | None = None
    ) -> InitializeResult:
        """Introduces the client; returns (and keeps as ``info``) the server and its model."""
        result = await send_initialize(self.client, client_name, timeout=timeout)
        self.info = InitializeResult.model_validate(result)
        return self.info

    async def availability(self, *, timeout: float | None = None) -> Availability:
        """Whether the ``"system"`` model can run now, and how to fix it when not."""
        return Availability.model_validate(
            await self.client.request("model/availability", timeout=timeout)
        )

    async def ping(self, *, timeout: float | None = None) -> None:
        await self.client.request("ping", timeout=timeout)

    async def shutdown(self, *, timeout: float | None = None) -> None:
        """Ends this connection's work: running turns are cancelled, the daemon closes it."""
        await self.client.request("shutdown", timeout=timeout)

    async def validate_schema(
        self, schema: dict[str, Any], *, name: str | None = None, timeout: float | None = None
    ) -> SchemaValidateResult:
        """What the daemon makes of ``schema`` (``schema/validate``): its warnings and the schema
        the model is constrained by; ``name`` titles it (default ``Response``).

        Raises:
            RpcError: ``invalid_schema`` naming what is wrong.
        """
        params = present(schema=schema, name=name)
        result = await self.client.request("schema/validate", params, timeout=timeout)
        return SchemaValidateResult.model_validate(result)

    async def validate_tools(
        self, tools: Tools | None = None, *, timeout: float | None = None
    ) -> ToolsValidateResult:
        """How the daemon reads ``tools`` (``tools/validate``; default: every registered tool).

        Raises:
            RpcError: an invalid definition, named by its index.
        """
        params = {"tools": self.tools.definitions(tools)}
        result = await self.client.request("tools/validate", params, timeout=timeout)
        return ToolsValidateResult.model_validate(result)

    # ---- notifications -----------------------------------------------------------------------

    def on(self, method: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Calls ``handler`` with every notification ``method`` from now on, as its model
        (``NOTIFICATION_MODELS``: ``world/changed`` → ``WorldChange``, ``session/event`` →
        ``SessionEventNotification``…; the ``params`` dict for a method it does not know);
        returns the function that removes it. Plain or ``async def``, as for
        ``Client.on_notification``; one that raises costs that message only. Per object:
        ``Session.on_event``, ``Npc.on_event``, ``World.subscribe``."""
        model = NOTIFICATION_MODELS.get(method)
        typed = handler if model is None else typed_handler(handler, model)
        return self.client.on_notification(method, typed)

    # ---- client tools ------------------------------------------------------------------------

    def tool(
        self,
        name: str | None = None,
        description: str | None = None,
        parameters: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Callable[[ToolFunction], ToolFunction]:
        """Registers the decorated function as the client tool ``name`` (default: its name).

        ``description`` defaults to the function's docstring, ``parameters`` (the arguments' JSON
        Schema) to none. The function receives the call's arguments, and a ``ToolContext`` if it
        takes a second parameter; sync or async, it returns the output (text or any JSON), or
        raises ``ToolError`` for a failure the model should read. A sync function runs on the
        event loop: keep it quick.
        """

        def register(handler: ToolFunction) -> ToolFunction:
            text = description if description is not None else (handler.__doc__ or "").strip()
            tool_name = name or handler.__name__
            self.tools.add(tool_name, handler, text, parameters, timeout=timeout)
            return handler

        return register

    # ---- what the daemon keeps ---------------------------------------------------------------

    async def create_session(
        self,
        *,
        session: str | None = None,
        instructions: str | None = None,
        tools: Tools | None = None,
        options: dict[str, Any] | None = None,
        model: str | dict[str, Any] | None = None,
        history: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Session:
        """Creates a session (``session/create``): ``tools`` names registered tools (or gives
        definitions), ``model`` is ``"system"`` (the daemon's) or a model spec such as
        ``{"type": "scripted", "steps": […]}``, ``history`` a saved transcript.

        Raises:
            RpcError: e.g. ``session_exists``, ``invalid_params`` naming the member.
        """
        params = present(
            session=session,
            instructions=instructions,
            tools=self.tools.definitions(tools) if tools is not None else None,
            options=options,
            model=model,
            history=history,
        )
        result = await self.client.request("session/create", params, timeout=timeout)
        created = SessionCreateResult.model_validate(result)
        return Session(self, created.session, created.warnings)

    async def list_sessions(self, *, timeout: float | None = None) -> SessionListResult:
        """This connection's sessions (``session/list``), in creation order."""
        return SessionListResult.model_validate(
            await self.client.request("session/list", timeout=timeout)
        )

    async def create_npc(
        self,
        persona: dict[str, Any],
        *,
        npc: str | None = None,
        tools: Tools | None = None,
        world: World | str | None = None,
        memory: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        model: str | dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Npc:
        """Creates an NPC (``npc/create``) from ``persona`` (``name``, ``role``, …); with a
        ``world`` it reads and writes that world through its own tools."""
        params = present(
            npc=npc,
            persona=persona,
            tools=self.tools.definitions(tools) if tools is not None else None,
            world=world.id if isinstance(world, World) else world,
            memory=memory,
            options=options,
            model=model,
        )
        result = await self.client.request("npc/create", params, timeout=timeout)
        created = NpcCreateResult.model_validate(result)
        return Npc(self, created.npc, created.tools, created.warnings)

    async def restore_npc(
        self,
        state: dict[str, Any],
        *,
        npc: str | None = None,
        tools: Tools | None = None,
        options: dict[str, Any] | None = None,
        world: World | str | None = None,
        model: str | dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Npc:
        """Brings back an NPC saved by ``Npc.state()`` (``npc/restore``) under its saved id, or
        ``npc``; ``tools``, ``options`` and ``world`` replace what was saved, and ``model`` is
        not saved (without one the NPC runs on the daemon's).

        Raises:
            RpcError: e.g. ``npc_exists``, ``invalid_params`` naming the member of ``state``.
        """
        params = present(
            state=state,
            npc=npc,
            tools=self.tools.definitions(tools) if tools is not None else None,
            options=options,
            world=world.id if isinstance(world, World) else world,
            model=model,
        )
        restored = NpcCreateResult.model_validate(
            await self.client.request("npc/restore", params, timeout=timeout)
        )
        return Npc(self, restored.npc, restored.tools, restored.warnings)

    async def list_npcs(self, *, timeout: float | None = None) -> NpcListResult:
        """This connection's NPCs (``npc/list``), in creation order."""
        return NpcListResult.model_validate(await self.client.request("npc/list", timeout=timeout))

    async def create_world(
        self,
        state: dict[str, Any] | None = None,
        *,
        world: str | None = None,
        timeout: float | None = None,
    ) -> World:
        """Creates a world document with ``state`` as its root (``world/create``)."""
        result = await self.client.request(
            "world/create", present(world=world, state=state), timeout=timeout
        )
        created = WorldCreateResult.model_validate(result)
        return World(self, created.world, created.version)

    async def list_worlds(self, *, timeout: float | None = None) -> WorldListResult:
        """This connection's worlds (``world/list``), with their subscriptions."""
        return WorldListResult.model_validate(
            await self.client.request("world/list", timeout=timeout)
        )

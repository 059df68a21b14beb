"""The inspector against what a hostile engine or page sends: a request id with a lone surrogate
(echoed exactly, by design) gives the same turn whether or not a page watches, and every view
that shows it answers 200; a tracer that raises never reaches the protocol; request heads are
bounded as docs/INSPECTOR.md says."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import ByteStream
from conftest import memory_daemon

from oamd.agent.trace import TURN_TRACER
from oamd.daemon import default_config, serve_stream
from oamd.inspector import Inspector
from oamd.limits import INSPECT_MAX_HEAD_BYTES
from oamd.rpc.observe import CONNECTION_WATCH
from oamd.transport import memory_stream_pair

pytestmark = pytest.mark.anyio

LONE_ID = "\ud800turn"
"""A request id holding a lone surrogate: the daemon echoes it exactly."""
SCRIPT = {"type": "scripted", "steps": [{"text": "The well is dry."}]}


class RawPeer:
    """The engine's side of a daemon over memory streams: raw lines in, parsed messages out
    (``json``, which reads lone surrogate escapes as the engine sent them)."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self._buffer = b""

    async def send(self, line: str) -> None:
        await self.stream.send(line.encode() + b"\n")

    async def reply_to(self, request_id: Any) -> dict[str, Any]:
        """The next message answering ``request_id`` (notifications before it are dropped)."""
        with anyio.fail_after(10):
            while True:
                while b"\n" not in self._buffer:
                    self._buffer += await self.stream.receive()
                line, self._buffer = self._buffer.split(b"\n", 1)
                message = json.loads(line)
                if "method" not in message and message.get("id") == request_id:
                    return message


def request_line(request_id: str, method: str, params: dict[str, Any]) -> str:
    """A request line whose id is written with ASCII escapes (a lone surrogate as ``\\ud800``)."""
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


@asynccontextmanager
async def raw_daemon(inspector: Inspector | None) -> AsyncIterator[RawPeer]:
    config = default_config(test_methods=True)
    ours, theirs = memory_stream_pair()

    async def serve(task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await serve_stream(theirs, config)

    async with ours, anyio.create_task_group() as tg:
        if inspector is None:
            tg.start_soon(serve)
        else:
            tg.start_soon(inspector.run_beside, serve)
        peer = RawPeer(ours)
        await peer.send(request_line("init", "initialize", {"protocolVersion": "1.0"}))
        await peer.reply_to("init")
        yield peer
        tg.cancel_scope.cancel()


async def lone_surrogate_turn(peer: RawPeer) -> dict[str, Any]:
    await peer.send(request_line("c", "session/create", {"session": "s", "model": SCRIPT}))
    assert "result" in await peer.reply_to("c")
    await peer.send(request_line(LONE_ID, "session/respond", {"session": "s", "prompt": "Water?"}))
    return await peer.reply_to(LONE_ID)


def inspector_for(tmp_path) -> tuple[Inspector, str]:
    tmp_path.mkdir()
    inspector = Inspector("127.0.0.1:0", transport="stdio")
    inspector.use_token_file(str(tmp_path / "token"))
    return inspector, (tmp_path / "token").read_text().strip()


async def test_a_lone_surrogate_id_gives_the_same_turn_watched_or_not_and_its_view_answers(
    tmp_path,
):
    async with raw_daemon(None) as peer:
        unwatched = await lone_surrogate_turn(peer)
    assert unwatched["id"] == LONE_ID and unwatched["result"]["text"] == "The well is dry."

    # a page reading the event stream: the turn's events carry the id
    inspector, token = inspector_for(tmp_path / "page")
    async with (
        raw_daemon(inspector) as peer,
        httpx.AsyncClient(base_url=inspector.url, params={"token": token}) as http,
    ):
        with anyio.fail_after(10):
            async with http.stream("GET", "/api/events") as events:
                lines = events.aiter_lines()
                async for line in lines:
                    if line == "event: hello":
                        break
                paged = await lone_surrogate_turn(peer)
                async for line in lines:
                    if line == "event: turn":
                        event = json.loads((await anext(lines)).removeprefix("data: "))
                        break
        daemon = (await http.get("/api/daemon")).json()
        (conn,) = daemon["connections"]
        view = await http.get(f"/api/connections/{conn['id']}/sessions/s")
        (summary,) = view.json()["turns"]
        detail = await http.get(f"/api/connections/{conn['id']}/turns/{summary['id']}")
    assert paged == unwatched
    assert event["requestId"] == LONE_ID
    assert view.status_code == 200 and summary["requestId"] == LONE_ID
    assert detail.status_code == 200 and detail.json()["requestId"] == LONE_ID

    # an API poller alone (no event stream)
    inspector, token = inspector_for(tmp_path / "poller")
    async with (
        raw_daemon(inspector) as peer,
        httpx.AsyncClient(base_url=inspector.url, params={"token": token}) as http,
    ):
        polled = await lone_surrogate_turn(peer)
        (conn,) = (await http.get("/api/daemon")).json()["connections"]
        view = await http.get(f"/api/connections/{conn['id']}/sessions/s")
    assert polled == unwatched
    assert view.status_code == 200, view.text
    assert view.json()["turns"][0]["requestId"] == LONE_ID


class RaisingTrace:
    def step(self, figures: Any) -> None:
        raise RuntimeError("a tracer's step failed")

    def finished(self, result: Any, error: BaseException | None) -> None:
        raise RuntimeError("a tracer's finished failed")


class RaisingTracer:
    def __init__(self, *, at_begin: bool) -> None:
        self.at_begin = at_begin

    def begin(self, spec: Any) -> RaisingTrace:
        if self.at_begin:
            raise RuntimeError("a tracer's begin failed")
        return RaisingTrace()


class RaisingWorldWatch:
    def opened(self, conn: Any) -> None:
        conn.state.world_watch = self.changed

    def closed(self, conn: Any) -> None:
        pass

    def changed(self, world_id: str, changes: Any) -> None:
        raise RuntimeError("a world watch failed")


async def traced_turns() -> list[Any]:
    """A tool turn and a world write, as the protocol answers them (durations left out)."""
    tool = {"name": "look", "description": "Looks.", "parameters": {"type": "object"}}
    script = {
        "type": "scripted",
        "steps": [
            {"toolCalls": [{"id": "c1", "name": "look", "arguments": {}}]},
            {"text": "A jar."},
        ],
    }
    async with memory_daemon() as client:
        client.tool_handler = _answer("a jar")
        await client.request("session/create", {"session": "s", "model": script, "tools": [tool]})
        with anyio.fail_after(10):
            turn = await client.request("session/respond", {"session": "s", "prompt": "What?"})
        for call in turn["toolCalls"]:
            call.pop("durationSeconds")
        await client.request("world/create", {"world": "w", "state": {"gold": 1}})
        written = await client.request("world/set", {"world": "w", "path": "gold", "value": 2})
    return [turn, written]


def _answer(output: Any):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": output}

    return handler


@pytest.mark.parametrize("at_begin", [True, False], ids=["begin raises", "step+finished raise"])
async def test_a_tracer_or_watch_that_raises_never_changes_what_the_protocol_answers(at_begin):
    unwatched = await traced_turns()
    tracer = TURN_TRACER.set(RaisingTracer(at_begin=at_begin))
    watch = CONNECTION_WATCH.set(RaisingWorldWatch())
    try:
        watched = await traced_turns()
    finally:
        CONNECTION_WATCH.reset(watch)
        TURN_TRACER.reset(tracer)
    assert watched == unwatched


HEAD_LIMIT = 16 * 1024
"""The request head bound docs/INSPECTOR.md states (``INSPECT_MAX_HEAD_BYTES``)."""


def head_of(size: int) -> bytes:
    """A GET head (request line, headers, blank line) of exactly ``size`` bytes."""
    start = b"GET /page.js HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
    end = b"\r\n\r\n"
    return start + b"p" * (size - len(start) - len(end)) + end


async def status_of(inspector: Inspector, data: bytes, *, piece: int = 0) -> int:
    """The status the inspector answers ``data`` with (sent whole, or ``piece`` bytes a write)."""

    async def send_all(stream: ByteStream) -> None:
        step = piece or len(data)
        with contextlib.suppress(anyio.BrokenResourceError, OSError):  # refused, and closed
            for at in range(0, len(data), step):
                await stream.send(data[at : at + step])

    with anyio.fail_after(10):
        async with (
            await anyio.connect_tcp(inspector.host, inspector.port) as stream,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(send_all, stream)
            answer = b""
            while b"\r\n" not in answer:
                answer += await stream.receive()
    return int(answer.split(b" ", 2)[1])


@asynccontextmanager
async def page_server(tmp_path) -> AsyncIterator[Inspector]:
    inspector, _ = inspector_for(tmp_path)
    async with anyio.create_task_group() as tg:
        await tg.start(inspector.run)
        yield inspector
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("piece", [0, 1000], ids=["one write", "in pieces"])
async def test_a_request_head_is_served_up_to_the_documented_bound_and_431_past_it(tmp_path, piece):
    assert INSPECT_MAX_HEAD_BYTES == HEAD_LIMIT
    async with page_server(tmp_path / "p") as inspector:
        at_limit = await status_of(inspector, head_of(HEAD_LIMIT), piece=piece)
        past = await status_of(inspector, head_of(HEAD_LIMIT + 1), piece=piece)
        far_past = await status_of(inspector, head_of(64 * 1024 - 1), piece=piece)
        after = await status_of(inspector, head_of(200))
    assert (at_limit, past, far_past, after) == (200, 431, 431, 200)

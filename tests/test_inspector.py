"""The live inspector (``--inspect``), driven through its HTTP API against a daemon served in this
process: what it shows of sessions, NPCs, worlds and each turn's steps; that what it keeps is
bounded; that its token and loopback rules hold; that nothing is recorded without it; and that a
page reading its event stream slowly is dropped while the protocol keeps answering."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import h11
import httpx
import orjson
import pytest
from conftest import memory_daemon, recording

import oamd.agent.step_log
from oamd.agent.trace import StepFigures
from oamd.backends.base import (
    Availability,
    LanguageModel,
    ModelCapabilities,
    TextDelta,
    Usage,
)
from oamd.client import Client
from oamd.daemon import default_config, serve_stream
from oamd.inspector import Inspector, bind_loopback
from oamd.limits import INSPECT_MESSAGE_CHARS, INSPECT_PAGE_QUEUE_EVENTS, INSPECT_TURNS_KEPT
from oamd.transport import memory_stream_pair
from oamd.transport.sockets import EndpointError

pytestmark = pytest.mark.anyio

LOOK = {
    "name": "look",
    "description": "Looks at something.",
    "parameters": {
        "type": "object",
        "properties": {"thing": {"type": "string"}},
        "required": ["thing"],
    },
}
TOOL_TURN = {
    "type": "scripted",
    "steps": [
        {"toolCalls": [{"name": "look", "arguments": {"thing": "jar"}}]},
        {"text": "A jar of pickled turnips."},
    ],
}
NPC_LINE = {"emotion": "happy", "line": "Hi.", "player_options": [], "ends_conversation": False}


@dataclass
class Inspected:
    client: Client
    inspector: Inspector
    http: httpx.AsyncClient
    token: str

    async def get(self, path: str) -> Any:
        reply = await self.http.get(f"/api/{path}")
        assert reply.status_code == 200, reply.text
        return reply.json()


@asynccontextmanager
async def inspected_daemon(
    tmp_path, system_model: LanguageModel | None = None
) -> AsyncIterator[Inspected]:
    """A daemon over memory streams with an inspector beside it, as ``oamd stdio --inspect``."""
    config = default_config(system_model, test_methods=True)
    inspector = Inspector("127.0.0.1:0", transport="stdio")
    inspector.use_token_file(str(tmp_path / "token"))
    token = (tmp_path / "token").read_text().strip()
    ours, theirs = memory_stream_pair()

    async def serve(task_status: Any) -> None:
        task_status.started()
        await serve_stream(theirs, config)

    async with anyio.create_task_group() as tg:
        tg.start_soon(inspector.run_beside, serve)
        async with (
            Client(ours, **recording()) as client,
            httpx.AsyncClient(base_url=inspector.url, params={"token": token}) as http,
        ):
            await client.request("initialize", {"protocolVersion": "1.0"})
            yield Inspected(client, inspector, http, token)
        tg.cancel_scope.cancel()


async def test_a_sessions_turn_shows_its_prompt_messages_raw_output_tool_calls_and_figures(
    tmp_path,
):
    async with inspected_daemon(tmp_path) as d:
        d.client.tool_handler = _answer("a jar")
        await d.client.request(
            "session/create",
            {
                "session": "s1",
                "instructions": "You are a shopkeeper.",
                "tools": [LOOK],
                "model": TOOL_TURN,
            },
        )
        with anyio.fail_after(5):
            await d.client.request("session/respond", {"session": "s1", "prompt": "What is that?"})
        (conn,) = (await d.get("daemon"))["connections"]
        listing = await d.get(f"connections/{conn['id']}")
        (session,) = listing["sessions"]
        (summary,) = (await d.get(f"connections/{conn['id']}/sessions/s1"))["turns"]
        turn = await d.get(f"connections/{conn['id']}/turns/{summary['id']}")
    assert session["id"] == "s1" and session["turnCount"] == 1 and session["busy"] is False
    assert session["queued"] == 0 and session["tools"] == ["look"]
    assert summary["stepCount"] == 2 and summary["toolCount"] == 1
    assert [s["kind"] for s in summary["steps"]] == ["answer", "answer"]
    assert "messages" not in summary["steps"][0]  # a listing carries no prompts
    assert turn["status"] == "done" and turn["prompt"] == "What is that?"
    assert turn["method"] == "session/respond" and turn["text"] == "A jar of pickled turnips."
    (tool,) = turn["tools"]
    assert tool["name"] == "look" and tool["arguments"] == {"thing": "jar"}
    assert tool["output"] == "a jar" and tool["durationMs"] >= 0
    first, second = turn["steps"]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["messages"][0]["content"].startswith("You are a shopkeeper.")
    assert first["messages"][1]["content"] == "What is that?"
    assert first["toolCalls"] == [
        {"id": first["toolCalls"][0]["id"], "name": "look", "arguments": {"thing": "jar"}}
    ]
    assert first["tools"] == ["look"]
    assert [m["role"] for m in second["messages"]][-2:] == ["assistant", "tool"]
    assert second["output"] == "A jar of pickled turnips."
    for step in (first, second):
        assert step["promptTokens"] > 0 and step["totalMs"] >= 0 and step["outcome"] == "done"
    assert turn["usage"]["promptTokens"] > 0


async def test_a_failed_turn_shows_its_error_and_the_tool_calls_it_made_before_it(tmp_path):
    # the turn's failure (agent/events.TurnFailed) carries what its run gathered
    failing = {
        "type": "scripted",
        "steps": [
            {"toolCalls": [{"name": "look", "arguments": {"thing": "jar"}}]},
            {"error": "refusal"},
        ],
    }
    async with inspected_daemon(tmp_path) as d:
        d.client.tool_handler = _answer("a jar")
        await d.client.request(
            "session/create", {"session": "s", "tools": [LOOK], "model": failing}
        )
        with anyio.fail_after(5):
            response = await d.client.call("session/respond", {"session": "s", "prompt": "Hm?"})
        (conn,) = (await d.get("daemon"))["connections"]
        (summary,) = (await d.get(f"connections/{conn['id']}/sessions/s"))["turns"]
        turn = await d.get(f"connections/{conn['id']}/turns/{summary['id']}")
    assert response["error"]["data"]["code"] == "refusal"
    assert turn["status"] == "failed" and turn["error"]["name"] == "refusal"
    assert turn["error"]["message"] == response["error"]["message"]
    (tool,) = turn["tools"]
    assert tool["name"] == "look" and tool["output"] == "a jar"


class CachingModel(LanguageModel):
    """A model that reports usage as a server with a KV cache does."""

    name = "caching"
    capabilities = ModelCapabilities(native_tools=True)

    async def availability(self) -> Availability:
        return Availability(available=True)

    async def generate(self, request):
        yield TextDelta("Cached answer.")
        yield Usage(input_tokens=200, cached_input_tokens=150, output_tokens=4)


async def test_a_step_shows_the_share_of_its_prompt_served_from_the_kv_cache(tmp_path):
    async with inspected_daemon(tmp_path, CachingModel()) as d:
        await d.client.request("session/create", {"session": "s"})
        await d.client.request("session/respond", {"session": "s", "prompt": "Hi."})
        (conn,) = (await d.get("daemon"))["connections"]
        (turn,) = (await d.get(f"connections/{conn['id']}/sessions/s"))["turns"]
    (step,) = turn["steps"]  # the summary's step line has the figures
    assert (step["promptTokens"], step["cachedTokens"], step["cacheShare"]) == (200, 150, 0.75)
    assert turn["usage"]["cacheShare"] == 0.75 and turn["backend"] == "caching"


async def test_an_npc_shows_its_relationship_memory_facts_and_turns(tmp_path):
    async with inspected_daemon(tmp_path) as d:
        await d.client.request(
            "npc/create",
            {
                "npc": "gorm",
                "persona": {"name": "Gorm", "role": "a smith"},
                "memory": {"facts": ["The player owes Gorm 5 gold."], "relationship": 12},
                "model": {"type": "scripted", "steps": [{"json": NPC_LINE}]},
            },
        )
        await d.client.request("npc/talk", {"npc": "gorm", "line": "Hello, smith."})
        (conn,) = (await d.get("daemon"))["connections"]
        (npc,) = (await d.get(f"connections/{conn['id']}"))["npcs"]
        (summary,) = (await d.get(f"connections/{conn['id']}/npcs/gorm"))["turns"]
        turn = await d.get(f"connections/{conn['id']}/turns/{summary['id']}")
    assert npc["name"] == "Gorm" and npc["relationship"] == 12 and npc["turnCount"] == 1
    assert npc["facts"] == ["The player owes Gorm 5 gold."] and npc["busy"] is False
    assert turn["method"] == "npc/talk" and turn["subject"] == {"kind": "npc", "id": "gorm"}
    assert any("Gorm" in m["content"] for m in turn["steps"][0]["messages"])


async def test_a_world_shows_its_tree_and_its_recent_changes_oldest_first(tmp_path):
    async with inspected_daemon(tmp_path) as d:
        await d.client.request("world/create", {"world": "village", "state": {"gold": 1}})
        await d.client.request("world/set", {"world": "village", "path": "gold", "value": 2})
        await d.client.request("world/set", {"world": "village", "path": "inn.open", "value": True})
        (conn,) = (await d.get("daemon"))["connections"]
        view = await d.get(f"connections/{conn['id']}/worlds/village")
    assert view["tree"] == {"gold": 2, "inn": {"open": True}} and view["world"]["version"] == 2
    assert [(c["path"], c["kind"], c.get("old"), c.get("new")) for c in view["changes"]] == [
        ("gold", "changed", 1, 2),
        ("inn.open", "created", None, True),
    ]


async def test_the_event_stream_brings_a_world_change_as_it_happens(tmp_path):
    async with inspected_daemon(tmp_path) as d:
        await d.client.request("world/create", {"world": "w", "state": {"gold": 1}})
        with anyio.fail_after(5):
            async with d.http.stream("GET", "/api/events") as events:
                lines = events.aiter_lines()
                assert events.headers["content-type"] == "text/event-stream"
                async for line in lines:
                    if line == "event: hello":
                        break  # subscribed: what happens from now on comes through
                await d.client.request("world/set", {"world": "w", "path": "gold", "value": 9})
                async for line in lines:
                    if line == "event: world":
                        data = orjson.loads((await anext(lines)).removeprefix("data: "))
                        break
    assert (data["world"], data["path"], data["old"], data["new"]) == ("w", "gold", 1, 9)


async def test_a_session_keeps_only_its_last_turns_each_prompt_cut_to_the_limit(tmp_path):
    turns = INSPECT_TURNS_KEPT + 2
    long_prompt = "x" * (INSPECT_MESSAGE_CHARS + 500)
    script = {"type": "scripted", "steps": [{"text": f"Answer {i}."} for i in range(turns + 1)]}
    async with inspected_daemon(tmp_path) as d:
        await d.client.request("session/create", {"session": "s", "model": script})
        for i in range(turns):
            await d.client.request("session/respond", {"session": "s", "prompt": f"Turn {i}."})
        await d.client.request("session/respond", {"session": "s", "prompt": long_prompt})
        (conn,) = (await d.get("daemon"))["connections"]
        kept = (await d.get(f"connections/{conn['id']}/sessions/s"))["turns"]
        last = await d.get(f"connections/{conn['id']}/turns/{kept[-1]['id']}")
        forgotten = await d.http.get(f"/api/connections/{conn['id']}/turns/t1")
    assert len(kept) == INSPECT_TURNS_KEPT and forgotten.status_code == 404
    assert kept[0]["prompt"] == f"Turn {turns + 1 - INSPECT_TURNS_KEPT}."
    assert len(last["prompt"]) == INSPECT_MESSAGE_CHARS and last["promptCut"] == 500
    message = last["steps"][0]["messages"][-1]
    assert len(message["content"]) == INSPECT_MESSAGE_CHARS and message["cut"] == 500


async def test_the_api_asks_for_the_token_and_the_page_does_not(tmp_path):
    async with inspected_daemon(tmp_path) as d:
        base = d.inspector.url
        async with httpx.AsyncClient(base_url=base) as bare:
            missing = await bare.get("/api/daemon")
            wrong = await bare.get("/api/daemon", params={"token": d.token + "x"})
            header = await bare.get("/api/daemon", headers={"X-Oamd-Token": d.token})
            bearer = await bare.get("/api/daemon", headers={"Authorization": f"Bearer {d.token}"})
            page = await bare.get("/")
            script = await bare.get("/page.js")
            foreign = await bare.get(
                "/api/daemon", params={"token": d.token}, headers={"Host": "evil.example:80"}
            )
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert (header.status_code, bearer.status_code) == (200, 200)
    assert page.status_code == 200 and "page.js" in page.text
    assert script.status_code == 200 and "EventSource" in script.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert foreign.status_code == 403


async def test_one_connection_carries_a_pages_successive_requests(tmp_path):
    """Kept alive, as a browser's fetches expect: a page's polls need no new connection each."""
    async with inspected_daemon(tmp_path) as d:
        statuses = []
        with anyio.fail_after(5):
            async with await anyio.connect_tcp(d.inspector.host, d.inspector.port) as stream:
                http = h11.Connection(h11.CLIENT)
                for path in ("/api/daemon", "/page.js", "/api/daemon"):
                    target = f"{path}?token={d.token}".encode()
                    request = h11.Request(
                        method="GET", target=target, headers=[("Host", "127.0.0.1")]
                    )
                    await stream.send(http.send(request) + http.send(h11.EndOfMessage()))
                    while not isinstance(event := http.next_event(), h11.EndOfMessage):
                        if event is h11.NEED_DATA:
                            http.receive_data(await stream.receive())
                        elif isinstance(event, h11.Response):
                            statuses.append(event.status_code)
                    http.start_next_cycle()
    assert statuses == [200, 200, 200]


@pytest.mark.parametrize("spec", ["0.0.0.0:0", "192.0.2.1:0", ":0", "[::]:0", "127.0.0.1"])
def test_an_address_that_is_not_loopback_is_refused(spec):
    with pytest.raises(EndpointError, match="--inspect"):
        bind_loopback(spec).close()


@pytest.mark.parametrize("spec", ["127.0.0.1:0", "localhost:0"])
def test_a_loopback_address_is_bound(spec):
    sock = bind_loopback(spec)
    try:
        assert sock.getsockname()[0] in ("127.0.0.1", "::1")
    finally:
        sock.close()


async def test_nothing_is_recorded_without_the_inspector_and_every_step_is_with_it(
    tmp_path, monkeypatch
):
    made: list[StepFigures] = []

    def counted(*args: Any) -> StepFigures:
        made.append(StepFigures(*args))
        return made[-1]

    monkeypatch.setattr(oamd.agent.step_log, "StepFigures", counted)
    script = {"type": "scripted", "steps": [{"text": "One."}, {"text": "Two."}]}
    async with memory_daemon() as client:
        await client.request("session/create", {"session": "s", "model": script})
        await client.request("session/respond", {"session": "s", "prompt": "Hi."})
    assert made == []
    async with inspected_daemon(tmp_path) as d:
        await d.client.request("session/create", {"session": "s", "model": script})
        await d.client.request("session/respond", {"session": "s", "prompt": "Hi."})
    assert len(made) == 1


PING_SECONDS = 1.0
"""The longest one ping may take while a page that does not read is being dropped."""


async def test_a_page_that_stops_reading_is_dropped_and_never_holds_the_protocol(tmp_path):
    big = "y" * 1000  # each change's event carries about 2 kB (old and new value)
    async with inspected_daemon(tmp_path) as d:
        await d.client.request("world/create", {"world": "w", "state": {"v": big}})
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect((d.inspector.host, d.inspector.port))
        slow.sendall(
            f"GET /api/events?token={d.token} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
        )
        try:
            with anyio.fail_after(30):
                while d.inspector.recorder.page_count == 0:
                    await d.client.request("ping")  # until the page is subscribed
                worst, n = 0.0, 0
                while d.inspector.recorder.dropped_pages == 0:
                    n += 1
                    await d.client.request(
                        "world/set", {"world": "w", "path": "v", "value": f"{n}{big}"}
                    )
                    started = time.perf_counter()
                    with anyio.fail_after(PING_SECONDS):
                        await d.client.request("ping")
                    worst = max(worst, time.perf_counter() - started)
            daemon = await d.get("daemon")
        finally:
            slow.close()
    assert n >= INSPECT_PAGE_QUEUE_EVENTS  # it was let fall that far behind, then dropped
    assert daemon["droppedPages"] == 1 and daemon["pages"] == 0
    assert worst < PING_SECONDS


def _answer(output: Any):
    async def handler(params: dict[str, Any]) -> dict[str, Any]:
        return {"output": output}

    return handler


async def test_a_likelihood_choice_is_a_step_with_its_candidates_and_their_scores(tmp_path):
    # a small model chooses whether to call a tool by likelihood: that choice is a model step
    # like any other (agent/step.py), so the page shows what was asked and what each scored
    small = {
        "type": "scripted",
        "style": "envelope",
        "capabilities": {"compactPrompts": True, "scoresText": True},
        "steps": [{"scores": [-4.0, -0.3], "tokens": [2, 1]}, {"raw": "Nothing to look at."}],
    }
    async with inspected_daemon(tmp_path) as d:
        await d.client.request("session/create", {"session": "s", "tools": [LOOK], "model": small})
        with anyio.fail_after(5):
            await d.client.request("session/respond", {"session": "s", "prompt": "Anything?"})
        (conn,) = (await d.get("daemon"))["connections"]
        (summary,) = (await d.get(f"connections/{conn['id']}/sessions/s"))["turns"]
        turn = await d.get(f"connections/{conn['id']}/turns/{summary['id']}")
    scoring, answer = turn["steps"]
    assert scoring["kind"] == "score" and scoring["outcome"] == "done"
    look, none = scoring["candidates"]
    assert (look["logprob"], none["logprob"]) == (-4.0, -0.3)
    assert look["scored"] == none["scored"] == "Anything?"
    assert look["message"]["content"] != none["message"]["content"]  # each reads the ask its way
    assert answer["output"] == "Nothing to look at."


SMALL_MODEL = {"compactPrompts": True, "scoresText": True}


async def test_the_choices_after_a_small_models_line_are_steps_of_its_turn(tmp_path):
    # the emotion is read off the likelihoods after the line is written (game/npc/small_reply):
    # those score steps belong to the talk's turn (agent/trace.TurnScope), not to nobody
    small = {
        "type": "scripted",
        "style": "envelope",
        "capabilities": SMALL_MODEL,
        "steps": [
            {"raw": "Welcome, traveller."},
            {"scores": [-1.0, -3.0]},  # happy or sad after the line ...
            {"scores": [-2.0, -2.0]},  # ... and after a neutral exchange (the prior)
        ],
    }
    options = {"emotions": ["happy", "sad"], "canEndConversation": False, "playerOptionCount": 0}
    async with inspected_daemon(tmp_path) as d:
        await d.client.request(
            "npc/create",
            {"npc": "mira", "persona": {"name": "Mira"}, "options": options, "model": small},
        )
        with anyio.fail_after(5):
            said = await d.client.request("npc/talk", {"npc": "mira", "line": "Hello."})
        (conn,) = (await d.get("daemon"))["connections"]
        (summary,) = (await d.get(f"connections/{conn['id']}/npcs/mira"))["turns"]
        turn = await d.get(f"connections/{conn['id']}/turns/{summary['id']}")
    assert (said["line"], said["emotion"]) == ("Welcome, traveller.", "happy")
    assert turn["method"] == "npc/talk" and turn["status"] == "done"
    line, emotion, prior = turn["steps"]
    assert line["kind"] == "respond" and line["output"] == "Welcome, traveller."
    assert emotion["kind"] == prior["kind"] == "score"
    assert [c["scored"] for c in emotion["candidates"]] == ["happy", "sad"]
    assert [c["logprob"] for c in emotion["candidates"]] == [-1.0, -3.0]
    assert "Welcome, traveller." in [m["content"] for m in emotion["messages"]]  # after the line
    assert "Welcome, traveller." not in [m["content"] for m in prior["messages"]]
    assert turn["text"] == "Welcome, traveller."


async def test_a_decision_by_likelihood_is_one_traced_turn(tmp_path):
    small = {
        "type": "scripted",
        "style": "envelope",
        "capabilities": SMALL_MODEL,
        "steps": [{"scores": [-3.0, -0.5]}, {"raw": " the door is shut."}],
    }
    options = [{"id": "knock"}, {"id": "leave"}]
    async with inspected_daemon(tmp_path) as d:
        with anyio.fail_after(5):
            chosen = await d.client.request(
                "decision/decide", {"situation": "A door.", "options": options, "model": small}
            )
        (conn,) = (await d.get("daemon"))["connections"]
        (summary,) = (await d.get(f"connections/{conn['id']}/turns"))["turns"]
    assert chosen["optionID"] == "leave" and summary["method"] == "decision/decide"
    assert summary["status"] == "done" and chosen["reasoning"] == "Because the door is shut."
    assert [s["kind"] for s in summary["steps"]] == ["score", "respond"]
    assert summary["text"] == (
        '{"reasoning":"Because the door is shut.","choice":"leave","confidence":'
        f"{chosen['confidence']}}}"
    )

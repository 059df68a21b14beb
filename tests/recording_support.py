"""Helpers for the recording tests: a daemon in this process that records its one connection
(``Recorder`` as ``--record`` wires it), and an OpenAI-compatible server in memory whose answers
depend on what it is asked, so concurrent calls get the same answers in any order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
from conftest import recording

from oamd.backends.base import LanguageModel
from oamd.backends.openai.model import OpenAIModel
from oamd.client import Client
from oamd.daemon import default_config, serve_stream
from oamd.recording import Recorder, read_recording
from oamd.transport import memory_stream_pair

GATE_TOOL = {
    "name": "open_gate",
    "description": "Open a named gate; says whether it opened.",
    "parameters": {"type": "object", "properties": {"gate": {"type": "string"}}},
}
Answer = Callable[[dict[str, Any]], dict[str, Any]]
"""A chat body → the assistant message the server answers with."""


class ChatServer:
    """``/models`` says ``owned_by: openai`` (native tools, ``json_schema``); a chat completion
    is ``answer(body)``, whole (not streamed), with usage numbers of its own."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.bodies: list[dict[str, Any]] = []
        self.hold = anyio.Event()
        """Set to let held answers (``{"hold": True}``) go; they wait until then."""

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"data": [{"id": "gpt", "owned_by": "openai"}]})
        body = orjson.loads(request.content)
        self.bodies.append(body)
        message = self.answer(body)
        if message.pop("hold", False):
            await self.hold.wait()
        return httpx.Response(200, json=completion(message, len(self.bodies)))

    def model(self) -> OpenAIModel:
        return OpenAIModel.from_spec(
            "http://fake.test/v1", environ={}, transport=httpx.MockTransport(self.handle)
        )


def completion(message: dict[str, Any], number: int) -> dict[str, Any]:
    """A whole chat completion answering ``message``, the ``number``-th, with usage."""
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    usage = {
        "prompt_tokens": 100 + number,
        "completion_tokens": 7,
        "prompt_tokens_details": {"cached_tokens": 64},
    }
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calls(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def last_user_text(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def keeper(body: dict[str, Any]) -> dict[str, Any]:
    """The server's answers, by what it is asked."""
    asked = last_user_text(body)
    if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
        return calls("open_gate", {"gate": "north"}, "call_gate_1")
    if "response_format" in body and "sword" in asked:
        return said(orjson.dumps({"name": "Oathkeeper", "price": 120}).decode())
    if "response_format" in body:
        choice = "flee" if "knights" in asked.lower() else "attack"
        return said(
            orjson.dumps({"reasoning": "Odds.", "choice": choice, "confidence": 70}).decode()
        )
    return said("The north gate is open. Pass, friend.")


async def gate_keeper(params: dict[str, Any]) -> dict[str, Any]:
    """The engine's side of ``tool/call``."""
    return {"output": f"The {params['call']['arguments'].get('gate', 'main')} gate is open."}


@asynccontextmanager
async def recorded_daemon(
    model: LanguageModel,
    directory: Path,
    *,
    tool_handler: Any = gate_keeper,
    limit: int | None = None,
    **config: Any,
) -> AsyncIterator[Client]:
    """A daemon on ``model`` recording into ``directory``, and a client; the file is written
    once the client has closed (when the block ends)."""
    daemon_config = default_config(model, **config)
    extra = {} if limit is None else {"limit": limit}
    recorder = Recorder(directory, daemon_config, transport="stdio", **extra)
    ours, theirs = memory_stream_pair()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_stream(theirs, daemon_config, tap=recorder))
        async with Client(ours, tool_handler=tool_handler, **recording()) as client:
            yield client
    # the task group ended with the connection, whose tap wrote the file before it returned


def only_recording(directory: Path) -> dict[str, Any]:
    (path,) = directory.glob("*.json")
    return read_recording(path)

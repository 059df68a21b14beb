"""Turn-level helpers for the long-run benchmarks: scripted sessions with one client tool per turn,
driven over a real ``oamd stdio`` subprocess by a synchronous client that answers every
``tool/call`` at once, and the daemon's resident memory read from ``/proc``.

The client is deliberately lean (one select loop, no recording), so the figures are the daemon's.
Every wait is bounded by a deadline.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import orjson
from _harness import OAMD_INITIALIZE, PYTHON, BenchError, Message, Server, ServerSpec, spawn

TURN_TIMEOUT_S = 30.0
_NOTIFICATION = b'{"jsonrpc":"2.0","method":"session/event"'

TOOL = {
    "name": "look",
    "description": "Looks at something in the room and says what is there.",
    "parameters": {
        "type": "object",
        "properties": {"thing": {"type": "string", "description": "What to look at."}},
        "required": ["thing"],
    },
}


def oamd_spec(*extra: str, executable: str | None = None) -> ServerSpec:
    """``python -m oamd stdio`` (or ``executable stdio``, e.g. the shipped ``dist/oamd/oamd``) with
    ``extra`` arguments, handshake ``initialize``."""
    command = (executable,) if executable else (PYTHON, "-m", "oamd")
    return ServerSpec("oamd", (*command, "stdio", *extra), (OAMD_INITIALIZE,))


def tool_turn_steps(turns: int, style: str = "native") -> dict[str, Any]:
    """A scripted model playing ``turns`` turns: each calls ``look`` once, then answers."""
    steps: list[dict[str, Any]] = []
    for i in range(turns):
        steps.append({"toolCalls": [{"name": "look", "arguments": {"thing": f"shelf {i}"}}]})
        steps.append(
            {"text": f"On shelf {i} there is a dusty jar of pickled turnips.", "chunks": 2}
        )
    return {"type": "scripted", "steps": steps, "style": style}


def look(call: dict[str, Any]) -> str:
    """The ``look`` tool's answer."""
    return f"{call['arguments'].get('thing', '?')}: a jar"


def rss_kib(pid: int) -> int:
    """Resident set size of a process in KiB (Linux ``/proc``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise BenchError(f"no VmRSS for pid {pid}")


@dataclass
class TurnClient:
    """Sends requests on a running server, answers its ``tool/call``s, routes responses by id."""

    server: Server
    done: dict[Any, Message] = field(default_factory=dict)
    on_reply: Callable[[Message, float], None] | None = None
    """Called with every response and the time its chunk was read (probes use it)."""
    answer: Callable[[dict[str, Any]], Any] = field(default=lambda call: look(call))
    """The engine's side of a ``tool/call``: the call → its output."""
    keep_errors: bool = False
    """Error responses are filed like results (``wait`` returns them) instead of raising."""

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        msg_id = self.server.take_ids(1)
        msg: Message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.server.send(msg)
        return msg_id

    def pump(self, timeout: float) -> None:
        """Handles whatever arrives within ``timeout``: answers tool calls, files responses."""
        lines = self.server.poll(timeout)
        now = perf_counter()
        replies = []
        for line in lines:
            if not line or line.startswith(_NOTIFICATION):
                continue  # events: the client would render them; here they cost it nothing
            msg = orjson.loads(line)
            method = msg.get("method")
            if method == "tool/call":
                output = self.answer(msg["params"]["call"])
                replies.append({"jsonrpc": "2.0", "id": msg["id"], "result": {"output": output}})
            elif method is None:
                if "error" in msg and not self.keep_errors:
                    raise self.server.error(f"error response: {line[:300]!r}")
                if self.on_reply is not None:
                    self.on_reply(msg, now)
                self.done[msg["id"]] = msg
        if replies:
            os.write(self.server.in_fd, b"".join(orjson.dumps(r) + b"\n" for r in replies))

    def wait(self, msg_id: int, timeout: float = TURN_TIMEOUT_S) -> Message:
        deadline = perf_counter() + timeout
        while msg_id not in self.done:
            if perf_counter() > deadline:
                raise self.server.error(f"no response to request {msg_id}")
            self.pump(0.5)
        return self.done.pop(msg_id)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self.wait(self.send(method, params))["result"]

    def create_session(self, model: dict[str, Any], **extra: Any) -> str:
        params = {"tools": [TOOL], "model": model, **extra}
        return self.call("session/create", params)["session"]


@contextmanager
def daemon(*extra: str, executable: str | None = None) -> Iterator[TurnClient]:
    """A ready ``oamd stdio`` (initialized, one ping answered) and its turn client."""
    with spawn(oamd_spec(*extra, executable=executable)) as server:
        server.ready()
        yield TurnClient(server)

"""``oamd replay``: a recorded connection played again on the recorded answers, with no model.

A daemon is started in this process, with the recording's options, whose ``"system"`` model gives
each use the scripted model recorded for it (``UseMatcher``). The recorded client lines are sent in
their order, each once the daemon lines recorded before it have come back (streamed text counted by its
characters, not its lines, see ``_diff``), or once the recorded pause plus ``LINE_WAIT_SECONDS``
has passed: so a cancel still reaches a turn that is running, after the text it had streamed, and
a tool reply the ``tool/call`` it answers. A reply to a
``tool/call`` is sent with the id the replay's daemon gave that call (the same call of the same
exchange). Then the daemon's lines are compared with the recorded ones (``compare_lines``).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import orjson
from anyio.abc import ByteStream

from oamd.daemon import default_config, serve_stream
from oamd.jsonvalue import dumps_text
from oamd.limits import MAX_CONNECTION_BYTES, MAX_LINE_BYTES, MAX_SESSIONS, MAX_TIMEOUT_SECONDS
from oamd.recording._diff import Difference, compare_lines, exchanges, is_streamed
from oamd.recording._log import CLIENT, DAEMON
from oamd.recording._replay_model import ReplaySystem, UseMatcher
from oamd.transport import memory_stream_pair

__all__ = ["ReplayOutcome", "play"]

LINE_WAIT_SECONDS = 10.0
"""How much longer than the recorded pause a client line waits for the daemon lines before it."""
END_WAIT_SECONDS = 30.0
"""How long the daemon may take, after the last client line, to send the rest and close."""
OVERSIZED_PIECE = b"x" * (1 << 20)
"""What an oversized line is sent again as, piece by piece, after its recorded head."""
SETTLE_SECONDS = 0.2
"""A recording whose client never closed its input: how long to wait for stray lines after the
last expected one before the replay ends the connection."""


@dataclass
class ReplayOutcome:
    differences: list[Difference]
    notes: list[str] = field(default_factory=list)
    """What the replay had to do that the recording did not (a wait given up, a use asked for
    by another request): the differences usually follow from them."""
    recorded_lines: int = 0
    replayed_lines: int = 0

    @property
    def matched(self) -> bool:
        return not self.differences


def _client_bytes(entry: dict[str, Any]) -> bytes:
    if "line" in entry:
        return orjson.dumps(entry["line"]) + b"\n"
    if "text" in entry:
        return str(entry["text"]).encode("utf-8", "surrogatepass") + b"\n"
    return base64.b64decode(entry["base64"]) + b"\n"


async def _send(stream: ByteStream, entry: dict[str, Any]) -> None:
    """Sends a client line; an oversized one at its recorded size, from one reused piece (the
    size was checked against ``MAX_REPLAYED_OVERSIZED_BYTES``; nothing is allocated from it)."""
    if "oversized" not in entry:
        await stream.send(_client_bytes(entry))
        return
    head = str(entry.get("head", "")).encode("utf-8", "surrogatepass")
    await stream.send(head)
    left = entry["oversized"] - len(head)
    while left > 0:
        await stream.send(OVERSIZED_PIECE[: min(left, len(OVERSIZED_PIECE))])
        left -= len(OVERSIZED_PIECE)
    await stream.send(b"\n")


def _streamed(line: Any) -> tuple[bytes, int] | None:
    """A streamed event's request (as JSON) and how much text it adds (its ``delta``): the same
    in total however the stream was cut."""
    if not is_streamed(line):
        return None
    params = line["params"]
    delta = params["event"].get("delta")
    return orjson.dumps(params.get("requestId")), len(delta) if isinstance(delta, str) else 0


def _answered(line: Any) -> bytes | None:
    """The request (as JSON) a response answers."""
    if type(line) is dict and "method" not in line and "id" in line:
        return orjson.dumps(line["id"])
    return None


def _count(streamed: dict[bytes, int], line: Any) -> None:
    if (event := _streamed(line)) is not None:
        streamed[event[0]] = streamed.get(event[0], 0) + event[1]


def _call_key(line: Any, seen: dict[Any, int]) -> Any:
    """Which call of which exchange a daemon request is (``tool/call`` n of request r)."""
    params = line.get("params") if type(line.get("params")) is dict else {}
    exchange = orjson.dumps([params.get("requestId"), params.get("index")])
    seen[exchange] = seen.get(exchange, 0) + 1
    return exchange, seen[exchange]


def _daemon_requests(lines: list[Any]) -> Iterator[tuple[Any, Any]]:
    seen: dict[Any, int] = {}
    for line in lines:
        if type(line) is dict and "method" in line and "id" in line:
            yield _call_key(line, seen), line["id"]


class _Daemon:
    """The replay's side of the connection: what came back, counted as the feeder waits for."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self.lines: list[Any] = []
        self.stable = 0
        self.streamed: dict[bytes, int] = {}
        """Request → characters of streamed text that came back for it (``_streamed``)."""
        self.answered: set[bytes] = set()
        """Requests whose response came back: no more text streams for them."""
        self.closed = anyio.Event()
        self.calls: dict[Any, Any] = {}
        """(exchange, n) → the id the replay's daemon gave that ``tool/call``."""
        self._seen: dict[Any, int] = {}
        self._changed = anyio.Event()

    async def read(self) -> None:
        pending = b""
        try:
            while True:
                pending += await self.stream.receive()
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    self._take(raw)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            if pending:
                self._take(pending)
            self.closed.set()
            self._changed.set()

    def _take(self, raw: bytes) -> None:
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            line = raw.decode("utf-8", "replace")
        self.lines.append(line)
        if not is_streamed(line):
            self.stable += 1
        _count(self.streamed, line)
        if (answered := _answered(line)) is not None:
            self.answered.add(answered)
        if type(line) is dict and "method" in line and "id" in line:
            self.calls[_call_key(line, self._seen)] = line["id"]
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def behind(self, streamed: dict[bytes, int]) -> int:
        """Characters of ``streamed`` (request → characters) that have not come back for
        requests still unanswered."""
        return sum(
            n - self.streamed.get(k, 0)
            for k, n in streamed.items()
            if k not in self.answered and self.streamed.get(k, 0) < n
        )

    async def wait_for(
        self, stable: int, seconds: float, streamed: dict[bytes, int] | None = None
    ) -> bool:
        """Whether ``stable`` lines, and the text ``streamed`` for requests still running, came
        within ``seconds`` (or the daemon closed first)."""
        with anyio.move_on_after(seconds):
            while (self.stable < stable or (streamed and self.behind(streamed))) and (
                not self.closed.is_set()
            ):
                await self._changed.wait()
            return True
        return False


def _config(document: dict[str, Any], matcher: UseMatcher, system: ReplaySystem) -> Any:
    daemon = document["daemon"]
    config = default_config(
        system,
        allow_scripted=bool(daemon.get("scripted", True)),
        test_methods=bool(daemon.get("testMethods", False)),
        max_sessions=int(daemon.get("maxSessions", MAX_SESSIONS)),
        tool_timeout=float(daemon.get("toolTimeoutSeconds", 120.0)),
        max_connection_bytes=int(daemon.get("maxConnectionBytes", MAX_CONNECTION_BYTES)),
    )
    return replace(config, models=replace(config.models, bind=matcher))


async def _feed(document: dict[str, Any], daemon: _Daemon, notes: list[str]) -> None:
    entries = document["lines"]
    recorded_calls = {
        orjson.dumps(ident): key for key, ident in _daemon_requests(_daemon_lines(entries))
    }
    stable = 0
    streamed: dict[bytes, int] = {}
    """Request → characters of text recorded streaming for it, while it was unanswered."""
    last_at = 0.0
    closed_at = document.get("clientClosedAt")
    for number, entry in enumerate(entries, 1):
        at = float(entry.get("at", last_at))
        if closed_at is not None and at > closed_at and entry["from"] == DAEMON:
            break  # what came after the client closed its input comes after our end too
        if entry["from"] == DAEMON:
            stable += 0 if is_streamed(entry.get("line")) else 1
            _count(streamed, entry.get("line"))
            if (answered := _answered(entry.get("line"))) is not None:
                streamed.pop(answered, None)  # its lines are counted by ``stable``
            continue
        wait = LINE_WAIT_SECONDS + min(max(0.0, at - last_at), MAX_TIMEOUT_SECONDS)
        if not await daemon.wait_for(stable, wait, streamed):
            notes.append(
                f"client line {number}: {max(0, stable - daemon.stable)} daemon lines and "
                f"{daemon.behind(streamed)} characters of streamed text recorded before it had "
                "not come back; sent it anyway"
            )
        last_at = at
        line = entry.get("line")
        call = orjson.dumps(line.get("id")) if type(line) is dict and "method" not in line else None
        if call in recorded_calls:
            ident = daemon.calls.get(recorded_calls[call])
            if ident is not None:  # the reply to a tool/call: our daemon named that call so
                entry = {**entry, "line": {**line, "id": ident}}
        await _send(daemon.stream, entry)
    if closed_at is not None:  # a hang-up cancels what runs: after the text it had streamed
        await daemon.wait_for(stable, LINE_WAIT_SECONDS, streamed)
        await daemon.stream.send_eof()


def _daemon_lines(entries: list[dict[str, Any]]) -> list[Any]:
    return [e.get("line", e.get("text")) for e in entries if e["from"] == DAEMON]


def _methods(entries: list[dict[str, Any]]) -> dict[Any, str]:
    """Client request id (as JSON) → its method, to name exchanges."""
    methods = {}
    for entry in entries:
        line = entry.get("line")
        if entry["from"] == CLIENT and type(line) is dict and isinstance(line.get("method"), str):
            methods[dumps_text(line.get("id"))] = line["method"]
    return methods


async def play(document: dict[str, Any]) -> ReplayOutcome:
    """Plays ``document`` (``read_recording``'s) and compares what came back.

    Raises:
        RecordingError: a recorded script cannot be read.
    """
    system = ReplaySystem(document["system"])
    matcher = UseMatcher(document["uses"], system)
    config = _config(document, matcher, system)
    ours, theirs = memory_stream_pair()
    daemon = _Daemon(ours)
    notes: list[str] = []
    max_line_bytes = int(document["daemon"].get("maxLineBytes", MAX_LINE_BYTES))
    async with ours, anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: serve_stream(
                theirs,
                config,
                max_line_bytes=max_line_bytes,
                hangup_on_eof=document.get("transport") == "socket",
            )
        )
        tg.start_soon(daemon.read)
        await _feed(document, daemon, notes)
        recorded = _daemon_lines(document["lines"])
        expected = sum(1 for line in recorded if not is_streamed(line))
        if not await daemon.wait_for(expected, END_WAIT_SECONDS):
            notes.append(f"the daemon sent {daemon.stable} of {expected} lines, then nothing")
        with anyio.move_on_after(SETTLE_SECONDS):
            await daemon.closed.wait()
        tg.cancel_scope.cancel()
    notes += matcher.mismatches
    if matcher.unused:
        notes.append(f"{matcher.unused} recorded uses of the model were never asked for")
    if matcher.unmatched:
        notes.append(
            f"{matcher.unmatched} model calls asked what no recorded call of their use did (the"
            " daemon builds its prompts otherwise now?); each got the next recorded step"
        )
    methods = _methods(document["lines"])
    recorded_view = exchanges(recorded, methods)
    replayed_view = exchanges(daemon.lines, methods, list(recorded_view))
    return ReplayOutcome(
        compare_lines(recorded_view, replayed_view), notes, len(recorded), len(daemon.lines)
    )

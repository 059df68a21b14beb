"""The inspector's page in a real browser: headless Chromium (``apt-get install chromium``) loads it
from an ``oamd stdio --inspect`` subprocess playing scripted turns, and the rendered DOM shows
the session, its turn's prompt and a world change that arrives while the page is open.

``OAMD_INSPECTOR_SCREENSHOT=docs/inspector.png`` also saves what the page looks like then
(``docs/INSPECTOR.md`` shows it)."""

from __future__ import annotations

import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from browser_harness import browser, chromium_path
from conftest import OAMD

CHROMIUM = chromium_path()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"
)

ROOT = Path(__file__).resolve().parent.parent
REPLY_SECONDS = 20.0
SCREENSHOT = os.environ.get("OAMD_INSPECTOR_SCREENSHOT")
PROMPT = "What is on the top shelf?"
LOOK = {
    "name": "look",
    "description": "Looks at a shelf of the shop and says what is on it.",
    "parameters": {
        "type": "object",
        "properties": {"shelf": {"type": "string"}},
        "required": ["shelf"],
    },
}
SHOPKEEPER = {
    "type": "scripted",
    "steps": [
        {"toolCalls": [{"name": "look", "arguments": {"shelf": "top"}}]},
        {"text": "A dusty jar of pickled turnips, and a brass lantern.", "chunks": 3},
    ],
}
NPC_LINE = {
    "emotion": "happy",
    "line": "Back again? The forge is hot today.",
    "player_options": ["Buy a sword", "Leave"],
    "ends_conversation": False,
}


class Daemon:
    """``oamd stdio --inspect`` on pipes: requests by id, ``tool/call``s answered at once."""

    def __init__(self, token_file: Path) -> None:
        self.process = subprocess.Popen(
            [*OAMD, "stdio", "--inspect", "127.0.0.1:0", "--inspect-token-file", str(token_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        self._out = self.process.stdout.fileno()
        self._buffer = b""
        self._ids = iter(range(1, 1 << 30))
        ready, _, _ = select.select([self.process.stderr], [], [], REPLY_SECONDS)
        assert ready, "no inspector line"
        self.inspector = orjson.loads(self.process.stderr.readline())
        self.token = token_file.read_text().strip()

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        msg_id = next(self._ids)
        self._send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}})
        deadline = time.monotonic() + REPLY_SECONDS
        while True:
            for msg in self._messages(deadline):
                if msg.get("method") == "tool/call":
                    shelf = msg["params"]["call"]["arguments"]["shelf"]
                    self._send(
                        {"jsonrpc": "2.0", "id": msg["id"], "result": {"output": f"{shelf}: a jar"}}
                    )
                elif msg.get("id") == msg_id:
                    assert "result" in msg, msg
                    return msg["result"]

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(orjson.dumps(msg) + b"\n")
        self.process.stdin.flush()

    def _messages(self, deadline: float) -> list[dict[str, Any]]:
        left = deadline - time.monotonic()
        assert left > 0 and select.select([self._out], [], [], left)[0], "no reply in time"
        chunk = os.read(self._out, 1 << 20)
        assert chunk, "the daemon exited"
        *lines, self._buffer = (self._buffer + chunk).split(b"\n")
        return [orjson.loads(line) for line in lines if line]

    def close(self) -> None:
        """Ends stdin (the daemon exits 0 once everything is answered) and checks it did."""
        process = self.process
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        process.stdin.close()
        try:
            assert process.wait(timeout=REPLY_SECONDS) == 0, process.stderr.read()[-2000:]
        finally:
            process.stdout.close()
            process.stderr.close()


def play_scene(daemon: Daemon) -> None:
    daemon.call("initialize", {"protocolVersion": "1.0", "client": {"name": "browser-test"}})
    daemon.call(
        "session/create",
        {
            "session": "shopkeeper",
            "instructions": "You keep a small shop in Millbrook. Answer in one sentence.",
            "tools": [LOOK],
            "model": SHOPKEEPER,
        },
    )
    daemon.call("session/respond", {"session": "shopkeeper", "prompt": PROMPT})
    daemon.call(
        "npc/create",
        {
            "npc": "gorm",
            "persona": {"name": "Gorm", "role": "the village smith"},
            "memory": {"facts": ["The player bought a dagger last week."], "relationship": 15},
            "model": {"type": "scripted", "steps": [{"json": NPC_LINE}]},
        },
    )
    daemon.call("npc/talk", {"npc": "gorm", "line": "Good morning, Gorm."})
    daemon.call("world/create", {"world": "village", "state": {"gold": 1, "inn": {"open": True}}})


def test_the_page_shows_a_session_its_turns_prompt_and_a_world_change_as_it_happens(tmp_path):
    daemon = Daemon(tmp_path / "token")
    try:
        play_scene(daemon)
        url = (
            f"{daemon.inspector['url']}#token={daemon.token}"
            "&connection=c1&kind=session&id=shopkeeper"
        )
        assert CHROMIUM is not None
        with browser(CHROMIUM) as chromium:
            page = chromium.open(url, 1360, 860)
            html = page.wait_for(
                "document.querySelector('#sessions li[data-id=\"shopkeeper\"]')"
                " && document.querySelector('#detail pre.prompt')"
                " && document.querySelector('#detail details.step .msg pre.content')"
                " && document.getElementById('status').textContent === 'live'"
            )
            assert "shopkeeper" in html and PROMPT in html
            steps = page.evaluate(
                "[...document.querySelectorAll('#detail details.step')].map(d => d.textContent)"
            )
            assert len(steps) == 2  # the tool call's step, then the answer's
            assert "You keep a small shop in Millbrook." in steps[0]  # its system message
            assert '"shelf": "top"' in steps[0]  # the tool call the model asked for
            assert "A dusty jar of pickled turnips, and a brass lantern." in steps[1]  # raw output
            daemon.call("world/set", {"world": "village", "path": "gold", "value": 2})
            html = page.wait_for(
                "document.getElementById('events').textContent.includes('village gold: 1 → 2')"
            )
            assert "village gold: 1 → 2" in html
            page.wait_for(  # and the world's listing follows it
                "document.querySelector('#worlds li[data-id=\"village\"]').textContent.includes('v1')"
            )
            if SCREENSHOT:
                page.evaluate(
                    "document.querySelectorAll('details.step').forEach(d => d.open = true)"
                )
                page.screenshot(SCREENSHOT)
    finally:
        daemon.close()

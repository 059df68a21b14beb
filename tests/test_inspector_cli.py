"""``--inspect`` on the real command line: ``oamd serve --inspect`` guards its page with the
daemon's own token and shows its socket clients; ``oamd stdio --inspect`` announces its page
before it reads anything, and removes the token file it wrote when it exits."""

from __future__ import annotations

import os
import subprocess

import anyio
import httpx
import orjson
import pytest
from conftest import OAMD
from serve_harness import serve

pytestmark = pytest.mark.anyio

INSPECTOR_LINE = '{"event":"inspector"'
RUN_SECONDS = 30


async def test_oamd_serve_inspect_asks_for_the_daemons_token_and_shows_its_clients():
    script = {"type": "scripted", "steps": [{"text": "Welcome."}]}
    async with serve("--inspect", "127.0.0.1:0") as daemon:
        with anyio.fail_after(RUN_SECONDS):
            announced = orjson.loads(await daemon.wait_for_log(INSPECTOR_LINE))
            async with daemon.connect("unix") as client:
                await client.request("session/create", {"session": "inn", "model": script})
                await client.request("session/respond", {"session": "inn", "prompt": "A room?"})
                async with httpx.AsyncClient(base_url=announced["url"]) as http:
                    refused = await http.get("/api/daemon")
                    listing = await http.get("/api/daemon", params={"token": daemon.token})
                    (conn,) = listing.json()["connections"]
                    detail = await http.get(
                        f"/api/connections/{conn['id']}/sessions/inn",
                        params={"token": daemon.token},
                    )
    assert announced["tokenFile"] == daemon.ready["tokenFile"]
    assert refused.status_code == 401 and listing.status_code == 200
    assert conn["transport"] == "unix" and conn["turns"] == 1
    (turn,) = detail.json()["turns"]
    assert turn["prompt"] == "A room?" and turn["text"] == "Welcome."


def test_oamd_stdio_inspect_announces_its_page_first_and_removes_the_token_file_it_wrote():
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "1.0"},
    }
    done = subprocess.run(
        [*OAMD, "stdio", "--inspect", "127.0.0.1:0"],
        input=orjson.dumps(initialize) + b"\n",
        capture_output=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    first = orjson.loads(done.stderr.splitlines()[0])
    assert first["event"] == "inspector" and first["url"].startswith("http://127.0.0.1:")
    assert not os.path.exists(first["tokenFile"])  # oamd wrote it: gone with the daemon
    (answer,) = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert answer["id"] == 1 and "result" in answer  # stdout: protocol lines only

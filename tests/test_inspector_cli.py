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


async def test_oamd_stdio_inspect_serves_its_page_while_the_engine_has_sent_nothing(tmp_path):
    """The page is served from the moment it is announced: run on its own, with stdin open and
    silent, as docs/INSPECTOR.md shows (it used to wait for the engine's first line)."""
    token_file = tmp_path / "token"
    argv = [*OAMD, "stdio", "--inspect", "127.0.0.1:0", "--inspect-token-file", str(token_file)]
    async with await anyio.open_process(argv) as process:
        assert process.stdin is not None and process.stderr is not None
        try:
            with anyio.fail_after(RUN_SECONDS):
                err = b""
                while b"\n" not in err:
                    err += await process.stderr.receive()
            announced = orjson.loads(err.split(b"\n", 1)[0])
            token = token_file.read_text().strip()
            async with httpx.AsyncClient(base_url=announced["url"], timeout=5) as http:
                page = await http.get("/")
                listing = await http.get("/api/daemon", params={"token": token})
            assert page.status_code == 200 and "page.js" in page.text
            assert listing.status_code == 200 and listing.json()["connections"][0]["inFlight"] == 0
            assert process.returncode is None  # still waiting for the engine
        finally:
            await process.stdin.aclose()  # end of input: the daemon exits 0
            with anyio.fail_after(RUN_SECONDS):
                assert await process.wait() == 0

"""A catalog model the game fetches itself (``--model llamacpp:NAME?pull=on-request``), through the
daemon as an engine polls it: ``initialize`` starts the download, ``model/availability`` reports
``downloading`` with ``bytesDownloaded`` / ``totalBytes`` until the file lands, verified, in the
store, and then the model loads in the same daemon. A failed download is reported once and the
next check starts it again; the option is refused where there is nothing to fetch. The catalog's
files come from a server on 127.0.0.1 (``$OAMD_CATALOG_BASE_URL``) serving the packaged SmolLM2
under a catalog name, so the load is real."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio
import anyio.to_thread
import pytest
from backends.llama_server import missing_reason
from model_server import UNPINNED_MODEL, Route, catalog_file, packaged_model_bytes, serving, sha256

from oamd.client import connect_stdio

pytestmark = pytest.mark.anyio

OAMD = [sys.executable, "-m", "oamd"]
WAIT_SECONDS = 60
"""Bound of a test's waits: under pytest's own timeout, so a stuck wait fails with its place."""
LLAMA_MISSING = missing_reason(server=False)
needs_llama = pytest.mark.skipif(LLAMA_MISSING is not None, reason=str(LLAMA_MISSING))
NAME = UNPINNED_MODEL
SPEC = f"llamacpp:{NAME}?pull=on-request"
POLL_SECONDS = 0.05


async def poll(client, until) -> list[dict]:
    """``model/availability`` asked until ``until(answer)``, every answer kept."""
    answers = [await client.request("model/availability", {})]
    while not until(answers[-1]):
        await anyio.sleep(POLL_SECONDS)
        answers.append(await client.request("model/availability", {}))
    return answers


@needs_llama
async def test_the_engines_check_starts_the_download_reports_progress_and_loads_the_model(
    tmp_path, monkeypatch
):
    body = packaged_model_bytes()
    paused_at = len(body) // 3
    route = Route(body, pause_after=paused_at)
    with serving({catalog_file(): route}) as server:
        monkeypatch.setenv("OAMD_MODELS", str(tmp_path))
        monkeypatch.setenv("OAMD_CATALOG_BASE_URL", server.url(""))
        async with connect_stdio(args=["--model", SPEC]) as client:
            with anyio.fail_after(WAIT_SECONDS):
                init = await client.request("initialize", {"protocolVersion": "1.0"})
                during = await poll(client, lambda a: a.get("bytesDownloaded") == paused_at)
                route.release.set()
                after = await poll(client, lambda a: a["status"] != "downloading")
                ping = await client.request("ping", {})
    assert init["model"]["status"] == "downloading" and init["model"]["available"] is False
    assert all(a["status"] == "downloading" and a["available"] is False for a in during)
    assert during[-1]["totalBytes"] == len(body)  # the server's length: the catalog pins none
    assert f"fetching {NAME} on request" in during[-1]["detail"]
    shown = [a["bytesDownloaded"] for a in during]
    assert shown == sorted(shown)
    assert after[-1]["available"] is True and after[-1]["status"] == "available"
    assert ping == {}
    stored = tmp_path / f"{NAME}.gguf"
    assert sha256(stored.read_bytes()) == sha256(body)
    assert not (tmp_path / f"{NAME}.gguf.part").exists()
    assert len(server.ranges_asked(catalog_file())) == 1  # one download, however many checks


@needs_llama
async def test_a_failed_download_is_reported_once_and_the_next_check_starts_it_again(
    tmp_path, monkeypatch
):
    route = Route(status=503)
    with serving({catalog_file(): route}) as server:
        monkeypatch.setenv("OAMD_MODELS", str(tmp_path))
        monkeypatch.setenv("OAMD_CATALOG_BASE_URL", server.url(""))
        async with connect_stdio(args=["--model", SPEC]) as client:
            with anyio.fail_after(WAIT_SECONDS):
                await client.request("initialize", {"protocolVersion": "1.0"})
                failed = (await poll(client, lambda a: a["status"] != "downloading"))[-1]
                route.status, route.body = 200, packaged_model_bytes()
                again = await client.request("model/availability", {})
                ready = (await poll(client, lambda a: a["status"] != "downloading"))[-1]
    assert failed["status"] == "downloadable" and failed["available"] is False
    assert failed["detail"].startswith("download failed: ") and "503" in failed["detail"]
    assert again["status"] == "downloading"  # the failure was said once; this check retried
    assert ready["available"] is True
    assert len(server.ranges_asked(catalog_file())) >= 2


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("llamacpp:/models/mine.gguf?pull=on-request", "fetches a model the catalog names"),
        ("llamacpp?pull=on-request", "fetches a model the catalog names"),
        ("llamacpp:hf:Org/Repo/file.gguf?pull=on-request", "fetches a model the catalog names"),
        (f"llamacpp:{NAME}?pull=always", "option 'pull' must be off or on-request"),
    ],
)
def test_the_option_is_refused_where_there_is_nothing_to_fetch(tmp_path, spec, said):
    done = subprocess.run(
        [*OAMD, "check", "--model", spec],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "OAMD_MODELS": str(tmp_path)},
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr


@needs_llama
async def test_without_the_option_the_daemon_starts_no_download(tmp_path, monkeypatch):
    with serving({catalog_file(): Route(packaged_model_bytes())}) as server:
        monkeypatch.setenv("OAMD_MODELS", str(tmp_path))
        monkeypatch.setenv("OAMD_CATALOG_BASE_URL", server.url(""))
        async with connect_stdio(args=["--model", f"llamacpp:{NAME}"]) as client:
            with anyio.fail_after(WAIT_SECONDS):
                await client.request("initialize", {"protocolVersion": "1.0"})
                asked = await client.request("model/availability", {})
    assert asked["status"] == "downloadable"
    assert f"oamd models pull {NAME}" in asked["detail"]
    assert server.ranges_asked(catalog_file()) == []

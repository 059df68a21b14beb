"""``oamd models pull|list|rm`` run as a user runs them, against a file server on 127.0.0.1
(``model_server``): a broken download is resumed with ``Range`` and ends with the same bytes, a
file that is not what was expected is refused and deleted, every failure is one line naming the
URL and the offline alternative, two pulls of one model at once leave one good file, and the
progress shows as JSON lines off a terminal and as a bar on one."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pty
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import anyio
import anyio.to_thread
import orjson
import pytest
from model_server import Route, serving, sha256, small_gguf

import oamd.cli

OAMD = [sys.executable, "-m", "oamd"]
RUN_SECONDS = 60
WAIT_SECONDS = 40
"""Bound of a test's waits: under pytest's own timeout, so a stuck wait fails with its place."""
SIZE = 3 * 1024 * 1024 + 17
"""A few of the server's sends and of the JSON progress steps, and no two sizes alike."""
OFFLINE = "--model llamacpp:/path/to/model.gguf"
EXIT_DOWNLOAD_FAILED, EXIT_REFUSED, EXIT_STORE_FAILED = 4, 5, 6


def models(store: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OAMD, "models", *argv],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
        env={**os.environ, "OAMD_MODELS": str(store)},
    )


def failure_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line that is not a JSON progress event."""
    lines = [text for text in done.stderr.splitlines() if not text.startswith("{")]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("oamd models pull: ")
    return lines[0]


def test_a_broken_download_is_resumed_by_the_next_pull_with_a_range_request(tmp_path):
    body = small_gguf(SIZE)
    cut = SIZE // 3
    route = Route(body, cut_at=cut)
    with serving({"/Tiny-Q4_K_M.gguf": route}) as server:
        url = server.url("/Tiny-Q4_K_M.gguf")
        first = models(tmp_path, "pull", url)
        kept = (tmp_path / "tiny-q4_k_m.gguf.part").stat().st_size
        complete = (tmp_path / "tiny-q4_k_m.gguf").exists()
        route.cut_at = None
        second = models(tmp_path, "pull", url)
    assert first.returncode == EXIT_DOWNLOAD_FAILED
    line = failure_line(first)
    assert url in line and "resume" in line and OFFLINE in line
    assert kept == cut
    assert not complete  # never half a model under its name
    assert second.returncode == 0, second.stderr
    assert server.ranges_asked("/Tiny-Q4_K_M.gguf")[-1] == f"bytes={cut}-"
    assert (tmp_path / "tiny-q4_k_m.gguf").read_bytes() == body
    assert second.stdout == f"{tmp_path / 'tiny-q4_k_m.gguf'}\n"
    assert not (tmp_path / "tiny-q4_k_m.gguf.part").exists()


def test_a_connection_cut_once_is_resumed_within_the_same_pull(tmp_path):
    body = small_gguf(SIZE, seed=1)
    with serving({"/m.gguf": Route(body, cut_at=SIZE // 2, cuts=1)}) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"))
    assert done.returncode == 0, done.stderr
    assert server.ranges_asked("/m.gguf") == [None, f"bytes={SIZE // 2}-"]
    assert (tmp_path / "m.gguf").read_bytes() == body


def test_a_server_that_ignores_range_is_read_again_from_the_first_byte(tmp_path):
    body = small_gguf(SIZE, seed=2)
    (tmp_path / "m.gguf.part").write_bytes(b"GGUF stale bytes")  # not a prefix of the file
    with serving({"/m.gguf": Route(body, ranges=False)}) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"))
    assert done.returncode == 0, done.stderr
    assert server.ranges_asked("/m.gguf") == ["bytes=16-"]
    assert (tmp_path / "m.gguf").read_bytes() == body


def pull_watching_the_part(store: Path, *argv: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """``oamd models pull``, and the most bytes its part file held while it ran."""
    part, largest, running = store / "m.gguf.part", [0], threading.Event()

    def watch() -> None:
        while not running.is_set():
            with contextlib.suppress(OSError):  # no part yet, or no more
                largest[0] = max(largest[0], part.stat().st_size)
            time.sleep(0.001)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        done = models(store, "pull", *argv)
    finally:
        running.set()
        watcher.join()
    return done, largest[0]


@pytest.mark.parametrize("known_from", ["content-range", "first-pull"])
def test_a_body_longer_than_the_known_size_is_refused_at_once_and_its_part_deleted(
    tmp_path, known_from
):
    body = small_gguf(SIZE)
    route = Route(body, excess=64 * 1024 * 1024, length=known_from == "content-range")
    with serving({"/m.gguf": route}) as server:
        url = server.url("/m.gguf")
        if known_from == "first-pull":  # the size the URL had (as the catalog's size would)
            known = {url: {"sha256": sha256(body), "size": SIZE}}
            (tmp_path / "digests.json").write_bytes(orjson.dumps(known))
        else:  # a resumed pull: the 206's Content-Range says the file's size
            (tmp_path / "m.gguf.part").write_bytes(body[: SIZE // 2])
        done, largest = pull_watching_the_part(tmp_path, url)
    assert done.returncode == EXIT_REFUSED
    assert f"more than the {SIZE} bytes" in failure_line(done)
    assert largest <= SIZE
    assert not (tmp_path / "m.gguf.part").exists()


@pytest.mark.parametrize("option", ["--name", "--sha256"])
def test_a_name_or_sha256_ending_in_a_line_break_is_a_usage_error(tmp_path, option):
    body = small_gguf(SIZE)
    value = "m\n" if option == "--name" else f"{sha256(body)}\n"
    with serving({"/m.gguf": Route(body)}) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"), option, value)
    assert done.returncode == 2, done.stderr
    assert server.requests == []
    assert list(tmp_path.iterdir()) == []


def test_a_file_whose_sha256_is_not_the_expected_one_is_refused_and_deleted(tmp_path):
    body = small_gguf(SIZE)
    with serving({"/m.gguf": Route(body)}) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"), "--sha256", "0" * 64)
    assert done.returncode == EXIT_REFUSED
    line = failure_line(done)
    assert sha256(body) in line and "deleted" in line and server.url("/m.gguf") in line
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".lock") == []


def test_a_url_is_checked_from_then_on_against_the_digest_it_first_had_unless_one_is_given(
    tmp_path,
):
    route = Route(small_gguf(SIZE, seed=1))
    with serving({"/m.gguf": route}) as server:
        url = server.url("/m.gguf")
        assert models(tmp_path, "pull", url).returncode == 0
        assert models(tmp_path, "rm", "m").returncode == 0
        route.body = small_gguf(SIZE, seed=2)  # the same URL now serves other bytes
        done = models(tmp_path, "pull", url)
        gone = not (tmp_path / "m.gguf").exists()
        vouched = models(tmp_path, "pull", url, "--sha256", sha256(route.body))
        again = models(tmp_path, "pull", url)  # the digest vouched for is the one kept
    assert done.returncode == EXIT_REFUSED
    assert f"{sha256(small_gguf(SIZE, seed=1))} was expected" in failure_line(done)
    assert gone
    assert vouched.returncode == again.returncode == 0, vouched.stderr
    assert (tmp_path / "m.gguf").read_bytes() == route.body


def test_a_page_instead_of_a_model_is_refused(tmp_path):
    with serving({"/m.gguf": Route(b"<!doctype html><p>Log in to download</p>")}) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"))
    assert done.returncode == EXIT_REFUSED
    assert "not a GGUF file" in failure_line(done)
    assert not (tmp_path / "m.gguf").exists()


@pytest.mark.parametrize("status", [404, 500, 503])
def test_an_http_error_is_one_line_naming_the_url_and_the_offline_alternative(tmp_path, status):
    with serving({"/m.gguf": Route(status=status)}) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"))
    assert done.returncode == EXIT_DOWNLOAD_FAILED
    line = failure_line(done)
    assert server.url("/m.gguf") in line and f"HTTP {status}" in line and OFFLINE in line
    assert done.stdout == ""


def test_no_network_is_one_line_naming_the_url_and_the_offline_alternative(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/m.gguf"
    done = models(tmp_path, "pull", url)
    assert done.returncode == EXIT_DOWNLOAD_FAILED
    line = failure_line(done)
    assert url in line and "cannot reach" in line and OFFLINE in line


def test_a_redirect_is_followed_and_the_model_keeps_the_name_of_the_url_asked(tmp_path):
    body = small_gguf(SIZE)
    routes = {"/dl/Smol-Q8_0.gguf": Route(location="/cdn/blob-1234"), "/cdn/blob-1234": Route(body)}
    with serving(routes) as server:
        done = models(tmp_path, "pull", server.url("/dl/Smol-Q8_0.gguf"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "smol-q8_0.gguf").read_bytes() == body


@pytest.mark.parametrize("content_range", [None, f"bytes */{SIZE}"])
def test_a_416_to_a_request_for_the_whole_file_is_an_http_error(tmp_path, content_range):
    headers = {"Content-Range": content_range} if content_range else {}
    with serving({"/m.gguf": Route(status=416, headers=headers)}) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"))
    assert done.returncode == EXIT_DOWNLOAD_FAILED, done.stderr
    line = failure_line(done)
    assert "HTTP 416" in line and server.url("/m.gguf") in line and OFFLINE in line
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".lock") == []


@pytest.mark.parametrize("resumed", [False, True])
def test_a_content_range_in_other_digits_than_ascii_ones_is_not_believed(tmp_path, resumed):
    """``str.isdigit`` is true of '²' and '¹', which ``int`` refuses (found by hostile_http)."""
    body = small_gguf(SIZE)
    if resumed:
        (tmp_path / "m.gguf.part").write_bytes(body[:100])
    weird = {"Content-Range": "bytes \u00b9\u00b2-\u00b3/\u00b9\u00b2"}
    with serving({"/m.gguf": Route(body, headers=weird)}) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"))
    assert done.returncode == 0, done.stderr  # Content-Length says the size instead
    assert (tmp_path / "m.gguf").read_bytes() == body


def test_a_redirect_loop_is_an_http_error(tmp_path):
    routes = {"/m.gguf": Route(location="/n.gguf"), "/n.gguf": Route(location="/m.gguf")}
    with serving(routes) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"))
    assert done.returncode == EXIT_DOWNLOAD_FAILED, done.stderr
    line = failure_line(done)
    assert "redirect" in line and server.url("/m.gguf") in line and OFFLINE in line


def test_a_store_that_is_a_file_is_a_store_failure(tmp_path):
    store = tmp_path / "models"
    store.write_text("not a folder")
    with serving({"/m.gguf": Route(small_gguf(SIZE))}) as server:
        done = models(store, "pull", server.url("/m.gguf"))
    assert done.returncode == EXIT_STORE_FAILED, done.stderr
    line = failure_line(done)
    assert f"{store} is not a folder" in line and "$OAMD_MODELS" in line
    assert store.read_text() == "not a folder"


def test_a_model_that_exactly_fills_the_disk_ends_cleanly_and_resumes_once_space_is_freed(
    tmp_path, monkeypatch, capsys
):
    """The free space is the model's size: the body fits, then the store's small JSON files
    cannot be written (a full disk creates the file and fails the write)."""
    from oamd.models import download

    monkeypatch.setenv("OAMD_MODELS", str(tmp_path))
    full = SimpleNamespace(total=SIZE, used=0, free=SIZE)
    monkeypatch.setattr(download.shutil, "disk_usage", lambda _: full)
    part, model = tmp_path / "m.gguf.part", tmp_path / "m.gguf"
    write_bytes = Path.write_bytes

    def disk_full_once_the_body_is_in(path: Path, data: bytes) -> int:
        if model.exists() or (part.exists() and part.stat().st_size == SIZE):
            path.touch()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return write_bytes(path, data)

    monkeypatch.setattr(Path, "write_bytes", disk_full_once_the_body_is_in)
    body = small_gguf(SIZE)
    with serving({"/m.gguf": Route(body)}) as server:
        url = server.url("/m.gguf")
        code = oamd.cli.main(["models", "pull", url, "--progress", "none"])
        err = capsys.readouterr().err
        left = sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".lock")
        monkeypatch.setattr(Path, "write_bytes", write_bytes)  # space was freed
        again = oamd.cli.main(["models", "pull", url, "--progress", "none"])
    assert code == EXIT_STORE_FAILED
    assert err.count("\n") == 1 and "disk filled up" in err and url in err and "resume" in err
    assert left == ["m.gguf.part", "m.pull.json"]  # no temporary file, no model without record
    assert again == 0
    assert server.ranges_asked("/m.gguf") == [None, f"bytes={SIZE}-"]  # nothing downloaded twice
    assert (tmp_path / "m.gguf").read_bytes() == body


def test_not_enough_free_space_is_refused_before_a_byte_is_written(tmp_path, monkeypatch, capsys):
    from oamd.models import download

    monkeypatch.setenv("OAMD_MODELS", str(tmp_path))
    nearly_full = SimpleNamespace(total=SIZE, used=SIZE - 10, free=10)
    monkeypatch.setattr(download.shutil, "disk_usage", lambda _: nearly_full)
    with serving({"/m.gguf": Route(small_gguf(SIZE))}) as server:
        code = oamd.cli.main(["models", "pull", server.url("/m.gguf"), "--progress", "none"])
    err = capsys.readouterr().err
    assert code == EXIT_STORE_FAILED
    assert "not enough space" in err and server.url("/m.gguf") in err and OFFLINE in err
    assert not (tmp_path / "m.gguf.part").exists()


def test_progress_off_a_terminal_is_one_json_line_per_step(tmp_path):
    with serving({"/m.gguf": Route(small_gguf(SIZE))}) as server:
        done = models(tmp_path, "pull", server.url("/m.gguf"))
    events = [orjson.loads(text) for text in done.stderr.splitlines() if text.startswith("{")]
    kinds = [event["event"] for event in events]
    steps = [event["bytesDownloaded"] for event in events if event["event"] == "pull_progress"]
    assert kinds[0] == "pull_started" and kinds[-1] == "pull_verifying"
    assert steps == sorted(steps) and steps[-1] == SIZE and len(steps) >= 1
    assert {event["model"] for event in events} == {"m"}
    assert all(event["totalBytes"] == SIZE for event in events if "totalBytes" in event)


def test_progress_on_a_terminal_is_a_bar(tmp_path):
    leader, follower = pty.openpty()
    rows_columns = struct.pack("HHHH", 24, 80, 0, 0)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, rows_columns)  # a fresh pty is 0 columns wide
    with serving({"/m.gguf": Route(small_gguf(SIZE))}) as server:
        done = subprocess.run(
            [*OAMD, "models", "pull", server.url("/m.gguf")],
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=RUN_SECONDS,
            check=False,
            env={**os.environ, "OAMD_MODELS": str(tmp_path)},
        )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal's other side is closed: all was read
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert done.returncode == 0
    assert b"100%" in shown and b"{" not in shown


@pytest.mark.anyio
async def test_two_pulls_of_one_model_at_once_leave_one_good_file(tmp_path):
    body = small_gguf(SIZE)
    route = Route(body, pause_after=SIZE // 2)
    env = {**os.environ, "OAMD_MODELS": str(tmp_path)}
    with serving({"/m.gguf": route}) as server:
        url = server.url("/m.gguf")
        with anyio.fail_after(WAIT_SECONDS):
            first = await anyio.open_process([*OAMD, "models", "pull", url], env=env)
            await anyio.to_thread.run_sync(route.paused.wait)
            second = await anyio.open_process([*OAMD, "models", "pull", url], env=env)
            assert second.stderr is not None
            said = b""
            while b"pull_waiting" not in said:
                said += await second.stderr.receive()
            route.release.set()
            outputs = []
            for process in (first, second):
                assert process.stdout is not None
                out = b""
                async for chunk in process.stdout:
                    out += chunk
                outputs.append(out)
                await process.wait()
    assert first.returncode == second.returncode == 0
    assert outputs[0] == outputs[1] == f"{tmp_path / 'm.gguf'}\n".encode()
    assert (tmp_path / "m.gguf").read_bytes() == body
    assert len(server.requests) == 1  # the second found the first one's verified file


SMOLLM2_360M = (
    "/HuggingFaceTB/SmolLM2-360M-Instruct-GGUF/resolve/main/smollm2-360m-instruct-q8_0.gguf"
)
"""The path of a catalog model (one whose digest the catalog does not pin) below its host."""


def from_mirror(store: Path, base: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OAMD, "models", *argv],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
        env={**os.environ, "OAMD_MODELS": str(store), "OAMD_CATALOG_BASE_URL": base},
    )


def test_a_catalog_model_is_pulled_from_the_mirror_oamd_catalog_base_url_names(tmp_path):
    body = small_gguf(SIZE, seed=3)
    with serving({SMOLLM2_360M: Route(body)}) as server:
        base = server.url("/")
        pulled = from_mirror(
            tmp_path, base, "pull", "smollm2-360m-instruct", "--sha256", sha256(body)
        )
        wrong = from_mirror(
            tmp_path / "other", base, "pull", "smollm2-360m-instruct", "--sha256", "0" * 64
        )
        listed = from_mirror(tmp_path, base, "list", "--json").stdout.splitlines()
    assert pulled.returncode == 0, pulled.stderr
    assert server.ranges_asked(SMOLLM2_360M) == [None, None]
    assert sha256((tmp_path / "smollm2-360m-instruct.gguf").read_bytes()) == sha256(body)
    assert wrong.returncode == EXIT_REFUSED and sha256(body) in failure_line(wrong)
    rows = {row["name"]: row for row in map(orjson.loads, listed)}
    assert rows["smollm2-360m-instruct"]["url"] == server.url(SMOLLM2_360M)
    assert rows["qwen3-0.6b"]["url"].startswith(server.url("/Qwen/"))


def test_a_mirror_is_held_to_the_catalogs_pinned_size_and_digest(tmp_path):
    path = "/Qwen/Qwen2.5-0.5B-Instruct-GGUF/resolve/9217f5db79a29953eb74d5343926648285ec7e67"
    path += "/qwen2.5-0.5b-instruct-q4_k_m.gguf"
    with serving({path: Route(small_gguf(SIZE))}) as server:
        done = from_mirror(tmp_path, server.url(""), "pull", "qwen2.5-0.5b-instruct")
    assert done.returncode == EXIT_REFUSED
    assert f"the server offers {SIZE} bytes, 491400032 were expected" in failure_line(done)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".lock") == []


def test_a_mirror_that_is_not_an_http_url_is_a_usage_error(tmp_path):
    done = from_mirror(tmp_path, "file:///srv/models", "pull", "qwen3-0.6b")
    assert done.returncode == 2
    assert "OAMD_CATALOG_BASE_URL" in done.stderr and "file:///srv/models" in done.stderr


def test_list_shows_catalog_and_pulled_models_and_rm_deletes_one(tmp_path):
    with serving({"/m.gguf": Route(small_gguf(SIZE))}) as server:
        models(tmp_path, "pull", server.url("/m.gguf"))
    listed = [orjson.loads(text) for text in models(tmp_path, "list", "--json").stdout.splitlines()]
    rows = {row["name"]: row for row in listed}
    assert rows["m"]["status"] == "pulled" and rows["m"]["bytes"] == SIZE
    assert rows["qwen2.5-0.5b-instruct"]["status"] == "not pulled"
    assert rows["qwen2.5-0.5b-instruct"]["licence"] == "Apache-2.0"
    table = models(tmp_path, "list").stdout
    assert table.startswith(f"store: {tmp_path} ")
    removed, again = models(tmp_path, "rm", "m"), models(tmp_path, "rm", "m")
    assert removed.returncode == 0 and not (tmp_path / "m.gguf").exists()
    assert again.returncode == 3 and "no model 'm'" in again.stderr
    assert "m" not in {
        orjson.loads(t)["name"] for t in models(tmp_path, "list", "--json").stdout.splitlines()
    }


@pytest.mark.parametrize("record", ['{"sha256": 5, "url": ["x"]}', "[1, 2]", "{not json"])
def test_a_store_record_of_the_wrong_types_is_read_as_far_as_its_types_hold(tmp_path, record):
    with serving({"/m.gguf": Route(small_gguf(SIZE))}) as server:
        assert models(tmp_path, "pull", server.url("/m.gguf")).returncode == 0
        (tmp_path / "m.json").write_text(record)
        again = models(tmp_path, "pull", server.url("/m.gguf"))
        listed = models(tmp_path, "list", "--json")
    assert again.returncode == 0, again.stderr
    assert "Traceback" not in again.stderr + listed.stderr
    rows = {orjson.loads(text)["name"]: orjson.loads(text) for text in listed.stdout.splitlines()}
    assert rows["m"]["status"] == "pulled"


def test_the_list_shows_the_model_that_runs_by_default_first(tmp_path):
    from oamd.backends.llamacpp.packaged_model import packaged_model_path

    packaged = packaged_model_path()
    rows = [orjson.loads(text) for text in models(tmp_path, "list", "--json").stdout.splitlines()]
    table = models(tmp_path, "list").stdout.splitlines()
    first = rows[0]
    assert (first["name"], first["status"], first["catalog"]) == (
        "smollm2-135m-instruct",
        "default" if packaged else "missing",
        False,
    )
    assert first["path"] == (str(packaged) if packaged else None)
    assert "--model llamacpp runs it" in first["source"]
    assert table[2].split()[0] == "smollm2-135m-instruct"
    assert table[-1].startswith("--model llamacpp runs the default (smollm2-135m-instruct")

"""``oamd serve`` endpoints: loopback only by default, safe socket files, the ready line."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

import anyio
import pytest
from serve_harness import serve, short_dir

pytestmark = pytest.mark.anyio

SERVE = [sys.executable, "-m", "oamd", "serve"]


async def refused_start(*args: str) -> str:
    """Runs ``oamd serve`` expecting it to refuse to start; returns its stderr."""
    with anyio.fail_after(10):
        result = await anyio.run_process([*SERVE, *args], check=False, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    return result.stderr.decode()


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0"])
async def test_a_non_loopback_tcp_bind_is_refused_without_allow_remote(address):
    assert "--allow-remote" in await refused_start("--tcp", address)


async def test_allow_remote_permits_a_wildcard_bind():
    async with serve("--tcp", "0.0.0.0:0", "--allow-remote", tcp=False) as daemon:
        host, port = daemon.tcp
        assert host == "0.0.0.0" and port > 0
        async with daemon.connect("tcp") as client:
            with anyio.fail_after(5):
                assert await client.request("ping") == {}


async def test_port_zero_reports_the_chosen_port_on_stderr_and_in_the_ready_file():
    async with serve(unix=False) as daemon:
        host, port = daemon.tcp
        assert host == "127.0.0.1" and port > 0
        with open(os.path.join(daemon.directory, "ready.json"), encoding="utf-8") as file:
            assert json.loads(file.read()) == daemon.ready
        assert daemon.ready["pid"] == daemon.pid


async def test_the_socket_file_is_0600_and_removed_on_exit():
    async with serve(tcp=False) as daemon:
        path = daemon.unix_path
        mode = os.lstat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        assert await daemon.stop() == 0
    assert not os.path.exists(path)


async def test_a_stale_socket_file_is_replaced():
    with short_dir() as where:
        path = os.path.join(where, "s")
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(path)
        stale.close()  # the file stays; nobody listens on it
        async with serve(tcp=False, directory=where) as daemon, daemon.connect() as client:
            with anyio.fail_after(5):
                assert await client.request("ping") == {}


async def test_a_socket_someone_listens_on_is_not_taken_over():
    with short_dir() as where:
        path = os.path.join(where, "s")
        live = socket.socket(socket.AF_UNIX)
        live.bind(path)
        live.listen()
        try:
            assert "another server" in await refused_start("--unix", path)
            assert os.path.exists(path)
        finally:
            live.close()


async def test_a_symlink_at_the_socket_path_is_refused_and_left_alone():
    with short_dir() as where:
        target = os.path.join(where, "target")
        path = os.path.join(where, "s")
        os.symlink(target, path)
        assert "symbolic link" in await refused_start("--unix", path)
        assert os.path.islink(path) and not os.path.exists(target)


async def test_a_regular_file_at_the_socket_path_is_refused_and_kept():
    with short_dir() as where:
        path = os.path.join(where, "s")
        with open(path, "w", encoding="utf-8") as file:
            file.write("precious")
        assert "not a socket" in await refused_start("--unix", path)
        with open(path, encoding="utf-8") as file:
            assert file.read() == "precious"


async def test_nothing_to_listen_on_is_a_usage_error():
    assert "--unix" in await refused_start()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets are Linux-only")
async def test_an_abstract_socket_serves_same_uid_clients():
    name = f"oamd-test-abstract-{os.getpid()}"
    async with serve("--abstract", name, unix=False, tcp=False) as daemon:
        assert daemon.endpoint("abstract") == {"transport": "abstract", "name": name}
        async with daemon.connect("abstract", token=None) as client:
            with anyio.fail_after(5):
                assert await client.request("ping") == {}


async def test_several_listeners_serve_at_once():
    async with serve() as daemon, daemon.connect("unix") as a, daemon.connect("tcp") as b:
        with anyio.fail_after(5):
            assert await a.request("ping") == await b.request("ping") == {}

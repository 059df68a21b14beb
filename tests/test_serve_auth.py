"""``oamd serve`` authentication: the token in ``initialize``'s ``auth``, and the same-uid rule."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import anyio
import pytest
from anyio.abc import ByteStream
from serve_harness import line, read_line, read_to_end, serve

from oamd.client import RpcError
from oamd.limits import MAX_PENDING_AUTH

pytestmark = pytest.mark.anyio


def refused(reply: dict | None, reason: str) -> bool:
    assert reply is not None
    error = reply["error"]
    assert (error["code"], error["data"]["code"]) == (-32600, "invalid_message")
    assert error["data"]["auth"] == reason
    return True


async def test_a_tcp_client_with_the_token_is_served():
    async with serve() as daemon, daemon.connect("tcp") as client:
        with anyio.fail_after(5):
            assert client.initialized["protocolVersion"] == "1.0"
            assert await client.request("ping") == {}


async def test_a_tcp_client_without_the_token_is_refused_and_disconnected():
    async with serve() as daemon:
        stream = await daemon.raw("tcp")
        async with stream:
            with anyio.fail_after(5):
                await stream.send(line({"jsonrpc": "2.0", "id": 1, "method": "initialize"}))
                reply = await read_line(stream)
                assert refused(reply, "required")
                assert reply["id"] == 1
                assert "token" in reply["error"]["message"]
                assert await read_to_end(stream) == b""


async def test_a_wrong_token_is_refused_without_echoing_it():
    async with serve() as daemon:
        with anyio.fail_after(5), pytest.raises(RpcError) as caught:
            async with daemon.connect("tcp", token="not-the-token"):
                pass
        assert caught.value.data == {"code": "invalid_message", "auth": "invalid"}
        assert "not-the-token" not in caught.value.message
        assert all("not-the-token" not in text for text in daemon.log)
        assert all(daemon.token not in text for text in daemon.log)


@pytest.mark.parametrize(
    "first",
    [
        line({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
        line({"jsonrpc": "2.0", "method": "initialize", "params": {"auth": "x"}}),
        b"not json\n",
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"auth":5}}\n',
    ],
)
async def test_anything_but_an_authenticated_initialize_first_closes_the_connection(first):
    async with serve() as daemon:
        stream = await daemon.raw("tcp")
        async with stream:
            with anyio.fail_after(5):
                # a valid request pipelined behind the bad first line must not be served
                await stream.send(first + line({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
                reply = await read_line(stream)
                assert refused(reply, "required")
                assert reply["id"] in (None, 1, 7)
                assert await read_to_end(stream) == b""


async def test_a_client_that_never_authenticates_is_disconnected_after_the_timeout():
    async with serve("--auth-timeout", "0.2") as daemon:
        stream = await daemon.raw("tcp")
        async with stream:
            with anyio.fail_after(5):
                assert await read_to_end(stream) == b""


async def test_the_token_file_is_private_and_holds_a_long_random_token():
    async with serve() as daemon:
        assert os.stat(daemon.ready["tokenFile"]).st_mode & 0o777 == 0o600
        assert len(daemon.token) >= 40
        token_file = daemon.ready["tokenFile"]
    assert not os.path.exists(token_file)  # it made the file, so it removes it


async def test_an_existing_token_file_is_used_and_kept(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("my-shared-secret\n")
    token_file.chmod(0o600)
    async with serve("--token-file", str(token_file)) as daemon:
        async with daemon.connect("tcp", token="my-shared-secret") as client:
            with anyio.fail_after(5):
                assert await client.request("ping") == {}
    assert token_file.read_text() == "my-shared-secret\n"


async def test_a_token_file_others_can_read_is_refused(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("secret\n")
    token_file.chmod(0o644)
    argv = [sys.executable, "-m", "oamd", "serve", "--tcp", "127.0.0.1:0"]
    result = await anyio.run_process(
        [*argv, "--token-file", str(token_file)], check=False, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 2
    assert b"chmod 600" in result.stderr


async def test_a_token_file_that_is_a_fifo_is_refused_at_once(tmp_path):
    # opening a FIFO for reading waits for a writer: the daemon hung before it looked at the file
    fifo = tmp_path / "token"
    os.mkfifo(fifo, 0o600)
    argv = [sys.executable, "-m", "oamd", "serve", "--tcp", "127.0.0.1:0"]
    with anyio.fail_after(20):  # start-up takes well under a second; the hang was forever
        result = await anyio.run_process(
            [*argv, "--token-file", str(fifo)], check=False, stdin=subprocess.DEVNULL
        )
    assert result.returncode == 2
    assert result.stderr.decode().strip().splitlines() == [
        f"oamd serve: --token-file {fifo}: not a regular file of this user."
    ]


async def test_a_same_uid_unix_client_needs_no_token():
    async with serve() as daemon, daemon.connect("unix", token=None) as client:
        with anyio.fail_after(5):
            assert await client.request("ping") == {}


async def test_with_require_token_a_same_uid_unix_client_must_authenticate():
    async with serve("--require-token") as daemon:
        with anyio.fail_after(5):
            with pytest.raises(RpcError) as caught:
                async with daemon.connect("unix", token=None):
                    pass
            assert caught.value.data["auth"] == "required"
            async with daemon.connect("unix") as client:
                assert await client.request("ping") == {}


OTHER_UID_CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\\0" + sys.argv[1])
params = {"auth": sys.argv[2]} if len(sys.argv) > 2 else {}
s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode() + b"\\n")
s.sendall(b'{"jsonrpc":"2.0","id":2,"method":"ping"}\\n')
data = b""
while data.count(b"\\n") < 2:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(json.dumps([json.loads(x) for x in data.splitlines()]))
"""


SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")
"""A Python another user can run (the venv may sit in root's home); the client needs only stdlib."""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0 or SYSTEM_PYTHON is None,
    reason="needs root (to run a client under another uid) and a system python3",
)
async def test_a_unix_client_of_another_uid_must_present_the_token():
    name = f"oamd-test-{os.getpid()}"
    async with serve("--abstract", name, unix=False) as daemon:
        argv = [SYSTEM_PYTHON, "-I", "-c", OTHER_UID_CLIENT, name]
        with anyio.fail_after(10):
            without = await anyio.run_process(argv, user=65534, check=False)
            assert without.returncode == 0, without.stderr
            with_token = await anyio.run_process([*argv, daemon.token], user=65534, check=True)
    replies = json.loads(without.stdout)
    assert len(replies) == 1 and refused(replies[0], "required")
    replies = json.loads(with_token.stdout)
    assert replies[0]["result"]["protocolVersion"] == "1.0"
    assert replies[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_silent_unauthenticated_peers_never_keep_a_token_holder_out():
    """Peers that connect and say nothing (more than every budget) neither take client slots nor
    stop a client with the token from getting in; the oldest of them are dropped."""
    async with serve("--max-connections", "2", "--max-pending-auth", "3") as daemon:
        hogs = [await daemon.raw("tcp") for _ in range(10)]
        try:
            with anyio.fail_after(5):
                async with daemon.connect("tcp") as first, daemon.connect("tcp") as second:
                    assert await first.request("ping") == {}
                    assert await second.request("ping") == {}
                    stats = await first.request("test/serverStats")
                    assert stats["admitted"] == 2
                    assert stats["unauthenticated"] <= 3
                # the dropped hogs were closed without a word
                assert await read_to_end(hogs[0]) == b""
        finally:
            for hog in hogs:
                await hog.aclose()


async def test_a_token_holder_past_the_client_limit_gets_limit_reached_on_its_initialize():
    async with serve("--max-connections", "1") as daemon, daemon.connect("tcp") as first:
        with anyio.fail_after(5):
            stream = await daemon.raw("tcp")
            async with stream:
                params = {"auth": daemon.token}
                await stream.send(
                    line({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": params})
                )
                reply = await read_line(stream)
                assert reply is not None and reply["id"] == 7
                assert reply["error"]["code"] == -32055
                assert reply["error"]["data"] == {"code": "limit_reached", "limit": 1}
                assert await read_to_end(stream) == b""
            assert await first.request("ping") == {}


async def test_before_authentication_a_long_line_is_refused_early():
    """An unauthenticated peer cannot make the daemon hold a 16 MiB line: past the small pre-auth
    limit it is refused like any wrong first message and disconnected."""
    async with serve() as daemon:
        stream = await daemon.raw("tcp")
        async with stream:
            with anyio.fail_after(5):
                await stream.send(b"[" * (128 * 1024))  # no newline: the line is unfinished
                reply = await read_line(stream)
                assert refused(reply, "required")


def test_a_waiting_connection_whose_line_is_already_here_is_dropped_last():
    # the ranking rule itself: under a flood every waiting connection may be younger than the
    # grace, and the client whose initialize has arrived must still not be the one dropped
    from functools import partial
    from types import SimpleNamespace

    from oamd.serve.server import _eviction_rank

    now = 100.0

    def waiting_for(age: float, *, unread: bool = False, part: bool = False) -> SimpleNamespace:
        queue = SimpleNamespace(read_queue=[b"{"] if unread else [])
        stream = SimpleNamespace(_protocol=queue, extra=lambda *_: None)
        conn = SimpleNamespace(has_partial_line=part)
        return SimpleNamespace(stream=stream, conn=conn, connected_at=now - age)

    waiting = {
        "line here, young": waiting_for(0.05, unread=True),
        "silent, young": waiting_for(0.01),
        "part of a line, young": waiting_for(0.02, unread=True, part=True),
        "line here, old": waiting_for(0.5, unread=True),
        "part of a line, old": waiting_for(1.0, unread=True, part=True),
        "silent, old": waiting_for(2.0),
    }
    order = sorted(waiting, key=partial(_eviction_rank, waiting, now))
    assert order == [
        "part of a line, old",
        "silent, old",
        "line here, old",
        "part of a line, young",
        "silent, young",
        "line here, young",
    ]


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS from /proc")
async def test_a_flood_of_peers_that_never_authenticate_leaves_no_memory_behind():
    # each closed connection runs an explicit young collection, which reset the count that starts
    # the automatic middle-generation ones: what peers left there was never collected (the soak's
    # 16 hogs, ~1,200 connections a second: RSS 31 -> 600 MiB in 30 s)
    def rss_mib(pid: int) -> float:
        with open(f"/proc/{pid}/status") as status:
            for text in status:
                if text.startswith("VmRSS:"):
                    return int(text.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    async def hog(daemon: Any, until: float) -> None:
        while anyio.current_time() < until:
            try:
                stream = await daemon.raw("tcp")
            except OSError:
                continue
            async with stream:
                await stream.send(b'{"jsonrpc": "2.0", "method": "initia' + b"x" * 20_000)
                await anyio.sleep(0.005)

    async with serve() as daemon:
        async with daemon.connect("tcp") as probe:
            with anyio.fail_after(60):
                await probe.request("ping")
                start = rss_mib(daemon.pid)
                until = anyio.current_time() + 6
                async with anyio.create_task_group() as tg:
                    for _ in range(12):
                        tg.start_soon(hog, daemon, until)
                await probe.request("ping")
                grown = rss_mib(daemon.pid) - start
    print(f"RSS grew {grown:.1f} MiB")
    assert grown < 40, f"RSS grew {grown:.0f} MiB"


class HeldUntilDropped(ByteStream):
    """A client's socket whose first write waits until the daemon has closed it: the client
    connected, and its initialize had not left yet when newer silent peers arrived."""

    def __init__(self, stream: ByteStream) -> None:
        self._stream = stream
        self._dropped = anyio.Event()
        self._held = True

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._stream.receive(max_bytes)
        except anyio.EndOfStream:
            self._dropped.set()
            raise

    async def send(self, item: bytes) -> None:
        if self._held:
            self._held = False
            with anyio.move_on_after(5):  # never dropped: the write goes as it is
                await self._dropped.wait()
        await self._stream.send(item)

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()


async def test_a_client_dropped_before_its_initialize_left_reconnects_once_and_is_served(
    monkeypatch,
):
    """8 silent peers wait to authenticate (every --max-pending-auth place); our client connects,
    and 8 more silent peers arrive before its initialize is written: it is the oldest silent one,
    so it is dropped. oamd.client connects once more, sends its initialize at once, and is
    served."""
    import oamd.client._connect as connect_module

    connected = anyio.Event()
    opened: list[ByteStream] = []
    real_connect_tcp = anyio.connect_tcp

    async def connect_tcp(host: str, port: int) -> ByteStream:
        stream = await real_connect_tcp(host, port)
        if not opened:
            stream = HeldUntilDropped(stream)
        opened.append(stream)
        connected.set()
        return stream

    monkeypatch.setattr(connect_module.anyio, "connect_tcp", connect_tcp)
    async with serve() as daemon:
        hogs = [await real_connect_tcp(*daemon.tcp) for _ in range(MAX_PENDING_AUTH)]

        async def newer_hogs() -> None:
            await connected.wait()
            hogs.extend([await real_connect_tcp(*daemon.tcp) for _ in range(MAX_PENDING_AUTH)])

        try:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(newer_hogs)
                    async with daemon.connect("tcp") as client:
                        assert client.initialized["protocolVersion"] == "1.0"
                        assert await client.request("ping") == {}
        finally:
            for hog in hogs:
                await hog.aclose()
    assert len(opened) == 2  # dropped once, then served

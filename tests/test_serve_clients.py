"""The engine clients in ``clients/`` checked with real tools where they are installed: the Unity
package's C# Runtime compiled with Mono's ``mcs`` and driven through a session turn with a client tool
against a real ``oamd serve`` from this checkout (``test_unity_package.py`` drives the shipped
executable through everything else). Skipped where Mono is missing (``apt-get install mono-mcs
mono-runtime``). The Godot addon has its own file, ``test_godot_addon.py``."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import anyio
import anyio.abc
import pytest
from serve_harness import serve

pytestmark = pytest.mark.anyio

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
MCS = shutil.which("mcs")
MONO = shutil.which("mono")


@pytest.fixture
async def smoke_exe(tmp_path) -> Path:
    if MCS is None or MONO is None:
        pytest.skip("Mono (mcs, mono) is not installed")
    exe = tmp_path / "smoke.exe"
    runtime = sorted((CLIENTS / "unity" / "com.oamd.client" / "Runtime").rglob("*.cs"))
    sources = [*runtime, CLIENTS / "unity" / "smoke" / "Smoke.cs"]
    with anyio.fail_after(120):
        result = await anyio.run_process(
            [MCS, "-warnaserror", f"-out:{exe}", *map(str, sources)], check=False
        )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    return exe


async def test_the_csharp_client_runs_a_turn_with_a_client_tool(smoke_exe, tmp_path):
    async with serve(unix=False) as daemon:
        host, port = daemon.tcp
        with anyio.fail_after(60):
            result = await anyio.run_process(
                [MONO, str(smoke_exe), host, str(port), daemon.ready["tokenFile"]], check=False
            )
        out = result.stdout.decode()
        assert result.returncode == 0, out + result.stderr.decode()
        assert "text: the north gate is open" in out

        bad = tmp_path / "wrong"
        bad.write_text("wrong-token\n")
        bad.chmod(0o600)
        with anyio.fail_after(60):
            refused = await anyio.run_process(
                [MONO, str(smoke_exe), host, str(port), str(bad)], check=False
            )
        assert refused.returncode == 1
        assert "Authentication failed" in refused.stdout.decode()


async def test_the_csharp_client_connects_once_more_when_dropped_before_its_initialize_is_answered(
    smoke_exe,
):
    """A front on loopback closes the client's first connection without a word, as ``oamd serve``
    drops a connection still waiting to authenticate under a flood of silent peers (PROTOCOL.md,
    "The handshake"), and passes later ones to the daemon: the client connects once more and its
    turn runs."""
    async with serve(unix=False) as daemon:
        accepted = 0

        async def front(client) -> None:
            nonlocal accepted
            accepted += 1
            async with client:
                if accepted == 1:
                    return  # dropped unanswered
                async with await anyio.connect_tcp(*daemon.tcp) as upstream:

                    async def pump(source, sink) -> None:
                        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                            async for chunk in source:
                                await sink.send(chunk)
                        with contextlib.suppress(OSError, anyio.BrokenResourceError):
                            await sink.send_eof()

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(pump, client, upstream)
                        tg.start_soon(pump, upstream, client)

        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, front)
            with anyio.fail_after(60):
                result = await anyio.run_process(
                    [MONO, str(smoke_exe), "127.0.0.1", str(port), daemon.ready["tokenFile"]],
                    check=False,
                )
            tg.cancel_scope.cancel()
        out = result.stdout.decode()
        assert result.returncode == 0, out + result.stderr.decode()
        assert "text: the north gate is open" in out
        assert accepted == 2

"""The engine clients in ``clients/`` checked with real tools where they are installed: the Unity
package's C# Runtime compiled with Mono's ``mcs`` and driven through a session turn with a client tool
against a real ``oamd serve`` from this checkout (``test_unity_package.py`` drives the shipped
executable through everything else). Skipped where Mono is missing (``apt-get install mono-mcs
mono-runtime``). The Godot addon has its own file, ``test_godot_addon.py``."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
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

"""``connect_stdio`` and ``Bridge.stdio`` against real subprocesses: the daemon they start is the
oamd this client is, whatever the working directory holds; a daemon that exits before answering is
explained by its exit status and its last stderr lines, read as they come so the pipe never fills."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

import oamd
from oamd.client import Bridge, ConnectionClosed, connect_stdio
from oamd.client._daemon import STDERR_TAIL_BYTES, STDERR_TAIL_LINES

pytestmark = pytest.mark.anyio

PACKAGE = Path(oamd.__file__).resolve().parent
START_SECONDS = 30


def fake_daemon(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


async def test_a_folder_named_oamd_in_the_working_directory_does_not_shadow_the_daemon(
    tmp_path, monkeypatch
):
    shadow = tmp_path / "oamd"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise ImportError("shadowed")\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with anyio.fail_after(START_SECONDS):
        async with Bridge.stdio() as bridge:
            await bridge.ping()
    assert bridge.info is not None and bridge.info.server.name == "oamd"


def test_a_host_script_beside_its_clone_folder_named_oamd_starts_the_daemon(tmp_path):
    # the newcomer's case: ~/src/oamd is the clone (no __init__.py at its top), the script is
    # ~/src/guard.py, so the script's folder puts that clone first on sys.path and oamd imports as
    # a namespace package whose __file__ is None
    (tmp_path / "oamd" / "clients").mkdir(parents=True)
    (tmp_path / "oamd" / "README.md").write_text("a clone's top\n", encoding="utf-8")
    script = tmp_path / "guard.py"
    script.write_text(
        textwrap.dedent(
            """
            import anyio
            from oamd.client import Bridge

            async def main():
                async with Bridge.stdio() as bridge:
                    await bridge.ping()
                    print(bridge.info.server.name)

            anyio.run(main)
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=START_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["oamd"]


def test_the_daemon_is_the_oamd_package_the_client_was_imported_from(tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(PACKAGE, copy / "oamd", ignore=shutil.ignore_patterns("__pycache__"))
    init = copy / "oamd" / "__init__.py"
    init.write_text(
        init.read_text(encoding="utf-8").replace(oamd.__version__, "9.9.9+copy"), encoding="utf-8"
    )
    host = f"""
        import sys
        sys.path.insert(0, {str(copy)!r})  # a checkout run without installing it
        import anyio
        from oamd.client import Bridge

        async def main():
            async with Bridge.stdio() as bridge:
                print(bridge.info.server.version)

        anyio.run(main)
    """
    neutral = tmp_path / "elsewhere"
    neutral.mkdir()
    done = subprocess.run(
        fake_daemon(host), cwd=neutral, capture_output=True, text=True, timeout=START_SECONDS
    )
    assert done.stdout.strip() == "9.9.9+copy", done.stderr


async def test_a_daemon_that_exits_at_start_is_explained_by_its_stderr():
    dies = fake_daemon("""
        import sys
        sys.stderr.write("oamd: no model file at /nowhere.gguf\\n")
        sys.exit(1)
    """)
    with anyio.fail_after(START_SECONDS), pytest.raises(ConnectionClosed) as closed:
        async with connect_stdio(dies) as client:
            await client.request("ping")
    message = str(closed.value)
    assert message.startswith("The connection closed before request 1 was answered.")
    assert "The daemon exited with status 1" in message
    assert "oamd: no model file at /nowhere.gguf" in message


async def test_oamd_stdio_refusing_its_arguments_says_so_through_bridge_stdio():
    with anyio.fail_after(START_SECONDS), pytest.raises(ConnectionClosed) as closed:
        async with Bridge.stdio("--bogus"):
            pass
    assert "status 2" in str(closed.value)
    assert "unrecognized arguments: --bogus" in str(closed.value)


async def test_a_daemon_flooding_its_stderr_still_answers_and_only_its_last_lines_are_kept():
    # 4,000 lines (~200 KB) before answering: a pipe holds 64 KB, so an unread one would block it
    floods = fake_daemon("""
        import sys
        for n in range(4000):
            sys.stderr.write(f"log line {n:04d} " + "x" * 40 + "\\n")
        sys.stderr.flush()
        request = sys.stdin.readline()
        sys.stdout.write('{"jsonrpc": "2.0", "id": 1, "result": {}}\\n')
        sys.stdout.flush()
        sys.stdin.readline()
        sys.stderr.write("last words\\n")
    """)
    with anyio.fail_after(START_SECONDS):
        async with connect_stdio(floods) as client:
            assert await client.request("ping") == {}
            with pytest.raises(ConnectionClosed) as closed:
                await client.request("ping")  # read, never answered: the daemon exits
    quoted = str(closed.value).split("the last lines of its stderr:\n", 1)[1].splitlines()
    assert len(quoted) == STDERR_TAIL_LINES
    assert quoted[-1] == "  last words"
    assert quoted[-2].startswith("  log line 3999 ")
    assert quoted[0].startswith(f"  log line {4000 - STDERR_TAIL_LINES + 1} ")


async def test_an_endless_last_line_is_quoted_by_its_last_bytes_only():
    rambles = fake_daemon("""
        import sys
        sys.stderr.write("y" * 100_000 + " the end")
        sys.exit(1)
    """)
    with anyio.fail_after(START_SECONDS), pytest.raises(ConnectionClosed) as closed:
        async with connect_stdio(rambles) as client:
            await client.request("ping")
    [quoted] = str(closed.value).split("the last lines of its stderr:\n", 1)[1].splitlines()
    assert quoted.startswith("  …yyy") and quoted.endswith("y the end")
    assert len(quoted.removeprefix("  …").encode()) == STDERR_TAIL_BYTES


async def test_a_stderr_the_caller_gives_receives_the_daemons_output_untouched(tmp_path):
    dies = fake_daemon("import sys; sys.stderr.write('why\\n'); sys.exit(3)")
    log = tmp_path / "daemon.log"
    with log.open("wb") as sink, pytest.raises(ConnectionClosed) as closed:
        with anyio.fail_after(START_SECONDS):
            async with connect_stdio(dies, stderr=sink) as client:
                await client.request("ping")
    assert log.read_text(encoding="utf-8") == "why\n"
    assert "status 3 (its stderr went where stderr= sent it)" in str(closed.value)


async def test_bridge_stdio_passes_model_to_the_daemon_and_info_says_whether_it_runs():
    with anyio.fail_after(START_SECONDS):
        async with Bridge.stdio(model="llamacpp:/nowhere/model.gguf") as bridge:
            assert bridge.info is not None
            model = bridge.info.model
    assert model.available is False
    assert model.detail == "The model file /nowhere/model.gguf does not exist."


async def test_a_whole_command_with_daemon_arguments_besides_is_refused():
    with pytest.raises(ValueError, match="argv is the whole command"):
        async with Bridge.stdio(model="llamacpp", argv=[sys.executable, "-m", "oamd", "stdio"]):
            pass

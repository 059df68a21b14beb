"""liboamd_ffi from the languages Apple's bindings are written in: ``tests/ffi/abi_rules.c``, compiled
with cc against ``ffi/open_apple_models.h`` and linked to the library, checks the header's rules
from C; ``tests/ffi/BridgeProgram.cs``, compiled with Mono's mcs, calls the six functions through
P/Invoke as a Unity binding does. Both run as subprocesses against this checkout's oamd (skipped
without cc, or without Mono: ``apt-get install mono-mcs mono-runtime``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from ffi_harness import LIBRARY, ROOT, build_library, daemon_script

RUN_SECONDS = 60
MCS = shutil.which("mcs")
MONO = shutil.which("mono")


@pytest.fixture
def environment(tmp_path) -> dict[str, str]:
    build_library()
    return {
        **os.environ,
        "OAMD_EXECUTABLE": str(daemon_script(tmp_path)),
        "LD_LIBRARY_PATH": str(LIBRARY.parent),
    }


def test_a_c_program_built_on_the_header_passes_every_rule(tmp_path, environment):
    program = tmp_path / "abi_rules"
    compiled = subprocess.run(
        [
            os.environ.get("CC", "cc"),
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pthread",
            f"-I{ROOT / 'ffi'}",
            "-o",
            str(program),
            str(ROOT / "tests" / "ffi" / "abi_rules.c"),
            f"-L{LIBRARY.parent}",
            "-loamd_ffi",
            f"-Wl,-rpath,{LIBRARY.parent}",
        ],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    assert compiled.returncode == 0, compiled.stderr
    ran = subprocess.run(
        [str(program)], env=environment, capture_output=True, text=True, timeout=RUN_SECONDS
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "FAILED" not in ran.stdout
    # every rule ran: as many "ok" lines as the program has checks
    checks = (ROOT / "tests" / "ffi" / "abi_rules.c").read_text().count('    CHECK("')
    passed = [line for line in ran.stdout.splitlines() if line.startswith("ok ")]
    assert checks > 0 and len(passed) == checks, ran.stdout


def test_a_csharp_program_calls_the_six_functions_through_pinvoke(tmp_path, environment):
    if MCS is None or MONO is None:
        pytest.skip("Mono (mcs, mono) is not installed: apt-get install mono-mcs mono-runtime")
    exe = tmp_path / "BridgeProgram.exe"
    compiled = subprocess.run(
        [MCS, "-warnaserror", f"-out:{exe}", str(ROOT / "tests" / "ffi" / "BridgeProgram.cs")],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    ran = subprocess.run(
        [MONO, str(exe)], env=environment, capture_output=True, text=True, timeout=RUN_SECONDS
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    report = dict(line.split(": ", 1) for line in ran.stdout.splitlines())
    assert report["version"].count(".") == 2
    assert report["created"] == "True"
    assert report["send"] == "0"
    assert json.loads(report["callback"]) == {"jsonrpc": "2.0", "id": "cs", "result": {}}
    assert json.loads(report["blocking"]) == {"jsonrpc": "2.0", "id": 0, "result": {}}
    assert report["invalid utf8"] == "-2"
    assert report["destroyed"] == "True"

"""The Unity package ``clients/unity/com.oamd.client``: its manifest, assembly definition and ``.meta``
files as Unity reads them, and its Runtime compiled with Mono's ``mcs -warnaserror`` (without
UnityEngine, and with a stub of it for the Unity-only code and the sample), then driven by
``clients/unity/smoke/Scenario.cs`` against the shipped executable over stdio (the C# client spawns it)
and over TCP (``serve --tcp``, token auth). The scenario prints one ``key: value`` line per check.
Skipped without Mono (``apt-get install mono-mcs mono-runtime``) or without the shipped executable."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest
from serve_harness import serve
from shipped import shipped_oamd

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
UNITY = ROOT / "clients" / "unity"
PACKAGE = UNITY / "com.oamd.client"
RUNTIME = PACKAGE / "Runtime"
MCS = shutil.which("mcs")
MONO = shutil.which("mono")
RUN_SECONDS = 50
SCENARIO = (UNITY / "smoke" / "Scenario.cs", UNITY / "smoke" / "MainLoop.cs")
"""The console program that plays the engine's part, on a main loop as Unity's."""
"""One scenario takes about two seconds; the margin is for a cold, busy CI machine."""

SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$"
)
GUID = re.compile(r"^guid: ([0-9a-f]{32})$", re.MULTILINE)


def runtime_sources() -> list[str]:
    return sorted(str(p) for p in RUNTIME.rglob("*.cs"))


def compile_cs(out: Path, *sources: str | Path, library: bool = False, define: str = "") -> None:
    if MCS is None or MONO is None:
        pytest.skip("Mono (mcs, mono) is not installed: apt-get install mono-mcs mono-runtime")
    argv = [MCS, "-warnaserror", f"-out:{out}", *map(str, sources)]
    if library:
        argv.insert(1, "-target:library")
    if define:
        argv.insert(1, f"-define:{define}")
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def scenario_exe(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("unity") / "scenario.exe"
    compile_cs(exe, *runtime_sources(), *SCENARIO)
    return exe


async def run_scenario(exe: Path, *args: str) -> tuple[int, dict[str, str]]:
    with anyio.fail_after(RUN_SECONDS):
        result = await anyio.run_process([MONO, str(exe), *args], check=False)
    out = result.stdout.decode()
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert "error" not in lines, out + result.stderr.decode()
    return result.returncode, lines


def assert_scenario_completed(rc: int, lines: dict[str, str]) -> None:
    assert rc == 0, lines
    assert lines["server"] == "oamd 1.0"
    # guard and gate: the scripted model calls the client tool, the C# handler answers
    assert lines["turn"] == "the north gate is open"
    assert lines["tool-record"] == "open_gate the north gate is open error=False"
    assert lines["usage"] == "yes"
    assert lines["text-events"] == "yes"
    # the daemon's tool timeout sends tool/cancel; the handler's CancellationToken is cancelled
    assert lines["tool-cancel"] == "token cancelled"
    assert lines["timed-out-turn"] == "True"
    assert lines["npc"] == "Who goes there? (suspicious) options=2 streamed-emotion=suspicious"
    assert lines["bark"] == "Quiet night."
    assert lines["decision"] == "flee 78 fallback=False"
    assert lines["world"] == "True exists=True version=True notified=True"
    assert lines["error-name"] == "session_not_found -32020"
    # every kind of callback ran, each on the thread that owns the context or calls Pump
    assert (
        lines["callback-kinds"] == "cancel-event,event,npc-event,slow-tool,token,tool,world-event"
    )
    assert lines["callbacks-on-main-thread"] == "yes"


# ---- the package as Unity reads it ----------------------------------------------------------


def test_package_json_has_the_fields_unity_requires():
    manifest = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    assert re.fullmatch(r"com(\.[a-z0-9][a-z0-9-]*){2,}", manifest["name"])
    assert manifest["name"] == PACKAGE.name  # Unity expects the folder to carry the package name
    assert len(manifest["name"]) <= 214
    assert SEMVER.match(manifest["version"])
    assert manifest["displayName"].strip()
    assert manifest["description"].strip()
    assert re.fullmatch(r"20\d\d\.\d+", manifest["unity"])
    for sample in manifest["samples"]:
        assert sample["displayName"] and sample["description"]
        assert sample["path"].startswith("Samples~/")
        assert (PACKAGE / sample["path"]).is_dir()


def test_package_version_is_the_daemon_version():
    manifest = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert manifest["version"] == project["version"], "bump clients/unity/com.oamd.client too"


def test_the_asmdef_names_the_assembly_and_needs_no_other_assembly():
    asmdef = json.loads((RUNTIME / "Oamd.Client.asmdef").read_text(encoding="utf-8"))
    assert asmdef["name"] == "Oamd.Client"
    assert asmdef["rootNamespace"] == "Oamd"
    assert asmdef["references"] == [] and asmdef["precompiledReferences"] == []
    assert asmdef["includePlatforms"] == [] and asmdef["excludePlatforms"] == []
    assert asmdef["autoReferenced"] is True
    assert asmdef["allowUnsafeCode"] is False
    assert list(PACKAGE.rglob("*.asmdef")) == [RUNTIME / "Oamd.Client.asmdef"]


def test_every_package_asset_has_a_meta_file_with_a_unique_guid():
    # A package installed from git is immutable: Unity ignores an asset without a .meta there.
    guids: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(PACKAGE):
        # folders ending in ~ (Samples~) are invisible to Unity and need no .meta
        dirnames[:] = [d for d in dirnames if not d.endswith("~")]
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if name.endswith(".meta"):
                assert path.with_suffix("").exists(), f"{path} describes nothing"
                continue
            meta = Path(f"{path}.meta")
            assert meta.is_file(), f"{path} has no .meta"
            text = meta.read_text(encoding="utf-8")
            assert text.startswith("fileFormatVersion: 2\n")
            (guid,) = GUID.findall(text)
            assert guid not in guids, f"{meta} repeats the guid of {guids[guid]}"
            guids[guid] = meta
            assert ("folderAsset: yes" in text) == path.is_dir()


def test_runtime_files_stay_small():
    for path in RUNTIME.rglob("*.cs"):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 400, path


# ---- compiled with Mono ----------------------------------------------------------------------


def test_the_runtime_compiles_without_unityengine(tmp_path):
    compile_cs(tmp_path / "Oamd.Client.dll", *runtime_sources(), library=True)


def test_the_unity_only_code_and_the_sample_compile_against_a_unityengine_stub(tmp_path):
    sample = PACKAGE / "Samples~" / "GuardAndGate" / "GuardAndGate.cs"
    compile_cs(
        tmp_path / "WithUnity.dll",
        *runtime_sources(),
        sample,
        UNITY / "smoke" / "UnityEngineStub.cs",
        library=True,
        define="UNITY_5_3_OR_NEWER",
    )


@pytest.mark.parametrize("dispatch", ["pump", "context"])
async def test_over_stdio_the_client_spawns_the_executable_and_completes_the_scenario(
    scenario_exe, dispatch
):
    exe = shipped_oamd()
    rc, lines = await run_scenario(scenario_exe, "stdio", str(exe), dispatch)
    assert_scenario_completed(rc, lines)
    # Dispose closed the daemon's input and waited for it; the test sees no survivor either
    assert lines["daemon-exited"] == "yes"
    with pytest.raises(ProcessLookupError):
        os.kill(int(lines["daemon-pid"]), 0)


@pytest.mark.parametrize("dispatch", ["context", "pump"])
async def test_over_tcp_the_client_authenticates_and_completes_the_scenario(scenario_exe, dispatch):
    exe = shipped_oamd()
    async with serve(unix=False, test_methods=False, command=[str(exe)]) as daemon:
        host, port = daemon.tcp
        rc, lines = await run_scenario(
            scenario_exe, "tcp", host, str(port), daemon.ready["tokenFile"], dispatch
        )
    assert_scenario_completed(rc, lines)


async def test_over_tcp_a_wrong_token_is_refused(scenario_exe, tmp_path):
    exe = shipped_oamd()
    bad = tmp_path / "wrong-token"
    bad.write_text("not-the-token\n")
    async with serve(unix=False, test_methods=False, command=[str(exe)]) as daemon:
        host, port = daemon.tcp
        rc, lines = await run_scenario(scenario_exe, "tcp", host, str(port), str(bad), "pump")
    assert rc == 1
    assert lines["refused"] == "invalid_message invalid"


async def test_process_arguments_reach_the_daemon_unchanged(scenario_exe, tmp_path):
    echo = tmp_path / "echo-args"
    echo.write_text(
        f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n", encoding="utf-8"
    )
    echo.chmod(0o755)
    tricky = ["llamacpp:/models/My Model.gguf", "it's", 'say "hi"', "C:\\dir\\", "", "ünï", "a=b"]
    with anyio.fail_after(RUN_SECONDS):
        result = await anyio.run_process([MONO, str(scenario_exe), "argv", str(echo), *tricky])
    assert json.loads(result.stdout) == ["stdio", *tricky]


def windows_argv(line: str) -> list[str]:
    """Splits an argument line as CommandLineToArgvW and the MSVCRT (2008 and later) do: whitespace
    outside quotes separates; 2n backslashes before a quote are n backslashes and the quote toggles
    quoting, 2n+1 are n backslashes and a literal quote; other backslashes are literal; "" inside
    quotes is a literal quote."""
    args: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            return args
        arg: list[str] = []
        quoted = False
        while i < n and (quoted or line[i] not in " \t"):
            if line[i] == "\\":
                j = i
                while j < n and line[j] == "\\":
                    j += 1
                if j < n and line[j] == '"':
                    arg.append("\\" * ((j - i) // 2))
                    if (j - i) % 2:
                        arg.append('"')
                        j += 1
                else:
                    arg.append("\\" * (j - i))
                i = j
            elif line[i] == '"':
                if quoted and line[i + 1 : i + 2] == '"':
                    arg.append('"')
                    i += 2
                else:
                    quoted = not quoted
                    i += 1
            else:
                arg.append(line[i])
                i += 1
        args.append("".join(arg))


async def test_the_argument_line_reads_back_unchanged_by_the_windows_rules(scenario_exe):
    tricky = [
        "C:\\Program Files\\oamd\\",
        "\\\\server\\share\\",
        "a\\\\b",
        'a\\"b',
        'tail\\\\"',
        '"',
        '\\"',
        '""',
        'x"y"z',
        "",
        " ",
        "\t",
        "tab\there",
        "line\nbreak",
        "ünï ✓",
        "it's",
        "%PATH%",
        "a=b",
        "llamacpp:C:\\models\\My Model.gguf",
    ]
    with anyio.fail_after(RUN_SECONDS):
        result = await anyio.run_process([MONO, str(scenario_exe), "cmdline", *tricky])
    assert windows_argv(result.stdout.decode()) == ["stdio", *tricky]


async def test_a_daemon_copied_without_its_execute_bit_is_made_executable_and_started(
    scenario_exe, tmp_path
):
    daemon = tmp_path / "oamd"
    daemon.write_text("#!/bin/sh\ncat >/dev/null\n", encoding="utf-8")
    daemon.chmod(0o644)
    with anyio.fail_after(RUN_SECONDS):
        result = await anyio.run_process([MONO, str(scenario_exe), "spawn", str(daemon)])
    assert result.stdout.decode().strip() == "spawn: ok"
    assert daemon.stat().st_mode & 0o100


async def test_the_executable_path_may_name_the_dist_folder(scenario_exe, tmp_path):
    daemon = tmp_path / "oamd"
    daemon.write_text("#!/bin/sh\ncat >/dev/null\n", encoding="utf-8")
    daemon.chmod(0o755)
    with anyio.fail_after(RUN_SECONDS):
        result = await anyio.run_process([MONO, str(scenario_exe), "spawn", str(tmp_path)])
    assert result.stdout.decode().strip() == "spawn: ok"


async def test_a_player_that_cannot_start_processes_refuses_stdio_with_a_clear_exception(tmp_path):
    exe = tmp_path / "android.exe"
    compile_cs(exe, *runtime_sources(), *SCENARIO, define="UNITY_ANDROID")
    with anyio.fail_after(RUN_SECONDS):
        result = await anyio.run_process([MONO, str(exe), "spawn", sys.executable])
    out = result.stdout.decode()
    assert out.startswith("spawn: PlatformNotSupportedException"), out
    assert "ConnectTcpAsync" in out


async def test_json_reads_and_writes_what_the_daemon_and_games_hand_it(scenario_exe):
    lines = [
        '{"n":9007199254740993,"d":1.5,"e":1e3,"neg":-0,"big":1' + "0" * 400 + "}",
        '{"s":"\\u00fcn\\u00ef \\ud83d\\ude00 \\u2028 \\" \\\\ \\/ \\n"}',
        "[" * 512 + "]" * 512,
        "[" * 513 + "]" * 513,
        '"\\u12G4"',
        "[1,]x",
    ]
    with anyio.fail_after(RUN_SECONDS):
        result = await anyio.run_process(
            [MONO, str(scenario_exe), "json"], input="\n".join(lines).encode() + b"\n"
        )
    out = result.stdout.decode("utf-8").splitlines()
    # integers stay exact longs; a number beyond a double reads as infinity (written as null)
    assert json.loads(out[0]) == {
        "n": 9007199254740993,
        "d": 1.5,
        "e": 1000.0,
        "neg": 0,
        "big": None,
    }
    assert json.loads(out[1]) == {"s": 'ünï 😀 \u2028 " \\ / \n'}
    assert out[2] == "[" * 512 + "]" * 512
    # deeper than Json.MaxDepth: a FormatException, never a stack overflow that ends the player
    assert out[3:6] == ["FormatException"] * 3
    assert json.loads(out[6]) == {"gold": 7}
    assert json.loads(out[7]) == {"1": {"a": "b"}}
    assert out[8] == "ArgumentException"


async def test_in_unity_play_mode_exit_script_reload_and_quit_close_open_clients_and_end_daemons(
    tmp_path,
):
    exe = tmp_path / "editor.exe"
    compile_cs(
        exe,
        *runtime_sources(),
        *SCENARIO,
        UNITY / "smoke" / "UnityEngineStub.cs",
        UNITY / "smoke" / "UnityEditorStub.cs",
        define="UNITY_5_3_OR_NEWER;UNITY_EDITOR",
    )
    with anyio.fail_after(RUN_SECONDS):
        result = await anyio.run_process([MONO, str(exe), "lifetime", str(shipped_oamd())])
    lines = dict(line.split(": ", 1) for line in result.stdout.decode().splitlines())
    assert lines == {
        "play-mode-exit": "Closed daemon-exited=yes",
        "script-reload": "Closed daemon-exited=yes",
        "player-quit": "Closed daemon-exited=yes",
    }


def param_names(schema: dict, defs: dict) -> set[str]:
    """The member names an object schema allows, through $ref and allOf."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    names = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        names |= param_names(part, defs)
    return names


def test_every_typed_call_names_a_protocol_method_and_only_its_params():
    protocol = json.loads((ROOT / "protocol" / "bridge.json").read_text(encoding="utf-8"))
    bridge, defs = protocol["methods"], protocol["$defs"]
    key = re.compile(r'\{ "(\w+)",|\.Put\("(\w+)"|\bId\("(\w+)"|\bp\["(\w+)"\]')
    called: set[str] = set()
    for path in sorted((RUNTIME / "Api").glob("*.cs")):
        text = path.read_text(encoding="utf-8")
        # each public method up to the next one: the params it builds and the method it calls
        for body in re.split(r"\n        public ", text)[1:]:
            methods = re.findall(r'Call\("([\w/]+)"', body)
            if not methods:
                continue
            (method,) = methods
            called.add(method)
            assert method in bridge, f"{path.name}: {method} is not in protocol/bridge.json"
            allowed = param_names(bridge[method]["params"], defs)
            used = {next(g for g in m if g) for m in key.findall(body)}
            if "request.ToJson()" in body:  # decision/decide spreads a DecisionRequest
                used |= {"situation", "options", "actor", "context", "tools", "fallbackOptionID"}
            assert used <= allowed, (
                f"{path.name} {method}: {sorted(used - allowed)} not in its params"
            )
    # initialize is sent by OamdClient.cs itself
    client = (RUNTIME / "OamdClient.cs").read_text(encoding="utf-8")
    init = client[
        client.index('RequestAsync("initialize"') - 400 : client.index('RequestAsync("initialize"')
    ]
    assert {"protocolVersion", "client", "auth"} <= param_names(
        bridge["initialize"]["params"], defs
    )
    assert all(f'"{k}"' in init for k in ("protocolVersion", "client", "auth"))
    # the API covers the protocol, apart from the two validation helpers reached by RequestAsync
    assert set(bridge) - called - {"initialize"} == {"schema/validate", "tools/validate"}


async def test_three_hundred_turns_on_one_session_each_answer_their_own_tool_call(tmp_path):
    # a long session through the package (bench/unity_turns.py times 5,000): every reply is the
    # output of that turn's own tool call, answered on the pumping main thread
    exe = tmp_path / "turns.exe"
    compile_cs(exe, *runtime_sources(), UNITY / "smoke" / "Turns.cs")
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [MONO, str(exe), str(shipped_oamd()), "300", "100"], check=False
        )
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert out.splitlines()[-1] == "turns: 300"
    assert [line.split()[1] for line in out.splitlines()[:-1]] == ["1-100", "101-200", "201-300"]

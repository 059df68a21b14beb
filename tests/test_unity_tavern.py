"""The Unity package's Tavern sample (``clients/unity/com.oamd.client/Samples~/Tavern``) and
``OamdClient.WaitForModelAsync``, outside Unity: the samples compile as Unity builds them (their own
assembly against ``Oamd.Client``, with and without the UnityEngine stub), the sample's ``TavernGame``
plays headless under Mono against the shipped executable (``clients/unity/smoke/Tavern.cs``, one
``key: value`` line per check), a context's turn events run before the code awaiting the result
(``smoke/StreamOrder.cs``), and the wait for a model follows a real download served from 127.0.0.1
(``smoke/WaitForModel.cs`` against the daemon of this checkout, wrapped as an executable). Skipped
without Mono or the shipped executable, like ``test_unity_package.py``, whose helpers these are."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from backends.llama_server import missing_reason
from model_server import Route, catalog_file, packaged_model_bytes, serving, sha256
from shipped import shipped_oamd
from test_unity_package import GUID, MONO, PACKAGE, RUN_SECONDS, UNITY, compile_cs, runtime_sources

pytestmark = pytest.mark.anyio

TAVERN = PACKAGE / "Samples~" / "Tavern"
SMOKE = UNITY / "smoke"
GAME_SOURCES = [TAVERN / "TavernGame.cs", TAVERN / "TavernScripts.cs"]
LLAMA_MISSING = missing_reason(server=False)
needs_llama = pytest.mark.skipif(LLAMA_MISSING is not None, reason=str(LLAMA_MISSING))
CATALOG_NAME = "smollm2-360m-instruct"
"""A catalog entry that pins no size or digest: the mirror may serve the packaged SmolLM2-135M."""
PULL_SPEC = f"llamacpp:{CATALOG_NAME}?pull=on-request"
WAIT_SECONDS = 60


def runtime_dll(folder: Path, define: str = "", *references: Path) -> Path:
    """``Oamd.Client.dll`` in ``folder``, where Mono finds it next to the programs built there."""
    dll = folder / "Oamd.Client.dll"
    # mcs reads options anywhere on its command line: a reference passes as a source would
    compile_cs(
        dll, *[f"-r:{r}" for r in references], *runtime_sources(), library=True, define=define
    )
    return dll


def program(folder: Path, name: str, *sources: Path) -> Path:
    """A console program of the smoke sources (and MainLoop) against the Runtime as its own assembly."""
    dll = folder / "Oamd.Client.dll"
    if not dll.exists():
        runtime_dll(folder)
    exe = folder / f"{name}.exe"
    compile_cs(exe, f"-r:{dll}", *sources, SMOKE / "MainLoop.cs")
    return exe


def key_values(out: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def run_program(*argv: str | Path, timeout: float = RUN_SECONDS, env=None) -> dict[str, str]:
    done = subprocess.run(
        [MONO, *map(str, argv)], capture_output=True, text=True, timeout=timeout, env=env
    )
    lines = key_values(done.stdout)
    assert done.returncode == 0 and "error" not in lines, done.stdout + done.stderr
    return lines


def replay(events: list[str], npc: str) -> tuple[str, list[str]]:
    """The subtitle ``npc``'s events build (deltas appended, a reset replacing it), and each text a
    reset took back."""
    shown, taken_back = "", []
    for event in events:
        who, _, rest = event.partition(":")
        kind, _, value = rest.partition(" ")
        if who != npc:
            continue
        if kind == "lineDelta":
            shown += value
        elif kind == "lineReset":
            taken_back.append(shown)
            shown = value
    return shown, taken_back


# ---- the sample as Unity imports and compiles it ---------------------------------------------


def test_the_tavern_sample_is_declared_and_each_sample_file_has_a_meta_file_with_a_unique_guid():
    manifest = json.loads((PACKAGE / "package.json").read_text(encoding="utf-8"))
    (tavern,) = [s for s in manifest["samples"] if s["path"] == "Samples~/Tavern"]
    assert tavern["displayName"] == "Tavern" and tavern["description"]
    # Samples~ is invisible to Unity until imported: the import copies these .meta files with
    # their guids, so they must not repeat each other's or the package's
    guids = [GUID.findall(p.read_text(encoding="utf-8")) for p in PACKAGE.rglob("*.meta")]
    flat = [g for found in guids for g in found]
    assert all(len(found) == 1 for found in guids) and len(flat) == len(set(flat))
    importers = {".cs": "MonoImporter:", ".md": "TextScriptImporter:"}
    for sample in (PACKAGE / "Samples~").iterdir():
        assets = [p for p in sample.iterdir() if p.suffix != ".meta"]
        assert assets, sample
        for asset in assets:
            meta = Path(f"{asset}.meta").read_text(encoding="utf-8")
            assert meta.startswith("fileFormatVersion: 2\nguid: "), asset
            assert f"\n{importers[asset.suffix]}\n" in meta, asset
        for meta in sample.glob("*.meta"):
            assert meta.with_suffix("").exists(), f"{meta} describes nothing"
    assert sorted(p.name for p in TAVERN.iterdir() if p.suffix != ".meta") == [
        "README.md",
        "TavernGame.cs",
        "TavernScripts.cs",
        "TavernUI.cs",
    ]


def test_the_samples_compile_in_their_own_assembly_against_the_unityengine_stub(tmp_path):
    # as in Unity: UnityEngine, the package's assembly, then the imported samples (Assembly-CSharp),
    # which see only what Oamd.Client makes public
    engine = tmp_path / "UnityEngine.dll"
    compile_cs(engine, SMOKE / "UnityEngineStub.cs", library=True)
    dll = runtime_dll(tmp_path, "UNITY_5_3_OR_NEWER", engine)
    samples = sorted((PACKAGE / "Samples~").rglob("*.cs"))
    assert TAVERN / "TavernUI.cs" in samples
    compile_cs(
        tmp_path / "Assembly-CSharp.dll",
        f"-r:{engine}",
        f"-r:{dll}",
        *samples,
        library=True,
        define="UNITY_5_3_OR_NEWER",
    )


def test_the_tavern_game_compiles_without_unityengine(tmp_path):
    # TavernGame and its scripts hold no UnityEngine type; TavernUI compiles to nothing outside Unity
    dll = runtime_dll(tmp_path)
    compile_cs(
        tmp_path / "Tavern.dll", f"-r:{dll}", *GAME_SOURCES, TAVERN / "TavernUI.cs", library=True
    )


def test_the_sample_readme_says_what_ran_and_links_the_npc_reference():
    readme = (TAVERN / "README.md").read_text(encoding="utf-8")
    assert "Nothing in this folder has been run inside the Unity editor" in readme
    (link,) = re.findall(r"\]\(([^)]*NPC\.md)\)", readme)
    assert (TAVERN / link).resolve() == (PACKAGE.parent.parent.parent / "docs" / "NPC.md")
    assert (TAVERN / link).resolve().is_file()


# ---- the game, headless under Mono --------------------------------------------------------------


@pytest.fixture(scope="module")
def tavern_exe(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tavern")
    return program(folder, "tavern", *GAME_SOURCES, SMOKE / "Tavern.cs")


@pytest.fixture(scope="module")
def evening(tavern_exe) -> dict[str, str]:
    """One scripted evening against the shipped executable, save and load included."""
    return run_program(tavern_exe, shipped_oamd(), "scripted")


def test_the_guard_barks_when_the_player_comes_in_and_decides_to_let_them_in(evening):
    assert evening["bark"] == "brom Wipe your boots, stranger. Trouble stays outside."
    assert evening["decision"] == "let_in confidence=80 fallback=False door=open"
    assert evening["world-door"] == "true"  # the game wrote the decision to the world


def test_the_innkeeper_calls_the_client_tool_and_her_line_quotes_what_the_game_answered(evening):
    arguments, output = evening["innkeeper-tool-place_order"].split(" -> ")
    assert json.loads(arguments) == {"item": "ale", "quantity": 2}
    output, error = output.rsplit(" error=", 1)
    # the C# handler priced the order from TavernGame.Menu (ale: 3) and the player's 10 gold
    assert (json.loads(output), error) == (
        "Served 2 ale for 6 gold; the guest has 4 gold left.",
        "False",
    )
    assert evening["innkeeper-line"] == json.loads(output) + " Anything else, love?"
    assert evening["gold"] == "4 world=4"
    assert json.loads(evening["innkeeper-knowledge"])[:3] == [
        "On the menu: ale for 3 gold.",
        "On the menu: stew for 5 gold.",
        "On the menu: room for 8 gold.",
    ]
    # her built-in memory tools ran in the daemon, in the same turn
    assert evening["innkeeper-tool-remember_fact"].endswith('-> "Remembered." error=False')
    assert evening["innkeeper-relationship"] == "5"


def test_the_subtitle_follows_deltas_and_a_reset_and_ends_as_the_result_line(evening):
    events = json.loads(evening["events"])
    shown, taken_back = replay(events, "brom")
    line = evening["guard-line"]
    assert line == "Trouble stays outside while I stand here."
    # the guard's first answer streamed, was refused (no player_options) and taken back
    assert taken_back == ["Trouble? Not while I stand at this door."]
    assert shown == line
    assert evening["guard-stream"] == "deltas=3 resets=1"
    assert evening["guard-streamed"] == evening["guard-subtitle"] == line
    for turn in ("innkeeper", "innkeeper-2", "restored"):
        assert evening[f"{turn}-streamed"] == evening[f"{turn}-subtitle"] == evening[f"{turn}-line"]
        assert evening[f"{turn}-stream"] == "deltas=1 resets=0"
    assert replay(events, "mira")[0] == evening["innkeeper-line"] + evening["innkeeper-2-line"]
    assert evening["events-on-main-thread"] == "yes"


def test_player_options_become_buttons_and_the_emotion_is_shown(evening):
    assert evening["innkeeper-options"] == "3 A room for the night?|Some stew?|That is all."
    assert evening["innkeeper-buttons"] == (
        "4 mira>A room for the night?|mira>Some stew?|mira>That is all.|brom>Any trouble tonight?"
    )
    assert evening["choice"] == "mira A room for the night?"  # the first button, pressed
    assert evening["guard-options"] == "2 Glad to hear it.|Who would dare?"
    assert (
        evening["guard-buttons"].startswith("3 ")
        and "mira>Two ales, please." in (evening["guard-buttons"])
    )
    # the label showed the emotion event's value while the line streamed, and the result's after
    assert evening["innkeeper-emotion"] == "happy result=happy label=happy"
    assert evening["innkeeper-2-emotion"] == "worried result=worried label=worried"
    assert evening["guard-emotion"] == "suspicious result=suspicious label=suspicious"
    events = json.loads(evening["events"])
    assert events.index("mira:emotion happy") < events.index("mira:emotion worried")
    assert "brom:emotion suspicious" in events


def test_a_game_event_writes_the_world_and_the_innkeepers_next_prompt_reads_it(evening):
    assert evening["time"] == 'night world="night" version-grew=True'
    # the "Game state:" of the turn after it, as the daemon kept her prompt (worldContextPaths)
    assert evening["innkeeper-2-prompt-state"] == "timeOfDay: night|player.gold: 4"


def test_a_saved_evening_loads_into_a_fresh_daemon_with_the_innkeepers_memory(evening):
    assert evening["saved"] == "yes"
    assert evening["first-daemon-exited"] == "yes" and evening["fresh-daemon"] == "yes"
    assert evening["restored-game"] == "gold=4 time=night door=open"
    assert json.loads(evening["restored-world"]) == {
        "timeOfDay": "night",
        "player": {"gold": 4},
        "door": {"open": True},
    }
    assert json.loads(evening["restored-memory"]) == {
        "facts": ["The traveller drinks ale."],
        "relationship": 5,
    }
    assert int(evening["saved-transcript-entries"]) > 0
    assert evening["restored-transcript-entries"] == evening["saved-transcript-entries"]
    assert evening["restored-line"] == "Back again? I kept your seat by the fire."
    assert evening["restored-relationship"] == "5"


@needs_llama
@pytest.mark.timeout(300)
def test_with_a_real_model_the_same_game_plays_on_the_packaged_smollm2(tavern_exe, tmp_path):
    # useScriptedModels off: the daemon's --model speaks; what it says is the model's, so only the
    # game's side is checked (the subtitle still ends as each result's line, the save still loads)
    lines = run_program(tavern_exe, daemon_wrapper(tmp_path), "model", "llamacpp", timeout=240)
    assert lines["model-1"] == lines["model-2"] == "available available=true"
    assert lines["decision"].split()[0] in ("let_in", "turn_away")
    for turn in ("innkeeper", "innkeeper-2", "guard", "restored"):
        assert lines[f"{turn}-streamed"] == lines[f"{turn}-subtitle"] == lines[f"{turn}-line"]
        assert int(lines[f"{turn}-options"].split()[0]) <= (2 if turn == "guard" else 3)
        # the emotion event comes before the line: the label had it while the line streamed
        streaming, rest = lines[f"{turn}-emotion"].split(" result=")
        assert streaming == rest.split(" label=")[0] == rest.split(" label=")[1]
    events = json.loads(lines["events"])
    # the model's own stream, deltas and any resets, adds up exactly to the lines that stand
    assert replay(events, "mira")[0] == lines["innkeeper-line"] + lines["innkeeper-2-line"]
    assert replay(events, "brom")[0] == lines["guard-line"]
    restored = json.loads(lines["restored-memory"])
    assert lines["restored-relationship"] == str(restored["relationship"])
    assert lines["restored-transcript-entries"] == lines["saved-transcript-entries"]


# ---- the order of events and results ------------------------------------------------------------


def test_with_a_context_every_turns_events_run_before_the_code_awaiting_its_result(tmp_path):
    exe = program(tmp_path, "streamorder", SMOKE / "StreamOrder.cs")
    lines = run_program(exe, shipped_oamd(), "300")
    assert (lines["late"], lines["turns"]) == ("0", "300")


# ---- waiting for the model ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def wait_exe(tmp_path_factory) -> Path:
    return program(tmp_path_factory.mktemp("wait"), "waitformodel", SMOKE / "WaitForModel.cs")


def daemon_wrapper(folder: Path) -> Path:
    """This checkout's daemon as an executable the C# client can spawn."""
    wrapper = folder / "oamd"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m oamd "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    return wrapper


def progress(line: str) -> dict[str, str]:
    """``progress: STATUS available=… bytes=… total=… main=… detail=…`` as a dict."""
    status, rest = line.split(" ", 1)
    fields = dict(re.findall(r"(\w+)=(\S*)", rest.split(" detail=", 1)[0]))
    return {"status": status, **fields, "detail": rest.split(" detail=", 1)[1]}


def mirror_env(store: Path, base: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OAMD_MODEL"}
    return {**env, "OAMD_MODELS": str(store), "OAMD_CATALOG_BASE_URL": base}


async def watch(exe: Path, *argv: str, env: dict[str, str], on_progress) -> list[str]:
    """Runs the waiting program, handing each progress line to ``on_progress`` as it comes."""
    out: list[str] = []
    with anyio.fail_after(WAIT_SECONDS):
        command = [MONO, str(exe), *argv]
        async with await anyio.open_process(command, env=env, stderr=subprocess.STDOUT) as proc:
            buffered = b""
            async for chunk in proc.stdout:
                buffered += chunk
                *complete, buffered = buffered.split(b"\n")
                for raw in complete:
                    line = raw.decode()
                    out.append(line)
                    if line.startswith("progress: "):
                        on_progress(progress(line.removeprefix("progress: ")))
            await proc.wait()
    assert proc.returncode == 0 and not any(line.startswith("error:") for line in out), out
    return out


def test_waiting_without_a_model_configured_ends_after_one_check(wait_exe):
    env = {k: v for k, v in os.environ.items() if k != "OAMD_MODEL"}
    lines = run_program(wait_exe, shipped_oamd(), "50", env=env)
    assert progress(lines["progress"])["status"] == "unavailable"
    assert lines["result"] == "unavailable available=false reports=1"


@needs_llama
def test_waiting_for_a_model_already_there_ends_after_one_check_and_it_answers(wait_exe, tmp_path):
    lines = run_program(wait_exe, daemon_wrapper(tmp_path), "50", "llamacpp")
    assert progress(lines["progress"])["status"] == "available"
    assert lines["result"] == "available available=true reports=1"
    assert lines["answered"] == "yes"


@needs_llama
async def test_a_model_not_downloaded_that_may_not_be_fetched_is_asked_twice_then_left(
    wait_exe, tmp_path
):
    with serving({catalog_file(CATALOG_NAME): Route(packaged_model_bytes())}) as server:
        env = mirror_env(tmp_path / "store", server.url(""))
        seen: list[dict[str, str]] = []
        out = await watch(
            wait_exe,
            str(daemon_wrapper(tmp_path)),
            "50",
            f"llamacpp:{CATALOG_NAME}",
            env=env,
            on_progress=seen.append,
        )
    assert [p["status"] for p in seen] == ["downloadable", "downloadable"]
    assert f"oamd models pull {CATALOG_NAME}" in seen[-1]["detail"]
    assert "result: downloadable available=false reports=2" in out
    assert server.requests == []


@needs_llama
async def test_the_wait_follows_a_download_to_the_loaded_model_reporting_on_the_main_thread(
    wait_exe, tmp_path
):
    body = packaged_model_bytes()
    paused_at = len(body) // 3
    route = Route(body, pause_after=paused_at)
    seen: list[dict[str, str]] = []

    def on_progress(answer: dict[str, str]) -> None:
        seen.append(answer)
        if answer["bytes"] == str(paused_at):
            route.release.set()  # the game saw the download stand at a third: let it go on

    store = tmp_path / "store"
    with serving({catalog_file(CATALOG_NAME): route}) as server:
        out = await watch(
            wait_exe,
            str(daemon_wrapper(tmp_path)),
            "50",
            PULL_SPEC,
            env=mirror_env(store, server.url("")),
            on_progress=on_progress,
        )
    *during, last = seen
    assert during and all(p["status"] == "downloading" for p in during)
    assert all(p["available"] == "false" for p in during)
    # the size is the server's (the catalog pins none), known once its answer began
    assert {p["total"] for p in during} <= {"null", str(len(body))}
    shown = [int(p["bytes"]) for p in during]
    assert shown == sorted(shown) and paused_at in shown
    assert next(p for p in during if p["bytes"] == str(paused_at))["total"] == str(len(body))
    assert f"fetching {CATALOG_NAME} on request" in during[-1]["detail"]
    assert (last["status"], last["available"]) == ("available", "true")
    assert all(p["main"] == "yes" for p in seen)  # onProgress ran on the client's callback thread
    assert f"result: available available=true reports={len(seen)}" in out
    assert "answered: yes" in out  # the model the game waited for answers a turn
    assert sha256((store / f"{CATALOG_NAME}.gguf").read_bytes()) == sha256(body)
    assert len(server.ranges_asked(catalog_file(CATALOG_NAME))) == 1


@needs_llama
@pytest.mark.parametrize("recovers", [True, False])
async def test_a_failed_download_is_started_again_once_and_a_second_failure_ends_the_wait(
    wait_exe, tmp_path, recovers
):
    route = Route(status=503)
    seen: list[dict[str, str]] = []

    def on_progress(answer: dict[str, str]) -> None:
        seen.append(answer)
        if recovers and answer["status"] == "downloadable":
            route.status, route.body = (
                200,
                packaged_model_bytes(),
            )  # the server is back for the retry

    # polled once a second, as an engine does: time for this test to bring the server back
    # between the failure's report and the check that starts the download again
    poll = "1000" if recovers else "50"
    with serving({catalog_file(CATALOG_NAME): route}) as server:
        out = await watch(
            wait_exe,
            str(daemon_wrapper(tmp_path)),
            poll,
            PULL_SPEC,
            env=mirror_env(tmp_path / "store", server.url("")),
            on_progress=on_progress,
        )
    failures = [p for p in seen if p["status"] == "downloadable"]
    assert all(
        p["detail"].startswith("download failed: ") and "503" in p["detail"] for p in failures
    )
    assert all(p["status"] in ("downloading", "downloadable", "available") for p in seen)
    if recovers:
        assert len(failures) == 1 and seen[-1]["status"] == "available"
        assert f"result: available available=true reports={len(seen)}" in out
    else:
        assert len(failures) == 2 and seen[-1] == failures[-1]
        assert f"result: downloadable available=false reports={len(seen)}" in out
    # the first pull (started by initialize), then the one the first failure's next check started
    assert len(server.ranges_asked(catalog_file(CATALOG_NAME))) == 2

"""The real ``MlKitBackend`` on a desktop JVM against the stub ML Kit (``android_host/stubs``):
ML Kit initialised for the ``:service`` process before the first client, harmlessly twice, the
system text put in the prompt when ``SystemInstruction`` is refused, and a download's listener
ended once whichever of ML Kit's callback and future reports the end first. Driven by
``tests/android/MlKitBackendCheck.java``, one JVM per scenario (initialisation is per process);
the engine's view of a download, and of a start call past the JVM call timeout, through pyjnius
in this process, on the stubs' ``FakeMlKit``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from android.jvm_support import java_classes, jvm  # noqa: F401 (fixtures)
from conftest import memory_daemon
from contract import validate_result

from oamd.backends.android.jvm import DownloadProgress
from oamd.backends.android.mlkit import MlKitModel
from oamd.daemon import default_config

ROOT = Path(__file__).resolve().parents[1]
HOST = ROOT / "android_host"
CHECK = ROOT / "tests" / "android" / "MlKitBackendCheck.java"


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no JDK on PATH (install one, e.g. openjdk-17-jdk-headless)")
    out = tmp_path_factory.mktemp("mlkit-check")
    sources = [
        str(p) for d in ("stubs", "java", "java_android") for p in (HOST / d).rglob("*.java")
    ]
    done = subprocess.run(
        ["javac", "-Xlint:all,-options", "-Werror", "--release", "8", "-d", str(out), *sources,
         str(CHECK)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def run(classes: Path, scenario: str) -> str:
    done = subprocess.run(
        ["java", "-cp", str(classes), "MlKitBackendCheck", scenario],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_ml_kit_is_initialised_for_the_service_process_before_the_first_client(classes):
    assert "two backends in a fresh process" in run(classes, "fresh")


def test_a_second_initialisation_after_ml_kits_own_provider_is_harmless(classes):
    assert "two backends after the provider" in run(classes, "provider")


def test_a_refused_system_instruction_goes_into_the_prompt(classes):
    assert "system instruction fallback" in run(classes, "system")


def test_a_download_ends_its_listener_once_whichever_of_callback_and_future_ends_first(classes):
    assert "one end of every download" in run(classes, "download")


# ---- in-process, through pyjnius: what the engine sees --------------------------------------

DOWNLOADABLE, AVAILABLE = 1, 3  # ML Kit's FeatureStatus


@pytest.fixture
def mlkit(jvm) -> tuple[Any, Any]:  # noqa: F811
    """(the stubs' FakeMlKit, a real MlKitBackend on it)."""
    fake_class = jvm.autoclass("com.google.mlkit.genai.prompt.java.FakeMlKit")
    fake = jvm.run_blocking(fake_class.install)
    backend = jvm.run_blocking(
        lambda: jvm.autoclass("org.oamd.host.MlKitBackend")(fake_class.CONTEXT)
    )
    yield fake, backend
    jvm.run_blocking(fake.releaseStart)
    jvm.run_blocking(backend.close)


@pytest.fixture
def ends(monkeypatch) -> list[str | None]:
    """Every end a download listener passed on to its DownloadProgress, counted before the
    progress ignores a second one."""
    seen: list[str | None] = []
    end = DownloadProgress.end

    def counted(self: DownloadProgress, error: str | None = None) -> None:
        seen.append(error)
        end(self, error)

    monkeypatch.setattr(DownloadProgress, "end", counted)
    return seen


async def play(jvm, fake, step: str, *args: Any) -> None:  # noqa: F811
    """One scripted step; a future's end is awaited, as it reports on the backend's executor."""
    before = jvm.run_blocking(fake.listenersRun)
    await jvm.call(getattr(fake, step), *args)
    if step.startswith("future") or step == "race":
        assert await jvm.call(fake.awaitListeners, before + 1, 5000)


ORDERS = {
    "callback-then-future": ([("callbackCompletes",), ("futureSucceeds",)], None),
    "future-then-callback": ([("futureSucceeds",), ("callbackCompletes",)], None),
    "future-fails-alone": ([("futureFails", 8, "binding died")], "binding died (code 8)"),
    "both-fail": (
        [("callbackFails", 501, "disk full"), ("futureFails", 8, "binding died")],
        "disk full (code 501)",
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("order", ORDERS)
async def test_the_engine_sees_one_end_of_a_download_whichever_report_comes_first(
    jvm,  # noqa: F811
    mlkit,
    ends,
    order,
):
    fake, backend = mlkit
    steps, error = ORDERS[order]
    jvm.run_blocking(fake.setStatus, DOWNLOADABLE)
    model = MlKitModel(backend, jvm)
    with anyio.fail_after(5):
        assert (await model.availability()).status == "downloading"
        if order != "future-fails-alone":
            await jvm.call(fake.started, 300)
            await jvm.call(fake.progress, 100)
            during = (await model.availability()).to_wire()
            assert (during["status"], during["bytesDownloaded"], during["totalBytes"]) == (
                "downloading",
                100,
                300,
            )
            assert during["detail"] == "downloaded 100 of 300 bytes"
        for step in steps:
            await play(jvm, fake, *step)
        # AICore's own status follows: the model is there, or can be downloaded again
        jvm.run_blocking(fake.setStatus, AVAILABLE if error is None else DOWNLOADABLE)
        after = (await model.availability()).to_wire()
        again = (await model.availability()).to_wire()
    assert ends == [error]
    validate_result("model/availability", after)
    if error is None:
        assert after["status"] == "available" and "bytesDownloaded" not in after
        assert again["status"] == "available"
        assert jvm.run_blocking(fake.downloadCount) == 1
    else:  # reported once, then the next check starts the download again
        assert (after["status"], after["detail"]) == ("downloadable", f"download failed: {error}")
        assert "bytesDownloaded" not in after
        assert again["status"] == "downloading"
        assert jvm.run_blocking(fake.downloadCount) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("future_fails", [False, True], ids=["future-completes", "future-fails"])
async def test_a_download_ended_by_callback_and_future_at_once_ends_once(
    jvm,  # noqa: F811
    mlkit,
    ends,
    future_fails,
):
    fake, backend = mlkit
    for i in range(50):
        progress = DownloadProgress()
        listener = jvm.download_listener(progress)
        await jvm.call(backend.download, listener)
        with anyio.fail_after(5):
            await play(jvm, fake, "race", False, future_fails, 501)
        assert len(ends) == i + 1
        assert progress.state in ("completed", "failed")


# ---- a start call past the JVM call timeout --------------------------------------------------


@pytest.mark.anyio
async def test_a_start_blocked_past_the_call_timeout_fails_once_and_the_session_answers_again(
    jvm,  # noqa: F811
    mlkit,
    monkeypatch,
):
    fake, backend = mlkit
    monkeypatch.setattr(jvm, "call_timeout", 0.2)
    watchdog = 0.3
    guard = jvm.autoclass("org.oamd.host.GuardedSink")
    dropped = jvm.run_blocking(guard.droppedTotal)
    model = MlKitModel(backend, jvm, watchdog_seconds=watchdog)
    async with memory_daemon(default_config(system_model=model)) as client:
        with anyio.fail_after(5):
            await client.request(
                "session/create", {"session": "s", "model": "system", "options": {"maxAttempts": 1}}
            )
            listeners = jvm.run_blocking(fake.listenersRun)
            # past the call timeout and two watchdog periods: a watchdog still running would fire
            jvm.run_blocking(fake.holdStart, int((0.2 + 2 * watchdog) * 1000))
            first = await client.start("session/respond", {"session": "s", "prompt": "Hi"})
            response = await client.wait(first)
            # the start is still blocked in Java, which holds the sink: so does the registry
            assert jvm.registered() == 1
            # queued behind the blocked start: runs once it returned and the guard was ended
            assert await anyio.to_thread.run_sync(
                jvm.run_blocking, fake.awaitListeners, listeners + 1, 5000
            )
            dropped_now = jvm.run_blocking(guard.droppedTotal)
            answer = await client.request("session/respond", {"session": "s", "prompt": "Hi"})
    error = response["error"]
    assert (error["code"], error["data"]["code"]) == (-32012, "generation_failed")
    assert "longer than 0.2 s" in error["message"] and "watchdog" not in error["message"]
    about_first = [
        m
        for m in client.recorder.received
        if m.get("id") == first or m.get("params", {}).get("requestId") == first
    ]
    assert about_first == [response]
    # the blocked generation was cancelled in Java; its CANCELLED came after the guard's end
    assert jvm.run_blocking(fake.cancelledGenerations) == 1
    assert dropped_now - dropped == 1
    assert jvm.registered() == 0
    assert answer["text"] == "ok"

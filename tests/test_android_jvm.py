"""MlKitModel over pyjnius on the desktop JVM, driving the compiled FakeBackend: streaming order,
one terminal callback, every error code, cancellation, foreign-thread callbacks, the watchdog and
callback lifetimes under ``gc.collect()``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from android.jvm_support import fake, java_classes, jvm  # noqa: F401 (fixtures)
from contract import validate_result

from oamd.backends.android import jvm as jvm_module
from oamd.backends.android.mlkit import CODE_NAMES, MlKitModel
from oamd.backends.base import ChatMessage, GenerationRequest, Sampling, TextDelta, Usage
from oamd.errors import ModelError

pytestmark = pytest.mark.anyio


def ask(text: str = "Hello?", **sampling: Any) -> GenerationRequest:
    return GenerationRequest([ChatMessage("user", text)], sampling=Sampling(**sampling))


async def collect(model: MlKitModel, request: GenerationRequest | None = None) -> list[Any]:
    with anyio.fail_after(5):
        return [event async for event in model.generate(request or ask())]


async def idle(jvm, fake) -> None:  # noqa: F811
    """Waits (bounded) until every fake generation thread has ended."""
    assert await jvm.call(fake.awaitIdle, 5000)


async def test_chunks_arrive_in_order_then_usage(jvm, fake):  # noqa: F811
    jvm.run_blocking(fake.enqueueReply, ["Three ", "iron ", "swords."], 1)
    events = await collect(MlKitModel(fake, jvm))
    assert events[:3] == [TextDelta("Three "), TextDelta("iron "), TextDelta("swords.")]
    assert isinstance(events[3], Usage) and events[3].output_tokens > 0
    assert len(events) == 4


async def test_options_carry_clamped_sampling_and_the_system_instruction(jvm, fake):  # noqa: F811
    model = MlKitModel(fake, jvm, max_output_tokens=256)
    request = GenerationRequest(
        [ChatMessage("system", "Be Gorm."), ChatMessage("user", "Hi")],
        sampling=Sampling(temperature=1.7, top_k=40, seed=-1, max_tokens=99999),
    )
    await collect(model, request)
    (options,) = jvm.run_blocking(fake.options)
    assert orjson.loads(options) == {
        "systemInstruction": "Be Gorm.",
        "temperature": 1.0,
        "topK": 40,
        "seed": 0x7FFFFFFF,
        "maxOutputTokens": 256,
    }
    assert list(jvm.run_blocking(fake.prompts)) == ["Hi"]


async def test_every_generation_gets_exactly_one_terminal_and_releases_its_sink(jvm, fake):  # noqa: F811
    model = MlKitModel(fake, jvm)
    for i in range(20):
        jvm.run_blocking(fake.enqueueReply, [f"a{i}", f"b{i}"], 0)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(collect, model)
    await idle(jvm, fake)
    assert jvm.run_blocking(fake.terminalCount) == 20
    assert jvm.registered() == 0


@pytest.mark.parametrize("code", [*sorted(CODE_NAMES), 12345])
async def test_each_error_code_reaches_the_caller_as_its_model_error(jvm, fake, code):  # noqa: F811
    jvm.run_blocking(fake.enqueueError, code, "scripted failure", 2500, ["partial "])
    events: list[Any] = []
    with pytest.raises(ModelError) as caught, anyio.fail_after(5):
        async for event in MlKitModel(fake, jvm).generate(ask()):
            events.append(event)
    expected = CODE_NAMES.get(code, ("UNKNOWN", "generation_failed"))[1]
    assert caught.value.name == expected
    assert events == [TextDelta("partial ")]
    assert caught.value.retry_after == (2.5 if expected == "rate_limited" else None)
    await idle(jvm, fake)
    assert jvm.registered() == 0


async def test_cancelling_while_streaming_cancels_in_java_and_releases_the_sink(jvm, fake):  # noqa: F811
    jvm.run_blocking(fake.enqueueHang, ["first "])
    model = MlKitModel(fake, jvm)
    seen: list[Any] = []
    with anyio.fail_after(5):
        with anyio.CancelScope() as scope:
            async for event in model.generate(ask()):
                seen.append(event)
                scope.cancel()
        assert scope.cancelled_caught
        await idle(jvm, fake)
    assert seen == [TextDelta("first ")]
    assert jvm.run_blocking(fake.cancelCount) == 1
    assert jvm.registered() == 0


async def test_callbacks_come_from_java_threads_and_are_delivered_on_the_loop(
    jvm,  # noqa: F811
    fake,  # noqa: F811
    monkeypatch,
):
    posted: list[int] = []
    delivered: list[int] = []
    post, deliver = jvm_module._LoopPort.post, jvm_module._LoopPort._deliver

    def record_post(self, *args):
        posted.append(threading.get_ident())
        post(self, *args)

    def record_deliver(self, *args):
        delivered.append(threading.get_ident())
        deliver(self, *args)

    monkeypatch.setattr(jvm_module._LoopPort, "post", record_post)
    monkeypatch.setattr(jvm_module._LoopPort, "_deliver", record_deliver)
    jvm.run_blocking(fake.enqueueReply, ["a", "b"], 0)
    await collect(MlKitModel(fake, jvm))
    loop_thread = threading.get_ident()
    assert len(posted) == 3 and loop_thread not in posted
    assert delivered == [loop_thread] * 3


async def test_the_watchdog_fails_a_call_that_never_completes(jvm, fake):  # noqa: F811
    jvm.run_blocking(fake.enqueueSilent, ["stuck "])
    model = MlKitModel(fake, jvm, watchdog_seconds=0.2)
    events: list[Any] = []
    with pytest.raises(ModelError) as caught, anyio.fail_after(5):
        async for event in model.generate(ask()):
            events.append(event)
    assert caught.value.name == "generation_failed"
    assert "watchdog" in caught.value.message
    assert events == [TextDelta("stuck ")]
    await jvm.call(lambda: None)  # the cancel queued behind the watchdog has run
    assert jvm.run_blocking(fake.cancelCount) == 1
    # Java never sent a terminal call, so the sink is still held for it
    assert jvm.registered() == 1
    await jvm.call(fake.close)
    await idle(jvm, fake)
    assert jvm.registered() == 0


async def test_availability_and_capabilities_come_from_the_backend(jvm, fake):  # noqa: F811
    jvm.run_blocking(fake.setStatus, '{"status":"downloadable"}')
    jvm.run_blocking(fake.setTokenLimit, 3000)
    jvm.run_blocking(fake.holdDownload)  # its end would set the status behind the test's back
    model = MlKitModel(fake, jvm)
    found = await model.availability()
    assert (found.available, found.status, found.reason) == (
        False,
        "downloading",
        "model_not_ready",
    )
    assert model.cached_availability() is None
    jvm.run_blocking(fake.setStatus, '{"status":"available","maxOutputTokens":512}')
    found = await model.availability()
    assert found.available and found.context_size == 3000
    assert model.capabilities.max_output_tokens == 512
    assert model.capabilities.context_size == 3000
    assert model.capabilities.native_tools is False
    assert model.cached_availability() == found
    assert await model.count_tokens("12345678") == 2
    jvm.run_blocking(fake.releaseDownload)


async def test_a_java_call_past_the_call_timeout_fails_generation_failed(jvm, fake, monkeypatch):  # noqa: F811
    monkeypatch.setattr(jvm, "call_timeout", 0.2, raising=False)
    jvm.run_blocking(fake.setStatusDelay, 1000)
    with anyio.fail_after(0.9):  # well before Java returns
        with pytest.raises(ModelError) as caught:
            await jvm.call(fake.status)
        found = await MlKitModel(fake, jvm).availability()
    assert caught.value.name == "generation_failed"
    assert "longer than 0.2 s" in caught.value.message
    assert (found.available, found.reason) == (False, "unknown")
    assert "longer than 0.2 s" in (found.detail or "")
    jvm.run_blocking(fake.setStatusDelay, 0)


async def until(progress, predicate) -> None:
    """Waits (bounded, off the loop) until the download's progress satisfies ``predicate``."""
    assert await anyio.to_thread.run_sync(progress.wait_until, predicate, 5)


async def test_a_downloadable_model_is_downloaded_once_and_its_progress_reported(jvm, fake):  # noqa: F811
    jvm.run_blocking(fake.setStatus, '{"status":"downloadable"}')
    jvm.run_blocking(fake.holdDownload)
    model = MlKitModel(fake, jvm)
    with anyio.fail_after(5):
        first = await model.availability()
        progress = model.download_progress()
        await until(progress, lambda p: p.bytes_downloaded == 100)
        second = await model.availability()
        jvm.run_blocking(fake.releaseDownload)
        await until(progress, lambda p: p.state == "completed")
        third = await model.availability()
    assert (first.available, first.reason, first.status) == (
        False,
        "model_not_ready",
        "downloading",
    )
    wire = second.to_wire()
    assert (wire["status"], wire["bytesDownloaded"], wire["totalBytes"]) == (
        "downloading",
        100,
        300,
    )
    assert wire["detail"] == "downloaded 100 of 300 bytes"
    validate_result("model/availability", wire)
    assert jvm.run_blocking(fake.downloadCount) == 1
    assert third.available and "bytesDownloaded" not in third.to_wire()


async def test_a_failed_download_is_reported_then_started_again(jvm, fake):  # noqa: F811
    jvm.run_blocking(fake.setStatus, '{"status":"downloadable"}')
    jvm.run_blocking(fake.failDownload, "disk full")
    model = MlKitModel(fake, jvm)
    with anyio.fail_after(5):
        await model.availability()
        await until(model.download_progress(), lambda p: p.state == "failed")
        failed = await model.availability()
        assert jvm.run_blocking(fake.downloadCount) == 1
        again = await model.availability()
    assert (failed.status, failed.detail) == (
        "downloadable",
        "download failed: disk full (code 501)",
    )
    assert again.status == "downloading"
    assert jvm.run_blocking(fake.downloadCount) == 2


GC_STRESS = """
import gc, sys
import anyio
from oamd.backends.android.jvm import JvmRuntime
from oamd.backends.base import ChatMessage, GenerationRequest, TextDelta
from oamd.backends.android.mlkit import MlKitModel

runtime = JvmRuntime.start([sys.argv[1]])
fake = runtime.run_blocking(lambda: runtime.autoclass("org.oamd.host.FakeBackend")())
for i in range(150):
    if i % 2:
        runtime.run_blocking(fake.enqueueReply, [f"x{i}", "y", "z", "w"], 30)
    else:
        runtime.run_blocking(fake.enqueueHang, [f"h{i}"])  # ends only when cancelled

async def one(model):
    text = []
    abandon = False
    stream = model.generate(GenerationRequest([ChatMessage("user", "hi")]))
    async for event in stream:
        gc.collect()
        if isinstance(event, TextDelta):
            text.append(event.text)
            abandon = text[0].startswith("h")
            if abandon:
                break  # Java keeps calling the sink after this frame is gone
    await stream.aclose()
    del stream
    gc.collect()
    assert len(text) == (1 if abandon else 4), text

async def main():
    model = MlKitModel(fake, runtime)
    with anyio.fail_after(40):
        async with anyio.create_task_group() as tg:
            for i in range(150):
                tg.start_soon(one, model)
                gc.collect()
        for _ in range(20):
            gc.collect()
            await anyio.sleep(0)
    assert runtime.run_blocking(fake.awaitIdle, 5000)
    gc.collect()
    assert runtime.registered() == 0
    print("ok", runtime.run_blocking(fake.terminalCount), runtime.run_blocking(fake.cancelCount))

anyio.run(main)
"""


def test_no_callback_is_collected_early_under_gc_stress(java_classes, tmp_path):  # noqa: F811
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(GC_STRESS), str(java_classes)],
        capture_output=True,
        text=True,
        timeout=50,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        cwd=tmp_path,  # where a crashing JVM would leave its hs_err file
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ok, terminals, cancels = done.stdout.split()
    assert (ok, terminals) == ("ok", "150")
    assert cancels == "75"  # each abandoned generation was cancelled, then ended in Java


async def test_a_call_after_the_terminal_one_is_ignored_and_counted(jvm):  # noqa: F811
    sink, _token, events = jvm.open_sink()
    with events:
        sink.onChunk("a")
        sink.onDone(None, "STOP")
        sink.onChunk("late")
        sink.onError(9, "late", 0)
        with anyio.fail_after(5):
            received = [event async for event in events]
    assert received == [jvm_module.Chunk("a"), jvm_module.Done(None, "STOP")]
    assert sink.late_calls == 2
    assert jvm.registered() == 0


GUARD_CASE = """
import gc, sys, time
from oamd.backends.android.jvm import JvmRuntime

runtime = JvmRuntime.start([sys.argv[1]])
case, guarded = sys.argv[2], sys.argv[3] == "guarded"
fake = runtime.run_blocking(lambda: runtime.autoclass("org.oamd.host.FakeBackend")())
if case == "null-usage":
    runtime.run_blocking(fake.enqueueNullUsage, ["a"])
else:
    runtime.run_blocking(fake.enqueueLateCall, ["a"], 300)

async def main():
    sink, token, events = runtime.open_sink()
    handed = runtime.run_blocking(runtime.guard, sink) if guarded else sink
    runtime.run_blocking(fake.generate, "hi", "{}", handed)
    with events:
        received = [event async for event in events]
    return received

import anyio
received = anyio.run(main)
gc.collect()  # the Python sink is gone now: only the guard stands between Java and it
time.sleep(1.0)  # the late call comes 300 ms after the terminal one
gc.collect()
dropped = runtime.run_blocking(runtime.autoclass("org.oamd.host.GuardedSink").droppedTotal)
print("ok", len(received), dropped)
"""


def run_guard_case(classes: Path, tmp_path, case: str, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(GUARD_CASE), str(classes), case, mode],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        cwd=tmp_path,  # where a crashing JVM leaves its hs_err file
    )


@pytest.mark.parametrize("case", ["null-usage", "late-call"])
def test_the_guard_keeps_the_jvm_alive_where_the_bare_sink_kills_it(java_classes, tmp_path, case):  # noqa: F811
    """A null usage and a call after the terminal one: through ``GuardedSink`` the generation ends
    normally (the late call dropped and counted); handed the bare Python sink, the same
    generation kills the process — pyjnius converting a null String, every run; a call into the
    released object, 2 runs in 3 here."""
    guarded = run_guard_case(java_classes, tmp_path, case, "guarded")
    assert guarded.returncode == 0, guarded.stderr[-3000:]
    ok, events, dropped = guarded.stdout.split()
    assert ok == "ok" and int(events) == 2  # the chunk, then the terminal event
    assert int(dropped) == (1 if case == "late-call" else 0)
    if case == "null-usage":  # a use after free crashes most runs, not every one: not asserted
        bare = run_guard_case(java_classes, tmp_path, case, "bare")
        assert bare.returncode != 0 and "ok" not in bare.stdout, (bare.returncode, bare.stdout)

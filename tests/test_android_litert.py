"""LiteRtBackend (``android_host/java_android``) on the desktop JVM against the stubs' fake
LiteRT-LM engine (``FakeLiteRtLm``), whose decode calls back on its own thread and keeps running
for a while after ``cancelProcess()``: a failed load, the options it passes, and when it closes
its conversations (never inside a callback, never under a running decode). Reuse of the live
conversation across generations: ``test_android_litert_reuse.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from android.jvm_support import engine, java_classes, jvm, litert_backend  # noqa: F401 (fixtures)

from oamd.backends.android.litert import LiteRtModel
from oamd.backends.base import ChatMessage, GenerationRequest, Sampling, TextDelta
from oamd.errors import ModelError

pytestmark = pytest.mark.anyio


def backend(jvm, tmp_path: Path, watchdog_millis: int = 90_000) -> Any:  # noqa: F811
    return litert_backend(jvm, tmp_path / "cache", watchdog_millis)


def ask(text: str = "Hello?") -> GenerationRequest:
    return GenerationRequest(
        [ChatMessage("system", "Be Gorm."), ChatMessage("user", text)], sampling=Sampling()
    )


async def failures_of(model: LiteRtModel) -> list[ModelError]:
    """Runs one generation to its end: the ``ModelError`` it failed with, if any."""
    try:
        async for _ in model.generate(ask()):
            pass
    except ModelError as exc:
        return [exc]
    return []


async def closed(jvm, engine, n: int = 1) -> None:  # noqa: F811
    assert await jvm.call(engine.awaitClosed, n, 5000)
    assert list(jvm.run_blocking(engine.violations)) == []


@pytest.mark.parametrize(
    ("kind", "shown"),
    [
        ("unsatisfied-link", "UnsatisfiedLinkError"),
        ("error", "OutOfMemoryError"),
        ("runtime", "IllegalStateException"),
    ],
)
async def test_a_failed_initialize_leaves_the_backend_unavailable_with_its_reason(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    tmp_path,
    kind,
    shown,
):
    jvm.run_blocking(engine.failInitialize, kind)
    native = backend(jvm, tmp_path)
    status = orjson.loads(jvm.run_blocking(native.status))
    assert status["status"] == "unavailable" and shown in status["detail"]
    with pytest.raises(ModelError) as caught, anyio.fail_after(5):
        async for _ in LiteRtModel(native, jvm).generate(ask()):
            pass
    assert caught.value.name != "guardrail_violation" and shown in caught.value.message
    jvm.run_blocking(native.close)
    assert jvm.registered() == 0


async def test_a_reply_streams_and_its_conversation_stays_live_until_the_backend_closes(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    tmp_path,
):
    native = backend(jvm, tmp_path)
    with anyio.fail_after(5):
        events = [e async for e in LiteRtModel(native, jvm).generate(ask())]
    # LiteRT-LM reports no usage: the guard turns its null into "{}", so no Usage event
    assert events == [TextDelta("Hello"), TextDelta(" there")]
    assert jvm.run_blocking(engine.aliveConversations) == 1  # kept for the next step
    jvm.run_blocking(native.close)
    await closed(jvm, engine)
    assert jvm.run_blocking(engine.engineClosed)
    assert jvm.registered() == 0


async def test_max_output_tokens_the_system_text_and_a_created_cache_dir_reach_the_engine(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    tmp_path,
):
    native = backend(jvm, tmp_path)
    cache = tmp_path / "cache"
    assert cache.is_dir() and jvm.run_blocking(engine.cacheDir) == str(cache)
    assert jvm.run_blocking(engine.maxNumTokens) == 4096
    with anyio.fail_after(5):
        async for _ in LiteRtModel(native, jvm, max_output_tokens=256).generate(ask()):
            pass
    assert jvm.run_blocking(engine.maxOutputToken) == 256
    assert jvm.run_blocking(engine.systemInstruction) == "Be Gorm."
    jvm.run_blocking(native.close)
    await closed(jvm, engine)


async def test_a_native_error_names_litert_and_is_generation_failed(jvm, engine, tmp_path):  # noqa: F811
    jvm.run_blocking(engine.failNext, "Status Code: 13. Message: decode failed")
    native = backend(jvm, tmp_path)
    model = LiteRtModel(native, jvm)
    assert model.capabilities.native_tools is False
    with pytest.raises(ModelError) as caught, anyio.fail_after(5):
        async for _ in model.generate(ask()):
            pass
    assert caught.value.name == "generation_failed"
    assert caught.value.message.startswith("LiteRT-LM: Status Code: 13")
    await closed(jvm, engine)
    jvm.run_blocking(native.close)
    assert jvm.registered() == 0


async def test_a_cancelled_decode_is_closed_only_after_it_ended(jvm, engine, tmp_path):  # noqa: F811
    jvm.run_blocking(engine.setReply, [f"w{i} " for i in range(100)], 20)
    jvm.run_blocking(engine.setCancelLagMillis, 300)
    native = backend(jvm, tmp_path)
    seen: list[Any] = []
    with anyio.fail_after(5):
        with anyio.CancelScope() as scope:
            async for event in LiteRtModel(native, jvm).generate(ask()):
                seen.append(event)
                scope.cancel()
        assert scope.cancelled_caught
        await closed(jvm, engine)
    assert seen == [TextDelta("w0 ")]
    assert jvm.run_blocking(engine.cancels) == 1
    jvm.run_blocking(native.close)


async def test_the_watchdog_fails_the_call_and_closes_after_the_cancelled_decode(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    tmp_path,
):
    jvm.run_blocking(engine.setHang, True)
    jvm.run_blocking(engine.setCancelLagMillis, 300)
    native = backend(jvm, tmp_path, watchdog_millis=200)
    with pytest.raises(ModelError) as caught, anyio.fail_after(5):
        async for _ in LiteRtModel(native, jvm).generate(ask()):
            pass
    assert "watchdog" in caught.value.message
    # the sink had its terminal call at once; the conversation waits for the decode's end
    assert jvm.run_blocking(engine.closedConversations) == 0
    await closed(jvm, engine)
    jvm.run_blocking(native.close)
    assert jvm.registered() == 0


async def test_closing_the_backend_cancels_a_hung_decode_then_closes_it_and_the_engine(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    tmp_path,
):
    jvm.run_blocking(engine.setHang, True)
    native = backend(jvm, tmp_path)
    failures: list[ModelError] = []

    async def run() -> None:
        failures.extend(await failures_of(LiteRtModel(native, jvm)))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await anyio.sleep(0.1)
            await jvm.call(native.close)
    assert len(failures) == 1
    assert jvm.run_blocking(engine.closedConversations) == 1
    assert list(jvm.run_blocking(engine.violations)) == []
    assert jvm.run_blocking(engine.engineClosed)
    assert jvm.registered() == 0


async def test_closing_the_backend_while_a_conversation_is_being_created_closes_it_first(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    tmp_path,
):
    """close() cancels a generation whose conversation is still being created on the lifecycle
    executor; the conversation it then gets is closed there, before the engine, not left open."""
    jvm.run_blocking(engine.setCreateMillis, 300)
    native = backend(jvm, tmp_path)
    failures: list[ModelError] = []

    async def run() -> None:
        failures.extend(await failures_of(LiteRtModel(native, jvm)))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await anyio.lowlevel.checkpoint()  # run() queues its converse on the JVM thread
            assert await jvm.call(engine.awaitCreating, 5000)
            await jvm.call(native.close)
    assert [f.name for f in failures] == ["cancelled"]
    assert jvm.run_blocking(engine.engineClosed)
    assert jvm.run_blocking(engine.aliveConversations) == 0
    assert list(jvm.run_blocking(engine.violations)) == []
    assert jvm.registered() == 0


async def test_a_request_after_the_backend_closed_is_model_unavailable_and_leaves_nothing(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    tmp_path,
):
    native = backend(jvm, tmp_path)
    model = LiteRtModel(native, jvm)
    jvm.run_blocking(native.close)
    with pytest.raises(ModelError) as caught, anyio.fail_after(5):
        async for _ in model.generate(ask()):
            pass
    assert (caught.value.name, "closed" in caught.value.message) == ("model_unavailable", True)
    assert jvm.registered() == 0
    assert jvm.run_blocking(engine.createdConversations) == 0


async def test_a_conversation_that_cannot_be_opened_is_generation_failed_not_a_guardrail(
    jvm,  # noqa: F811
    engine,  # noqa: F811
    tmp_path,
):
    jvm.run_blocking(engine.failNextCreate, "a session already exists")
    native = backend(jvm, tmp_path)
    with pytest.raises(ModelError) as caught, anyio.fail_after(5):
        async for _ in LiteRtModel(native, jvm).generate(ask()):
            pass
    assert caught.value.name == "generation_failed"
    assert "could not open a conversation" in caught.value.message
    jvm.run_blocking(native.close)
    assert jvm.registered() == 0

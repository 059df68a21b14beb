"""Desktop-JVM fixtures for the Android tests: compile the Java contract and FakeBackend with
``javac`` once per session, start pyjnius on it, and hand each test a fresh FakeBackend.

Tests skip, with the reason, when pyjnius cannot be imported or no ``javac`` is on PATH."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oamd.backends.android.jvm import JvmRuntime, JvmUnavailable, jnius_available

JAVA_SOURCES = Path(__file__).resolve().parents[2] / "android_host" / "java"
"""The pure-Java contract and the fake (``org.oamd.host``)."""


def jvm_skip_reason() -> str | None:
    reason = jnius_available()
    if reason:
        return reason
    if shutil.which("javac") is None:
        return "no javac on PATH (install a JDK, e.g. openjdk-17-jdk-headless)"
    return None


HOST_SOURCES = JAVA_SOURCES.parent
"""``android_host``: also ``java_android`` (the real backends) and ``stubs`` (their libraries,
with a fake LiteRT-LM engine)."""


def compile_contract(out: Path) -> Path:
    """Compiles every ``.java`` under ``android_host/java``, ``java_android`` and ``stubs`` into
    ``out``; returns ``out``. The stubs stand in for ML Kit, LiteRT-LM and org.json, so the real
    backends load on the desktop JVM (LiteRtBackend against the stubs' fake engine)."""
    sources = sorted(
        str(p)
        for folder in ("java", "java_android", "stubs")
        for p in (HOST_SOURCES / folder).rglob("*.java")
    )
    subprocess.run(
        ["javac", "-Xlint:all,-options", "-Werror", "--release", "8", "-d", str(out), *sources],
        check=True,
        capture_output=True,
        text=True,
    )
    return out


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = jvm_skip_reason()
    if reason:
        pytest.skip(reason)
    return compile_contract(tmp_path_factory.mktemp("oamd-java"))


@pytest.fixture(scope="session")
def jvm(java_classes: Path) -> JvmRuntime:
    try:
        return JvmRuntime.start([str(java_classes)])
    except JvmUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def fake(jvm: JvmRuntime) -> Any:
    backend = jvm.run_blocking(lambda: jvm.autoclass("org.oamd.host.FakeBackend")())
    yield backend
    jvm.run_blocking(backend.close)


@pytest.fixture
def engine(jvm: JvmRuntime) -> Any:
    """The stubs' fake LiteRT-LM engine (``FakeLiteRtLm``), reset: its statics are per test."""
    fake_engine = jvm.autoclass("com.google.ai.edge.litertlm.FakeLiteRtLm")
    jvm.run_blocking(fake_engine.reset)
    return fake_engine


def litert_backend(jvm: JvmRuntime, cache_dir: Path, watchdog_millis: int = 90_000) -> Any:
    """A ``LiteRtBackend`` on the fake engine (4,096-token context); the caller closes it."""
    cls = jvm.autoclass("org.oamd.host.LiteRtBackend")
    return jvm.run_blocking(lambda: cls("/m.litertlm", str(cache_dir), 4096, watchdog_millis))

"""The real ``MlKitBackend`` on a desktop JVM against the stub ML Kit (``android_host/stubs``):
ML Kit initialised for the ``:service`` process before the first client, harmlessly twice, and
the system text put in the prompt when ``SystemInstruction`` is refused. Driven by
``tests/android/MlKitBackendCheck.java``, one JVM per scenario (initialisation is per process)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

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

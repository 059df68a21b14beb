"""What gets installed: pyproject's package list is the tree's, and the conformance runner (whose
folder stays at the top of the repository) installs under the project's name, not as a generic
top-level ``conformance`` package."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["tool"]["setuptools"]


def test_the_package_list_is_every_package_of_the_tree():
    found = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "oamd").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    # the scenario folders hold JSON only, yet import as namespace packages: listed too
    found |= {
        "oamd." + ".".join(path.parent.relative_to(ROOT).parts)
        for pattern in ("*.py", "*.json")
        for path in (ROOT / "conformance").rglob(pattern)
        if "__pycache__" not in path.parts
    }
    found.add("oamd.conformance.scenarios")
    assert sorted(_config()["packages"]) == sorted(found)
    assert _config()["package-dir"] == {"oamd.conformance": "conformance"}


def test_the_conformance_runner_is_oamd_conformance_and_oamd_conformance_runs_it():
    code = (
        "import importlib.util, oamd.conformance as c; "
        "print(c.__name__, importlib.util.find_spec('conformance') is None)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], cwd="/", capture_output=True, text=True, check=True
    )
    assert shown.stdout.split() == ["oamd.conformance", "True"]
    listed = subprocess.run(
        [sys.executable, "-m", "oamd", "conformance", "list"],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert "session/" in listed.stdout


def test_a_wheel_builds_without_a_warning_of_ours_and_carries_every_scenario_and_the_page(
    tmp_path,
):
    # the first run meets what setuptools says about pyproject.toml (a deprecated licence table,
    # data folders missing from the package list): nothing, and the corpus is in the wheel
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "--verbose",
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    said = built.stdout + built.stderr
    for warning in ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "is absent from"):
        assert warning not in said, said[said.index(warning) - 400 :][:1200]
    (wheel,) = tmp_path.glob("oamd-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    shipped = {name for name in names if name.endswith(".json")}
    corpus = {
        "oamd/conformance/" + path.relative_to(ROOT / "conformance").as_posix()
        for path in (ROOT / "conformance" / "scenarios").rglob("*.json")
    }
    assert corpus and corpus <= shipped
    assert set(INSPECTOR_PAGE) <= names


INSPECTOR_PAGE = ("oamd/inspector/page.html", "oamd/inspector/page.js")
"""The ``--inspect`` page: data files, which neither a wheel nor a frozen build takes unasked."""


def test_the_frozen_build_takes_the_inspectors_page_files():
    spec = (ROOT / "packaging" / "pyinstaller" / "oamd.spec").read_text(encoding="utf-8")
    for name in INSPECTOR_PAGE:
        assert Path(name).name in spec, name
    assert all((ROOT / name).is_file() for name in INSPECTOR_PAGE)

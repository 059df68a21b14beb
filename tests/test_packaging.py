"""What gets installed: pyproject's package list is the tree's, and the conformance runner (whose
folder stays at the top of the repository) installs under the project's name, not as a generic
top-level ``conformance`` package."""

from __future__ import annotations

import subprocess
import sys
import tomllib
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
    found |= {
        "oamd." + ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "conformance").rglob("*.py")
        if "__pycache__" not in path.parts
    }
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

"""Where the tests find the self-contained executable that ``make dist`` builds (``dist/oamd/oamd``).

``OAMD_EXECUTABLE`` names another one (a wrapper script while developing, a Windows build); without
either the test is skipped with the reason, and ``.ci/run`` fails a run where that skip shows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DIST_EXECUTABLE = ROOT / "dist" / "oamd" / "oamd"


def shipped_oamd() -> Path:
    """The executable under test, or a skip that says how to build it."""
    named = os.environ.get("OAMD_EXECUTABLE")
    path = Path(named) if named else DIST_EXECUTABLE
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip(f"the shipped executable {path} is not built (make dist)")
    return path

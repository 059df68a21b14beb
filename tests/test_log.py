"""Logging writes to the ``sys.stderr`` of the moment a record is written."""

from __future__ import annotations

import io
import sys

from oamd.log import configure_logging, get_logger


def test_a_record_after_a_swapped_stderr_was_closed_goes_to_the_stderr_of_now(monkeypatch, capsys):
    configure_logging("info")
    try:
        borrowed = io.StringIO()
        monkeypatch.setattr(sys, "stderr", borrowed)
        get_logger("test").info("while swapped")
        monkeypatch.undo()
        borrowed.close()  # a capture that ended: writing to it raises ValueError
        get_logger("test").info("after")
    finally:
        configure_logging("warning")
    assert '"event": "after"' in capsys.readouterr().err

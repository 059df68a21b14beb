"""Record a connection, and play it back with no model (``docs/RECORDING.md``).

``Recorder`` is the ``--record DIR`` tap: each connection's lines both ways, and what every use of
the system model returned as scripted-model steps, in one JSON file. ``play`` replays such a file on
those scripts and diffs the daemon's lines with the recorded ones (``oamd replay``). Nothing here is
loaded unless one of them is asked for.
"""

from __future__ import annotations

from oamd.recording._format import RecordingError, read_recording
from oamd.recording._recorder import Recorder, prepare_directory
from oamd.recording._replay import ReplayOutcome, play

__all__ = [
    "Recorder",
    "RecordingError",
    "ReplayOutcome",
    "play",
    "prepare_directory",
    "read_recording",
]

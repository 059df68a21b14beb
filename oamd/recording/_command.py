"""``oamd replay PATH...``: plays recordings back and prints, for each, that it matched or its
differences. Exit 0 when every recording matched, 1 when one did not, 2 when a path holds no
recording this oamd can play (nothing is played then: the message names the file)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from oamd.recording._format import RecordingError, read_recording
from oamd.recording._replay import ReplayOutcome, play

__all__ = ["replay_main"]

EXIT_MATCHED = 0
EXIT_MISMATCH = 1
EXIT_UNPLAYABLE = 2


def _files(paths: list[str]) -> list[Path]:
    """The recordings ``paths`` name: files as given, directories' ``*.json`` by name.

    Raises:
        RecordingError: a path does not exist, or a directory holds no recording.
    """
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found = sorted(p for p in path.glob("*.json") if p.is_file())
            if not found:
                raise RecordingError(f"{given}: no recordings (*.json) in this directory.")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise RecordingError(f"{given}: no such file or directory.")
    return files


def _report(path: Path, outcome: ReplayOutcome, show: int) -> str:
    if outcome.matched:
        lines = [f"{path}: played back as recorded ({outcome.recorded_lines} daemon lines)"]
    else:
        count = len(outcome.differences)
        lines = [f"{path}: {count} difference{'s' if count != 1 else ''}"]
        for difference in outcome.differences[:show]:
            lines += ["  " + text for text in str(difference).splitlines()]
        if count > show:
            lines.append(f"  … and {count - show} more (--show N)")
    lines += [f"  note: {note}" for note in outcome.notes]
    return "\n".join(lines)


def replay_main(paths: list[str], show: int) -> int:
    try:
        documents = [(path, read_recording(path)) for path in _files(paths)]
    except RecordingError as exc:
        sys.stderr.write(f"oamd replay: {exc}\n")
        return EXIT_UNPLAYABLE
    matched = 0
    for path, document in documents:
        try:
            outcome = anyio.run(play, document)
        except RecordingError as exc:
            sys.stderr.write(f"oamd replay: {path}: {exc}\n")
            return EXIT_UNPLAYABLE
        matched += outcome.matched
        sys.stdout.write(_report(path, outcome, show) + "\n")
    if len(documents) > 1:
        sys.stdout.write(f"{matched} of {len(documents)} recordings played back as recorded.\n")
    return EXIT_MATCHED if matched == len(documents) else EXIT_MISMATCH

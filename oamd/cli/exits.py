"""Every exit code ``oamd`` documents, one table for all its commands, and the lines each
command's help ends with to explain its own (``exit_codes``)."""

from __future__ import annotations

import textwrap

__all__ = [
    "CHECK_EXITS",
    "EPILOG_WIDTH",
    "EXIT_DOWNLOAD_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_MISMATCH",
    "EXIT_OUTPUT_BROKEN",
    "EXIT_REFUSED",
    "EXIT_STORE_FAILED",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "LIST_EXITS",
    "PULL_EXITS",
    "REPLAY_EXITS",
    "RM_EXITS",
    "SERVE_EXITS",
    "STDIO_EXITS",
    "exit_codes",
]

EXIT_MISMATCH = 1
"""``oamd replay``: a recording played back differently."""
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_DOWNLOAD_FAILED = 4
EXIT_REFUSED = 5
EXIT_STORE_FAILED = 6
EXIT_INTERRUPTED = 130
"""128 + SIGINT: Ctrl-C, as a shell reports it."""
EXIT_OUTPUT_BROKEN = 141
"""``oamd stdio`` could no longer write its stdout (the engine is gone), or the engine let more than
``--max-outbox-bytes`` wait unread (taken for gone, logged as ``peer_not_reading``): everything
still running was cancelled at once. 128 + SIGPIPE, as a shell reports a process killed by a broken
pipe."""

EPILOG_WIDTH = 78
"""Exit-code tables are wrapped by hand (argparse keeps an epilog as written): to 78 columns."""


def exit_codes(*rows: tuple[int, str]) -> str:
    lines = ["exit codes:"]
    for code, meaning in rows:
        first, *more = textwrap.wrap(meaning, width=EPILOG_WIDTH - len("  130  "))
        lines += [f"  {code:<5}{first}", *(f"{'':7}{line}" for line in more)]
    return "\n".join(lines)


USAGE_ROW = (EXIT_USAGE, "a usage error: an unknown option or a bad value (one line on stderr)")
STDIO_EXITS = exit_codes(
    (0, "stdin ended (every request read was answered first)"),
    USAGE_ROW,
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (
        EXIT_OUTPUT_BROKEN,
        "stdout broke, or more than --max-outbox-bytes waited unread: the engine is taken for "
        "gone and everything still running is cancelled",
    ),
)
SERVE_EXITS = exit_codes(
    (0, "SIGTERM or SIGINT: stopped accepting, answered or cancelled every connection's work"),
    (
        EXIT_USAGE,
        "a usage error, or an endpoint or token file that cannot be used safely (one line on "
        "stderr)",
    ),
    (EXIT_INTERRUPTED, "a second Ctrl-C during the drain"),
)
REPLAY_EXITS = exit_codes(
    (0, "every recording played back as recorded"),
    (EXIT_MISMATCH, "a recording played back differently: its differences are on stdout"),
    (
        EXIT_USAGE,
        "a usage error, or a file that is not a recording this oamd can play (one line on stderr)",
    ),
)
CHECK_EXITS = exit_codes(
    (0, "the model is available"),
    USAGE_ROW,
    (
        EXIT_UNAVAILABLE,
        "the model is not available (none configured, the server unreachable, the file "
        "missing…): the JSON says why",
    ),
)
PULL_EXITS = exit_codes(
    (0, "the model is in the store, verified (its path is printed on stdout)"),
    (
        EXIT_USAGE,
        "a usage error: an unknown name, not an http(s) URL, a bad --sha256 or"
        " $OAMD_CATALOG_BASE_URL",
    ),
    (
        EXIT_DOWNLOAD_FAILED,
        "the download failed: the server refused (404, 5xx…), could not be reached, or the "
        "connection kept breaking; a partial file is kept and the same command resumes it",
    ),
    (
        EXIT_REFUSED,
        "the file is not what was expected (size, GGUF header or SHA-256): it was deleted",
    ),
    (
        EXIT_STORE_FAILED,
        "the store cannot be written (the disk is full, no permission, a file in its place);"
        " what was downloaded is kept and the same command resumes it",
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C): the partial file is kept for the next pull"),
)
LIST_EXITS = exit_codes((0, "always"))
RM_EXITS = exit_codes(
    (0, "the model was removed"),
    USAGE_ROW,
    (EXIT_UNAVAILABLE, "no model of that name is in the store"),
    (EXIT_STORE_FAILED, "a pull of it is running, or its files cannot be deleted"),
)

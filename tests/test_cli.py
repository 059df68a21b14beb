"""The ``oamd`` command line refuses values that would silently mean something else (a negative or
nan timeout meant "wait forever", a zero line limit refused every line): exit 2 with the reason."""

from __future__ import annotations

import pytest

from oamd.cli import main

BAD = [
    (["stdio", "--max-line-bytes", "0"], "--max-line-bytes: must be at least 1, not 0"),
    (["stdio", "--max-line-bytes", "-5"], "--max-line-bytes: must be at least 1, not -5"),
    (["stdio", "--max-sessions", "-1"], "--max-sessions: must be at least 1, not -1"),
    (["stdio", "--max-sessions", "many"], "--max-sessions: must be a whole number, not 'many'"),
    (["stdio", "--tool-timeout", "nan"], "--tool-timeout: must be a finite number of seconds"),
    (["stdio", "--tool-timeout", "-3"], "--tool-timeout: must be a finite number of seconds"),
    (["stdio", "--tool-timeout", "inf"], "--tool-timeout: must be a finite number of seconds"),
    (["serve", "--auth-timeout", "-1"], "--auth-timeout: must be a finite number of seconds"),
    (["serve", "--max-connections", "0"], "--max-connections: must be at least 1, not 0"),
    (["serve", "--max-pending-auth", "0"], "--max-pending-auth: must be at least 1, not 0"),
    (["stdio", "--max-connection-bytes", "-1"], "--max-connection-bytes: must be at least 1"),
]


@pytest.mark.parametrize(("argv", "reason"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_meaningless_value_is_refused_with_its_reason(argv, reason, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert reason in capsys.readouterr().err

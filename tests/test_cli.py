"""The ``oamd`` command line refuses values that would silently mean something else (a negative or
nan timeout meant "wait forever", a zero line limit refused every line): exit 2 with the reason.
And ``oamd stdio`` serves without loading pydantic, which only the typed client needs."""

from __future__ import annotations

import subprocess
import sys

import orjson
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
    (["stdio", "--max-outbox-bytes", "0"], "--max-outbox-bytes: must be at least 1, not 0"),
    (["stdio", "--inspect", "0.0.0.0:0"], "--inspect 0.0.0.0:0: 0.0.0.0 is not a loopback address"),
    (["serve", "--inspect", "192.0.2.7:80"], "--inspect 192.0.2.7:80: 192.0.2.7 is not a loopback"),
    (["stdio", "--inspect", "127.0.0.1"], "--inspect 127.0.0.1: expected HOST:PORT"),
    (["stdio", "--inspect-token-file", "t"], "--inspect-token-file: only with --inspect"),
]


@pytest.mark.parametrize(("argv", "reason"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_meaningless_value_is_refused_with_its_reason(argv, reason, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert reason in capsys.readouterr().err


def test_oamd_stdio_serves_every_namespace_without_loading_pydantic_tqdm_the_store_or_inspector():
    """pydantic is the typed client's optional dependency (``oamd[client]``), never the daemon's;
    tqdm and the model store are ``oamd models``'s, loaded for it alone; the inspector (and its
    HTTP library) loads only with ``--inspect``."""
    script = {"type": "scripted", "steps": [{"text": "Hello."}]}
    npc_line = {"emotion": "happy", "line": "Hi.", "player_options": [], "ends_conversation": False}
    choice = {"reasoning": "Safer.", "choice": "flee", "confidence": 60}
    requests = [
        ("initialize", {"protocolVersion": "1.0", "client": {"name": "tests"}}),
        ("session/create", {"session": "s", "model": script}),
        ("session/respond", {"session": "s", "prompt": "Hi.", "stream": True}),
        (
            "npc/create",
            {
                "npc": "n",
                "persona": {"name": "Gorm", "role": "a smith"},
                "model": {"type": "scripted", "steps": [{"json": npc_line}]},
            },
        ),
        ("npc/talk", {"npc": "n", "line": "Hello."}),
        (
            "decision/decide",
            {
                "situation": "A goblin.",
                "options": ["fight", "flee"],
                "model": {"type": "scripted", "steps": [{"json": choice}]},
            },
        ),
        ("world/create", {"world": "w", "state": {"gold": 1}}),
        ("world/set", {"world": "w", "path": "gold", "value": 2}),
        (
            "content/generate",
            {
                "prompt": "A name.",
                "schema": {"type": "string"},
                "model": {"type": "scripted", "steps": [{"json": "Bess"}]},
            },
        ),
        ("schema/validate", {"schema": {"type": "object"}}),
        ("tools/validate", {"tools": [{"name": "open_gate", "description": "Open it."}]}),
    ]
    lines = b"".join(
        orjson.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}) + b"\n"
        for n, (method, params) in enumerate(requests)
    )
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write(f'pydantic: {\"pydantic\" in sys.modules}\\n'))\n"
        "atexit.register(lambda: sys.stderr.write(f'tqdm: {\"tqdm\" in sys.modules}\\n'))\n"
        "atexit.register(lambda: sys.stderr.write(f'store: {\"oamd.models\" in sys.modules}\\n'))\n"
        "atexit.register(lambda: sys.stderr.write(f'inspector: {\"oamd.inspector\" in sys.modules}'"
        " f' h11: {\"h11\" in sys.modules}\\n'))\n"
        "from oamd.cli import main\n"
        "sys.exit(main(['stdio']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=lines, capture_output=True, timeout=60, check=False
    )
    replies = [orjson.loads(line) for line in done.stdout.splitlines()]
    answered = {r["id"]: r for r in replies if "id" in r}
    assert done.returncode == 0, done.stderr.decode()
    assert [n for n in range(len(requests)) if "result" not in answered[n]] == []
    assert b"pydantic: False" in done.stderr
    assert b"tqdm: False" in done.stderr
    assert b"store: False" in done.stderr
    assert b"inspector: False h11: False" in done.stderr

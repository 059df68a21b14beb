"""``oamd`` explains itself, run the way a user runs it (``python -m oamd …`` as a subprocess).

Every ``--help`` page names its own command, carries no reST markup and explains every option,
with its default; a bad option or value, before or after the command, is one usage-error line
naming it, exit 2, nothing on stdout and never a traceback; an option shared by the commands
means the same before the command as after it; and what help says about the token file and the
model's loading note is what the daemon does."""

from __future__ import annotations

import os
import pty
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import orjson
import pytest
from backends.llama_server import missing_reason
from serve_harness import serve, short_dir

from oamd.limits import (
    AUTH_TIMEOUT_SECONDS,
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    MAX_CONCURRENT_GENERATIONS,
    MAX_CONNECTION_BYTES,
    MAX_CONNECTIONS,
    MAX_LINE_BYTES,
    MAX_OUTBOX_BYTES,
    MAX_PENDING_AUTH,
    MAX_SESSIONS,
)

OAMD = [sys.executable, "-m", "oamd"]
RUN_SECONDS = 60
HELP_COLUMNS = "100"
"""argparse wraps help to $COLUMNS: fixed, so the pages parse the same on every terminal."""

CONFORMANCE_COMMANDS = ["run", "diff", "record", "show", "fmt", "list"]
MODELS_ACTIONS = ["pull", "list", "rm"]
PAGES = [
    [],
    ["stdio"],
    ["serve"],
    ["check"],
    ["replay"],
    ["version"],
    ["models"],
    *(["models", action] for action in MODELS_ACTIONS),
    ["conformance"],
    *(["conformance", name] for name in CONFORMANCE_COMMANDS),
]
OPTION_LINE = re.compile(r"^  (-\S.*?)(?:\s{2,}(\S.*))?$")
CONTINUATION = re.compile(r"^\s{4,}(\S.*)$")


def oamd(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "COLUMNS": HELP_COLUMNS, **(env or {})}
    return subprocess.run(
        [*OAMD, *argv],
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
        env=environment,
    )


def options_of(page: str) -> dict[str, str]:
    """Each option of a help page (its invocation, e.g. ``--model SPEC``) and its help text."""
    options: dict[str, str] = {}
    section = page.split("\noptions:\n", 1)[1].split("\n\n", 1)[0]
    current = None
    for text in section.splitlines():
        started, continued = OPTION_LINE.match(text), CONTINUATION.match(text)
        if started and not text.startswith("   "):
            current = started.group(1).strip()
            options[current] = started.group(2) or ""
        elif continued and current is not None:
            options[current] = f"{options[current]} {continued.group(1)}".strip()
    return options


def takes_a_value(invocation: str) -> bool:
    """``--model SPEC`` or ``--log-format {json,console}`` does, ``--no-scripted`` does not."""
    return any(" " in part for part in invocation.split(", "))


@pytest.mark.parametrize("page", PAGES, ids=[" ".join(p) or "oamd" for p in PAGES])
def test_every_help_page_is_its_commands_own_and_explains_every_option(page):
    done = oamd(*page, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith(f"usage: {' '.join(['oamd', *page])} ")
    assert "``" not in done.stdout
    options = options_of(done.stdout)
    assert "-h, --help" in options
    unexplained = [flag for flag, text in options.items() if not text]
    assert unexplained == []
    no_default = [
        flag
        for flag, text in options.items()
        if takes_a_value(flag) and "default:" not in text and "required" not in text
    ]
    assert no_default == []


def test_the_top_level_help_lists_every_command():
    listed = oamd("--help").stdout.split("\ncommands:\n", 1)[1]
    for command in ["stdio", "serve", "check", "replay", "version", "models", "conformance"]:
        assert re.search(rf"^\s+{command}\s+\S", listed, re.MULTILINE), command


DEFAULTS = [
    ("stdio", "--max-line-bytes N", str(MAX_LINE_BYTES)),
    ("stdio", "--max-sessions N", str(MAX_SESSIONS)),
    ("stdio", "--max-connection-bytes N", str(MAX_CONNECTION_BYTES)),
    ("stdio", "--max-outbox-bytes N", str(MAX_OUTBOX_BYTES)),
    ("stdio", "--tool-timeout SECONDS", f"{DEFAULT_TOOL_TIMEOUT_SECONDS:g}"),
    ("stdio", "--log-level LEVEL", "$OAMD_LOG_LEVEL, else warning"),
    ("stdio", "--log-format {json,console}", "json"),
    ("stdio", "--model SPEC", "$OAMD_MODEL"),
    ("stdio", "--inspect HOST:PORT", "off, and nothing is recorded"),
    ("stdio", "--inspect-token-file PATH", "$XDG_RUNTIME_DIR/oamd-<pid>.token"),
    ("serve", "--inspect HOST:PORT", "off, and nothing is recorded"),
    ("serve", "--max-connections N", str(MAX_CONNECTIONS)),
    ("serve", "--max-generations N", str(MAX_CONCURRENT_GENERATIONS)),
    ("serve", "--max-pending-auth N", str(MAX_PENDING_AUTH)),
    ("serve", "--auth-timeout SECONDS", f"{AUTH_TIMEOUT_SECONDS:g}"),
    ("serve", "--max-outbox-bytes N", str(MAX_OUTBOX_BYTES)),
    ("check", "--model SPEC", "$OAMD_MODEL"),
    ("stdio", "--record DIR", "no recording"),
    ("serve", "--record DIR", "no recording"),
    ("replay", "--show N", "20"),
    ("replay", "--log-level LEVEL", "$OAMD_LOG_LEVEL, else warning"),
]


@pytest.mark.parametrize(("command", "option", "default"), DEFAULTS)
def test_an_options_help_shows_its_real_default(command, option, default):
    text = options_of(oamd(command, "--help").stdout)[option]
    assert f"default: {default}" in text


@pytest.mark.parametrize(
    ("command", "codes"),
    [
        ("stdio", [0, 2, 130, 141]),
        ("serve", [0, 2, 130]),
        ("check", [0, 2, 3]),
        ("replay", [0, 1, 2]),
        ("version", [0]),
        ("models pull", [0, 2, 4, 5, 6, 130]),
        ("models list", [0]),
        ("models rm", [0, 2, 3, 6]),
    ],
)
def test_every_commands_help_ends_with_its_exit_codes(command, codes):
    table = oamd(*command.split(), "--help").stdout.split("\nexit codes:\n", 1)[1]
    assert [int(code) for code in re.findall(r"^  (\d+) ", table, re.MULTILINE)] == codes


@pytest.mark.parametrize(
    ("spec", "forms"),
    [
        ("openai:http://127.0.0.1:1/v1?bogus=1", "openai:<base-url>[#<model>]"),
        ("llamacpp?bogus=1", "llamacpp[:<path.gguf>|<name>|hf:<org>/<repo>/<file.gguf>]"),
        ("ollama:smollm2?bogus=1", "ollama:<name>[:<tag>][?<the llamacpp options>]"),
    ],
)
def test_the_model_forms_in_help_name_every_option_the_spec_takes(spec, forms):
    """The spec parser's own list of options (from its error) against what help shows."""
    refused = oamd("check", "--model", spec)
    known = refused.stderr.rsplit("known options: ", 1)[1].split()
    page = oamd("check", "--help").stdout
    assert forms in page
    assert [option for option in known if f"{option.rstrip(',')}=" not in page] == []


def _one_error_line(done: subprocess.CompletedProcess[str], prefix: str) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"usage: {prefix} ")
    errors = [text for text in done.stderr.splitlines() if ": error: " in text]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"{prefix}: error: ")
    return errors[0]


CONFORMANCE_ARGS = {"diff": ["--reference", "x"], "record": ["--reference", "x", "--out", "o"]}
BAD = [
    (["stdio", "--bogus"], "oamd stdio", "--bogus"),
    (["serve", "--bogus"], "oamd serve", "--bogus"),
    (["check", "--bogus"], "oamd check", "--bogus"),
    (["version", "--bogus"], "oamd version", "--bogus"),
    (["--bogus", "stdio"], "oamd", "--bogus"),
    *(
        (
            ["conformance", name, *CONFORMANCE_ARGS.get(name, []), "--bogus"],
            f"oamd conformance {name}",
            "--bogus",
        )
        for name in CONFORMANCE_COMMANDS
    ),
    (["conformance", "run", "-j", "0"], "oamd conformance run", "--jobs"),
    (["conformance", "run", "--scenario-timeout", "nan"], "oamd conformance run", "--scenario"),
    (["--log-level", "bogus", "check"], "oamd", "--log-level"),
    (["check", "--log-level", "bogus"], "oamd check", "--log-level"),
    (["stdio", "--log-level", "bogus"], "oamd stdio", "--log-level"),
    (["--log-format", "xml", "stdio"], "oamd", "--log-format"),
    (["stdio", "--max-line-bytes", "0"], "oamd stdio", "--max-line-bytes"),
    (["stdio", "--max-line-bytes", "-5"], "oamd stdio", "--max-line-bytes"),
    (["stdio", "--max-sessions", "nan"], "oamd stdio", "--max-sessions"),
    (["stdio", "--max-outbox-bytes", "0"], "oamd stdio", "--max-outbox-bytes"),
    (["stdio", "--max-connection-bytes", "-1"], "oamd stdio", "--max-connection-bytes"),
    (["stdio", "--tool-timeout", "nan"], "oamd stdio", "--tool-timeout"),
    (["stdio", "--tool-timeout", "-3"], "oamd stdio", "--tool-timeout"),
    (["serve", "--max-connections", "0"], "oamd serve", "--max-connections"),
    (["serve", "--max-generations", "-1"], "oamd serve", "--max-generations"),
    (["serve", "--max-pending-auth", "nan"], "oamd serve", "--max-pending-auth"),
    (["serve", "--auth-timeout", "nan"], "oamd serve", "--auth-timeout"),
    (["check", "--model", "garbage"], "oamd check", "--model"),
    (["--model", "garbage", "check"], "oamd check", "--model"),
    (["stdio", "--model", "llamacpp?ctx=0"], "oamd stdio", "--model"),
    (["serve", "--model", "openai:ftp://host"], "oamd serve", "--model"),
    (["--model", "none", "version"], "oamd", "--model"),
    (["--model", "none", "conformance", "list"], "oamd", "--model"),
    (["--model", "none", "models", "list"], "oamd", "--model"),
    (["models", "--bogus", "list"], "oamd models", "--bogus"),
    (["models", "bogus"], "oamd models", "bogus"),
    (["models", "pull"], "oamd models pull", "NAME|URL"),
    (["models", "pull", "x", "--bogus"], "oamd models pull", "--bogus"),
    (["models", "pull", "no-such-model"], "oamd models pull", "no-such-model"),
    (["models", "pull", "ftp://host/m.gguf"], "oamd models pull", "ftp://host/m.gguf"),
    (["models", "pull", "qwen3-0.6b", "--sha256", "abc"], "oamd models pull", "--sha256"),
    (["models", "pull", "qwen3-0.6b", "--name", "mine"], "oamd models pull", "--name"),
    (["models", "pull", "http://h/m.gguf", "--name", "../up"], "oamd models pull", "../up"),
    (["models", "pull", "x", "--progress", "loud"], "oamd models pull", "--progress"),
    (["models", "list", "--bogus"], "oamd models list", "--bogus"),
    (["models", "rm"], "oamd models rm", "NAME"),
    (["models", "rm", "a/b"], "oamd models rm", "a/b"),
    (["check", "--model", "llamacpp:no-such-model"], "oamd check", "no-such-model"),
    (["check", "--model", "ollama:"], "oamd check", "ollama"),
    (["check", "--model", "ollama:a/b/c/d"], "oamd check", "ollama:a/b/c/d"),
    (["check", "--model", "llamacpp:hf:org-only"], "oamd check", "hf:org-only"),
    (["replay", "--bogus", "r.json"], "oamd replay", "--bogus"),
    (["replay", "--show", "0", "r.json"], "oamd replay", "--show"),
    (["replay"], "oamd replay", "PATH"),
    (["--model", "none", "replay", "r.json"], "oamd", "--model"),
]


@pytest.mark.parametrize(("argv", "prefix", "named"), BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_a_bad_option_or_value_is_one_usage_error_line_naming_it(argv, prefix, named):
    assert named in _one_error_line(oamd(*argv), prefix)


@pytest.mark.parametrize(
    ("variable", "value"), [("OAMD_LOG_LEVEL", "bogus"), ("OAMD_MODEL", "garbage")]
)
def test_a_bad_environment_default_is_a_usage_error_naming_the_variable(variable, value):
    assert f"${variable}" in _one_error_line(oamd("check", env={variable: value}), "oamd check")


def _closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"openai:http://127.0.0.1:{port}/v1"


def test_a_shared_option_means_the_same_before_and_after_the_command():
    spec = _closed_port_url()
    before = oamd("--model", spec, "check", env={"OAMD_MODEL": "none"})
    after = oamd("check", "--model", spec, env={"OAMD_MODEL": "none"})
    both = oamd("--model", "none", "check", "--model", spec)  # the one after the command wins
    unset = oamd("check", env={"OAMD_MODEL": "none"})
    assert before.returncode == after.returncode == both.returncode == 3, before.stderr
    assert before.stdout == after.stdout == both.stdout
    assert "127.0.0.1" in orjson.loads(before.stdout)["detail"]
    assert unset.stdout != before.stdout  # so the option did decide


GENERATE = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "1.0"}},
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "content/generate",
        "params": {
            "prompt": "A name.",
            "schema": {"type": "string"},
            "model": {"type": "scripted", "steps": [{"json": "Bess"}]},
        },
    },
]


def _stdio_log(*argv: str) -> list[str]:
    done = subprocess.run(
        [*OAMD, *argv],
        input=b"".join(orjson.dumps(line) + b"\n" for line in GENERATE),
        capture_output=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.decode().splitlines()


def test_the_log_options_before_the_command_apply_as_after_it():
    before = _stdio_log("--log-level", "debug", "--log-format", "console", "stdio")
    after = _stdio_log("stdio", "--log-level", "debug", "--log-format", "console")
    for log in (before, after):
        assert any("turn" in text for text in log), log
        assert not any(text.startswith("{") for text in log)  # console, not JSON
    assert len(before) == len(after)
    assert _stdio_log("stdio") == []  # the default level, warning, shows none of it


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["unix", "runtime_dir", "temporary"])
async def test_the_token_file_goes_where_serve_help_says(where, monkeypatch, tmp_path):
    help_text = options_of(oamd("serve", "--help").stdout)["--token-file PATH"]
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    if where == "runtime_dir":
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with short_dir() as directory:
        async with serve(unix=where == "unix", directory=directory) as daemon:
            token_file = Path(daemon.ready["tokenFile"])
            expected = {
                "unix": Path(directory, "s.token"),
                "runtime_dir": tmp_path / f"oamd-{daemon.pid}.token",
            }
            if where == "temporary":
                assert token_file.parent.parent == Path(tempfile.gettempdir())
                assert token_file.parent.name.startswith("oamd-")
                assert token_file.parent.stat().st_mode & 0o777 == 0o700
            else:
                assert token_file == expected[where]
            assert token_file.is_file()
            with anyio.fail_after(RUN_SECONDS):
                await daemon.stop()
    assert not token_file.exists()  # a file oamd wrote is removed when it exits
    words = {"unix": "<socket>.token", "runtime_dir": "$XDG_RUNTIME_DIR/oamd-<pid>.token"}
    assert words.get(where, "new private temporary directory") in help_text


LLAMA_MISSING = missing_reason(server=False)


@pytest.mark.skipif(LLAMA_MISSING is not None, reason=str(LLAMA_MISSING))
def test_loading_the_embedded_model_writes_only_log_records_to_a_piped_stderr():
    done = oamd("--log-level", "info", "check", "--model", "llamacpp")
    assert done.returncode == 0, done.stderr
    records = [orjson.loads(text) for text in done.stderr.splitlines()]
    assert [r["event"] for r in records if r["event"].startswith("model_")] == ["model_loaded"]
    assert oamd("check", "--model", "llamacpp").stderr == ""


@pytest.mark.skipif(LLAMA_MISSING is not None, reason=str(LLAMA_MISSING))
def test_loading_the_embedded_model_shows_a_note_on_a_terminal():
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [*OAMD, "check", "--model", "llamacpp"],
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=RUN_SECONDS,
            check=False,
        )
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other side is closed: all was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 0
    assert re.match(rb"oamd: loading SmolLM2\S* \(.*\)\xe2\x80\xa6 done in \d+\.\d s", shown)

"""The README's examples, run as written: the "Use it from Python" snippet against a real ``oamd
stdio`` subprocess (only the session's model is a script, passed through the snippet's ``model``,
and the daemon's own model is none, ``OAMD_MODEL=none``, as on a machine where nothing is
configured); the stdio transcript line by line against another, each line the daemon prints matched
against the README's; the Unity and Godot hello worlds compiled and linted."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import anyio
import orjson
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from conftest import OAMD

pytestmark = pytest.mark.anyio

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "<!-- guard-and-gate: tests/test_readme.py runs this block -->"
MAX_SNIPPET_LINES = 22
"""The headline example stays a short read (blank lines aside)."""

GUARD_SCRIPT = {
    "type": "scripted",
    "steps": [
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north"}}]},
        {"template": "The gate answers: {toolOutput}", "chunks": 2},
    ],
}


def snippet() -> str:
    after = README.read_text(encoding="utf-8").split(MARKER, 1)[1]
    match = re.match(r"\s*```python\n(.*?)```", after, re.DOTALL)
    assert match, "the guard-and-gate block must follow its marker"
    return match.group(1)


def guard_and_gate():
    namespace: dict = {"__name__": "readme"}
    exec(compile(snippet(), str(README), "exec"), namespace)
    return namespace["guard_and_gate"]


@pytest.fixture(autouse=True)
def no_system_model(monkeypatch):
    monkeypatch.setenv("OAMD_MODEL", "none")


def test_the_snippet_stays_short():
    lines = [line for line in snippet().splitlines() if line.strip()]
    assert len(lines) <= MAX_SNIPPET_LINES


async def test_the_guard_and_gate_snippet_opens_the_gate_and_the_guard_answers(capsys):
    with anyio.fail_after(20):
        reply = await guard_and_gate()(GUARD_SCRIPT)
    [record] = reply.tool_calls
    assert (record.call.name, record.call.arguments) == ("open_gate", {"gate": "north"})
    assert record.output == "The north gate is open."
    assert reply.text == "The gate answers: The north gate is open."
    printed = capsys.readouterr().out
    assert printed == f"{reply.text}\n{{'gate': 'north'}} · {reply.usage.total_tokens} tokens\n"


async def test_without_a_model_the_snippet_exits_saying_how_to_get_one_not_with_a_traceback():
    with anyio.fail_after(20), pytest.raises(SystemExit) as stopped:
        await guard_and_gate()()
    assert str(stopped.value).startswith(
        "No model to run: No system model is configured. Start oamd with --model (or set "
        "OAMD_MODEL)"
    )


def block(marker: str, language: str) -> str:
    after = README.read_text(encoding="utf-8").split(marker, 1)[1]
    match = re.match(rf"\s*```{language}\n(.*?)```", after, re.DOTALL)
    assert match, f"a {language} block must follow {marker}"
    return match.group(1)


def test_the_unity_hello_world_compiles_against_the_package(tmp_path):
    from test_unity_package import UNITY, compile_cs, runtime_sources

    body = block(
        "<!-- unity-hello: tests/test_readme.py compiles this block with mcs -->", "csharp"
    )
    assert len([line for line in body.splitlines() if line.strip()]) <= 12
    source = tmp_path / "Hello.cs"
    source.write_text(
        "using Oamd;\nusing UnityEngine;\n"
        "public sealed class Hello : MonoBehaviour {\n"
        "    public GameObject gate;\n"
        f"    async void Start() {{\n{body}    }}\n}}\n",
        encoding="utf-8",
    )
    compile_cs(
        tmp_path / "Hello.dll",
        *runtime_sources(),
        UNITY / "smoke" / "UnityEngineStub.cs",
        source,
        library=True,
        define="UNITY_5_3_OR_NEWER",
    )


def test_the_godot_hello_world_parses_and_lints():
    from gdtoolkit.linter import lint_code
    from gdtoolkit.parser import parser

    body = block(
        "<!-- godot-hello: tests/test_readme.py parses and lints this block -->", "gdscript"
    )
    assert len([line for line in body.splitlines() if line.strip()]) <= 12
    parser.parse(body)
    assert lint_code(body) == []
    # every addon call the block makes is a function (or property) the autoload defines
    addon = (README.parent / "clients/godot/addons/oamd/oamd.gd").read_text(encoding="utf-8")
    for name in set(re.findall(r"Oamd\.(\w+)", body)):
        assert re.search(rf"^(func|var) {name}\b", addon, re.MULTILINE), name


TRANSCRIPT_MARKER = (
    "<!-- stdio-transcript: tests/test_readme.py plays this block against oamd stdio -->"
)
EXAMPLE = README.parent / "protocol" / "examples" / "guard-and-gate.jsonl"
CUT = "⟨…⟩"
"""Where the README cuts a line the daemon prints (a long list or message, a duration)."""
MAX_LINE_BYTES = 1 << 20


def transcript() -> list[tuple[str, str]]:
    """The stdio block's lines as (direction, text): ``→`` the engine writes, ``←`` it reads."""
    lines = block(TRANSCRIPT_MARKER, "text").splitlines()
    assert all(line[:2] in ("→ ", "← ") for line in lines), "every line is → or ←"
    return [(line[0], line[2:]) for line in lines]


def printed_as(shown: str) -> re.Pattern[str]:
    """A ← line as a pattern: exactly the text shown, any text where it shows a cut."""
    return re.compile(".*?".join(re.escape(part) for part in shown.split(CUT)))


def test_the_transcripts_engine_lines_are_the_example_file_whole_and_in_order():
    sent = [text for direction, text in transcript() if direction == "→"]
    assert sent == EXAMPLE.read_text(encoding="utf-8").splitlines()
    assert all(CUT not in text and isinstance(orjson.loads(text), dict) for text in sent)


async def test_the_stdio_transcript_is_what_oamd_stdio_prints_line_by_line():
    process = await anyio.open_process(
        [*OAMD, "stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    async with process:
        stdout = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(30):
            # in the README's order: a → line is written only once every ← line above it was
            # read, so the tool reply goes out after the daemon's tool/call arrived
            for direction, text in transcript():
                if direction == "→":
                    await process.stdin.send(text.encode() + b"\n")
                    continue
                line = (await stdout.receive_until(b"\n", MAX_LINE_BYTES)).decode()
                assert printed_as(text).fullmatch(line), f"README:\n{text}\noamd stdio:\n{line}"
            await process.stdin.aclose()
            with pytest.raises(anyio.EndOfStream):  # nothing printed beyond the transcript
                await stdout.receive()
            assert await process.wait() == 0

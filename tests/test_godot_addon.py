"""The Godot 4 addon in ``clients/godot/addons/oamd``, checked without Godot (none runs here).

What can be checked is: ``plugin.cfg`` has what Godot's plugin loader reads; every ``.gd`` file
parses, lints and is formatted (gdtoolkit); and the stdio path speaks to the *shipped* executable
as the addon would. For that the command line is read out of ``oamd.gd`` (``STDIO_ARGS``), the
lines are written as Godot's ``JSON.stringify`` writes them (every number read back from the daemon
is a float: Godot's JSON parser has no ints), the daemon's output is read in small pieces and split
by a mirror of ``oamd_lines.gd``, and ids are mapped back as ``_normal_id`` does. The mirrors are
Python copies of the GDScript logic, so they check the logic and the wire, not the GDScript."""

from __future__ import annotations

import configparser
import importlib.util
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from shipped import shipped_oamd

ADDON = Path(__file__).resolve().parent.parent / "clients" / "godot" / "addons" / "oamd"
GD_FILES = sorted(ADDON.glob("*.gd"))
MAX_LINE_LENGTH = 100
"""gdlint's default, which gdformat is run with too."""

needs_gdtoolkit = pytest.mark.skipif(
    importlib.util.find_spec("gdtoolkit") is None,
    reason="gdtoolkit missing (pip install gdtoolkit)",
)


# --- Godot's JSON, mirrored (core/io/json.cpp, core/string/ustring.cpp) ---------------------------


def godot_parse(line: bytes | str) -> Any:
    """``JSON.parse_string``: every number becomes a float."""
    return json.loads(line, parse_int=float)


def _godot_num(num: float) -> str:
    # JSON::_stringify: exactly 0 is "0.0"; otherwise String::num with 14 significant decimals,
    # which prints "%.Nf" and strips trailing zeros and a trailing period (so 5.0 is "5").
    if num == 0.0:
        return "0.0"
    decimals = min(32, max(1, 14 - math.floor(math.log10(abs(num)))))
    text = f"{num:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _godot_escape(text: str) -> str:
    # String::json_escape: only these characters are escaped; the rest is written as UTF-8.
    for raw, escaped in (
        ("\\", "\\\\"),
        ("\b", "\\b"),
        ("\f", "\\f"),
        ("\n", "\\n"),
        ("\r", "\\r"),
        ("\t", "\\t"),
        ('"', '\\"'),
    ):
        text = text.replace(raw, escaped)
    return text


def godot_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` with its defaults: no indent, keys sorted (``sort_keys`` is
    true unless passed false; JSON::_bind_methods)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _godot_num(value)
    if isinstance(value, list):
        return "[" + ",".join(godot_stringify(v) for v in value) + "]"
    if isinstance(value, dict):
        ordered = sorted(value.items(), key=lambda item: str(item[0]))
        items = (f"{godot_stringify(str(k))}:{godot_stringify(v)}" for k, v in ordered)
        return "{" + ",".join(items) + "}"
    return '"' + _godot_escape(str(value)) + '"'


def test_the_stringify_mirror_writes_floats_as_godot_does():
    assert godot_stringify({"a": 5.0, "b": 0.0, "c": 2.5, "d": 7, "e": -3.0}) == (
        '{"a":5,"b":0.0,"c":2.5,"d":7,"e":-3}'
    )
    assert godot_stringify(0.1) == "0.1"
    assert godot_stringify(["é\n"]) == '["é\\n"]'
    # keys come out sorted, whatever order the Dictionary was built in
    assert godot_stringify({"method": "ping", "id": 1, "jsonrpc": "2.0"}) == (
        '{"id":1,"jsonrpc":"2.0","method":"ping"}'
    )


# --- the addon's logic, mirrored -----------------------------------------------------------------


class LineFramer:
    """``oamd_lines.gd``: bytes in, complete non-blank lines out; a tail waits for its newline."""

    def __init__(self, max_line_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_line_bytes = max_line_bytes
        self._pending = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> list[str]:
        lines = []
        start = 0
        newline = data.find(b"\n")
        while newline >= 0:
            line = bytes(self._pending) + data[start:newline]
            self._pending.clear()
            if not self._skipping and line:
                line = line.removesuffix(b"\r")
                text = line.decode("utf-8", errors="replace")
                if text.strip():
                    lines.append(text)
            self._skipping = False
            start = newline + 1
            newline = data.find(b"\n", start)
        if not self._skipping:
            self._pending += data[start:]
            if len(self._pending) > self.max_line_bytes:
                self._pending.clear()
                self._skipping = True
        return lines


def normal_id(value: Any) -> Any:
    """``_normal_id``: an integral float id is an int again."""
    if isinstance(value, float) and value == math.floor(value):
        return int(value)
    return value


def addon_line(message: dict[str, Any]) -> bytes:
    """``_write``: ``JSON.stringify(message) + "\\n"`` as UTF-8."""
    return (godot_stringify(message) + "\n").encode()


def addon_tool_reply(message: dict[str, Any], handlers: dict[str, Any]) -> bytes:
    """``_answer`` for a ``tool/call`` whose handler returns ``output``."""
    params = message["params"]
    call = params["call"]
    output = handlers[call["name"]](call["arguments"], params)
    result = output if isinstance(output, dict) and "output" in output else {"output": output}
    return addon_line({"jsonrpc": "2.0", "id": normal_id(message["id"]), "result": result})


def test_the_line_framer_joins_partial_reads_and_splits_joined_ones():
    framer = LineFramer(max_line_bytes=64)
    wire = '{"a":"é"}\r\n\n{"b":1}\n'.encode()
    seen = []
    for i in range(len(wire)):  # one byte per read: a line and a character cut anywhere
        seen += framer.feed(wire[i : i + 1])
    assert seen == ['{"a":"é"}', '{"b":1}']
    assert framer.feed(b'{"c":2}\n{"d":3}\n{"e"') == ['{"c":2}', '{"d":3}']
    assert framer.feed(b":4}\n") == ['{"e":4}']
    assert framer.feed(b"x" * 65) == []  # over the limit: dropped up to its newline
    assert framer.feed(b'xx\n{"f":5}\n') == ['{"f":5}']


# --- the source itself ---------------------------------------------------------------------------


def _const(tree: Any, name: str) -> Any:
    """The value of ``const NAME := <literal>`` at the top of a parsed script."""
    for statement in tree.children:
        if statement.data != "const_stmt":
            continue
        const = statement.children[0]
        if str(const.children[0]) == name:
            return _literal(const.children[-1])
    raise AssertionError(f"no const {name}")


def _literal(node: Any) -> Any:
    while getattr(node, "data", None) == "expr":
        (node,) = node.children
    kind = getattr(node, "data", None)
    if kind == "array":
        return [_literal(child) for child in node.children]
    if kind == "string":
        return json.loads(str(node.children[0]))  # a plain "..." literal
    raise AssertionError(f"not a literal: {node}")


def addon_command(executable: Path, args: list[str]) -> list[str]:
    """What ``spawn(executable, args)`` runs: ``STDIO_ARGS`` from ``oamd.gd``, then ``args``."""
    from gdtoolkit.parser import parser

    code = (ADDON / "oamd.gd").read_text(encoding="utf-8")
    stdio_args = _const(parser.parse(code), "STDIO_ARGS")
    assert stdio_args and all(isinstance(a, str) for a in stdio_args)
    # spawn's argument list is STDIO_ARGS plus the caller's, nothing else: pin the function body
    body = re.search(
        r"static func _spawn_arguments\(args: Array\) -> PackedStringArray:\n(.*?)\n\n", code, re.S
    )
    assert body is not None
    assert body.group(1) == (
        "\tvar argv := PackedStringArray(STDIO_ARGS)\n"
        "\tfor arg in args:\n"
        "\t\targv.append(str(arg))\n"
        "\treturn argv"
    )
    assert "transport.open(path, _spawn_arguments(args))" in code
    return [str(executable), *stdio_args, *args]


def addon_initialize_params() -> dict[str, Any]:
    """``initialize``'s params as ``_process`` builds them over stdio (no token, so no ``auth``)."""
    from gdtoolkit.parser import parser

    tree = parser.parse((ADDON / "oamd.gd").read_text(encoding="utf-8"))
    return {"protocolVersion": _const(tree, "PROTOCOL_VERSION"), "client": {"name": "godot"}}


def test_plugin_cfg_has_what_godot_reads():
    config = configparser.ConfigParser(interpolation=None)
    config.read(ADDON / "plugin.cfg", encoding="utf-8")
    assert config.sections() == ["plugin"]
    plugin = config["plugin"]
    for key in ("name", "description", "author", "version", "script"):
        value = plugin.get(key)
        # ConfigFile values are Godot literals: strings must be quoted
        assert value and value.startswith('"') and value.endswith('"'), key
    script = ADDON / json.loads(plugin["script"])
    assert script.is_file()
    source = script.read_text(encoding="utf-8")
    assert "\n@tool\nextends EditorPlugin\n" in source
    assert 'AUTOLOAD_NAME := "Oamd"' in source
    assert '.path_join("oamd.gd")' in source and (ADDON / "oamd.gd").is_file()


def _function_bodies(source: str) -> dict[str, str]:
    """Each top-level ``func``'s name and the indented lines under it."""
    parts = re.split(r"^func (\w+)\(.*$", source, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_plugin_adds_its_autoload_when_enabled_and_removes_it_when_disabled():
    bodies = _function_bodies((ADDON / "plugin.gd").read_text(encoding="utf-8"))
    # Godot calls _enable_plugin/_disable_plugin when the user switches the plugin in Project
    # Settings; _enter_tree/_exit_tree run at every editor start and quit, and touching the
    # autoload there saves project.godot without it (or re-adds one the user removed)
    assert "add_autoload_singleton(AUTOLOAD_NAME" in bodies.get("_enable_plugin", "")
    assert "remove_autoload_singleton(AUTOLOAD_NAME)" in bodies.get("_disable_plugin", "")
    for hook in ("_enter_tree", "_exit_tree"):
        assert "autoload_singleton" not in bodies.get(hook, ""), hook


@needs_gdtoolkit
@pytest.mark.parametrize("path", GD_FILES, ids=lambda p: p.name)
def test_every_gd_file_parses_lints_and_is_formatted(path):
    from gdtoolkit.formatter import format_code
    from gdtoolkit.linter import lint_code
    from gdtoolkit.parser import parser

    code = path.read_text(encoding="utf-8")
    parser.parse(code)
    assert lint_code(code) == []
    assert format_code(code, max_line_length=MAX_LINE_LENGTH) == code


@needs_gdtoolkit
def test_the_readme_example_parses_and_lints():
    from gdtoolkit.linter import lint_code
    from gdtoolkit.parser import parser

    readme = (ADDON.parent.parent / "README.md").read_text(encoding="utf-8")
    (example,) = re.findall(r"```gdscript\n(.*?)```", readme, re.S)
    parser.parse(example)
    assert lint_code(example) == []


def test_the_addon_has_its_files():
    assert {p.name for p in GD_FILES} == {
        "oamd.gd",
        "oamd_lines.gd",
        "oamd_stdio.gd",
        "oamd_tcp.gd",
        "plugin.gd",
    }
    assert not (ADDON.parent.parent / "oamd_client.gd").exists()  # replaced by the addon


# --- the stdio path against the shipped executable -----------------------------------------------

OPEN_GATE = {
    "name": "open_gate",
    "description": "Open a gate of the keep.",
    "parameters": {
        "type": "object",
        "properties": {"gate": {"type": "string"}, "seconds": {"type": "number"}},
        "required": ["gate"],
    },
}
# the scripted model calls the tool, then answers with its output (PROTOCOL.md's `model` param)
GUARD_MODEL = {
    "type": "scripted",
    "steps": [
        {"toolCalls": [{"name": "open_gate", "arguments": {"gate": "north", "seconds": 0}}]},
        {"template": "{toolOutput}"},
    ],
}


def open_gate(arguments: dict[str, Any], _params: dict[str, Any]) -> Any:
    # a GDScript handler sees floats and hands them back: 0 is written 0.0, 2.5 stays 2.5
    return {"gate": arguments["gate"], "open_for": arguments["seconds"], "width": 2.5}


class Peer:
    """The addon's side of the pipe: writes ``addon_line``s, reads through ``LineFramer`` in
    7-byte reads (a pipe read returns whatever is there), answers ``tool/call`` like ``_answer``."""

    READ_BYTES = 7

    def __init__(self, process: Any) -> None:
        self.process = process
        self.framer = LineFramer()
        self.lines: list[str] = []
        self.notifications: list[dict[str, Any]] = []
        self.tool_calls: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        await self.process.stdin.send(addon_line(message))

    async def reply_to(self, request_id: int) -> dict[str, Any]:
        """Reads until the response to ``request_id``, answering tool calls on the way."""
        while True:
            while not self.lines:
                chunk = await self.process.stdout.receive(self.READ_BYTES)
                self.lines += self.framer.feed(chunk)
            message = godot_parse(self.lines.pop(0))
            if "method" in message and "id" in message:
                assert message["method"] == "tool/call"
                self.tool_calls.append(message)
                await self.process.stdin.send(addon_tool_reply(message, {"open_gate": open_gate}))
            elif "method" in message:
                self.notifications.append(message)
            elif normal_id(message["id"]) == request_id:
                return message


@needs_gdtoolkit
@pytest.mark.anyio
async def test_the_addons_stdio_command_runs_a_guard_and_gate_turn_with_a_client_tool():
    command = addon_command(shipped_oamd(), [])
    process = await anyio.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    async with process:
        peer = Peer(process)
        with anyio.fail_after(30):
            params = addon_initialize_params()
            await peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
            init = await peer.reply_to(1)
            assert init["result"]["server"]["name"] == "oamd"
            assert "scripted" in init["result"]["capabilities"]["models"]

            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/create",
                    "params": {"session": "guard", "tools": [OPEN_GATE], "model": GUARD_MODEL},
                }
            )
            assert (await peer.reply_to(2))["result"]["session"] == "guard"

            # maxToolRounds as a GDScript float (read back from earlier JSON) is written "3"
            respond = {"session": "guard", "prompt": "Open the north gate.", "stream": True}
            respond["maxToolRounds"] = 3.0
            await peer.send(
                {"jsonrpc": "2.0", "id": 3, "method": "session/respond", "params": respond}
            )
            turn = (await peer.reply_to(3))["result"]
            (call,) = peer.tool_calls
            assert call["params"]["session"] == "guard"
            assert normal_id(call["params"]["requestId"]) == 3
            assert call["params"]["call"]["arguments"] == {"gate": "north", "seconds": 0.0}
            assert json.loads(turn["text"]) == {"gate": "north", "open_for": 0, "width": 2.5}
            assert turn["toolCalls"][0]["output"] == {"gate": "north", "open_for": 0, "width": 2.5}
            events = [n for n in peer.notifications if n["method"] == "session/event"]
            assert events and all(normal_id(n["params"]["requestId"]) == 3 for n in events)

            # world values written the Godot way (0.0, 2.5, 3 for 3.0) are taken as numbers
            state = {"gate": {"open": True, "guards": 0.0, "width": 2.5}}
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": 4,
                    "method": "world/create",
                    "params": {"world": "keep", "state": state},
                }
            )
            assert "error" not in await peer.reply_to(4)
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": 5,
                    "method": "world/set",
                    "params": {"world": "keep", "path": "gate.guards", "value": 3.0},
                }
            )
            assert "error" not in await peer.reply_to(5)
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": 6,
                    "method": "world/get",
                    "params": {"world": "keep", "path": "gate"},
                }
            )
            got = (await peer.reply_to(6))["result"]
            assert got["value"] == {"open": True, "guards": 3.0, "width": 2.5}

            # an id an encoder wrote as a float comes back as plain digits, which Godot reads
            # as 7.0 and _normal_id maps to 7
            await process.stdin.send(b'{"jsonrpc":"2.0","id":7.0,"method":"ping"}\n')
            assert await peer.reply_to(7) == {"jsonrpc": "2.0", "id": 7.0, "result": {}}

            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": 8,
                    "method": "session/respond",
                    "params": {"session": "nobody", "prompt": "x"},
                }
            )
            error = (await peer.reply_to(8))["error"]
            assert error["data"]["code"] == "session_not_found"

            # close(): shutdown, then the child exits on its own within the grace period
            await peer.send({"jsonrpc": "2.0", "id": 9, "method": "shutdown"})
            assert (await peer.reply_to(9))["result"] == {}
            assert await process.wait() == 0

"""The Godot demo in ``clients/godot/demo`` (a tavern with two NPCs), checked without Godot.

What is checked here: every ``.gd`` file of the demo parses, lints and is formatted (gdtoolkit);
``project.godot`` enables the addon's plugin and autoload and names a main scene that exists; the
scene references only resources and nodes that exist, and the script's ``%Name`` nodes have the
types it declares; the script uses the ``Oamd`` autoload only through its public API, and its
signal handlers take the signals' arguments. Then the demo's protocol calls are played by a Python
mirror of ``tavern.gd`` (the same params, built from the same ``tavern.json`` the scene loads)
through a mirror of the addon (``oamd.gd``: ids, ``tool/call`` answers, its new
``npc_line_changed`` line folding) against the *shipped* executable, and the values the scene
would show are checked: the innkeeper's tool answered from game state and quoted in her line, a
streamed subtitle that a ``lineReset`` corrects, the player's options, emotions, the bark, the
guard reading a world value a game event wrote, his decision, and a save restored into a fresh
daemon keeping the innkeeper's memory and relationship.

Last, ``Oamd.wait_for_model`` (the addon's polling of a model the daemon downloads itself,
``--model llamacpp:NAME?pull=on-request``) is mirrored and run against a real download served on
127.0.0.1. The GDScript of the two rules the mirrors copy (``_folded_line``, ``_polls_again`` and
``wait_for_model``) is pinned word for word: a change there fails here until the mirror follows.
The mirrors check the logic and the wire, not the GDScript itself, which no Godot has run here."""

from __future__ import annotations

import configparser
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from backends.llama_server import missing_reason
from model_server import Route, catalog_file, packaged_model_bytes, serving
from shipped import shipped_oamd
from test_godot_addon import (
    ADDON,
    MAX_LINE_LENGTH,
    LineFramer,
    _const,
    _function_bodies,
    addon_command,
    addon_initialize_params,
    addon_line,
    addon_tool_reply,
    godot_parse,
    godot_stringify,
    needs_gdtoolkit,
    normal_id,
)

DEMO = ADDON.parent.parent / "demo"
DEMO_GD = sorted(DEMO.glob("*.gd"))
TAVERN = godot_parse((DEMO / "tavern.json").read_text(encoding="utf-8"))
"""``tavern.json`` as ``JSON.parse_string`` gives it to ``tavern.gd``: every number a float."""
WAIT_SECONDS = 45


# --- the source --------------------------------------------------------------------------------


def _code(path: Path) -> str:
    return path.read_text(encoding="utf-8")


_STRING_OR_COMMENT = re.compile(r'("(?:[^"\\\n]|\\.)*")|#[^\n]*')


def _without_comments(code: str) -> str:
    """GDScript without its comments (``#`` inside a string stays)."""
    return _STRING_OR_COMMENT.sub(lambda m: m.group(1) or "", code)


def _without_strings(code: str) -> str:
    """GDScript with its string literals emptied and its comments dropped."""
    return _STRING_OR_COMMENT.sub(lambda m: '""' if m.group(1) else "", code)


def _top_level_function(code: str, name: str) -> str:
    """The body of ``func name`` or ``static func name`` (gdformat puts two blank lines after)."""
    found = re.search(rf"^(?:static )?func {name}\(.*?\n(.*?)(?:\n\n\n|\n?\Z)", code, re.M | re.S)
    assert found is not None, f"no func {name}"
    return found.group(1)


def test_the_demo_has_its_files():
    assert {p.name for p in DEMO_GD} == {"tavern.gd"}
    for name in ("project.godot", "tavern.tscn", "tavern.json", "README.md", ".gitignore"):
        assert (DEMO / name).is_file(), name
    # the addon and the daemon are linked or copied in by hand (README.md), never kept in git
    ignored = _code(DEMO / ".gitignore").splitlines()
    assert "/addons/" in ignored and "/oamd/" in ignored


@needs_gdtoolkit
@pytest.mark.parametrize("path", DEMO_GD, ids=lambda p: p.name)
def test_every_demo_gd_file_parses_lints_and_is_formatted(path):
    from gdtoolkit.formatter import format_code
    from gdtoolkit.linter import lint_code
    from gdtoolkit.parser import parser

    code = _code(path)
    parser.parse(code)
    assert lint_code(code) == []
    assert format_code(code, max_line_length=MAX_LINE_LENGTH) == code


@pytest.mark.parametrize(
    "readme", [DEMO / "README.md", DEMO.parent / "README.md"], ids=["demo", "addon"]
)
def test_the_readmes_links_lead_somewhere(readme):
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", _code(readme))
    local = [link for link in links if "://" not in link]
    assert local
    for link in local:
        assert (readme.parent / link).exists(), link
    if readme.parent == DEMO:
        assert "../../../docs/NPC.md" in local
    else:
        assert "demo/README.md" in local


def _godot_config(path: Path) -> configparser.ConfigParser:
    text = _code(path)
    # project.godot opens with keys before any section (config_version)
    config = configparser.ConfigParser(interpolation=None, comment_prefixes=(";",))
    config.optionxform = str  # keys are case-sensitive (Oamd, config/name)
    config.read_string("[_top]\n" + text)
    return config


def _res(path: str) -> Path:
    """A ``res://`` path of the demo, with ``res://addons/oamd`` where README.md puts the addon."""
    assert path.startswith("res://"), path
    inside = path.removeprefix("res://")
    if inside.startswith("addons/oamd/"):
        return ADDON / inside.removeprefix("addons/oamd/")
    return DEMO / inside


def test_project_godot_enables_the_plugin_its_autoload_and_a_main_scene():
    config = _godot_config(DEMO / "project.godot")
    assert config["_top"]["config_version"] == "5"  # Godot 4's
    application = config["application"]
    assert application["config/features"] == 'PackedStringArray("4.3")'
    main_scene = json.loads(application["run/main_scene"])
    assert main_scene == "res://tavern.tscn" and _res(main_scene).is_file()
    # the autoload as plugin.gd registers it: its name, the script beside plugin.cfg, a singleton
    plugin = _code(ADDON / "plugin.gd")
    (name,) = re.findall(r'^const AUTOLOAD_NAME := "(\w+)"$', plugin, re.M)
    assert dict(config["autoload"]) == {name: '"*res://addons/oamd/oamd.gd"'}
    assert _res("res://addons/oamd/oamd.gd").is_file()
    enabled = config["editor_plugins"]["enabled"]
    assert enabled == 'PackedStringArray("res://addons/oamd/plugin.cfg")'
    assert _res("res://addons/oamd/plugin.cfg").is_file()


def _scene(path: Path) -> tuple[dict[str, str], list[dict[str, Any]], str]:
    """A ``.tscn``: its header's fields, its sections (kind, fields, properties) and the text."""
    text = _code(path)
    sections: list[dict[str, Any]] = []
    for line in text.splitlines():
        head = re.fullmatch(r"\[(\w+)((?: \w+=(?:\"[^\"]*\"|\S+))*)\]", line)
        if head:
            fields = dict(re.findall(r'(\w+)=("[^"]*"|[^ \]]+)', head.group(2)))
            fields = {k: v.strip('"') for k, v in fields.items()}
            sections.append({"kind": head.group(1), "fields": fields, "properties": {}})
        elif line.strip():
            key, equals, value = line.partition(" = ")
            assert equals and sections, f"not a tscn line: {line!r}"
            sections[-1]["properties"][key] = value
    header = sections.pop(0)
    assert header["kind"] == "gd_scene"
    return header["fields"], sections, text


def test_the_scene_references_only_what_exists_and_has_the_nodes_the_script_uses():
    header, sections, _ = _scene(DEMO / "tavern.tscn")
    assert header["format"] == "3"  # Godot 4's scene format
    resources = {s["fields"]["id"]: s["fields"] for s in sections if s["kind"] == "ext_resource"}
    assert int(header["load_steps"]) == len(resources) + 1
    for fields in resources.values():
        assert _res(fields["path"]).is_file(), fields["path"]
    nodes: dict[str, dict[str, Any]] = {}
    for section in sections:
        if section["kind"] != "node":
            assert section["kind"] == "ext_resource", section["kind"]
            continue
        fields, properties = section["fields"], section["properties"]
        parent = fields.get("parent")
        if parent is None:
            assert not nodes, "one root, first"
            path = "."
        else:
            assert parent in nodes, f"{fields['name']}: no parent {parent}"
            path = fields["name"] if parent == "." else f"{parent}/{fields['name']}"
        nodes[path] = {"type": fields["type"], **properties}
        for used in re.findall(r'ExtResource\("([^"]+)"\)', "".join(properties.values())):
            assert used in resources, used
    root = nodes["."]
    assert root["type"] == "Control"
    script = resources[re.fullmatch(r'ExtResource\("(.+)"\)', root["script"]).group(1)]
    assert script["type"] == "Script" and script["path"] == "res://tavern.gd"

    unique = {
        path.rsplit("/", 1)[-1]: node
        for path, node in nodes.items()
        if node.get("unique_name_in_owner") == "true"
    }
    code = _code(DEMO / "tavern.gd")
    used = set(re.findall(r"%(\w+)", _without_strings(code)))
    assert used and used <= set(unique), used - set(unique)
    # `@onready var x: Label = %Subtitle`: the declared type is the node's
    typed = re.findall(r"^@onready var \w+: (\w+) = %(\w+)$", code, re.M)
    assert len(typed) >= 6
    for kind, name in typed:
        assert unique[name]["type"] == kind, name
    for name in re.findall(r"%(\w+)\.pressed\.connect", code):
        assert unique[name]["type"] == "Button", name
    # the buttons `_busy` disables are the Actions box's
    assert {p.rsplit("/", 1)[-1] for p in nodes if p.startswith("Layout/Actions/")} == {
        name for name in unique if unique[name]["type"] == "Button"
    }


def _public_api() -> dict[str, str]:
    """The names ``oamd.gd`` offers a game (no leading ``_``), each with what it is."""
    code = _code(ADDON / "oamd.gd")
    api = {}
    for kind, name in re.findall(r"^(?:static )?(func|signal|var|const|enum) (\w+)", code, re.M):
        if not name.startswith("_"):
            api[name] = kind
    return api


def _signal_arity() -> dict[str, int]:
    code = _code(ADDON / "oamd.gd")
    found = re.findall(r"^signal (\w+)(?:\((.*)\))?$", code, re.M)
    return {name: len([a for a in args.split(",") if a.strip()]) for name, args in found}


def _func_arity(code: str) -> dict[str, int]:
    found = re.findall(r"^func (\w+)\((.*)\)", code, re.M)
    return {name: len([a for a in args.split(",") if a.strip()]) for name, args in found}


def test_the_demo_uses_only_the_addons_public_api_and_its_handlers_fit_the_signals():
    code = _code(DEMO / "tavern.gd")
    bare = _without_strings(code)
    api = _public_api()
    used = set(re.findall(r"\bOamd\.(\w+)", bare))
    assert used and used <= set(api), used - set(api)
    assert "res://addons" not in code  # nothing of the addon is loaded but the autoload
    signals, handlers = _signal_arity(), _func_arity(code)
    connected = re.findall(r"\bOamd\.(\w+)\.connect\((\w+)\)", bare)
    assert len(connected) >= 4
    for signal, handler in connected:
        assert api[signal] == "signal"
        assert handlers[handler] == signals[signal], (signal, handler)
    # a tool handler is called with (arguments, call params)
    for tool, handler in re.findall(r'Oamd\.tool_handlers\["(\w+)"\] = (\w+)', code):
        assert handlers[handler] == 2, tool


def _helper_methods() -> dict[str, str]:
    """``oamd.gd``'s helpers and the protocol method each one calls."""
    methods = {}
    for name, body in _function_bodies(_code(ADDON / "oamd.gd")).items():
        called = re.findall(r'call_method\("([\w/]+)"', body)
        if len(called) == 1:
            methods[name] = called[0]
    return methods


def demo_methods() -> set[str]:
    """The protocol methods ``tavern.gd`` calls, through a helper or ``call_method``."""
    code = _without_comments(_code(DEMO / "tavern.gd"))
    helpers = _helper_methods()
    methods = set()
    for name, args in re.findall(r"\bOamd\.(\w+)\(([^)]*)", code):
        if name == "call_method":
            (method,) = re.findall(r'^"([\w/]+)"', args)
            methods.add(method)
        elif name in helpers:
            methods.add(helpers[name])
        else:
            assert name == "spawn", f"Oamd.{name}: teach this test which method it calls"
    return methods


# --- the addon's new rules, mirrored ------------------------------------------------------------


def folded_line(shown: str, event: dict[str, Any]) -> str:
    """``_folded_line``: ``lineDelta`` appends, ``lineReset`` replaces, anything else keeps."""
    if event.get("type") == "lineDelta":
        return shown + str(event.get("delta", ""))
    if event.get("type") == "lineReset":
        return str(event.get("line", ""))
    return shown


def polls_again(availability: dict[str, Any], retried: bool) -> bool:
    """``_polls_again``: while downloading, and once after a failed download."""
    if availability.get("available", False):
        return False
    status = availability.get("status", "")
    return status == "downloading" or (status == "downloadable" and not retried)


def test_the_addons_gdscript_says_what_the_mirrors_do():
    code = _code(ADDON / "oamd.gd")
    assert _top_level_function(code, "_folded_line") == (
        '\tmatch event.get("type"):\n'
        '\t\t"lineDelta":\n'
        '\t\t\treturn shown + str(event.get("delta", ""))\n'
        '\t\t"lineReset":\n'
        '\t\t\treturn str(event.get("line", ""))\n'
        "\treturn shown"
    )
    assert _top_level_function(code, "_polls_again") == (
        '\tif availability.get("available", false):\n'
        "\t\treturn false\n"
        '\tvar status = availability.get("status", "")\n'
        '\treturn status == "downloading" or (status == "downloadable" and not retried)'
    )
    assert _top_level_function(code, "wait_for_model") == (
        "\tvar retried := false\n"
        "\twhile true:\n"
        '\t\tvar reply: Dictionary = await call_method("model/availability")\n'
        '\t\tif not reply.has("result"):\n'
        "\t\t\treturn reply\n"
        '\t\tvar availability: Dictionary = reply["result"]\n'
        "\t\tmodel_progress.emit(availability)\n"
        "\t\tif not _polls_again(availability, retried):\n"
        "\t\t\treturn reply\n"
        '\t\tretried = retried or availability.get("status") == "downloadable"\n'
        "\t\tawait get_tree().create_timer(poll_seconds).timeout\n"
        "\treturn {}"
    )
    # npc/event: npc_event first, then the folded line of a turn that has an id; a reply ends it
    dispatch = _top_level_function(code, "_dispatch")
    assert (
        "\t\t\tnpc_event.emit(npc, request_id, event)\n"
        '\t\t\tif typeof(request_id) == TYPE_INT and event is Dictionary and event.has("type"):\n'
        '\t\t\t\tif event["type"] in ["lineDelta", "lineReset"]:\n'
        '\t\t\t\t\tvar line := _folded_line(_npc_lines.get(request_id, ""), event)\n'
        "\t\t\t\t\t_npc_lines[request_id] = line\n"
        "\t\t\t\t\tnpc_line_changed.emit(npc, request_id, line)\n"
    ) in dispatch
    assert "\t_pending.erase(id)\n\t_npc_lines.erase(id)" in _top_level_function(
        code, "_handle_line"
    )
    assert "\t_npc_lines.clear()\n" in _top_level_function(code, "_finish")


def test_the_line_fold_replaces_on_a_reset():
    shown = ""
    for event in (
        {"type": "emotion", "emotion": "happy"},
        {"type": "lineDelta", "delta": "Evening, "},
        {"type": "lineDelta", "delta": "stranger."},
        {"type": "lineReset", "line": "Evening, love."},
        {"type": "lineDelta", "delta": " What'll it be?"},
        {"type": "toolCallStarted"},
    ):
        shown = folded_line(shown, event)
    assert shown == "Evening, love. What'll it be?"


def test_the_polling_rule():
    downloading = {"available": False, "status": "downloading", "bytesDownloaded": 5}
    failed = {"available": False, "status": "downloadable", "detail": "download failed: 503"}
    assert polls_again(downloading, retried=False) and polls_again(downloading, retried=True)
    assert polls_again(failed, retried=False) and not polls_again(failed, retried=True)
    assert not polls_again({"available": True, "status": "available"}, retried=False)
    assert not polls_again({"available": False, "status": "unavailable"}, retried=False)
    assert not polls_again({"available": False, "reason": "not_configured"}, retried=False)


# --- the addon, mirrored as the demo drives it ---------------------------------------------------


class Addon:
    """The ``Oamd`` autoload's side of the pipe (``oamd.gd``): requests with the ids it takes,
    lines as ``JSON.stringify`` writes them and read in small pieces, ``tool/call`` answered from
    ``tool_handlers``, and its signals as lists of handlers (``npc_event``, ``npc_line_changed``
    with the folded line, ``model_progress``)."""

    READ_BYTES = 512

    def __init__(self, process: Any) -> None:
        self.process = process
        self.framer = LineFramer()
        self.lines: list[str] = []
        self.next_id = 1
        self.tool_handlers: dict[str, Callable[..., Any]] = {}
        self.npc_lines: dict[int, str] = {}
        self.on_npc_event: list[Callable[[str, Any, dict[str, Any]], None]] = []
        self.on_npc_line_changed: list[Callable[[str, int, str], None]] = []
        self.on_model_progress: list[Callable[[dict[str, Any]], None]] = []
        self.sent: list[dict[str, Any]] = []
        self.tool_calls: list[dict[str, Any]] = []
        self.npc_events: list[dict[str, Any]] = []

    async def _next_message(self) -> dict[str, Any]:
        while not self.lines:
            chunk = await self.process.stdout.receive(self.READ_BYTES)
            self.lines += self.framer.feed(chunk)
        return godot_parse(self.lines.pop(0))

    async def call_method(self, method: str, params: dict[str, Any] | None = None) -> dict:
        """``call_method``: the reply message, ``{"result": …}`` or ``{"error": …}``."""
        request_id = self.next_id
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        self.sent.append(message)
        await self.process.stdin.send(addon_line(message))
        while True:
            message = await self._next_message()
            if "method" in message and "id" in message:
                assert message["method"] == "tool/call"
                self.tool_calls.append(message)
                reply = addon_tool_reply(message, self.tool_handlers)
                await self.process.stdin.send(reply)
            elif "method" in message:
                self._dispatch(message["method"], message.get("params", {}))
            elif normal_id(message["id"]) == request_id:
                self.npc_lines.pop(request_id, None)  # the turn is over: result.line stands
                return message

    def _dispatch(self, method: str, params: dict[str, Any]) -> None:
        if method != "npc/event":
            return
        npc, request_id, event = params["npc"], normal_id(params.get("requestId")), params["event"]
        self.npc_events.append(params)
        for handler in self.on_npc_event:
            handler(npc, request_id, event)
        if isinstance(request_id, int) and event.get("type") in ("lineDelta", "lineReset"):
            line = folded_line(self.npc_lines.get(request_id, ""), event)
            self.npc_lines[request_id] = line
            for handler in self.on_npc_line_changed:
                handler(npc, request_id, line)

    async def initialize(self) -> dict[str, Any]:
        return await self.call_method("initialize", addon_initialize_params())

    async def wait_for_model(self, poll_seconds: float) -> dict[str, Any]:
        """``wait_for_model``: polls ``model/availability`` by ``polls_again``."""
        retried = False
        while True:
            reply = await self.call_method("model/availability")
            if "result" not in reply:
                return reply
            availability = reply["result"]
            for handler in self.on_model_progress:
                handler(availability)
            if not polls_again(availability, retried):
                return reply
            retried = retried or availability.get("status") == "downloadable"
            await anyio.sleep(poll_seconds)

    async def close(self) -> None:
        """``close()``: ``shutdown``, then the daemon exits on its own."""
        assert (await self.call_method("shutdown"))["result"] == {}
        assert await self.process.wait() == 0


# --- tavern.gd, mirrored ------------------------------------------------------------------------


class Tavern:
    """``tavern.gd`` with ``scripted_models`` on: the same calls with the same params, built from
    ``tavern.json`` as it builds them, and the labels it would show (``speaker``, ``subtitle``,
    ``emotion``, the option buttons, the status numbers). ``subtitles`` keeps every text the
    subtitle label was given. A reply that is an error fails the test (the scene shows it)."""

    def __init__(self, addon: Addon) -> None:
        self.addon = addon
        self.tavern = TAVERN
        self.copper = 0
        self.bounty = 0
        self.regard = 0
        self.speaker = ""
        self.speaker_label = ""
        self.subtitle = ""
        self.emotion = ""
        self.options: list[str] = []
        self.subtitles: list[str] = []
        addon.tool_handlers["place_order"] = self.place_order
        addon.on_npc_event.append(self.on_npc_event)
        addon.on_npc_line_changed.append(self.on_npc_line_changed)

    def world(self) -> str:
        return self.tavern["world"]["world"]

    async def open_tavern(self) -> None:
        self.copper = int(self.tavern["game"]["copper"])
        await self.addon.initialize()  # spawn(): sent first, before anything the scene asks
        world = self.tavern["world"]
        # Oamd.world_create(world, state)
        params = {"world": world["world"], "state": world["state"]}
        ok(await self.addon.call_method("world/create", params))
        for npc in self.tavern["npcs"]:
            ok(await self.create_npc(npc))
        bark = ok(await self.addon.call_method("npc/bark", self.tavern["bark"]))
        self.show_line(str(self.tavern["bark"]["npc"]), bark["result"]["line"])

    async def create_npc(self, npc: dict[str, Any]) -> dict[str, Any]:
        create = npc["create"]
        extra = {
            "tools": create.get("tools", []),
            "world": create["world"],
            "options": create["options"],
        }
        extra["model"] = npc["model"]
        # npc_create(npc, persona, extra): {npc, persona} merged with extra
        params = {"npc": create["npc"], "persona": create["persona"], **extra}
        return await self.addon.call_method("npc/create", params)

    async def talk(self, npc: str, line: str) -> dict[str, Any]:
        self.show_line(npc, "")
        self.options = []
        reply = ok(
            await self.addon.call_method("npc/talk", {"npc": npc, "line": line, "stream": True})
        )
        result = reply["result"]
        self.show_line(npc, result["line"])
        self.emotion = result["emotion"]
        if npc == "marta":
            self.regard = int(result["relationship"])
        if not result["endsConversation"]:
            self.options = list(result["playerOptions"])
        return reply

    async def brawl(self) -> dict[str, Any]:
        brawl = self.tavern["game"]["brawl"]
        params = {"world": self.world(), "path": brawl["path"], "value": brawl["value"]}
        reply = ok(await self.addon.call_method("world/set", params))
        self.bounty = int(brawl["value"])
        return reply

    async def guard_decides(self) -> dict[str, Any]:
        decision = self.tavern["decision"]
        decide = decision["decide"]
        player = ok(
            await self.addon.call_method("world/get", {"world": self.world(), "path": "player"})
        )
        extra = {
            "actor": decide["actor"],
            "context": {"player": player["result"]["value"]},
            "fallbackOptionID": decide["fallbackOptionID"],
        }
        extra["model"] = decision["model"]
        params = {"situation": decide["situation"], "options": decide["options"], **extra}
        return ok(await self.addon.call_method("decision/decide", params))

    async def save_game(self) -> str:
        """``_save_game``: the text it stores in ``user://tavern_save.json``."""
        snapshot = ok(await self.addon.call_method("world/snapshot", {"world": self.world()}))
        save: dict[str, Any] = {"version": 1, "game": {"copper": self.copper}, "npcs": {}}
        save["world"] = snapshot["result"]["state"]
        for npc in self.tavern["npcs"]:
            npc_id = npc["create"]["npc"]
            state = ok(await self.addon.call_method("npc/state", {"npc": npc_id}))
            save["npcs"][npc_id] = state["result"]["state"]
        return godot_stringify(save)

    async def load_game(self, text: str) -> list[dict[str, Any]]:
        """``_load_game`` into this (fresh) daemon; the ``npc/restore`` replies."""
        save = godot_parse(text)
        assert int(save.get("version", 0)) == 1
        await self.addon.initialize()  # _start_daemon: Oamd.spawn, a new daemon
        params = {"world": self.world(), "state": save["world"]}
        ok(await self.addon.call_method("world/create", params))
        restored = []
        for npc in self.tavern["npcs"]:
            params = {"state": save["npcs"][npc["create"]["npc"]]}
            params["model"] = npc["restoreModel"]
            restored.append(ok(await self.addon.call_method("npc/restore", params)))
        self.copper = int(save["game"]["copper"])
        self.bounty = int(save["world"]["player"]["bounty"])
        self.regard = int(save["npcs"]["marta"]["memory"]["relationship"])
        return restored

    def place_order(self, arguments: dict[str, Any], _call: dict[str, Any]) -> Any:
        game = self.tavern["game"]
        item = str(arguments.get("item", ""))
        quantity = int(arguments.get("quantity", 1))
        facts: dict[str, Any] = {"item": item, "quantity": quantity, "copper": self.copper}
        if item not in game["menu"]:
            return {"output": game["say"]["notOnMenu"].format(**facts), "isError": True}
        total = int(game["menu"][item]) * quantity
        facts["total"] = total
        if total > self.copper:
            return {"output": game["say"]["tooPoor"].format(**facts), "isError": True}
        self.copper -= total
        facts["copper"] = self.copper
        return game["say"]["orderServed"].format(**facts)

    def on_npc_line_changed(self, npc: str, _request_id: int, line: str) -> None:
        if npc == self.speaker:
            self.subtitle = line
            self.subtitles.append(line)

    def on_npc_event(self, npc: str, _request_id: Any, event: dict[str, Any]) -> None:
        if npc == self.speaker and event.get("type") == "emotion":
            self.emotion = event["emotion"]

    def show_line(self, npc: str, line: str) -> None:
        self.speaker = npc
        self.speaker_label = persona_name(npc)
        self.subtitle = line
        self.subtitles.append(line)
        self.emotion = ""


def persona_name(npc: str) -> str:
    for each in TAVERN["npcs"]:
        if each["create"]["npc"] == npc:
            return each["create"]["persona"]["name"]
    return npc


def ok(reply: dict[str, Any]) -> dict[str, Any]:
    """``_ok``: where the scene shows an error, the mirror fails."""
    assert "error" not in reply, reply["error"]
    return reply


def test_tavern_json_holds_what_the_walkthrough_needs():
    (marta, brann) = TAVERN["npcs"]
    assert marta["create"]["npc"] == "marta" and brann["create"]["npc"] == "brann"
    assert marta["create"]["persona"]["knowledge"]
    assert [t["name"] for t in marta["create"]["tools"]] == ["place_order"]
    for npc in (marta, brann):
        options = npc["create"]["options"]
        assert options["worldReadable"] and options["worldContextPaths"]
        assert npc["create"]["world"] == TAVERN["world"]["world"]
    assert TAVERN["bark"]["npc"] == "marta"
    assert TAVERN["decision"]["decide"]["actor"] == "brann"


async def _spawn() -> Any:
    """``Oamd.spawn()``: the command line it builds, on the shipped executable."""
    command = addon_command(shipped_oamd(), [])
    return await anyio.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )


@needs_gdtoolkit
@pytest.mark.anyio
async def test_the_tavern_plays_against_the_shipped_daemon():
    game = TAVERN["game"]
    process = await _spawn()
    async with process:
        addon = Addon(process)
        tavern = Tavern(addon)
        with anyio.fail_after(WAIT_SECONDS):
            # the player walks in: world, NPCs, Marta's bark
            await tavern.open_tavern()
            (bark_step, *_) = TAVERN["npcs"][0]["model"]["steps"]
            assert (tavern.speaker_label, tavern.subtitle) == ("Marta", bark_step["text"])
            assert tavern.copper == 10

            # Marta greets: her first answer streams, misses the reply's player_options and is
            # retried; the daemon takes the streamed words back with a lineReset, and the
            # subtitle follows it to the line that stands
            greeting = (await tavern.talk("marta", ""))["result"]
            events = [n["event"] for n in addon.npc_events if n["npc"] == "marta"]
            assert [e["type"] for e in events] == ["emotion", "lineDelta", "lineReset"]
            retracted = "Evening, stranger. Dripping on my floor, are we?"
            assert greeting["line"] == "Evening, love. What'll it be?"
            # cleared, the streamed words, the reset, then result.line (the same) set at the end
            line = greeting["line"]
            assert tavern.subtitles[-4:] == ["", retracted, line, line]
            assert tavern.subtitle == greeting["line"]
            assert (tavern.emotion, greeting["emotion"]) == ("happy", "happy")
            assert tavern.options == ["Two ales, please.", "What's on the menu?", "Goodbye."]

            # the player presses the first option: Marta calls place_order, the game answers
            # from its menu and purse, and her line quotes what the game said
            order = (await tavern.talk("marta", tavern.options[0]))["result"]
            (call,) = addon.tool_calls
            assert call["params"]["npc"] == "marta"
            assert call["params"]["call"]["name"] == "place_order"
            assert call["params"]["call"]["arguments"] == {"item": "ale", "quantity": 2.0}
            served = game["say"]["orderServed"].format(quantity=2, item="ale", total=6, copper=4)
            assert served == "2 ale for 6 copper, and 4 copper left in your purse"
            assert tavern.copper == 4
            assert order["line"] == f"There you are, love: {served}."
            assert tavern.subtitle == order["line"]
            records = {r["call"]["name"]: r for r in order["toolCalls"]}
            assert records["place_order"]["output"] == served
            assert records["place_order"]["isError"] is False
            assert set(records) == {"place_order", "change_relationship", "remember_fact"}
            assert order["relationship"] == 5 == tavern.regard
            assert tavern.options == ["Thank you.", "Any news?", "Goodbye."]

            # a game event writes the world; Brann reads it when the player speaks to him
            assert (await tavern.brawl())["result"]["path"] == "player.bounty"
            brann = (await tavern.talk("brann", game["guardLine"]))["result"]
            (read,) = brann["toolCalls"]
            assert read["call"] == {
                "id": read["call"]["id"],
                "name": "read_world_state",
                "arguments": {"path": "player.bounty"},
            }
            assert read["output"] == 10.0  # what the brawl wrote
            assert brann["line"] == "Bounty on your head: 10 copper. Mind yourself."
            assert (tavern.speaker_label, tavern.subtitle) == ("Brann", brann["line"])
            assert tavern.emotion == "suspicious"
            assert tavern.options == ["I'll behave.", "It was him!"]

            # Brann decides, the world's view of the player in hand
            decision = (await tavern.guard_decides())["result"]
            assert (decision["optionID"], decision["confidence"]) == ("arrest", 80.0)
            assert decision["isFallback"] is False
            decide = addon.sent[-1]["params"]
            assert decide["context"] == {"player": {"bounty": 10.0}}

            saved = await tavern.save_game()
            await addon.close()
    save = json.loads(saved)
    marta_saved = save["npcs"]["marta"]
    assert marta_saved["memory"] == {"facts": ["The player drinks ale."], "relationship": 5}
    assert save["world"] == {
        "town": {"weather": "rain", "curfewBell": 10},
        "player": {"bounty": 10},
    }
    assert save["game"] == {"copper": 4}
    first_methods = {m["method"] for m in addon.sent}

    # Load: a fresh daemon, the saved world, both NPCs restored
    process = await _spawn()
    async with process:
        addon = Addon(process)
        tavern = Tavern(addon)
        with anyio.fail_after(WAIT_SECONDS):
            restored = await tavern.load_game(saved)
            assert restored[0]["result"]["tools"][0] == "place_order"  # the client tool came back
            assert (tavern.copper, tavern.bounty, tavern.regard) == (4, 10, 5)
            back = (await tavern.talk("marta", ""))["result"]
            assert back["line"] == "Back again, love? Two ales, like last time?"
            assert back["relationship"] == 5  # kept across the save
            played = first_methods | {m["method"] for m in addon.sent}
            state = (await addon.call_method("npc/state", {"npc": "marta"}))["result"]["state"]
            assert state["memory"]["facts"] == ["The player drinks ale."]
            said = [e.get("text", "") for e in state["transcript"]["transcript"]["entries"]]
            assert any("Two ales, please." in text for text in said)  # the conversation too
            await addon.close()
    # the mirror played every method tavern.gd calls, and no other (model/availability is
    # wait_for_model's, which scripted models skip; it has its own test below)
    assert demo_methods() - {"model/availability"} == played - {"initialize", "shutdown"}


# --- Oamd.wait_for_model against a real download ------------------------------------------------

LLAMA_MISSING = missing_reason(server=False)
needs_llama = pytest.mark.skipif(LLAMA_MISSING is not None, reason=str(LLAMA_MISSING))
MODEL_NAME = "smollm2-360m-instruct"
"""``tavern.gd``'s ``DAEMON_MODEL``: a catalog entry without a pinned size or digest, so the
mirror may serve another model's bytes (here the packaged SmolLM2-135M)."""
POLL_SECONDS = 0.05
"""The mirror's ``poll_seconds``; the scene uses the default second."""


def _daemon_model() -> str:
    (model,) = re.findall(r'^const DAEMON_MODEL := "(.+)"$', _code(DEMO / "tavern.gd"), re.M)
    return model


async def _venv_daemon(store: Path, base_url: str) -> Any:
    """``oamd stdio --model …?pull=on-request`` from this Python, with a model store and
    catalog mirror of the test's own."""
    from gdtoolkit.parser import parser

    # the addon's STDIO_ARGS, as spawn() puts them before the caller's arguments
    stdio_args = _const(parser.parse(_code(ADDON / "oamd.gd")), "STDIO_ARGS")
    command = [sys.executable, "-m", "oamd", *stdio_args, "--model", _daemon_model()]
    env = {**os.environ, "OAMD_MODELS": str(store), "OAMD_CATALOG_BASE_URL": base_url}
    return await anyio.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )


@needs_gdtoolkit
@needs_llama
@pytest.mark.anyio
async def test_wait_for_model_retries_a_failed_download_follows_its_progress_and_ends_ready(
    tmp_path,
):
    assert _daemon_model() == f"llamacpp:{MODEL_NAME}?pull=on-request"
    body = packaged_model_bytes()
    paused_at = len(body) // 3
    route = Route(status=503)  # the first download fails
    seen: list[dict[str, Any]] = []

    def on_progress(availability: dict[str, Any]) -> None:  # the game's model_progress handler
        seen.append(availability)
        if availability.get("status") == "downloadable" and route.status == 503:
            route.status, route.body, route.pause_after = 200, body, paused_at  # back online
        if availability.get("bytesDownloaded") == paused_at:
            route.release.set()

    with serving({catalog_file(MODEL_NAME): route}) as server:
        process = await _venv_daemon(tmp_path, server.url(""))
        async with process:
            addon = Addon(process)
            addon.on_model_progress.append(on_progress)
            with anyio.fail_after(WAIT_SECONDS):
                init = (await addon.initialize())["result"]
                reply = await addon.wait_for_model(POLL_SECONDS)
                await addon.close()
    assert init["model"]["status"] == "downloading"  # initialize started the first download
    statuses = [a["status"] for a in seen]
    failed = statuses.index("downloadable")
    assert statuses.count("downloadable") == 1
    assert seen[failed]["detail"].startswith("download failed:") and "503" in seen[failed]["detail"]
    assert set(statuses[:failed]) <= {"downloading"}
    # after the failure the rule asked again, which started the download again
    progress = seen[failed + 1 : -1]
    assert progress and all(a["status"] == "downloading" for a in progress)
    shown = [a.get("bytesDownloaded", 0) for a in progress]
    assert shown == sorted(shown) and paused_at in shown and shown[-1] <= len(body)
    assert {a.get("totalBytes") for a in progress if "totalBytes" in a} == {len(body)}
    # the download rose to totalBytes: the file that landed is all of it, and it loaded
    assert (tmp_path / f"{MODEL_NAME}.gguf").stat().st_size == len(body)
    assert seen[-1]["available"] is True and seen[-1]["status"] == "available"
    assert reply == {"jsonrpc": "2.0", "id": reply["id"], "result": seen[-1]}
    assert len(server.ranges_asked(catalog_file(MODEL_NAME))) == 2


@needs_gdtoolkit
@needs_llama
@pytest.mark.anyio
async def test_wait_for_model_gives_up_when_the_retried_download_fails_too(tmp_path):
    route = Route(status=503)
    seen: list[dict[str, Any]] = []
    with serving({catalog_file(MODEL_NAME): route}) as server:
        process = await _venv_daemon(tmp_path, server.url(""))
        async with process:
            addon = Addon(process)
            addon.on_model_progress.append(seen.append)
            with anyio.fail_after(WAIT_SECONDS):
                await addon.initialize()
                reply = await addon.wait_for_model(POLL_SECONDS)
                await addon.close()
    statuses = [a["status"] for a in seen]
    assert statuses.count("downloadable") == 2 and statuses[-1] == "downloadable"
    assert set(statuses[:-1]) <= {"downloading", "downloadable"}
    assert reply["result"] == seen[-1] and reply["result"]["available"] is False
    assert reply["result"]["detail"].startswith("download failed:")
    assert len(server.ranges_asked(catalog_file(MODEL_NAME))) == 2  # the first, and the one retry

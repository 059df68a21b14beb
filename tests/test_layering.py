"""House rules that a glance could miss: imports point down the layers, error numbers live in one
table, and that table matches ``protocol/errors.json`` row by row."""

from __future__ import annotations

import ast
from pathlib import Path

from contract import ERRORS

from oamd.rpc.errors import CODES

ROOT = Path(__file__).resolve().parent.parent / "oamd"

ALLOWED = {
    "transport": {"transport", "limits", "errors", "log", "jsonvalue"},
    "rpc": {"rpc", "transport", "limits", "errors", "log", "jsonvalue"},
    "backends": {"backends", "limits", "errors", "log", "jsonvalue"},
    # backends.scripted.turn_snapshot: the turn a step belongs to, which scripted templates read
    "agent": {
        "agent",
        "backends.base",
        "backends.scripted.turn_snapshot",
        "limits",
        "errors",
        "log",
        "jsonvalue",
    },
    # the small-model layout and its likelihood choices: below both loops (the envelope loop
    # lays a small model's steps out with it) and above the step reader and the turn's vocabulary
    "agent.small": {
        "agent.small",
        "agent.step",
        "agent.entries",
        "agent.events",
        "agent.history",
        "agent.tools",
        "agent.turn_spec",
        "backends.base",
        "limits",
        "errors",
        "log",
        "jsonvalue",
    },
    "game": {"game", "agent", "backends.base", "limits", "errors", "log", "jsonvalue"},
    # each namespace's params module reads params into the value types below it
    "bridge": {
        "bridge",
        "rpc",
        "agent",
        "game",
        "backends.base",
        "limits",
        "errors",
        "log",
        "jsonvalue",
    },
    # one connection however it arrives, and the method set: above the bridge, below serve/,
    # recording/ and the command line
    "daemon": {
        "daemon",
        "bridge",
        "rpc",
        "transport",
        "agent.models",
        "backends.base",
        "backends.scripted.model",
        "limits",
        "errors",
        "log",
        "jsonvalue",
    },
    "client": {"client", "transport", "rpc.errors", "jsonvalue"},
    # programs a game developer copies from: the public client only, and nothing imports them
    "examples": {"examples", "client"},
    # the model store is a leaf beside backends/: the llama.cpp backend may not import it, so
    # oamd/cli hands its lookup to the backend; it needs none of the daemon's layers itself
    "models": {"models", "limits", "errors", "log", "jsonvalue"},
    # records a connection from its wire and its models, and replays one on a daemon it starts:
    # it sits above the daemon (which only knows a tap by its type), below nothing but oamd/cli
    "recording": {
        "recording",
        "daemon",
        "transport",
        "agent.models",
        "backends.base",
        "backends.delegating",
        "backends.scripted.model",
        "backends.scripted.grammar",
        "bridge.state",
        "limits",
        "errors",
        "log",
        "jsonvalue",
    },
    # the inspector reads what a connection holds (rpc, agent, game objects) and listens on a
    # socket (transport), but is wired in by oamd/cli alone: nothing below imports it, and it never
    # imports bridge/, serve/ or daemon/, so --inspect cannot change how a request is handled
    "inspector": {
        "inspector",
        "rpc",
        "agent",
        "game",
        "backends.base",
        "transport",
        "limits",
        "errors",
        "log",
        "jsonvalue",
    },
    # the command line is the top layer: it makes a process of the layers below (the daemon, a
    # server, a recorder, an inspector, the model store's lookups handed to the backends), and
    # nothing in the package imports it but __main__ (test below; evals/ and bench/ do, outside)
    "cli": {
        "cli",
        "daemon",
        "bridge.state",
        "serve",
        "recording",
        "inspector",
        "transport.sockets",
        "backends.base",
        "backends.spec",
        "backends.llamacpp.packaged_model",  # `oamd models list` shows the default model's file
        "models",
        "conformance",
        "limits",
        "errors",
        "log",
        "jsonvalue",
    },
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("oamd."):
            found.add(node.module[len("oamd.") :])
        elif isinstance(node, ast.Import):
            found.update(a.name[len("oamd.") :] for a in node.names if a.name.startswith("oamd."))
    return found


def _allowed(target: str, allowed: set[str]) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed) or target in {
        "",
        "__init__",
    }


def test_no_import_points_up_the_layers():
    violations = []
    for package, allowed in ALLOWED.items():
        for path in (ROOT / package.replace(".", "/")).rglob("*.py"):
            for target in _imports(path):
                if not _allowed(target, allowed):
                    violations.append(f"{path.relative_to(ROOT.parent)} imports oamd.{target}")
    assert violations == []


def test_the_bridge_core_knows_nothing_of_the_game_extension():
    """``bridge/game`` builds on the core; the core (sessions, validation, the budget, the
    wiring of extensions) imports neither it nor ``game/``."""
    core = ROOT / "bridge"
    offenders = [
        f"{path.relative_to(ROOT.parent)} imports oamd.{target}"
        for path in core.rglob("*.py")
        if "game" not in path.relative_to(core).parts
        for target in _imports(path)
        if target.startswith(("bridge.game", "game"))
    ]
    assert offenders == []


def test_nothing_in_the_daemon_imports_the_examples():
    users = [
        str(path.relative_to(ROOT.parent))
        for path in ROOT.rglob("*.py")
        if "examples" not in path.relative_to(ROOT).parts
        and any(t == "examples" or t.startswith("examples.") for t in _imports(path))
    ]
    assert users == []


def _error_numbers(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        -node.operand.value
        for node in ast.walk(tree)
        if isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and isinstance(node.operand.value, int)
        and 32000 <= node.operand.value <= 32768
    ]


def test_error_numbers_appear_in_code_only_in_the_error_table():
    offenders = [
        str(path.relative_to(ROOT.parent))
        for path in ROOT.rglob("*.py")
        if path != ROOT / "rpc" / "errors.py" and _error_numbers(path)
    ]
    assert offenders == []


def test_the_error_table_matches_protocol_errors_json_row_by_row():
    assert [(row["name"], row["code"]) for row in ERRORS] == list(CODES.items())


def _importers(package: str) -> list[str]:
    """The modules outside ``oamd/<package>`` that import it."""
    return sorted(
        str(path.relative_to(ROOT.parent))
        for path in ROOT.rglob("*.py")
        if package not in path.relative_to(ROOT).parts
        and any(t == package or t.startswith(package + ".") for t in _imports(path))
    )


def test_only_the_command_line_imports_the_inspector():
    """``--inspect`` is wired in by ``oamd/cli`` alone, so without it nothing loads the inspector."""
    assert _importers("inspector") == ["oamd/cli/serving.py"]


def test_nothing_in_the_daemon_imports_the_command_line_but_main():
    """``oamd/cli`` is the top layer: ``python -m oamd`` runs it, nothing below may reach up to it."""
    assert _importers("cli") == ["oamd/__main__.py"]

"""No circle of imports inside a package: each package's modules import one another in layers, so
any of them can be imported first. An import deferred into a function still counts (deferring it
is how a circle hides); one under ``if TYPE_CHECKING:`` does not (it never runs); importing a
module of another package counts as importing that package's ``__init__`` too (Python runs it
first)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "oamd"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, package: str) -> set[str]:
    """Every module the code may import, except under ``if TYPE_CHECKING:``."""
    found: set[str] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        pending.extend(ast.iter_child_nodes(node))
    return found


def import_graph() -> dict[str, set[str]]:
    """Module → the ``oamd`` modules it imports, within its own package (``oamd.agent``…)."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        top = ".".join(name.split(".")[:2])
        imported = _imports(ast.parse(path.read_text(encoding="utf-8")), package)
        targets = {
            target
            for target in imported
            if target in modules and target != name and target.split(".")[:2] == top.split(".")
        }
        graph[name] = targets | _packages_run(targets, name, modules)
    return graph


def _packages_run(targets: set[str], importer: str, modules: dict[str, Path]) -> set[str]:
    """The packages whose ``__init__`` importing ``targets`` runs first, from outside them: a
    module that imports ``oamd.agent.envelope._x`` runs ``oamd.agent.envelope`` (and so what its
    ``__init__`` imports) before ``_x``. From inside a package, its ``__init__`` is already
    running or done."""
    found = set()
    for target in targets:
        package = target.rpartition(".")[0]
        while package.count(".") >= 2 and package != importer:
            if package in modules and not importer.startswith(package + "."):
                found.add(package)
            package = package.rpartition(".")[0]
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of imports, as the modules along it, or ``None``."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for target in sorted(graph.get(node, ())):
            if target in on_path:
                return [*path[path.index(target) :], target]
            if target not in done:
                found = visit(target)
                if found:
                    return found
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            found = visit(start)
            if found:
                return found
    return None


def test_no_package_has_a_circle_of_imports():
    assert find_cycle(import_graph()) is None


def test_a_module_imported_from_outside_its_package_runs_the_packages_init_first():
    modules = {name: Path() for name in ("oamd.a", "oamd.a.p", "oamd.a.p.x", "oamd.a.p.y")}
    assert _packages_run({"oamd.a.p.x"}, "oamd.a.step", modules) == {"oamd.a.p"}
    assert _packages_run({"oamd.a.p.x"}, "oamd.a.p.y", modules) == set()


def test_the_cycle_finder_finds_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None

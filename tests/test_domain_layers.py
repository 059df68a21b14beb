"""The domain (``oamd/agent``, ``oamd/game``) knows nothing of the wire: it imports no adapter,
connection or host module, by any import form (``TYPE_CHECKING`` and deferred imports included),
and none of its string literals is a params property name of the protocol, so each params key is
read, validated and written by the adapters (``oamd/bridge``: each namespace's ``methods``,
``params`` and ``encode`` modules) alone.

The property names are every name under each method's ``params`` in ``protocol/bridge.json``
(``$ref``s followed) with an upper-case letter: lower-case ones (``name``, ``text``) are ordinary
words the domain uses for its own values too."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DOMAIN = ("oamd/agent", "oamd/game")
FORBIDDEN = (
    "oamd.bridge",
    "oamd.rpc",
    "oamd.transport",
    "oamd.serve",
    "oamd.daemon",
    "oamd.inspector",
    "oamd.recording",
)

ENTRIES_MODULE = "oamd/agent/entries.py"
"""The one module that knows the stored form of history entries (oamd's transcript form,
``toolCalls`` among its kinds); every other domain module goes through it."""

JSON_SCHEMA_VOCABULARY = frozenset(
    {
        "$defs",
        "$ref",
        "additionalItems",
        "additionalProperties",
        "allOf",
        "anyOf",
        "contentEncoding",
        "contentMediaType",
        "dependentRequired",
        "dependentSchemas",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "maxContains",
        "maxItems",
        "maxLength",
        "maxProperties",
        "minContains",
        "minItems",
        "minLength",
        "minProperties",
        "multipleOf",
        "oneOf",
        "patternProperties",
        "prefixItems",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "uniqueItems",
    }
)
"""What ``oamd.agent.schema`` reads in the schemas callers give: JSON Schema's own words."""

ALLOWED: dict[tuple[str, str], str] = {}
"""(module, literal) → why that module may spell that wire name. Keep it short; each entry needs
a reason (a model-facing schema property, a built-in tool's name), never "the parser is here"."""


def _wire_names() -> frozenset[str]:
    bridge = json.loads((REPO / "protocol" / "bridge.json").read_text(encoding="utf-8"))
    defs = bridge["$defs"]
    names: set[str] = set()

    def walk(node: Any, seen: set[str]) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.rsplit("/", 1)[-1]
                if name not in seen:
                    seen.add(name)
                    walk(defs[name], seen)
            properties = node.get("properties")
            if isinstance(properties, dict):
                names.update(properties)
            for value in node.values():
                walk(value, seen)
        elif isinstance(node, list):
            for item in node:
                walk(item, seen)

    for method in bridge["methods"].values():
        walk(method.get("params", {}), set())
    return frozenset(n for n in names if any(c.isupper() for c in n))


def _domain_files() -> Iterator[Path]:
    for folder in DOMAIN:
        yield from sorted((REPO / folder).rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _imported(path: Path) -> Iterator[str]:
    """Every module ``path`` may import: ``import``, ``from … import``, relative imports,
    ``importlib.import_module("…")`` and ``__import__("…")``, wherever they stand."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (
                called in ("import_module", "__import__")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                yield first.value


def _forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def test_the_domain_imports_no_adapter_connection_or_host_module():
    offenders = sorted(
        f"{_relative(path)} imports {module}"
        for path in _domain_files()
        for module in set(_imported(path))
        if _forbidden(module)
    )
    assert offenders == []


def test_no_domain_string_is_a_params_property_name_of_the_wire():
    wire = _wire_names() - JSON_SCHEMA_VOCABULARY
    offenders = sorted(
        {
            f"{_relative(path)}: {node.value!r}"
            for path in _domain_files()
            if _relative(path) != ENTRIES_MODULE
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in wire
            and (_relative(path), node.value) not in ALLOWED
        }
    )
    assert offenders == []


def test_the_wire_names_are_found_and_the_allowlist_is_still_needed():
    """The check above is not vacuous: the protocol has camelCase params, and each allowlist
    entry (and the entries module) still spells a wire name (or it should leave the list)."""
    wire = _wire_names()
    assert {"toolChoice", "maxToolRounds", "toolTimeoutSeconds"} <= wire
    literals: dict[str, set[str]] = {}
    for path in _domain_files():
        literals[_relative(path)] = {
            node.value
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
    assert literals[ENTRIES_MODULE] & wire
    stale = [key for key in ALLOWED if key[1] not in literals.get(key[0], set())]
    assert stale == []

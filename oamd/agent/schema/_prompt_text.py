"""Schemas as a small model reads them: one line for the tool catalog, one key per line for tasks.

It owns the wording (``one of "ale", "stew"``, ``integer 1-10``, ``"note"?: string``, alternatives
joined with ``or`` and never ``|``, which small models copy) and the concrete example of an
envelope. It reads generation schemas (``CompiledSchema.generation``: local ``$ref``s, ``$defs``)
and never raises on a schema it does not understand: the unknown renders as ``any``.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["envelope_example", "render_fields", "render_inline"]

_MAX_RENDER_DEPTH = 8
"""Deeper levels, and reference cycles, render as ``…`` or the reference's name."""

_ELLIPSIS = "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _number(value: Any) -> str:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))  # 10, not 10.0
    return str(value)


def _pointer(root: Any, ref: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node = root
    for raw in ref[2:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        else:
            return None
    return node


def _range(low: Any, high: Any, unit: str) -> str:
    if low is not None and high is not None:
        if low == high:
            return f" (exactly {_number(low)} {unit})"
        return f" ({_number(low)}-{_number(high)} {unit})"
    if low is not None:
        return f" (at least {_number(low)} {unit})"
    if high is not None:
        return f" (at most {_number(high)} {unit})"
    return ""


def _types(node: dict) -> list[str]:
    declared = node.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list) and declared:
        return [t for t in declared if isinstance(t, str)]
    if "properties" in node:
        return ["object"]
    if "items" in node:
        return ["array"]
    return ["any"]


def _description(node: Any) -> str:
    if isinstance(node, dict) and isinstance(node.get("description"), str):
        return node["description"].strip()
    return ""


class _Renderer:
    def __init__(self, root: Any) -> None:
        self.root = root

    def render(self, node: Any, depth: int = 0, refs: frozenset[str] = frozenset()) -> str:
        if node is True:
            return "any"
        if node is False:
            return "never"
        if not isinstance(node, dict):
            return "any"
        ref = node.get("$ref")
        if isinstance(ref, str):
            target = _pointer(self.root, ref)
            if ref in refs or depth > _MAX_RENDER_DEPTH or target is None:
                return ref.rsplit("/", 1)[-1] or "object"
            return self.render(target, depth + 1, refs | {ref})
        if depth > _MAX_RENDER_DEPTH:
            return _ELLIPSIS
        if isinstance(node.get("enum"), list) and node["enum"]:
            values = node["enum"]
            if len(values) == 1:
                return f"exactly {_json(values[0])}"
            return "one of " + ", ".join(_json(v) for v in values)
        if "const" in node:
            return f"exactly {_json(node['const'])}"
        for keyword, joiner in (("anyOf", " or "), ("oneOf", " or "), ("allOf", " and also ")):
            members = node.get(keyword)
            if isinstance(members, list) and members:
                return joiner.join(self.render(m, depth + 1, refs) for m in members)
        return " or ".join(self.typed(t, node, depth, refs) for t in _types(node))

    def typed(self, kind: str, node: dict, depth: int, refs: frozenset[str]) -> str:
        if kind == "object":
            return self.object(node, depth, refs)
        if kind == "array":
            items = self.render(node.get("items", True), depth + 1, refs)
            return f"[{items}, {_ELLIPSIS}]" + _range(
                node.get("minItems"), node.get("maxItems"), "items"
            )
        if kind == "string":
            text = "string"
            if isinstance(node.get("pattern"), str):
                text += f" matching /{node['pattern']}/"
            return text + _range(node.get("minLength"), node.get("maxLength"), "chars")
        if kind in ("integer", "number"):
            return kind + self.bounds(node)
        if kind == "boolean":
            return "true or false"
        return kind

    @staticmethod
    def bounds(node: dict) -> str:
        low, high = node.get("minimum"), node.get("maximum")
        if low is not None and high is not None:
            text = f" {_number(low)}-{_number(high)}"
        elif low is not None:
            text = f" >= {_number(low)}"
        elif high is not None:
            text = f" <= {_number(high)}"
        else:
            text = ""
        if node.get("exclusiveMinimum") is not None:
            text += f" > {_number(node['exclusiveMinimum'])}"
        if node.get("exclusiveMaximum") is not None:
            text += f" < {_number(node['exclusiveMaximum'])}"
        return text

    def object(self, node: dict, depth: int, refs: frozenset[str]) -> str:
        properties = node.get("properties")
        if not isinstance(properties, dict) or not properties:
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                return f"{{[key: string]: {self.render(extra, depth + 1, refs)}}}"
            return "{}"
        required = node.get("required") if isinstance(node.get("required"), list) else []
        parts = []
        for name, sub in properties.items():
            mark = "" if name in required else "?"
            text = f"{_json(name)}{mark}: {self.render(sub, depth + 1, refs)}"
            if description := _description(sub):
                already = description.startswith("(") and description.endswith(")")
                text += f" {description}" if already else f" ({description})"
            parts.append(text)
        return "{" + ", ".join(parts) + "}"


def _object_node(schema: Any) -> dict | None:
    """The schema itself, or what its top-level reference points at, when it has properties."""
    node = schema
    if isinstance(node, dict) and isinstance(node.get("$ref"), str):
        node = _pointer(schema, node["$ref"])
    if isinstance(node, dict) and isinstance(node.get("properties"), dict) and node["properties"]:
        return node
    return None


def render_inline(schema: Any) -> str:
    """``{"item": one of "ale", "stew" (menu item), "quantity": integer 1-10}``"""
    return _Renderer(schema).render(schema)


def render_fields(schema: Any) -> str:
    """One line per property (``- "quantity" (optional): integer 1-10, how many``) for an object
    schema; the one-line form for anything else."""
    node = _object_node(schema)
    if node is None:
        return render_inline(schema)
    renderer = _Renderer(schema)
    required = node.get("required") if isinstance(node.get("required"), list) else []
    lines = []
    for name, sub in node["properties"].items():
        line = f"- {_json(name)}"
        if name not in required:
            line += " (optional)"
        line += f": {renderer.render(sub, 1)}"
        if description := _description(sub):
            line += f", {description}"
        lines.append(line)
    return "\n".join(lines)


def envelope_example(tool: str, schema: Any) -> str:
    """``{"action": "take_order", "arguments": {"item": …, "quantity": …}}``: concrete, since
    small models copy abstract templates literally."""
    node = _object_node(schema)
    keys = ", ".join(f"{_json(k)}: {_ELLIPSIS}" for k in node["properties"]) if node else ""
    return f'{{"action": {_json(tool)}, "arguments": {{{keys}}}}}'

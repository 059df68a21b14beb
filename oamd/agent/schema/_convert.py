"""The schema converter: a caller's JSON Schema → the self-contained generation schema.

It owns walking the supported subset of protocol §9 (types, enums, consts, unions, ``allOf``
merges, local references as ``$defs``), closing objects with ``x-order``, spelling unenforced
constraints out in ``description`` with a warning, and the ``SchemaError`` (a JSON pointer and a
reason) for what cannot be used. Caching and the public ``CompiledSchema`` are
``oamd.agent.schema``'s.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Converter", "SchemaError"]

_MAX_DEPTH = 32
"""Deepest nesting (objects, arrays, unions, ``$ref`` hops) accepted, as in ``SchemaConverter``."""

_MAX_EXACT_INT = 2**53
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")
_STRING_NOTES = ("format", "minLength", "maxLength", "contentEncoding", "contentMediaType")
_NUMBER_NOTES = ("multipleOf",)
_ARRAY_NOTES = ("uniqueItems", "contains")
_OBJECT_NOTES = ("minProperties", "maxProperties", "patternProperties", "dependentRequired")
_NULL = {"type": "null"}


class SchemaError(Exception):
    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(reason)
        self.pointer = pointer
        self.reason = reason


@dataclass
class _Built:
    schema: dict
    nullable: bool = False


def _text(value: Any) -> str:
    """Strings as they are, anything else as compact JSON (a whole float is written as an integer)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < _MAX_EXACT_INT:
        value = int(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _number(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if isinstance(value, int) or math.isfinite(value) else None


def _exact_int(value: Any) -> int | None:
    number = _number(value)
    if number is None or abs(number) >= _MAX_EXACT_INT or number != int(number):
        return None
    return int(number)


def _join(first: str | None, second: str) -> str:
    return f"{first} {second}" if first else second


def _with_description(schema: dict, description: str | None) -> dict:
    if description:
        schema["description"] = description
    return schema


def _with_null(schema: dict) -> dict:
    """The same schema also accepting null (idempotent)."""
    t = schema.get("type")
    if "anyOf" in schema:
        if _NULL not in schema["anyOf"]:
            schema = {**schema, "anyOf": [*schema["anyOf"], dict(_NULL)]}
    elif "$ref" in schema or "const" in schema:
        inner = {k: v for k, v in schema.items() if k != "description"}
        schema = _with_description({"anyOf": [inner, dict(_NULL)]}, schema.get("description"))
    elif isinstance(t, str) and t != "null":
        schema = {**schema, "type": [t, "null"]}
        if "enum" in schema and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
    return schema


def _is_named(target: Any) -> bool:
    """Whether a ``$ref`` target can be kept as a definition (objects and unions, as in Apple)."""
    return isinstance(target, dict) and (
        "properties" in target
        or target.get("type") == "object"
        or "anyOf" in target
        or "oneOf" in target
    )


def _string_literals(choice: Any) -> list[str] | None:
    """The strings a union branch allows when it is a string ``const`` or ``enum``, else None."""
    if not isinstance(choice, dict):
        return None
    if isinstance(choice.get("const"), str):
        return [choice["const"]]
    values = choice.get("enum")
    return values if isinstance(values, list) and all(isinstance(v, str) for v in values) else None


def _is_null_choice(choice: Any) -> bool:
    return isinstance(choice, dict) and (
        choice.get("type") == "null" or ("const" in choice and choice["const"] is None)
    )


class Converter:
    """One compilation: walks the caller's schema once, in document order."""

    def __init__(self, root: dict) -> None:
        self.root = root
        self.defs: dict[str, dict] = {}
        self.warnings: list[str] = []
        self._ref_names: dict[str, str] = {}
        self._ref_nullable: dict[str, bool] = {}
        self._inlining: set[str] = set()
        self._depth = 0

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(f"{path}: {message}")

    def build(self, node: Any, path: str) -> _Built:
        self._depth += 1
        try:
            if self._depth > _MAX_DEPTH:
                raise SchemaError(
                    path, f"the schema nests or references more than {_MAX_DEPTH} levels deep"
                )
            if not isinstance(node, dict):
                if node is True:
                    self.warn(path, "unconstrained schema `true` is generated as a string")
                    return _Built({"type": "string"})
                raise SchemaError(path, "expected a schema object")
            built = self._dispatch(node, path)
            if built.nullable:
                built.schema = _with_null(built.schema)
            return built
        finally:
            self._depth -= 1

    def _dispatch(self, node: dict, path: str) -> _Built:
        description = node.get("description") if isinstance(node.get("description"), str) else None
        if isinstance(node.get("$ref"), str):
            return self._reference(node["$ref"], description, path)
        if isinstance(node.get("allOf"), list):
            return self.build(self._merge_all_of(node, node["allOf"], path), path)
        keyword = "anyOf" if "anyOf" in node else "oneOf"
        if isinstance(node.get(keyword), list):
            return self._union(keyword, node[keyword], description, path)
        if isinstance(node.get("enum"), list):
            return self._enum(node["enum"], description, path)
        if "const" in node:
            return self._const(node, description, path)
        kind, nullable = self._resolve_type(node, path)
        if kind in ("boolean", "null"):
            return _Built(
                _with_description({"type": kind}, description), nullable or kind == "null"
            )
        if kind not in ("object", "array", "string", "integer", "number"):
            raise SchemaError(path, f"unsupported type '{kind}'")
        return _Built(getattr(self, "_" + kind)(node, path), nullable)

    def _resolve_type(self, node: dict, path: str) -> tuple[str, bool]:
        declared = node.get("type", ...)
        if isinstance(declared, str):
            types = [declared]
        elif isinstance(declared, list):
            types = [t for t in declared if isinstance(t, str)]
        elif declared is not ...:
            raise SchemaError(path, "invalid 'type'")
        elif "properties" in node:
            types = ["object"]
        elif "items" in node:
            types = ["array"]
        elif "pattern" in node or "format" in node:
            types = ["string"]
        elif "minimum" in node or "maximum" in node:
            types = ["number"]
        else:
            self.warn(path, "schema without a type is generated as a string")
            types = ["string"]
        concrete = [t for t in types if t != "null"]
        if len(concrete) > 1:
            listed = ", ".join(f'"{t}"' for t in concrete)
            self.warn(path, f"multiple types [{listed}] are not supported; using '{concrete[0]}'")
        return (concrete[0] if concrete else "null"), "null" in types

    def _describe(self, node: dict, path: str, keys: tuple[str, ...]) -> str | None:
        """The description with the unenforced constraints, examples and default appended."""
        base = node.get("description") if isinstance(node.get("description"), str) else None
        notes = []
        for key in keys:
            if key in node:
                notes.append(f"{key}: {_text(node[key])}")
                self.warn(path, f"'{key}' is described to the model but not enforced")
        examples = node.get("examples")
        if isinstance(examples, list) and examples:
            notes.append("examples: " + ", ".join(_text(e) for e in examples[:3]))
        if "default" in node:
            notes.append(f"default: {_text(node['default'])}")
        return _join(base, "(" + "; ".join(notes) + ")") if notes else base

    def _object(self, node: dict, path: str) -> dict:
        declared = node.get("properties")
        properties = declared if isinstance(declared, dict) else {}
        required = node.get("required") if isinstance(node.get("required"), list) else []
        extra = node.get("additionalProperties", False)
        if not properties and extra is not False:
            self.warn(
                path,
                "free-form objects (additionalProperties without properties) cannot be "
                "generated; producing an empty object",
            )
        order = node.get("x-order") if isinstance(node.get("x-order"), list) else []
        order = list(dict.fromkeys(k for k in order if isinstance(k, str) and k in properties))
        order += [k for k in properties if k not in order]
        converted: dict[str, dict] = {}
        needed = []
        for key in order:
            child = self.build(
                properties[key], path + "/properties/" + key.replace("~", "~0").replace("/", "~1")
            )
            converted[key] = child.schema
            if key in required and not child.nullable:
                needed.append(key)
        schema = _with_description({"type": "object"}, self._describe(node, path, _OBJECT_NOTES))
        schema["properties"] = converted
        if needed:
            schema["required"] = needed
        schema["x-order"] = order
        if isinstance(declared, dict):
            schema["additionalProperties"] = False
        return schema

    def _array(self, node: dict, path: str) -> dict:
        items, items_path = node.get("items", ...), f"{path}/items"
        prefix = node.get("prefixItems")
        if items is ... and isinstance(prefix, list) and prefix:
            self.warn(
                path, "tuple arrays (prefixItems) are generated as arrays of the first item type"
            )
            items, items_path = prefix[0], f"{path}/prefixItems/0"
        if items is ...:
            self.warn(path, "array without 'items' is generated as an array of strings")
            item_schema = {"type": "string"}
        else:
            item_schema = self.build(items, items_path).schema
        schema = _with_description({"type": "array"}, self._describe(node, path, _ARRAY_NOTES))
        schema["items"] = item_schema
        for key in ("minItems", "maxItems"):
            if (count := _exact_int(node.get(key))) is not None and count >= 0:
                schema[key] = count
        return schema

    def _string(self, node: dict, path: str) -> dict:
        description = self._describe(node, path, _STRING_NOTES)
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            # The on-device model rejects most regex guides, so patterns are described instead.
            self.warn(path, f"pattern '{pattern}' is described to the model but not enforced")
            description = _join(description, f"Must match pattern {pattern}.")
        return _with_description({"type": "string"}, description)

    def _integer(self, node: dict, path: str) -> dict:
        low, high = _number(node.get("minimum")), _number(node.get("maximum"))
        low = None if low is None else math.ceil(low)
        high = None if high is None else math.floor(high)
        if (bound := _number(node.get("exclusiveMinimum"))) is not None:
            low = math.floor(bound) + 1 if low is None else max(low, math.floor(bound) + 1)
        if (bound := _number(node.get("exclusiveMaximum"))) is not None:
            high = math.ceil(bound) - 1 if high is None else min(high, math.ceil(bound) - 1)
        return self._ranged("integer", low, high, node, path)

    def _number(self, node: dict, path: str) -> dict:
        low = _number(node.get("minimum"))
        low = _number(node.get("exclusiveMinimum")) if low is None else low
        high = _number(node.get("maximum"))
        high = _number(node.get("exclusiveMaximum")) if high is None else high
        if "exclusiveMinimum" in node or "exclusiveMaximum" in node:
            self.warn(path, "exclusive number bounds are enforced as inclusive")
        return self._ranged("number", low, high, node, path)

    def _ranged(self, kind: str, low: Any, high: Any, node: dict, path: str) -> dict:
        if low is not None and high is not None and low > high:
            self.warn(path, f"empty {kind} range is ignored")
            low = high = None
        schema = _with_description({"type": kind}, self._describe(node, path, _NUMBER_NOTES))
        if low is not None:
            schema["minimum"] = low
        if high is not None:
            schema["maximum"] = high
        return schema

    def _enum(self, values: list, description: str | None, path: str) -> _Built:
        nullable = any(v is None for v in values)
        concrete = [v for v in values if v is not None]
        if not concrete:
            return _Built(_with_description({"type": "null"}, description), True)
        if all(isinstance(v, str) for v in concrete):
            choices = list(dict.fromkeys(concrete))
        elif all(_exact_int(v) is not None for v in concrete):
            ints = [_exact_int(v) for v in concrete]
            low, high = min(ints), max(ints)
            self.warn(
                path,
                f"integer enum is enforced as a range {low}...{high}; exact values are described",
            )
            listed = _join(description, "One of: " + ", ".join(map(str, ints)) + ".")
            schema = {"type": "integer", "description": listed, "minimum": low, "maximum": high}
            return _Built(schema, nullable)
        else:
            self.warn(path, "mixed-type enum is generated as strings")
            choices = list(dict.fromkeys(_text(v) for v in concrete))
        schema = _with_description({"type": "string"}, description)
        schema["enum"] = choices
        return _Built(schema, nullable)

    def _const(self, node: dict, description: str | None, path: str) -> _Built:
        constant = node["const"]
        if isinstance(constant, str):
            schema = _with_description({"type": "string"}, description)
            schema["const"] = constant
            return _Built(schema)
        self.warn(path, f"non-string const {_text(constant)} is described instead of enforced")
        rest = {k: v for k, v in node.items() if k != "const"}
        rest["description"] = _join(description, f"Must be exactly {_text(constant)}.")
        return self.build(rest, path)

    def _union(self, keyword: str, choices: list, description: str | None, path: str) -> _Built:
        nullable = any(_is_null_choice(c) for c in choices)
        concrete = [(i, c) for i, c in enumerate(choices) if not _is_null_choice(c)]
        if not concrete:
            return _Built(_with_description({"type": "null"}, description), True)
        if len(concrete) == 1:
            index, single = concrete[0]
            if isinstance(single, dict) and "description" not in single and description:
                single = {**single, "description": description}
            built = self.build(single, f"{path}/{keyword}/{index}")
            if nullable and not built.nullable:
                built = _Built(_with_null(built.schema), True)
            return built
        literals = [_string_literals(choice) for _, choice in concrete]
        if all(values is not None for values in literals):  # one string enum
            schema = _with_description({"type": "string"}, description)
            schema["enum"] = list(dict.fromkeys(v for values in literals for v in values))
            return _Built(schema, nullable)
        branches = [self.build(c, f"{path}/{keyword}/{i}").schema for i, c in concrete]
        return _Built(_with_description({"anyOf": branches}, description), nullable)

    def _merge_all_of(self, node: dict, parts: list, path: str) -> dict:
        merged = {k: v for k, v in node.items() if k != "allOf"}
        own = merged.get("properties")
        properties = dict(own) if isinstance(own, dict) else {}
        required = list(merged["required"]) if isinstance(merged.get("required"), list) else []
        for index, part in enumerate(parts):
            resolved = part
            if isinstance(part, dict) and isinstance(part.get("$ref"), str):
                resolved = self._pointer(part["$ref"], path)
            if not isinstance(resolved, dict):
                raise SchemaError(f"{path}/allOf/{index}", "expected a schema object")
            if isinstance(resolved.get("properties"), dict):
                properties.update(resolved["properties"])
            if isinstance(resolved.get("required"), list):
                required.extend(resolved["required"])
            for key, value in resolved.items():
                if key not in ("properties", "required") and key not in merged:
                    merged[key] = value
        if properties:
            merged["type"] = "object"
            merged["properties"] = properties
        if required:
            merged["required"] = required
        return merged

    def _reference(self, ref: str, description: str | None, path: str) -> _Built:
        recursive = f"recursive $ref '{ref}' must point to an object or union schema"
        if ref == "#":
            if not _is_named(self.root):
                raise SchemaError(path, recursive)
            return _Built(_with_description({"$ref": "#"}, description))
        target = self._pointer(ref, path)
        if not _is_named(target):  # strings, numbers and arrays are inlined at each use
            if ref in self._inlining:
                raise SchemaError(path, recursive)
            self._inlining.add(ref)
            try:
                built = self.build(target, ref)
            finally:
                self._inlining.discard(ref)
            if description and "description" not in built.schema:
                built.schema = {**built.schema, "description": description}
            return built
        name = self._ref_names.get(ref)
        if name is None:
            name = self._unique_name(ref.rsplit("/", 1)[-1])
            self._ref_names[ref] = name  # registered first, so recursion ends at this reference
            self.defs[name] = {}
            built = self.build(target, ref)
            self.defs[name] = built.schema
            self._ref_nullable[ref] = built.nullable
        schema = _with_description({"$ref": f"#/$defs/{name}"}, description)
        return _Built(schema, self._ref_nullable.get(ref, False))

    def _pointer(self, ref: str, path: str) -> Any:
        if not ref.startswith("#/"):
            raise SchemaError(path, f"only local $ref values are supported, got '{ref}'")
        node: Any = self.root
        for raw in ref[2:].split("/"):
            token = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdecimal() and int(token) < len(node):
                node = node[int(token)]
            else:
                raise SchemaError(path, f"unresolvable $ref '{ref}'")
        return node

    def _unique_name(self, proposed: str) -> str:
        base = _NAME_CHARS.sub("_", proposed) or "Schema"
        if base[0].isdigit():
            base = "_" + base
        name, counter = base, 2
        while name in self.defs:
            name, counter = f"{base}{counter}", counter + 1
        return name

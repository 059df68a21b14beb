"""The JSON Schema engine: turns a caller's schema into the generation schema the daemon generates with.

It owns compiling (the supported subset of protocol §9, the same as Apple's ``SchemaConverter`` in the
open-apple-models bridge), the warnings for what cannot be enforced, the ``InvalidSchema`` errors for
what cannot be used, and the compile cache. Checking, repairing and ordering model output against the
result is delegated to ``_coerce``, the conversion itself to ``_convert``, and rendering a schema
as prompt text to ``_prompt_text`` (re-exported here for the envelope loop's prompts);
constraining decoding is left to the backends, which read ``generation``.
"""

from __future__ import annotations

__all__ = [
    "EMPTY_OBJECT_SCHEMA",
    "CompiledSchema",
    "compile_schema",
    "envelope_example",
    "render_fields",
    "render_inline",
]

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson

from oamd.agent.schema._coerce import coerce_value, order_value, validate_value
from oamd.agent.schema._convert import Converter, SchemaError
from oamd.agent.schema._prompt_text import envelope_example, render_fields, render_inline
from oamd.errors import InvalidSchema
from oamd.jsonvalue import JsonTextError, loads_embedded

EMPTY_OBJECT_SCHEMA: dict = {"type": "object", "properties": {}}
"""The parameters of a tool with no arguments."""

_CACHE_SIZE = 256
"""Compiled schemas kept; a turn reuses its structured-output and tool schemas."""


@dataclass(frozen=True)
class CompiledSchema:
    """A compiled schema. Shared through the cache: treat every member as read-only.

    ``generation`` is self-contained JSON Schema: objects that declare properties are closed
    (``additionalProperties: false``) and carry ``x-order``; recursive or shared object and union
    definitions sit under ``$defs``; constraints that are not enforced are spelled out in
    ``description``.
    """

    source: dict
    generation: dict
    warnings: list[str] = field(default_factory=list)

    def validate(self, value: Any) -> list[str]:
        """Problems of ``value`` as ``"$.a[0]: message"``, [] when it matches the generation schema."""
        return validate_value(value, self.generation, self.generation)

    def coerce(self, value: Any) -> Any:
        """Repairs near misses (numeric strings, enum spelling, key spelling…); never raises."""
        return coerce_value(value, self.generation, self.generation)

    def order(self, value: Any) -> Any:
        """Returns ``value`` with object keys in schema property order (unknown keys last)."""
        return order_value(value, self.generation, self.generation)

    def accept(self, value: Any) -> tuple[Any, list[str]]:
        """A model's value as the turn keeps it: coerced, checked and, when it matches, in
        schema order with no problems; otherwise coerced as it stands, with its problems."""
        coerced = self.coerce(value)
        problems = self.validate(coerced)
        return (coerced, problems) if problems else (self.order(coerced), [])


def compile_schema(schema: Any, path: str = "schema") -> CompiledSchema:
    """Compiles a schema given as a dict or as JSON text holding an object.

    ``path`` names the parameter in errors (``'schema'``, ``'tools[0].parameters'``).

    Raises:
        InvalidSchema: the schema cannot be used; ``data.path`` and ``data.schemaPath`` locate it.
    """
    try:
        return _compile_text(_canonical(schema))
    except SchemaError as exc:
        raise InvalidSchema(
            f"{path}: {exc.reason} (at {exc.pointer})", path=path, schemaPath=exc.pointer
        ) from None


def _canonical(schema: Any) -> bytes | str:
    """The JSON text of a schema object, in document order: property order is part of its meaning."""
    if isinstance(schema, str):
        try:
            schema = loads_embedded(schema)
        except JsonTextError:
            schema = None
    if isinstance(schema, dict):
        try:
            return orjson.dumps(schema)
        except TypeError:  # integers past 64 bits, deep nesting, non-string keys
            pass
        try:
            return json.dumps(schema, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            pass
    raise SchemaError("#", "expected a schema object")


@lru_cache(maxsize=_CACHE_SIZE)
def _compile_text(text: bytes | str) -> CompiledSchema:
    return _compile(orjson.loads(text) if isinstance(text, bytes) else json.loads(text))


def _compile(source: dict) -> CompiledSchema:
    converter = Converter(source)
    generation = converter.build(source, "#").schema
    if converter.defs:
        generation = {**generation, "$defs": converter.defs}
    return CompiledSchema(source, generation, converter.warnings)

"""The schema engine: generation schemas, warnings, errors, validation, coercion and key order."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from oamd.agent.schema import EMPTY_OBJECT_SCHEMA, CompiledSchema, compile_schema
from oamd.errors import InvalidSchema


def obj(required: list[str] | None = None, **properties: dict) -> dict:
    schema: dict = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return schema


def warnings_of(schema: dict) -> list[str]:
    return compile_schema(schema).warnings


def invalid(schema, path: str = "schema") -> InvalidSchema:
    with pytest.raises(InvalidSchema) as info:
        compile_schema(schema, path)
    return info.value


# --- generation schema --------------------------------------------------------------------------


def test_supported_schema_compiles_without_warnings_into_a_closed_ordered_object():
    compiled = compile_schema(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "urn:x",
            "$comment": "c",
            "title": "Order",
            "type": "object",
            "properties": {
                "item": {"type": "string", "description": "What", "examples": ["stew"]},
                "quantity": {"type": "integer", "minimum": 1, "maximum": 9, "default": 1},
                "price": {"type": "number", "minimum": 0.5, "deprecated": True},
                "paid": {"type": "boolean", "readOnly": True, "writeOnly": False},
            },
            "required": ["item", "quantity"],
        }
    )
    assert compiled.warnings == []
    assert compiled.generation == {
        "type": "object",
        "properties": {
            "item": {"type": "string", "description": "What (examples: stew)"},
            "quantity": {
                "type": "integer",
                "description": "(default: 1)",
                "minimum": 1,
                "maximum": 9,
            },
            "price": {"type": "number", "minimum": 0.5},
            "paid": {"type": "boolean"},
        },
        "required": ["item", "quantity"],
        "x-order": ["item", "quantity", "price", "paid"],
        "additionalProperties": False,
    }
    Draft202012Validator.check_schema(compiled.generation)


def test_every_object_with_properties_is_closed_even_when_additional_properties_are_allowed():
    compiled = compile_schema(
        {
            "type": "object",
            "properties": {"inner": obj(a={"type": "string"})},
            "additionalProperties": True,
        }
    )
    assert compiled.warnings == []
    assert compiled.generation["additionalProperties"] is False
    assert compiled.generation["properties"]["inner"]["additionalProperties"] is False
    assert compiled.validate({"inner": {"a": "x", "b": 1}}) == [
        '$.inner: unexpected property "b" (allowed: "a")'
    ]


def test_property_order_follows_the_document_and_a_given_x_order_first():
    plain = compile_schema(obj(b={"type": "string"}, a={"type": "string"}, c={"type": "string"}))
    assert plain.generation["x-order"] == ["b", "a", "c"]
    ordered = compile_schema(
        {**obj(b={"type": "string"}, a={"type": "string"}, c={"type": "string"}), "x-order": ["c"]}
    )
    assert ordered.generation["x-order"] == ["c", "b", "a"]
    assert list(ordered.generation["properties"]) == ["c", "b", "a"]


def test_schemas_differing_only_in_property_order_compile_to_different_orders():
    first = compile_schema(obj(a={"type": "string"}, b={"type": "string"}))
    second = compile_schema(obj(b={"type": "string"}, a={"type": "string"}))
    assert first.generation["x-order"] == ["a", "b"]
    assert second.generation["x-order"] == ["b", "a"]


def test_equal_schemas_share_one_compilation_whose_source_is_a_private_copy():
    schema = obj(a={"type": "string"})
    first = compile_schema(schema)
    schema["properties"]["a"]["type"] = "integer"
    assert compile_schema(obj(a={"type": "string"})) is first
    assert first.source == obj(a={"type": "string"})
    assert isinstance(first, CompiledSchema)


def test_a_json_string_holding_an_object_compiles_like_the_object():
    text = '{"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}}'
    compiled = compile_schema(text)
    assert compiled.generation["x-order"] == ["z", "a"]
    assert compiled.source == json.loads(text)
    assert compiled.validate({"z": "x", "a": 1}) == []


def test_the_empty_object_schema_accepts_only_an_empty_object():
    compiled = compile_schema(EMPTY_OBJECT_SCHEMA)
    assert compiled.warnings == []
    assert compiled.validate({}) == []
    assert compiled.validate({"a": 1}) == ['$: unexpected property "a" (no properties are allowed)']


def test_string_enum_and_const_are_enforced():
    compiled = compile_schema(obj(mood={"enum": ["happy", "sad"]}, kind={"const": "order"}))
    assert compiled.warnings == []
    assert compiled.generation["properties"]["mood"] == {"type": "string", "enum": ["happy", "sad"]}
    assert compiled.generation["properties"]["kind"] == {"type": "string", "const": "order"}
    assert compiled.validate({"mood": "happy", "kind": "order"}) == []
    assert compiled.validate({"mood": "angry", "kind": "chaos"}) == [
        '$.mood: must be one of ["happy", "sad"]; got "angry"',
        '$.kind: must be exactly "order"; got "chaos"',
    ]


def test_a_union_of_string_literals_becomes_one_string_enum():
    compiled = compile_schema({"anyOf": [{"const": "a"}, {"enum": ["b", "a"]}, {"type": "null"}]})
    assert compiled.warnings == []
    assert compiled.generation == {"type": ["string", "null"], "enum": ["a", "b", None]}


def test_any_of_and_one_of_branches_are_generated_as_any_of():
    compiled = compile_schema(
        {"oneOf": [{"type": "string"}, obj(["n"], n={"type": "integer"})], "description": "Pick"}
    )
    assert compiled.generation == {
        "description": "Pick",
        "anyOf": [
            {"type": "string"},
            {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
                "x-order": ["n"],
                "additionalProperties": False,
            },
        ],
    }
    assert compiled.validate("x") == []
    assert compiled.validate({"n": 1}) == []
    assert compiled.validate(2) == ["$: expected a string or an object, got a number (2)"]
    assert compiled.validate({}) == ['$: missing required property "n"']


# --- nullable forms -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        {"type": ["string", "null"]},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"oneOf": [{"type": "null"}, {"type": "string"}]},
        {"anyOf": [{"type": "string"}, {"const": None}]},
    ],
)
def test_nullable_forms_accept_null_and_make_the_property_optional(schema):
    compiled = compile_schema(obj(["v"], v=schema))
    assert compiled.warnings == []
    assert compiled.generation["properties"]["v"] == {"type": ["string", "null"]}
    assert "required" not in compiled.generation
    assert compiled.validate({"v": None}) == []
    assert compiled.validate({"v": "x"}) == []
    assert compiled.validate({}) == []
    assert compiled.validate({"v": 1}) == ["$.v: expected a string or null, got a number (1)"]


def test_a_nullable_enum_accepts_null_but_no_other_value():
    compiled = compile_schema({"enum": ["a", None]})
    assert compiled.generation == {"type": ["string", "null"], "enum": ["a", None]}
    assert compiled.validate(None) == []
    assert compiled.validate("b") == ['$: must be one of ["a", null]; got "b"']


def test_the_null_type_accepts_only_null():
    compiled = compile_schema({"type": "null"})
    assert compiled.generation == {"type": "null"}
    assert compiled.validate(None) == []
    assert compiled.validate(0) == ["$: expected null, got a number (0)"]


def test_a_nullable_reference_is_wrapped_in_any_of_with_null():
    compiled = compile_schema(
        {**obj(p={"anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}]}), "$defs": {"P": obj()}}
    )
    assert compiled.generation["properties"]["p"] == {
        "anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}]
    }
    assert compiled.validate({"p": None}) == []
    assert compiled.validate({"p": {}}) == []


# --- references and allOf -----------------------------------------------------------------------


def test_object_references_into_defs_are_kept_as_definitions():
    compiled = compile_schema(
        {
            **obj(home={"$ref": "#/$defs/Place"}, work={"$ref": "#/$defs/Place"}),
            "$defs": {"Place": obj(["name"], name={"type": "string"})},
        }
    )
    assert compiled.warnings == []
    props = compiled.generation["properties"]
    assert props["home"] == props["work"] == {"$ref": "#/$defs/Place"}
    assert compiled.generation["$defs"]["Place"]["required"] == ["name"]
    assert compiled.validate({"home": {"name": "inn"}, "work": {}}) == [
        '$.work: missing required property "name"'
    ]


def test_references_into_definitions_and_escaped_pointers_resolve():
    compiled = compile_schema(
        {
            **obj(a={"$ref": "#/definitions/a~1b"}, b={"$ref": "#/definitions/Level"}),
            "definitions": {"a/b": {"type": "integer"}, "Level": {"enum": ["low", "high"]}},
        }
    )
    assert compiled.warnings == []
    assert compiled.generation["properties"]["a"] == {"type": "integer"}
    assert compiled.generation["properties"]["b"] == {"type": "string", "enum": ["low", "high"]}
    assert "$defs" not in compiled.generation


def test_a_reference_to_a_non_object_is_inlined_and_warns_at_the_definition():
    compiled = compile_schema(
        {**obj(code={"$ref": "#/$defs/Code"}), "$defs": {"Code": {"type": "string", "format": "x"}}}
    )
    assert compiled.warnings == [
        "#/$defs/Code: 'format' is described to the model but not enforced"
    ]
    assert compiled.generation["properties"]["code"] == {
        "type": "string",
        "description": "(format: x)",
    }


def test_recursive_object_references_compile_and_validate_nested_values():
    compiled = compile_schema(
        {
            **obj(["value"], value={"type": "integer"}, next={"$ref": "#/$defs/Node"}),
            "$defs": {
                "Node": obj(
                    ["value"],
                    value={"type": "integer"},
                    next={"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]},
                )
            },
        }
    )
    node = compiled.generation["$defs"]["Node"]
    assert node["properties"]["next"] == {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}
    Draft202012Validator.check_schema(compiled.generation)
    assert compiled.validate({"value": 1, "next": {"value": 2, "next": {"value": 3}}}) == []
    assert compiled.validate({"value": 1, "next": {"value": 2, "next": {"value": "x"}}}) == [
        '$.next.next.value: expected an integer, got a string ("x")'
    ]


def test_a_reference_to_the_root_object_recurses():
    compiled = compile_schema(obj(["name"], name={"type": "string"}, child={"$ref": "#"}))
    assert compiled.generation["properties"]["child"] == {"$ref": "#"}
    assert compiled.validate({"name": "a", "child": {"name": "b", "child": {}}}) == [
        '$.child.child: missing required property "name"'
    ]


def test_all_of_objects_are_merged_with_their_properties_and_required_keys():
    compiled = compile_schema(
        {
            "allOf": [
                {"$ref": "#/$defs/Named"},
                obj(["age"], age={"type": "integer"}),
            ],
            "description": "A person",
            "$defs": {"Named": obj(["name"], name={"type": "string"})},
        }
    )
    generation = compiled.generation
    assert generation["description"] == "A person"
    assert generation["x-order"] == ["name", "age"]
    assert generation["required"] == ["name", "age"]
    assert generation["additionalProperties"] is False
    assert compiled.validate({"name": "x"}) == ['$: missing required property "age"']


# --- warnings -----------------------------------------------------------------------------------


def test_pattern_is_warned_and_described_but_not_enforced():
    compiled = compile_schema(obj(code={"type": "string", "pattern": "^[A-Z]{3}$"}))
    assert compiled.warnings == [
        "#/properties/code: pattern '^[A-Z]{3}$' is described to the model but not enforced"
    ]
    description = compiled.generation["properties"]["code"]["description"]
    assert description == "Must match pattern ^[A-Z]{3}$."
    assert compiled.validate({"code": "lowercase"}) == []


@pytest.mark.parametrize(
    ("keyword", "schema", "value"),
    [
        ("format", {"type": "string", "format": "email"}, "x"),
        ("minLength", {"type": "string", "minLength": 3}, "x"),
        ("maxLength", {"type": "string", "maxLength": 1}, "xyz"),
        ("contentEncoding", {"type": "string", "contentEncoding": "base64"}, "!"),
        ("contentMediaType", {"type": "string", "contentMediaType": "text/html"}, "x"),
        ("multipleOf", {"type": "integer", "multipleOf": 5}, 3),
        ("multipleOf", {"type": "number", "multipleOf": 0.5}, 0.3),
        (
            "uniqueItems",
            {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
            [1, 1],
        ),
        (
            "contains",
            {"type": "array", "items": {"type": "integer"}, "contains": {"const": 2}},
            [1],
        ),
        ("minProperties", {**obj(a={"type": "string"}), "minProperties": 1}, {}),
        ("maxProperties", {**obj(a={"type": "string"}), "maxProperties": 0}, {"a": "x"}),
        ("patternProperties", {**obj(), "patternProperties": {"^x": {}}}, {}),
        ("dependentRequired", {**obj(a={"type": "string"}), "dependentRequired": {"a": ["b"]}}, {}),
    ],
)
def test_unenforced_keywords_are_warned_and_described_but_not_enforced(keyword, schema, value):
    compiled = compile_schema(obj(v=schema))
    assert compiled.warnings == [
        f"#/properties/v: '{keyword}' is described to the model but not enforced"
    ]
    assert f"({keyword}: " in compiled.generation["properties"]["v"]["description"]
    assert compiled.validate({"v": value}) == []


def test_a_schema_without_a_type_is_generated_as_a_string():
    compiled = compile_schema(obj(note={"description": "Anything"}))
    assert compiled.warnings == [
        "#/properties/note: schema without a type is generated as a string"
    ]
    assert compiled.generation["properties"]["note"] == {
        "type": "string",
        "description": "Anything",
    }


@pytest.mark.parametrize(
    ("schema", "kind"),
    [
        ({"items": {"type": "string"}}, "array"),
        ({"pattern": "^a"}, "string"),
        ({"minimum": 0}, "number"),
        ({"properties": {}}, "object"),
    ],
)
def test_a_schema_without_a_type_takes_the_type_its_keywords_imply(schema, kind):
    compiled = compile_schema(obj(v=schema))
    assert compiled.generation["properties"]["v"]["type"] == kind
    assert not any("without a type" in w for w in compiled.warnings)


def test_multiple_types_use_the_first_one_with_a_warning():
    compiled = compile_schema({"type": ["string", "integer", "null"]})
    assert compiled.warnings == [
        '#: multiple types ["string", "integer"] are not supported; using \'string\''
    ]
    assert compiled.generation == {"type": ["string", "null"]}


def test_the_true_schema_is_generated_as_a_string():
    compiled = compile_schema(obj(anything=True))
    assert compiled.warnings == [
        "#/properties/anything: unconstrained schema `true` is generated as a string"
    ]
    assert compiled.generation["properties"]["anything"] == {"type": "string"}


def test_a_non_string_const_is_described_instead_of_enforced():
    compiled = compile_schema(obj(version={"const": 2, "type": "integer"}))
    assert compiled.warnings == [
        "#/properties/version: non-string const 2 is described instead of enforced"
    ]
    assert compiled.generation["properties"]["version"] == {
        "type": "integer",
        "description": "Must be exactly 2.",
    }
    assert compiled.validate({"version": 3}) == []


def test_free_form_objects_are_generated_as_empty_objects_with_a_warning():
    compiled = compile_schema(
        obj(meta={"type": "object", "additionalProperties": {"type": "string"}})
    )
    assert compiled.warnings == [
        "#/properties/meta: free-form objects (additionalProperties without properties) cannot be "
        "generated; producing an empty object"
    ]
    assert compiled.generation["properties"]["meta"] == {
        "type": "object",
        "properties": {},
        "x-order": [],
    }


def test_tuple_arrays_use_the_first_item_type_with_a_warning():
    compiled = compile_schema(
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]}
    )
    assert compiled.warnings == [
        "#: tuple arrays (prefixItems) are generated as arrays of the first item type"
    ]
    assert compiled.generation == {"type": "array", "items": {"type": "integer"}}


def test_an_array_without_items_is_an_array_of_strings_with_a_warning():
    compiled = compile_schema({"type": "array", "maxItems": 2})
    assert compiled.warnings == ["#: array without 'items' is generated as an array of strings"]
    assert compiled.generation == {"type": "array", "items": {"type": "string"}, "maxItems": 2}
    assert compiled.validate(["a", "b", "c"]) == ["$: must have at most 2 item(s); got 3"]


@pytest.mark.parametrize("kind", ["integer", "number"])
def test_an_empty_range_is_ignored_with_a_warning(kind):
    compiled = compile_schema({"type": kind, "minimum": 5, "maximum": 1})
    assert compiled.warnings == [f"#: empty {kind} range is ignored"]
    assert compiled.generation == {"type": kind}
    assert compiled.validate(100) == []


def test_exclusive_number_bounds_are_enforced_as_inclusive_with_a_warning():
    compiled = compile_schema({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})
    assert compiled.warnings == ["#: exclusive number bounds are enforced as inclusive"]
    assert compiled.generation == {"type": "number", "minimum": 0, "maximum": 1}
    assert compiled.validate(0) == []
    assert compiled.validate(1.5) == ["$: must be at most 1; got 1.5"]


def test_exclusive_integer_bounds_become_exact_inclusive_bounds_silently():
    compiled = compile_schema({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10.5})
    assert compiled.warnings == []
    assert compiled.generation == {"type": "integer", "minimum": 1, "maximum": 10}


def test_integer_enum_is_enforced_as_a_range_and_its_values_described():
    compiled = compile_schema({"enum": [3, 1, 2.0], "description": "Stars"})
    assert compiled.warnings == [
        "#: integer enum is enforced as a range 1...3; exact values are described"
    ]
    assert compiled.generation == {
        "type": "integer",
        "description": "Stars One of: 3, 1, 2.",
        "minimum": 1,
        "maximum": 3,
    }
    assert compiled.validate(2) == []
    assert compiled.validate(4) == ["$: must be at most 3; got 4"]


def test_mixed_type_enum_is_generated_as_strings_with_a_warning():
    compiled = compile_schema({"enum": ["a", 1, True]})
    assert compiled.warnings == ["#: mixed-type enum is generated as strings"]
    assert compiled.generation == {"type": "string", "enum": ["a", "1", "true"]}
    assert compiled.coerce(1) == "1"


def test_warnings_come_in_document_order():
    compiled = compile_schema(
        obj(
            a={"type": "string", "format": "date"},
            b={"type": "array"},
            c={"type": "integer", "minimum": 3, "maximum": 2},
        )
    )
    assert [w.split(":")[0] for w in compiled.warnings] == [
        "#/properties/a",
        "#/properties/b",
        "#/properties/c",
    ]


# --- errors -------------------------------------------------------------------------------------


def test_an_unsupported_type_names_the_parameter_and_the_pointer():
    error = invalid({"type": "quaternion"})
    assert error.message == "schema: unsupported type 'quaternion' (at #)"
    assert error.data == {"path": "schema", "schemaPath": "#"}
    assert error.name == "invalid_schema"


def test_a_tool_parameters_error_carries_the_tool_path():
    error = invalid({"type": "wat"}, "tools[0].parameters")
    assert error.message == "tools[0].parameters: unsupported type 'wat' (at #)"
    assert error.data == {"path": "tools[0].parameters", "schemaPath": "#"}


@pytest.mark.parametrize(
    ("schema", "reason", "pointer"),
    [
        (obj(a={"type": 3}), "invalid 'type'", "#/properties/a"),
        (obj(a={"type": None}), "invalid 'type'", "#/properties/a"),
        (obj(a=False), "expected a schema object", "#/properties/a"),
        (
            obj(a={"type": "array", "items": [{"type": "string"}]}),
            "expected a schema object",
            "#/properties/a/items",
        ),
        ({"allOf": [obj(), 3]}, "expected a schema object", "#/allOf/1"),
        (
            obj(a={"$ref": "other.json#/x"}),
            "only local $ref values are supported, got 'other.json#/x'",
            "#/properties/a",
        ),
        (
            obj(a={"$ref": "#/$defs/Missing"}),
            "unresolvable $ref '#/$defs/Missing'",
            "#/properties/a",
        ),
        (
            {
                **obj(a={"$ref": "#/$defs/L"}),
                "$defs": {"L": {"type": "array", "items": {"$ref": "#/$defs/L"}}},
            },
            "recursive $ref '#/$defs/L' must point to an object or union schema",
            "#/$defs/L/items",
        ),
        (
            {"type": "array", "items": {"$ref": "#"}},
            "recursive $ref '#' must point to an object or union schema",
            "#/items",
        ),
    ],
)
def test_unusable_schemas_fail_with_the_reason_and_its_pointer(schema, reason, pointer):
    error = invalid(schema)
    assert error.message == f"schema: {reason} (at {pointer})"
    assert error.data == {"path": "schema", "schemaPath": pointer}


@pytest.mark.parametrize("schema", [None, 3, [], "not json", "[1]", "true", True])
def test_anything_but_an_object_or_its_json_text_is_not_a_schema(schema):
    error = invalid(schema)
    assert error.message == "schema: expected a schema object (at #)"
    assert error.data == {"path": "schema", "schemaPath": "#"}


def test_a_schema_that_is_not_plain_json_is_not_a_schema():
    error = invalid({"type": "object", "properties": {"a": {"enum": {1, 2}}}})
    assert error.message == "schema: expected a schema object (at #)"


def test_integers_past_64_bits_are_kept_exactly():
    compiled = compile_schema({"type": "integer", "maximum": 10**30})
    assert compiled.generation == {"type": "integer", "maximum": 10**30}
    assert compiled.validate(10**31) == [f"$: must be at most {10**30}; got {10**31}"]


def test_warning_pointers_escape_slashes_and_tildes_in_property_names():
    compiled = compile_schema(obj(**{"a/b~c": {"type": "array"}}))
    assert compiled.warnings == [
        "#/properties/a~1b~0c: array without 'items' is generated as an array of strings"
    ]


def nested(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels - 1):
        schema = obj(a=schema)
    return schema


def test_nesting_of_exactly_32_levels_is_accepted():
    compile_schema(nested(32))


def test_nesting_deeper_than_32_levels_is_rejected():
    error = invalid(nested(33))
    pointer = "#" + "/properties/a" * 32
    assert error.message == (
        f"schema: the schema nests or references more than 32 levels deep (at {pointer})"
    )
    assert error.data["schemaPath"] == pointer


# --- validation ---------------------------------------------------------------------------------


ORDER = obj(
    ["item", "quantity"],
    item={"type": "string"},
    quantity={"type": "integer", "minimum": 1, "maximum": 9},
    paid={"type": "boolean"},
    tags={"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
    size={"enum": ["small", "large"]},
    lines={
        "type": "array",
        "items": obj(["sku"], sku={"type": "string"}, **{"unit price": {"type": "number"}}),
    },
)


def test_a_valid_value_has_no_problems():
    compiled = compile_schema(ORDER)
    value = {"item": "stew", "quantity": 2, "paid": False, "tags": ["hot"], "lines": [{"sku": "s"}]}
    assert compiled.validate(value) == []
    assert compiled.validate({"item": "stew", "quantity": 2.0}) == []


def test_validation_problems_name_the_path_and_say_what_was_expected():
    compiled = compile_schema(ORDER)
    problems = compiled.validate(
        {
            "quantity": 2.5,
            "paid": 1,
            "tags": [],
            "size": "huge",
            "lines": [{"sku": "a"}, {"unit price": "x"}],
            "extra": None,
        }
    )
    assert problems == [
        '$: missing required property "item"',
        "$.quantity: expected an integer, got a number (2.5)",
        "$.paid: expected a boolean, got a number (1)",
        "$.tags: must have at least 1 item(s); got 0",
        '$.size: must be one of ["small", "large"]; got "huge"',
        '$.lines[1]: missing required property "sku"',
        '$.lines[1]["unit price"]: expected a number, got a string ("x")',
        '$: unexpected property "extra" (allowed: "item", "quantity", "paid", "tags", "size", "lines")',
    ]


def test_booleans_are_not_numbers_and_bounds_are_inclusive():
    compiled = compile_schema({"type": "integer", "minimum": 1, "maximum": 3})
    assert compiled.validate(True) == ["$: expected an integer, got a boolean (true)"]
    assert compiled.validate(1) == compiled.validate(3) == []
    assert compiled.validate(0) == ["$: must be at least 1; got 0"]


def test_long_values_are_cut_in_problem_messages():
    problem = compile_schema({"type": "integer"}).validate("x" * 100)[0]
    assert problem == '$: expected an integer, got a string ("' + "x" * 56 + "…)"


def test_a_value_close_to_several_alternatives_names_the_closest():
    compiled = compile_schema(
        {
            "anyOf": [
                obj(["a", "b"], a={"type": "string"}, b={"type": "string"}),
                obj(["c"], c={"type": "string"}),
            ]
        }
    )
    assert compiled.validate({"a": "x"}) == [
        "$: does not match any of the 2 allowed alternatives"
        ' (closest: $: missing required property "b")'
    ]


# --- coercion -----------------------------------------------------------------------------------


def test_numeric_strings_become_numbers():
    compiled = compile_schema(obj(n={"type": "integer"}, x={"type": "number"}))
    assert compiled.coerce({"n": "3", "x": "2.5"}) == {"n": 3, "x": 2.5}
    assert compiled.coerce({"n": " 4.0 ", "x": "7"}) == {"n": 4, "x": 7}
    assert compiled.coerce({"n": "2.5", "x": "many"}) == {"n": "2.5", "x": "many"}


def test_true_and_false_strings_become_booleans():
    compiled = compile_schema({"type": "array", "items": {"type": "boolean"}})
    assert compiled.coerce(["true", " FALSE ", "yes", 1]) == [True, False, "yes", 1]


def test_enum_values_match_ignoring_case_and_separators():
    compiled = compile_schema({"enum": ["raise_alarm", "Stand Down", "wait"]})
    assert compiled.coerce("Raise Alarm") == "raise_alarm"
    assert compiled.coerce("stand-down") == "Stand Down"
    assert compiled.coerce("WAIT") == "wait"
    assert compiled.coerce("flee") == "flee"


def test_a_string_const_matches_ignoring_case():
    assert compile_schema({"const": "Yes"}).coerce("yes") == "Yes"


def test_a_single_value_is_wrapped_into_an_array():
    compiled = compile_schema(obj(["tags"], tags={"type": "array", "items": {"type": "integer"}}))
    assert compiled.coerce({"tags": "3"}) == {"tags": [3]}
    assert compiled.coerce({"tags": "[1, 2]"}) == {"tags": [1, 2]}
    assert compiled.coerce({"tags": None}) == {"tags": None}


def test_an_object_given_as_json_text_is_parsed():
    compiled = compile_schema(obj(where=obj(x={"type": "integer"})))
    assert compiled.coerce({"where": '{"x": "1"}'}) == {"where": {"x": 1}}


def test_near_miss_keys_are_renamed_to_declared_properties():
    compiled = compile_schema(
        obj(["item_name"], item_name={"type": "string"}, count={"type": "integer"})
    )
    assert compiled.coerce({"itemName": "ale", "COUNT": 2}) == {"item_name": "ale", "count": 2}
    assert compiled.coerce({"itemName": "ale", "item_name": "stew"}) == {"item_name": "stew"}


def test_undeclared_keys_are_dropped_only_when_every_required_key_is_present():
    compiled = compile_schema(obj(["a"], a={"type": "string"}))
    assert compiled.coerce({"a": "x", "junk": 1}) == {"a": "x"}
    assert compiled.coerce({"b": "x", "junk": 1}) == {"b": "x", "junk": 1}


def test_null_for_an_optional_property_that_does_not_accept_null_is_dropped():
    compiled = compile_schema(obj(["a"], a={"type": "string"}, b={"type": "string"}))
    assert compiled.coerce({"a": "x", "b": None}) == {"a": "x"}
    assert compiled.coerce({"a": None}) == {"a": None}


def test_coercion_recurses_through_arrays_references_and_unions():
    compiled = compile_schema(
        {
            **obj(
                items={"type": "array", "items": {"$ref": "#/$defs/Line"}},
                maybe={"anyOf": [{"type": "integer"}, {"type": "null"}]},
            ),
            "$defs": {"Line": obj(["qty"], qty={"type": "integer"})},
        }
    )
    value = {"items": [{"Qty": "2", "x": 1}], "maybe": "5"}
    assert compiled.coerce(value) == {"items": [{"qty": 2}], "maybe": 5}
    assert value == {"items": [{"Qty": "2", "x": 1}], "maybe": "5"}


def test_values_that_need_no_repair_are_returned_unchanged():
    compiled = compile_schema(ORDER)
    value = {"item": "stew", "quantity": 2, "mystery": {"deep": [1]}}
    assert compiled.coerce(value) == {"item": "stew", "quantity": 2}
    assert compile_schema({"type": "string"}).coerce(5) == 5


# --- ordering -----------------------------------------------------------------------------------


def test_order_puts_keys_in_schema_order_recursively_and_unknown_keys_last():
    compiled = compile_schema(
        {
            **obj(
                z={"type": "string"},
                a={"type": "array", "items": {"$ref": "#/$defs/P"}},
                m={"anyOf": [obj(q={"type": "string"}, r={"type": "string"}), {"type": "null"}]},
            ),
            "$defs": {"P": obj(y={"type": "string"}, b={"type": "string"})},
        }
    )
    value = {"extra": 1, "m": {"r": "1", "q": "2"}, "a": [{"b": "1", "y": "2"}], "z": "x"}
    ordered = compiled.order(value)
    assert json.dumps(ordered) == json.dumps(
        {"z": "x", "a": [{"y": "2", "b": "1"}], "m": {"q": "2", "r": "1"}, "extra": 1}
    )


# --- properties ---------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["3", "2.5", "true", "Raise Alarm", "[1]", '{"a": 1}', "itemName"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["a", "B", "item_name", "itemName", "n", "x y"]) | st.text(max_size=6),
            inner,
            max_size=4,
        )
    ),
    max_leaves=16,
)

FIXED_SCHEMAS = [
    ORDER,
    EMPTY_OBJECT_SCHEMA,
    {"anyOf": [{"type": "string"}, obj(["n"], n={"type": "integer"}), {"type": "null"}]},
    {"type": "array", "items": {"enum": ["raise_alarm", "wait", None]}, "maxItems": 3},
    {
        **obj(["a"], a={"type": ["number", "null"], "minimum": 0}, n={"$ref": "#/$defs/Node"}),
        "$defs": {"Node": obj(item_name={"type": "boolean"}, n={"$ref": "#/$defs/Node"})},
    },
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FIXED_SCHEMAS), json_values)
def test_order_preserves_equality_and_coerce_never_raises(schema, value):
    compiled = compile_schema(schema)
    assert compiled.order(value) == value
    repaired = compiled.coerce(value)
    assert compiled.order(repaired) == repaired


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FIXED_SCHEMAS), json_values)
def test_validate_agrees_with_json_schema_on_the_generation_schema(schema, value):
    compiled = compile_schema(schema)
    expected = Draft202012Validator(compiled.generation).is_valid(value)
    assert (compiled.validate(value) == []) == expected

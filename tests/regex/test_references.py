"""Tests for formcast.regex.references: $ref, recursion unrolling, shared definitions."""

from __future__ import annotations

from typing import Any

import pytest
from regex_checks import (
    Case,
    Node,
    Unsupported,
    case_tests,
    dumps,
    fullmatch,
    unsupported_tests,
)

from formcast.automaton import LazyAutomaton, compile_automaton
from formcast.errors import SchemaError, UnsupportedSchemaError
from formcast.regex import (
    inline_definitions,
)
from formcast.regex.translator import schema_to_regex

CASES: list[Case] = [
    (
        "ref defs",
        {
            "$defs": {"pos": {"type": "integer", "minimum": 1}},
            "type": "array",
            "items": {"$ref": "#/$defs/pos"},
        },
        [[], [1, 2]],
        [[0]],
    ),
    (
        "ref definitions",
        {
            "definitions": {"s": {"type": "string"}},
            "properties": {"a": {"$ref": "#/definitions/s"}},
            "required": ["a"],
            "type": "object",
        },
        [{"a": "x"}],
        [{"a": 1}],
    ),
    (
        "ref with sibling",
        {"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 1},
        ["", "a"],
        ["ab"],
    ),
    (
        "ref to property",
        {
            "type": "object",
            "properties": {"a": {"type": "boolean"}, "b": {"$ref": "#/properties/a"}},
            "required": ["a", "b"],
        },
        [{"a": True, "b": False}],
        [{"a": True, "b": 1}],
    ),
    (
        "recursive list",
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "integer"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    },
                    "required": ["value"],
                }
            },
            "$ref": "#/$defs/node",
        },
        [{"value": 1}, {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}],
        [{"children": []}],
    ),
    (
        "recursive optional",
        {
            "$defs": {
                "ll": {
                    "type": "object",
                    "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/$defs/ll"}},
                    "required": ["v"],
                }
            },
            "$ref": "#/$defs/ll",
        },
        [{"v": 1}, {"v": 1, "next": {"v": 2, "next": {"v": 3}}}],
        [{"v": 1, "next": {}}],
    ),
    (
        "root recursion",
        {"type": "object", "properties": {"sub": {"$ref": "#"}, "n": {"type": "null"}}},
        [{}, {"sub": {"sub": {}}}, {"sub": {"n": None}, "n": None}],
        [{"sub": 1}],
    ),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


UNSUPPORTED: list[Unsupported] = [
    ({"$ref": "https://example.com/other.json"}, "$ref", "/", "generation"),
    ({"$dynamicRef": "#node"}, "$dynamicRef", "/", "generation"),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_recursion_is_unrolled_to_the_limit(depth: int) -> None:
    regex = schema_to_regex(Node, max_recursion_depth=depth)
    nested: dict[str, Any] = {"value": 0}
    for _ in range(depth):
        nested = {"value": 0, "children": [nested]}
    assert fullmatch(regex, dumps(nested))
    deeper = {"value": 0, "children": [nested]}
    assert not fullmatch(regex, dumps(deeper))


def test_recursion_that_cannot_stop_is_refused() -> None:
    schema = {
        "$defs": {
            "a": {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/a"}},
                "required": ["next"],
            }
        },
        "$ref": "#/$defs/a",
    }
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(schema, max_recursion_depth=3)
    assert info.value.keyword == "$ref"
    assert info.value.pointer == "/$defs/a/properties/next"
    assert "max_recursion_depth=3" in str(info.value)
    # exact (the default): the definition that cannot end matches nothing, and so the root
    with pytest.raises(SchemaError, match="cannot end without calling itself again"):
        compile_automaton(schema_to_regex(schema))
    with pytest.raises(SchemaError, match="matches no string at all"):
        compile_automaton(schema_to_regex(schema), drop_empty_definitions=True)


def test_recursion_through_min_items_is_refused() -> None:
    schema = {
        "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}, "minItems": 1}},
        "$ref": "#/$defs/t",
    }
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(schema, max_recursion_depth=3)
    assert info.value.keyword == "$ref"
    with pytest.raises(SchemaError, match="cannot end without calling itself again"):
        compile_automaton(schema_to_regex(schema))


def test_repeated_sub_schemas_become_definitions_when_the_plain_regex_is_too_large() -> None:
    """Ten nested arrays write their item regex 2**10 times when inlined (~2.5 million
    characters, past MAX_REGEX_LENGTH); as definitions each level is written once."""
    item = {
        "type": "object",
        "properties": {f"field{i}": {"type": "string", "maxLength": 8} for i in range(12)},
        "required": ["field0"],
        "additionalProperties": False,
    }
    schema: dict[str, Any] = {"$ref": "#/$defs/item", "$defs": {"item": item}}
    for _ in range(10):
        schema = {"type": "array", "items": schema, "$defs": {"item": item}}
    regex = schema_to_regex(schema, mode="specification")
    assert regex.startswith("(?(DEFINE)") and len(regex) < 100_000
    with pytest.raises(ValueError, match="inlined regex would exceed"):
        inline_definitions(regex)
    automaton = LazyAutomaton(regex)
    leaf = {"field0": "a", "field3": "abcdefgh"}
    value: Any = [leaf, {"field0": ""}]
    for _ in range(9):
        value = [value, []]
    assert automaton.matches(dumps(value).encode())
    assert not automaton.matches(dumps(value).replace("abcdefgh", "abcdefghi").encode())
    assert not automaton.matches(dumps([value]).encode())  # eleven levels

"""Tests for formcast.regex.combinators: anyOf, oneOf, allOf, not, if/then/else, dependencies."""

from __future__ import annotations

from typing import Any

import pytest
from regex_checks import (
    Case,
    Unsupported,
    case_tests,
    fullmatch,
    specification_tests,
    unsupported_tests,
    validator_for,
)

from formcast.errors import UnsupportedSchemaError
from formcast.regex.translator import schema_to_regex

CASES: list[Case] = [
    (
        "anyOf",
        {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]},
        [1, "ab"],
        ["abc", None],
    ),
    (
        "optional via anyOf null",
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        ["a", None],
        [1],
    ),
    (
        "anyOf with sibling properties",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
        },
        [{"a": 1}, {"b": 1}, {"a": 1, "b": 2}],
        [{}],
    ),
    (
        "oneOf overlapping, by negation",
        {"oneOf": [{"type": "integer"}, {"minimum": 5}]},
        [1, 4, -3, "x", None, [1]],
        [5, 7, 100],
    ),
    (
        "oneOf exactly one required",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
        },
        [{"a": 1}, {"b": 2}],
        [{}, {"a": 1, "b": 2}],
    ),
    (
        "oneOf nested lengths",
        {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}]},
        ["abc", "abcd"],
        ["ab", "", 1],
    ),
    (
        "if then else",
        {
            "type": "object",
            "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
            "required": ["kind"],
            "if": {"properties": {"kind": {"const": "a"}}},
            "then": {"required": ["n"]},
            "else": {"properties": {"n": {"maximum": 0}}},
        },
        [{"kind": "a", "n": 5}, {"kind": "b"}, {"kind": "b", "n": -1}],
        [{"kind": "a"}, {"kind": "b", "n": 1}],
    ),
    (
        "if then on strings",
        {"type": ["string", "integer"], "if": {"type": "string"}, "then": {"minLength": 2}},
        ["ab", 1, 0],
        ["a", ""],
    ),
    (
        "oneOf disjoint types",
        {"oneOf": [{"type": "integer"}, {"type": "string"}]},
        [1, "a"],
        [None, 1.5],
    ),
    (
        "oneOf discriminated",
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
                    "required": ["kind"],
                },
                {
                    "type": "object",
                    "properties": {"kind": {"const": "b"}, "y": {"type": "string"}},
                    "required": ["kind"],
                },
            ]
        },
        [{"kind": "a"}, {"kind": "a", "x": 1}, {"kind": "b", "y": "s"}],
        [{"kind": "c"}, {"kind": "a", "y": "s"}],
    ),
    (
        "allOf merge",
        {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"properties": {"b": {"type": "string"}}, "required": ["b"]},
            ]
        },
        [{"a": 1, "b": "x"}],
        [{"a": 1}, {"b": "x"}],
    ),
    (
        "allOf numeric",
        {"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 10}, {"exclusiveMaximum": 8}]},
        [0, 7],
        [8, 10, -1],
    ),
    (
        "allOf strings",
        {"allOf": [{"type": "string", "minLength": 2}, {"maxLength": 3}]},
        ["ab", "abc"],
        ["a", "abcd"],
    ),
    (
        "not type",
        {"not": {"type": ["string", "object", "array", "null"]}},
        [1, 1.5, True],
        ["a", None, [], {}],
    ),
    (
        "not required",
        {
            "type": "object",
            "properties": {"a": {"type": "null"}, "b": {"type": "null"}},
            "not": {"required": ["a"]},
        },
        [{}, {"b": None}],
        [{"a": None}],
    ),
    (
        "not empty",
        {"type": "object", "properties": {"a": {"not": {}}, "b": {"type": "null"}}},
        [{}, {"b": None}],
        [{"a": 1}],
    ),
    (
        "dependentRequired",
        {
            "type": "object",
            "properties": {"a": {"type": "null"}, "b": {"type": "null"}},
            "dependentRequired": {"a": ["b"]},
        },
        [{}, {"b": None}, {"a": None, "b": None}],
        [{"a": None}],
    ),
    (
        "dependencies schema",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "dependencies": {"a": {"properties": {"b": {"minimum": 5}}, "required": ["b"]}},
        },
        [{}, {"b": 1}, {"a": 1, "b": 5}],
        [{"a": 1}, {"a": 1, "b": 4}],
    ),
    ("if without then", {"type": "integer", "if": {"minimum": 3}}, [1, 5], ["a"]),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


SPEC_CASES: list[Case] = [
    # maskbench Github_easy---o89710: oneOf told apart by array lengths
    (
        "oneOf disjoint by item counts",
        {
            "type": "object",
            "oneOf": [
                {"properties": {"f": {"type": "array", "maxItems": 1}}, "required": ["f"]},
                {"properties": {"f": {"type": "array", "minItems": 2}}, "required": ["f"]},
            ],
        },
        [{"f": []}, {"f": [1, 2, 3]}],
        [{}, {"f": 1}],
    ),
    (
        "oneOf disjoint by lengths and ranges",
        {
            "oneOf": [
                {"type": "string", "maxLength": 0},
                {"type": "string", "minLength": 1},
                {"type": "integer", "maximum": 0},
                {"type": "number", "exclusiveMinimum": 0},
            ]
        },
        ["", "ab", -3, 0, 1.5, 7],
        [None, True],
    ),
    # maskbench Github_medium---o90967: untyped object branches, told apart by a
    # discriminator; any non-object satisfies both, so no non-object is valid
    (
        "oneOf of untyped branches with a discriminator",
        {
            "oneOf": [
                {
                    "properties": {"kind": {"enum": ["a"]}, "x": {"type": "string"}},
                    "required": ["kind", "x"],
                    "additionalProperties": False,
                },
                {"properties": {"kind": {"enum": ["b"]}}, "required": ["kind"]},
            ]
        },
        [{"kind": "a", "x": "s"}, {"kind": "b"}],
        [{"kind": "a"}, {"kind": "c"}, "s", 1, None, [], True],
    ),
    (
        "oneOf leaving other types free",
        {
            "oneOf": [
                {"properties": {"a": {"type": "string"}}},
                {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"minimum": 3},
            ]
        },
        [{"a": None}, 1, 2.5, -4],
        [{"a": 1}, {"a": "x"}, {}, 5, 3.5, "s", None],
    ),
    # maskbench Github_easy---o89710: properties in declaration order across allOf/oneOf
    (
        "oneOf branch properties come where declared",
        {
            "allOf": [
                {"oneOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]}]},
                {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
            ]
        },
        [{"a": 1, "b": 2}],
        [{"a": "x", "b": 2}],
    ),
]


test_specification_mode_cases = specification_tests(SPEC_CASES)


UNSUPPORTED: list[Unsupported] = [
    (
        {"if": {"propertyNames": {"pattern": "a"}}, "then": {"minProperties": 2}},
        "if",
        "/",
        "generation",
    ),
    (
        {"oneOf": [{"propertyNames": {"pattern": "a"}}, {"required": ["b"]}]},
        "oneOf",
        "/",
        "specification",
    ),
    (
        {
            "$defs": {"x": {"oneOf": [{"type": "string"}, {"type": "string", "format": "date"}]}},
            "$ref": "#/$defs/x",
        },
        "oneOf",
        "/$defs/x",
        "generation",
    ),
    ({"not": {"propertyNames": {"pattern": "a"}}}, "not", "/not", "generation"),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)


# Decimal's schema as Pydantic before 2.14 writes it: the string branch has a lookahead.
_LOOKAHEAD_MONEY = {
    "type": "object",
    "properties": {
        "amount": {
            "anyOf": [
                {"type": "number"},
                {"type": "string", "pattern": "^(?!^[-+.]*$)[+-]?0*\\d*\\.?\\d*$"},
            ]
        },
        "currency": {"enum": ["EUR", "USD"], "type": "string"},
    },
    "required": ["amount", "currency"],
}


def test_decimal_drops_the_lookahead_branch_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="dropped a anyOf branch"):
        regex = schema_to_regex(_LOOKAHEAD_MONEY, mode="specification")
    assert fullmatch(regex, '{"amount":1.5,"currency":"EUR"}')
    assert not fullmatch(regex, '{"amount":"1.5","currency":"EUR"}')


def test_exponential_anyof_distribution_is_refused_not_run() -> None:
    """allOf of 16 two-way anyOfs distributes into 65,536 conjunctions: refused."""
    parts = [{"anyOf": [{"maxLength": 9}, {"maxLength": 8 + i}]} for i in range(16)]
    with pytest.raises(UnsupportedSchemaError) as raised:
        schema_to_regex({"type": "string", "allOf": parts}, mode="specification")
    assert raised.value.keyword == "anyOf"
    assert raised.value.pointer.startswith("/allOf/")
    assert "sub-schemas" in str(raised.value)


_OBJECT_NEGATIONS: list[dict[str, Any]] = [
    {"not": {"properties": {"a": {"type": "integer"}}, "additionalProperties": False}},
    {"type": "object", "not": {"additionalProperties": {"type": "boolean"}}},
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "oneOf": [
            {"properties": {"a": {"const": 1}}, "additionalProperties": False},
            {"required": ["b"]},
        ],
    },
    {
        "oneOf": [
            {
                "type": "object",
                "properties": {"x": {"type": "string"}},
                "required": ["x"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "additionalProperties": {"enum": [False]},
                "minProperties": 1,
                "maxProperties": 1,
            },
        ]
    },
    {"type": "object", "properties": {"a": {}, "b": {}}, "not": {"additionalProperties": False}},
    {"not": {"type": "integer"}},
]


@pytest.mark.parametrize("schema", _OBJECT_NEGATIONS)
def test_negated_additional_properties_need_a_member_outside(schema: dict[str, Any]) -> None:
    """``not {properties, additionalProperties}``: a declared property fails its schema,
    or some member outside the declared names (declared by the other parts, or an extra
    anywhere among the extras) fails ``additionalProperties``; and ``not: {type:
    integer}`` leaves the numbers with a fraction. Over random objects and scalars,
    serialized in the order formcast writes keys, the automaton accepts exactly what
    jsonschema accepts."""
    import random
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from maskbench import serialize

    from formcast.automaton import LazyAutomaton

    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    validator = validator_for(schema)
    rng = random.Random(1)
    leaves: list[Any] = [1, "s", False, True, None, 2.5]
    values: list[Any] = [*leaves, [1]]
    for _ in range(500):
        names = rng.sample(["a", "b", "x", "c"], rng.randint(0, 3))
        values.append({name: rng.choice(leaves) for name in names})
    verdicts = set()
    for value in values:
        expected = validator.is_valid(value)
        assert automaton.matches(serialize(value, schema).encode()) is expected, value
        verdicts.add(expected)
    assert verdicts == {True, False}


def test_a_format_excluded_by_another_one_of_branch_is_empty() -> None:
    """Excluding a branch with a ``format`` from another ``oneOf`` branch takes the
    format's negation as no value: whatever formcast accepts is valid whether the
    validator asserts formats or reads them as annotations, and the format's own branch
    still produces its values."""
    import json

    from formcast.automaton import LazyAutomaton
    from formcast.schema import validator_class

    schema = {"oneOf": [{"format": "date"}, {"type": "integer"}]}
    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    asserting = validator_for(schema)
    annotating = validator_class(schema)(schema)
    texts: list[Any] = ["2020-01-31", "2020-13-45", "x-file", 5, None, 2.5, [1]]
    accepted = [v for v in texts if automaton.matches(json.dumps(v).encode())]
    assert "2020-01-31" in accepted and None in accepted and 5 not in accepted
    for value in accepted:
        assert asserting.is_valid(value) and annotating.is_valid(value), value
    with pytest.raises(UnsupportedSchemaError):
        schema_to_regex({"not": {"format": "date"}}, mode="specification")

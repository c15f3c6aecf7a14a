"""Tests for formcast.regex.enums: enum and const, filtered by every sibling keyword."""

from __future__ import annotations

import json

from regex_checks import (
    Case,
    Unsupported,
    case_tests,
    unsupported_tests,
)

CASES: list[Case] = [
    (
        "enum mixed",
        {"enum": ["a", 1, None, True, [1, 2], {"k": "v"}, 2.5]},
        ["a", 1, None, True, [1, 2], {"k": "v"}, 2.5],
        ["b", 2, False, [2, 1], {"k": "w"}],
    ),
    (
        "enum escapes",
        {"enum": ['he said "hi"', "a\\b", "tab\t", "é😀", "$.*+?()[]{}|^"]},
        ['he said "hi"', "a\\b", "tab\t", "é😀", "$.*+?()[]{}|^"],
        ["he said hi", "ab"],
    ),
    ("const", {"const": {"a": [1, "x"]}}, [{"a": [1, "x"]}], [{"a": [1]}]),
    ("enum filtered by type", {"type": "string", "enum": ["a", 1, "b"]}, ["a", "b"], [1]),
    (
        "enum duplicates, true is not 1",
        {"enum": [1, 1.0, True, {"a": 1, "b": 2}, {"b": 2, "a": 1}, "x", "x"]},
        [1, True, {"a": 1, "b": 2}, "x"],
        [False, 0, {"a": 1}, "y"],
    ),
    (
        "enum with type list and const",
        {"type": ["integer", "null"], "enum": [1, "1", None, 2.5], "const": 1},
        [1],
        ["1", None, 2.5],
    ),
    (
        "enum filtered by minLength",
        {"enum": ["a", "bb", "ccc"], "minLength": 2},
        ["bb", "ccc"],
        ["a"],
    ),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


UNSUPPORTED: list[Unsupported] = [
    ({"enum": [1, 2], "type": "string"}, "enum", "/", "generation"),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)


def test_enum_numbers_accept_their_equal_spellings_in_specification_mode() -> None:
    """JSON Schema compares numbers by value: ``2``, ``2.0`` and ``2.00`` are all the
    enum value ``2.0``. Specification mode accepts those spellings (with trailing zeros,
    not exponents), as jsonschema does; generation mode writes the compact one only."""
    from formcast.automaton import LazyAutomaton
    from formcast.regex.translator import schema_to_regex

    schema = {"enum": [2.0, 7, 2.5, -1.25, "2"]}
    spec = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    generation = LazyAutomaton(schema_to_regex(schema))
    for text in ["2", "2.0", "2.00", "7", "7.0", "2.5", "2.50", "-1.25", "-1.250", '"2"']:
        assert spec.matches(text.encode()), text
    for text in ["20", "2.", "2.05", "7.01", "2.51", "-1.2", "1.25", '"2.0"', "0"]:
        assert not spec.matches(text.encode()), text
    assert generation.matches(b"2.0") and not generation.matches(b"2.00")


def test_enumerations_check_every_keyword_without_rewriting() -> None:
    """With an ``enum`` or ``const`` in the conjunction, each value is checked against
    every keyword by jsonschema, so keywords formcast cannot negate or rewrite (``not``
    of ``multipleOf``, ``oneOf`` of lookarounds, ``uniqueItems``) no longer refuse the
    schema; the values kept are exactly those jsonschema accepts."""
    from formcast.automaton import LazyAutomaton
    from formcast.regex.translator import schema_to_regex
    from formcast.schema import validator_class

    values: list[object] = [1, 2, 3, 4, 5, 6, "a", "ab", [1, 1], [1, 2], None]
    schemas: list[dict[str, object]] = [
        {"enum": values, "not": {"multipleOf": 2}},
        {"allOf": [{"enum": values}, {"not": {"anyOf": [{"multipleOf": 3}, {"type": "null"}]}}]},
        {"enum": values, "oneOf": [{"pattern": "^(?!b)"}, {"multipleOf": 3}]},
        {"enum": values, "uniqueItems": True},
        {"enum": values, "if": {"type": "integer"}, "then": {"not": {"multipleOf": 4}}},
    ]
    for schema in schemas:
        automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
        validator = validator_class(schema)(schema)
        kept = [
            v for v in values if automaton.matches(json.dumps(v, separators=(",", ":")).encode())
        ]
        assert kept == [v for v in values if validator.is_valid(v)], schema
        assert 0 < len(kept) < len(values), schema

"""Tests for formcast.regex.arrays: items, prefixItems, counts, contains, uniqueItems."""

from __future__ import annotations

import pytest
from regex_checks import (
    Case,
    Unsupported,
    case_tests,
    fullmatch,
    specification_tests,
    unsupported_tests,
)

from formcast.errors import UnsupportedSchemaError
from formcast.regex.translator import schema_to_regex

CASES: list[Case] = [
    (
        "array of strings",
        {"type": "array", "items": {"type": "string"}},
        [[], ["a"], ["a", "b", "c"]],
        [[1], "a"],
    ),
    (
        "array bounds",
        {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3},
        [[1, 2], [1, 2, 3]],
        [[], [1], [1, 2, 3, 4]],
    ),
    ("array no items", {"type": "array"}, [[], [1, "a", None]], [{}]),
    ("array maxItems 0", {"type": "array", "maxItems": 0}, [[]], [[1]]),
    (
        "prefixItems",
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        [[], [1], [1, "a"]],
        [[1, "a", 2], ["a"]],
    ),
    (
        "prefixItems exact",
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "minItems": 2,
            "maxItems": 2,
        },
        [[1, "a"]],
        [[1], [1, "a", "b"]],
    ),
    (
        "prefixItems with tail",
        {
            "type": "array",
            "prefixItems": [{"type": "boolean"}],
            "items": {"type": "null"},
            "minItems": 1,
        },
        [[True], [False, None, None]],
        [[], [None], [True, True]],
    ),
    (
        "legacy items array",
        {"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
        [[], [1], [1, "a", "b"]],
        [["a"], [1, 2]],
    ),
    (
        "contains",
        {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 10}},
        [[10], [1, 2, 30], [11, 1]],
        [[], [1, 2]],
    ),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


UNSUPPORTED: list[Unsupported] = [
    (
        {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
            },
        },
        "uniqueItems",
        "/properties/items",
        "specification",
    ),
    (  # 9 values: 986,409 arrangements
        {"type": "array", "items": {"enum": list("abcdefghi")}, "uniqueItems": True},
        "uniqueItems",
        "/",
        "specification",
    ),
    (
        {"type": "array", "contains": {"type": "integer"}, "maxContains": 2},
        "maxContains",
        "/",
        "generation",
    ),
    (
        {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 3}, "maxItems": 4},
        "contains",
        "/contains",
        "generation",
    ),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)

# uniqueItems over enumerated items: every arrangement of distinct values
DISTINCT_CASES: list[Case] = [
    (
        "distinct enumerated items",
        {
            "type": "array",
            "items": {"enum": ["http", "https", "ws", 1, 1.0]},
            "uniqueItems": True,
        },
        [[], ["http"], ["ws", "http"], ["https", 1, "ws", "http"]],
        [["http", "http"], [1, 1.0], ["ftp"], [1, 2]],
    ),
    (
        "distinct booleans with counts",
        {
            "type": "array",
            "items": {"enum": [True, False, None]},
            "uniqueItems": True,
            "minItems": 1,
            "maxItems": 2,
        },
        [[True], [None, False], [False, True]],
        [[], [True, True], [True, False, None]],
    ),
]

test_distinct_items = specification_tests(DISTINCT_CASES)


def test_unique_items_depends_on_mode() -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    assert fullmatch(schema_to_regex(schema), "[1,2]")
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(schema, mode="specification")
    assert info.value.keyword == "uniqueItems"
    assert fullmatch(schema_to_regex({**schema, "maxItems": 1}, mode="specification"), "[1]")

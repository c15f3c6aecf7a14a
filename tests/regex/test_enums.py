"""Tests for formcast.regex.enums: enum and const, filtered by every sibling keyword."""

from __future__ import annotations

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

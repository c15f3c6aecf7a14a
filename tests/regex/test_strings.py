"""Tests for formcast.regex.strings: lengths, excluded strings, and what cannot be combined."""

from __future__ import annotations

from regex_checks import (
    Case,
    Unsupported,
    case_tests,
    unsupported_tests,
)

CASES: list[Case] = [
    (
        "string",
        {"type": "string"},
        ["", "abc", "é ñ 中 😀", 'q"uote', "back\\slash", "nl\n", "\x01"],
        [1, None, True],
    ),
    (
        "string lengths",
        {"type": "string", "minLength": 2, "maxLength": 4},
        ["ab", "abcd", "é😀", "\n\t"],
        ["a", "abcde"],
    ),
    ("string maxLength 0", {"type": "string", "maxLength": 0}, [""], ["a"]),
    (
        "not enum string",
        {"type": "string", "not": {"enum": ["a", "b"]}, "maxLength": 2},
        ["", "c", "ab", "aa"],
        ["a", "b"],
    ),
    (
        "two patterns",
        {"type": "string", "allOf": [{"pattern": "a"}, {"pattern": "b"}]},
        ["ab", "ba", "xaybz", "é a b"],
        ["a", "b", "", "xyz", 1],
    ),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


UNSUPPORTED: list[Unsupported] = [
    ({"type": "string", "format": "color"}, "format", "/", "generation"),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)

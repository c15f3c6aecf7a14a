"""Tests for formcast.regex.patterns: ECMAScript patterns, and lengths crossed with them."""

from __future__ import annotations

import random
from typing import Any

import pytest
from regex_checks import (
    Case,
    Unsupported,
    case_tests,
    dumps,
    unsupported_tests,
    validator_for,
)

from formcast.automaton import LazyAutomaton
from formcast.errors import UnsupportedSchemaError
from formcast.regex.translator import schema_to_regex

CASES: list[Case] = [
    ("pattern anchored", {"type": "string", "pattern": "^[a-z]+$"}, ["a", "abc"], ["", "aB", "1"]),
    (
        "pattern unanchored",
        {"type": "string", "pattern": "[0-9]{3}"},
        ["123", "ab123cd", "é999"],
        ["12", "abc"],
    ),
    (
        "pattern start anchored",
        {"type": "string", "pattern": "^ab"},
        ["ab", "abc", "ab\n"],
        ["cab", "a"],
    ),
    (
        "pattern alternation",
        {"type": "string", "pattern": "^(cat|dog)s?$"},
        ["cat", "dogs"],
        ["cats!", "bird"],
    ),
    (
        "pattern shorthands",
        {"type": "string", "pattern": "^\\d{2}-\\w+\\s?$"},
        ["12-ab_c", "00-x "],
        ["1-ab", "12-", "١٢-ab"],
    ),
    (
        "pattern escapes",
        {"type": "string", "pattern": '^a\\.b\\\\c"d\\/$'},
        ['a.b\\c"d/'],
        ['axb\\c"d/'],
    ),
    (
        "pattern negated class",
        {"type": "string", "pattern": "^[^abc]+$"},
        ["xyz", "é", 'q"', "\\", "\n"],
        ["a", "xa"],
    ),
    ("pattern dot", {"type": "string", "pattern": "^a.c$"}, ["abc", "a c", 'a"c'], ["a\nc", "ac"]),
    (
        "pattern quantifiers",
        {"type": "string", "pattern": "^x{2,3}y{2}z{1,}$"},
        ["xxyyz", "xxxyyzzz"],
        ["xyyz", "xxyz"],
    ),
    ("pattern unicode escape", {"type": "string", "pattern": "^\\u00e9+$"}, ["é", "éé"], ["e"]),
    (
        "pattern with length",
        {"type": "string", "pattern": "^[A-Z]+$", "maxLength": 3},
        ["A", "ABC"],
        ["ABCD", ""],
    ),
    (
        "pattern prefix with length",
        {"type": "string", "pattern": "^[A-Z]", "maxLength": 3, "minLength": 2},
        ["AB", "Zé!"],
        ["A", "ABCD", "aB"],
    ),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


UNSUPPORTED: list[Unsupported] = [
    ({"type": "string", "pattern": "^(?=a)b"}, "pattern", "/", "specification"),
    ({"type": "string", "pattern": "(a)\\1"}, "pattern", "/", "generation"),
    (
        {"type": "object", "properties": {"s": {"type": "string", "pattern": "a(?!b)"}}},
        "pattern",
        "/properties/s",
        "generation",
    ),
    ({"type": "string", "pattern": "\\bword"}, "pattern", "/", "generation"),
    ({"type": "string", "pattern": "a^b"}, "pattern", "/", "generation"),
    (
        {"type": "string", "pattern": "^(a|b)*c(a|b)*$", "maxLength": 5000},
        "maxLength",
        "/",
        "generation",
    ),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)


@pytest.mark.parametrize(
    ("pattern", "low", "high", "alphabet"),
    [
        (r"^(?:\S+\s+){0,2}\S+$", 0, 8, "ab \t"),
        (r"^(\d+\.\d+\.\d+.*)$", 0, 9, "12.-a"),
        (r"[0-9a-f]+", 2, 5, "0aZ-"),
        (r"^[a-z]([-a-z0-9]*[a-z0-9])?$", 1, 6, "a1-"),
        (r"^x|y$", 3, 4, "xyz"),
    ],
)
def test_lengths_combine_with_any_pattern_through_the_pattern_automaton(
    pattern: str, low: int, high: int, alphabet: str
) -> None:
    """Where a length bound cannot be fitted to one repetition of the pattern, the
    pattern's character DFA is crossed with a counter: exactly the strings the pattern
    finds with low..high characters."""
    schema = {"type": "string", "pattern": pattern, "minLength": low, "maxLength": high}
    _assert_agrees_on_random_strings(schema, alphabet, high + 3, seed=11)


def _assert_agrees_on_random_strings(schema: Any, alphabet: str, lengths: int, seed: int) -> None:
    """The specification-mode automaton accepts exactly the strings over ``alphabet``
    (60 random ones per length below ``lengths``) that jsonschema finds valid, and at
    least one of them is valid."""
    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    validator = validator_for(schema)
    rng = random.Random(seed)
    accepted = 0
    for length in range(lengths):
        for _ in range(60):
            text = "".join(rng.choice(alphabet) for _ in range(length))
            expected = validator.is_valid(text)
            assert automaton.matches(dumps(text).encode()) is expected, (text, expected)
            accepted += expected
    assert accepted > 0


def test_length_and_pattern_products_past_the_limits_are_refused() -> None:
    schema = {"type": "string", "pattern": "^(a|b)*c(a|b)*$", "maxLength": 5000}
    with pytest.raises(UnsupportedSchemaError) as raised:
        schema_to_regex(schema, mode="specification")
    assert raised.value.keyword == "maxLength"
    assert "cannot be combined with pattern" in str(raised.value)


@pytest.mark.parametrize(
    ("pattern", "low", "alphabet"),
    [(r"^(\d+\.\d+\.\d+.*)$", 7, "1.a"), (r"^[a-z]([-a-z0-9]*[a-z0-9])?$", 3, "a1-")],
)
def test_min_length_alone_combines_with_a_pattern(pattern: str, low: int, alphabet: str) -> None:
    schema = {"type": "string", "pattern": pattern, "minLength": low}
    _assert_agrees_on_random_strings(schema, alphabet, low + 6, seed=5)


def test_a_long_pattern_falls_back_to_the_plain_spelling() -> None:
    """``^\\S+@\\S+$`` with ``minLength: 5`` is past the regex limits when every JSON
    spelling of each character is written; it is then written in the plain spelling:
    strings that need an escape are not produced, every other match is, and nothing
    jsonschema rejects is."""
    import json

    from formcast.automaton import LazyAutomaton
    from formcast.regex.translator import schema_to_regex
    from formcast.schema import validator_class

    schema = {"type": "string", "pattern": "^\\S+@\\S+$", "minLength": 5}
    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    validator = validator_class(schema)(schema)
    for text in ["a@b.c", "ab@cdef", "é@ü.de", "a@b", "a b@cd.e", "@abcd", "abcd@", 'a"b@c.d']:
        plain = json.dumps(text, ensure_ascii=False).encode()
        needs_escape = '"' in text
        assert automaton.matches(plain) is (validator.is_valid(text) and not needs_escape), text
    assert not automaton.matches(json.dumps("é@ü.de").encode())  # \u00e9: not plain

"""Several patterns on one string, ``not: {pattern}``, ``not: {oneOf}``, and ``oneOf``
branches told apart by their patterns (:mod:`formcast.regex.string_sets`)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from regex_checks import (
    Case,
    case_tests,
    dumps,
    fullmatch,
    specification_tests,
    validator_for,
)

from formcast.regex.patterns import DfaTooLarge
from formcast.regex.string_sets import (
    CharDfa,
    has_word_between,
    intersection,
    minimized,
    pattern_language,
    word_language,
)
from formcast.regex.translator import schema_to_regex

CASES: list[Case] = [
    (
        "two patterns",
        {"type": "string", "allOf": [{"pattern": "^[a-z]+$"}, {"pattern": "b"}]},
        ["b", "abc", "bbbb"],
        ["", "acd", "B", "ab1", 1],
    ),
    (
        "two patterns and lengths",
        {"type": "string", "pattern": "^[ab]*$", "allOf": [{"pattern": "a"}], "maxLength": 3},
        ["a", "ba", "bba"],
        ["", "b", "bbba", "abab"],
    ),
    (
        "not pattern",
        {"not": {"pattern": "^a"}},
        ["", "b", "ba", "é"],
        ["a", "ab", 1, None, [], {}],
    ),
    (
        "string not pattern",
        {"type": "string", "not": {"pattern": "[0-9]"}, "minLength": 2},
        ["ab", "a b"],
        ["a", "a1", "12"],
    ),
    (
        "pattern minus excluded values",
        {"type": "string", "pattern": "^[ab]{1,2}$", "not": {"enum": ["a", "ab"]}},
        ["b", "aa", "ba", "bb"],
        ["a", "ab", "", "abc"],
    ),
    (
        "oneOf told apart by patterns",
        {
            "oneOf": [
                {"type": "integer"},
                {"type": "string", "pattern": "^\\d+\\.?\\d*%?$"},
                {"type": "string", "pattern": "^\\{[\\{%](.|[\\r\\n])*[\\}%]\\}$"},
            ]
        },
        [1, "12%", "1.5", "{{ x }}", "{% if %}"],
        ["x", "{x}", 1.5, None],
    ),
    (
        "oneOf pattern against an empty string",
        {"oneOf": [{"type": "string", "pattern": "^[0-9]+$"}, {"type": "string", "maxLength": 0}]},
        ["", "12"],
        ["a", "1a", 1],
    ),
    (
        "oneOf overlapping patterns, by negation",
        {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "b$"}]},
        ["a", "b", "ac", "cb"],
        ["ab", "acb", "c", ""],
    ),
    (
        "not oneOf",
        {"type": "integer", "not": {"oneOf": [{"minimum": 3}, {"maximum": 5}]}},
        [3, 4, 5],
        [2, 6, -1, 9],
    ),
    (
        "not oneOf of strings",
        {
            "type": "string",
            "maxLength": 2,
            "not": {"oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
        },
        ["", "c", "ab", "cc"],
        ["a", "b", "ac", "cb"],
    ),
]

test_hand_written_cases, test_samples_are_valid = case_tests(CASES)

# generation mode writes no undeclared property: these need specification mode
SPEC_CASES: list[Case] = [
    (
        "oneOf of objects, a pattern negated",
        {
            "type": "object",
            "oneOf": [
                {"properties": {"s": {"type": "string"}}, "required": ["s"]},
                {
                    "properties": {"s": {"pattern": "OK"}, "t": {"type": "null"}},
                    "required": ["s", "t"],
                },
            ],
        },
        [{"s": "x"}, {"s": "OK"}, {"s": "x", "t": None}, {"s": 1, "t": None}],
        [{"s": "OK", "t": None}, {}, {"s": 1}],
    ),
]

test_specification_mode_cases = specification_tests(CASES + SPEC_CASES)


# Exactness: every string over a small alphabet up to a few characters is accepted
# exactly when jsonschema finds it valid.
_EXHAUSTIVE: list[tuple[str, Any]] = [
    ("two patterns", {"type": "string", "pattern": "^[ab1]+$", "allOf": [{"pattern": "1"}]}),
    ("not pattern", {"type": "string", "not": {"pattern": "a.b"}}),
    ("not pattern with lengths", {"not": {"pattern": "^a|b$"}, "minLength": 1, "maxLength": 3}),
    (
        "oneOf patterns",
        {"oneOf": [{"pattern": "^a"}, {"pattern": "1"}, {"type": "string", "maxLength": 1}]},
    ),
    ("not oneOf patterns", {"not": {"oneOf": [{"pattern": "a"}, {"pattern": "b"}]}}),
    ("patterns and excluded values", {"pattern": "^[ab]+$", "not": {"enum": ["ab", "ba"]}}),
    ("alternation fitted to maxLength", {"pattern": "^(a|b[ab-]*1)$", "maxLength": 3}),
    ("alternation fitted to minLength", {"pattern": "^x?(a|1[ab]*|-)$", "minLength": 2}),
]


@pytest.mark.parametrize(("name", "schema"), _EXHAUSTIVE, ids=[n for n, _ in _EXHAUSTIVE])
def test_every_short_string_agrees_with_jsonschema(name: str, schema: Any) -> None:
    regex = schema_to_regex(schema, mode="specification")
    validator = validator_for(schema)
    strings = ["".join(p) for n in range(5) for p in itertools.product("ab1-", repeat=n)]
    for value in [*strings, 1, None, True, [], {}]:
        expected = validator.is_valid(value)
        assert bool(fullmatch(regex, dumps(value))) == expected, (name, value, expected)


def test_intersection_is_minimal_and_exact() -> None:
    both = intersection([pattern_language("a", False), pattern_language("b", False)], [])
    assert len(both.moves) == 4  # nothing, saw a, saw b, saw both
    assert has_word_between(both, 2, 2)
    assert not has_word_between(both, 0, 1)


def test_removed_languages_and_lengths() -> None:
    digits = pattern_language("^[0-9]+$", False)
    not_zero = intersection([digits], [word_language("0")])
    assert has_word_between(not_zero, 1, 1)  # "1"
    only_zero = intersection([pattern_language("^0$", False)], [word_language("0")])
    assert not has_word_between(only_zero, 0, None)
    assert len(minimized(only_zero).moves) == 1


def test_lengths_past_a_cycle_are_decided() -> None:
    even = pattern_language("^(?:aa)*$", False)
    assert not has_word_between(even, 5, 5)
    assert has_word_between(even, 5, None)
    assert not has_word_between(even, 1001, 1001)
    assert has_word_between(even, 999, 1000)


def test_a_product_past_the_limit_raises() -> None:
    from formcast.limits import Limits

    parts = [pattern_language(f"{c}.{{4}}$", False) for c in "abc"]
    with pytest.raises(DfaTooLarge):
        intersection(parts, [], Limits(max_pattern_dfa_states=20))


def test_negated_pattern_reads_shorthands_widely() -> None:
    """``not: {pattern: "\\d"}`` refuses digits any engine reads as ``\\d`` (Arabic-Indic
    digits too), so no string that some validator finds matching gets through."""
    regex = schema_to_regex({"type": "string", "not": {"pattern": "\\d"}}, mode="specification")
    assert fullmatch(regex, json.dumps("abc"))
    assert not fullmatch(regex, json.dumps("a1"))
    assert not fullmatch(regex, json.dumps("a\u0663", ensure_ascii=False))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "not": {"pattern": "b$"}},
        {"type": "string", "not": {"oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]}},
    ],
)
def test_negated_end_anchor_reads_a_final_line_feed_widely(schema: dict[str, object]) -> None:
    """Python's ``re`` (jsonschema's engine) lets ``$`` match before a final line feed,
    so under a negation ``"b\\n"`` matches ``b$`` and is refused."""
    regex = schema_to_regex(schema, mode="specification")
    assert not validator_for(schema).is_valid("b\n")
    assert not fullmatch(regex, json.dumps("b\n"))
    assert fullmatch(regex, json.dumps("c\n"))


def _minimized_by_merging_every_block(dfa: CharDfa) -> CharDfa:
    """The reference of :func:`minimized`: Moore's refinement with every block's ranges
    normalized at every round."""
    from formcast.charset import normalize
    from formcast.regex.string_sets import _live_states

    def signature(row: Any, block: dict[int, int]) -> tuple[Any, ...]:
        by_block: dict[int, list[tuple[int, int]]] = {}
        for ranges, target in row:
            if target in block:
                by_block.setdefault(block[target], []).extend(ranges)
        return tuple(sorted((b, normalize(r)) for b, r in by_block.items()))

    live = _live_states(dfa)
    if 0 not in live:
        return CharDfa(((),), (False,))
    states = sorted(live)
    block = {q: int(dfa.accepting[q]) for q in states}
    while True:
        signatures = {q: (block[q], signature(dfa.moves[q], block)) for q in states}
        numbering: dict[Any, int] = {}
        for q in states:
            numbering.setdefault(signatures[q], len(numbering))
        refined = {q: numbering[signatures[q]] for q in states}
        if len(numbering) == len(set(block.values())):
            break
        block = refined
    block = refined
    order = sorted(set(block.values()))
    first = {b: min(q for q in states if block[q] == b) for b in order}
    moves = tuple(tuple((r, t) for t, r in signature(dfa.moves[first[b]], block)) for b in order)
    return CharDfa(moves, tuple(dfa.accepting[first[b]] for b in order))


@st.composite
def _char_dfas(draw: Any) -> CharDfa:
    """Small DFAs whose moves' ranges may come unsorted and touching, several moves of a
    state leading to states that turn out equivalent."""
    count = draw(st.integers(1, 6))
    cut = st.tuples(st.integers(0, 12), st.integers(0, 3)).map(lambda p: (p[0], p[0] + p[1]))
    move = st.tuples(st.lists(cut, min_size=1, max_size=3).map(tuple), st.integers(0, count - 1))
    moves = tuple(tuple(draw(st.lists(move, max_size=3))) for _ in range(count))
    accepting = tuple(draw(st.lists(st.booleans(), min_size=count, max_size=count)))
    return CharDfa(moves, accepting)


@settings(max_examples=400, deadline=None)
@given(dfa=_char_dfas())
def test_minimized_merges_ranges_as_the_reference_does(dfa: CharDfa) -> None:
    assert minimized(dfa) == _minimized_by_merging_every_block(dfa)

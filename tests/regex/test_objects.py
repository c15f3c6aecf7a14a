"""Tests for formcast.regex.objects: properties, extras, patternProperties, counts, and the
disjointness of pattern keys."""

from __future__ import annotations

import math
import random
from typing import Any

import interegular
import pytest
from interegular.fsm import Alphabet
from interegular.patterns import REFlags
from regex_checks import (
    Case,
    Unsupported,
    case_tests,
    compile_fsm,
    dumps,
    fullmatch,
    specification_tests,
    unsupported_tests,
    validator_for,
)

from formcast.automaton import LazyAutomaton
from formcast.regex.objects import pattern_for_key, regex_disjoint
from formcast.regex.translator import schema_to_regex

# no other name may come: the optional properties are counted, in both modes
COUNTED_CASES: list[Case] = [
    (
        "counted optional properties",
        {
            "type": "object",
            "properties": {"a": {"type": "null"}, "b": {"type": "integer"}, "c": {"type": "null"}},
            "required": ["a"],
            "additionalProperties": False,
            "minProperties": 2,
            "maxProperties": 2,
        },
        [{"a": None, "b": 1}, {"a": None, "c": None}],
        [{"a": None}, {"a": None, "b": 1, "c": None}, {"b": 1, "c": None}, {}],
    ),
    (
        "at most one optional property",
        {
            "type": "object",
            "properties": {"a": {"type": "null"}, "b": {"type": "null"}, "c": {"type": "null"}},
            "additionalProperties": False,
            "maxProperties": 1,
        },
        [{}, {"a": None}, {"c": None}],
        [{"a": None, "b": None}, {"d": None}],
    ),
]

CASES: list[Case] = [
    *COUNTED_CASES,
    (
        "object required+optional",
        {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "string"},
                "c": {"type": "boolean"},
            },
            "required": ["b"],
        },
        [{"b": "x"}, {"a": 1, "b": "x"}, {"b": "x", "c": True}, {"a": 1, "b": "x", "c": False}],
        [{}, {"a": 1}, {"b": "x", "d": 1}, {"a": "1", "b": "x"}],
    ),
    (
        "object all optional",
        {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "integer"},
                "c": {"type": "integer"},
            },
        },
        [
            {},
            {"a": 1},
            {"b": 2},
            {"c": 3},
            {"a": 1, "c": 3},
            {"a": 1, "b": 2, "c": 3},
            {"b": 2, "c": 3},
        ],
        [{"d": 1}, {"a": None}],
    ),
    ("object empty generation", {"type": "object"}, [{}], [{"a": 1}]),
    (
        "object required undeclared",
        {"type": "object", "required": ["x"]},
        [{"x": 1}, {"x": [1]}],
        [{}],
    ),
    (
        "object escaped keys",
        {
            "type": "object",
            "properties": {
                'we"ird': {"type": "null"},
                "a\\b": {"type": "null"},
                "é": {"type": "null"},
            },
            "required": ['we"ird', "a\\b", "é"],
        },
        [{'we"ird': None, "a\\b": None, "é": None}],
        [{}],
    ),
    (
        "dict of ints",
        {"type": "object", "additionalProperties": {"type": "integer"}},
        [{}, {"a": 1}, {"a": 1, "b": 2}, {"": 0}],
        [{"a": "x"}],
    ),
    (
        "props + additional schema",
        {
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
            "additionalProperties": {"type": "string"},
        },
        [{"id": 1}, {"id": 1, "x": "y"}],
        [{"id": 1, "x": 2}],
    ),
    (
        "additional false",
        {"type": "object", "properties": {"a": {"type": "null"}}, "additionalProperties": False},
        [{}, {"a": None}],
        [{"b": None}],
    ),
    (
        "false property",
        {"type": "object", "properties": {"a": False, "b": {"type": "null"}}},
        [{}, {"b": None}],
        [{"a": 1}],
    ),
    (
        "propertyNames enum",
        {
            "type": "object",
            "propertyNames": {"enum": ["x", "y"]},
            "additionalProperties": {"type": "integer"},
        },
        [{}, {"x": 1}, {"x": 1, "y": 2}],
        [{"z": 1}],
    ),
    (
        "patternProperties",
        {
            "type": "object",
            "patternProperties": {"^x-": {"type": "string"}},
            "additionalProperties": False,
        },
        [{}, {"x-a": "b"}, {"x-": "", "x-b": "c"}],
        [{"y": "b"}, {"x-a": 1}],
    ),
    (
        "minProperties 1",
        {
            "type": "object",
            "properties": {"a": {"type": "null"}, "b": {"type": "null"}},
            "minProperties": 1,
        },
        [{"a": None}, {"b": None}, {"a": None, "b": None}],
        [{}],
    ),
    (
        "maxProperties extras",
        {"type": "object", "additionalProperties": {"type": "null"}, "maxProperties": 2},
        [{}, {"a": None}, {"a": None, "b": None}],
        [{"a": None, "b": None, "c": None}],
    ),
    (
        "deep nesting",
        {
            "type": "object",
            "properties": {
                "a": {
                    "type": "object",
                    "properties": {
                        "b": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {"c": {"enum": [1, 2]}},
                                "required": ["c"],
                            },
                        }
                    },
                    "required": ["b"],
                }
            },
            "required": ["a"],
        },
        [{"a": {"b": []}}, {"a": {"b": [{"c": 1}, {"c": 2}]}}],
        [{"a": {"b": [{"c": 3}]}}, {"a": {}}],
    ),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


SPEC_CASES: list[Case] = [
    # maskbench Github_easy---o21725: {"type": "object"} holding a nested document
    (
        "unconstrained object nests",
        {"type": "object", "properties": {"s": {"type": "object"}}, "additionalProperties": False},
        [{"s": {"k": {"j": 1}}}, {"s": {"k": [1, None]}}, {"s": {}}],
        [{"s": 1}, {"t": {}}],
    ),
    # maskbench Github_easy---o44227, o21096: a tolerated extra with an array/object value
    (
        "tolerated extras nest",
        {"type": "object", "properties": {"name": {"type": "string"}}},
        [{"name": "x", "args ": [0, 2]}, {"data ": {"u": "w", "v": None}}],
        [{"name": 1, "args ": [0, 2]}],
    ),
    # maskbench Github_hard---o45313: extra names with escapes (composer's "psr-4" maps)
    (
        "extra names with escapes",
        {"type": "object", "properties": {"a": {"type": "integer"}}},
        [{"a": 1, "Vendor\\Namespace\\": "src/"}, {'x"y': 1, "t\n": 2}],
        [{"a": "x"}],
    ),
]


test_specification_mode_cases = specification_tests(SPEC_CASES + COUNTED_CASES)


UNSUPPORTED: list[Unsupported] = [
    # other names may come: the optional properties cannot be counted
    (
        {"type": "object", "properties": {"a": {"type": "null"}}, "maxProperties": 0},
        "maxProperties",
        "/",
        "specification",
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "null"}, "b": {"type": "null"}},
            "minProperties": 2,
        },
        "minProperties",
        "/",
        "specification",
    ),
    (  # 2**10 sets of optional properties
        {
            "type": "object",
            "properties": {name: {"type": "null"} for name in "abcdefghij"},
            "additionalProperties": False,
            "maxProperties": 5,
        },
        "maxProperties",
        "/",
        "specification",
    ),
    (
        {"type": "object", "additionalProperties": True, "minProperties": 2},
        "minProperties",
        "/",
        "generation",
    ),
    (
        {
            "type": "object",
            "properties": {"a" + "b" * 12: {}},
            "patternProperties": {"^[ab]*a[ab]{12}$": {}},  # a DFA of 2**13 states
        },
        "patternProperties",
        "/",
        "generation",
    ),
    (
        {"type": "object", "properties": {"ab": {}}, "propertyNames": {"pattern": "^a"}},
        "propertyNames",
        "/propertyNames",
        "specification",
    ),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)


def test_specification_mode_allows_extra_properties_after_declared() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    regex = schema_to_regex(schema, mode="specification")
    assert fullmatch(regex, '{"a":1,"b":null}')
    assert fullmatch(regex, '{"a":1,"b":1,"c":"x"}')
    # an extra key may not repeat a declared name (that would bypass its schema)
    assert not fullmatch(regex, '{"a":1,"a":"x"}')
    assert not fullmatch(schema_to_regex(schema), '{"a":1,"b":1}')


def test_specification_mode_extra_keys_exclude_declared_names() -> None:
    schema = {"type": "object", "properties": {"ab": {"type": "integer"}, "abc": {"type": "null"}}}
    regex = schema_to_regex(schema, mode="specification")
    for key, ok in [
        ("a", True),
        ("ab", False),
        ("abc", False),
        ("abcd", True),
        ("b", True),
        ("", True),
    ]:
        assert bool(fullmatch(regex, dumps({key: "x"}))) is ok, key


def _optional_schema(count: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {f"field_{i:02d}": {"type": "integer"} for i in range(count)},
    }


@pytest.mark.parametrize("count", [1, 2, 5, 10, 20, 40])
def test_optional_properties_stay_small(count: int) -> None:
    regex = schema_to_regex(_optional_schema(count))
    member = (
        len(
            schema_to_regex(
                {
                    "type": "object",
                    "properties": {"field_00": {"type": "integer"}},
                    "required": ["field_00"],
                }
            )
        )
        - 4
    )
    # O(k log k) copies of each member regex

    assert len(regex) <= member * (count * (math.log2(count) + 1) + 2) * 1.6
    fsm = compile_fsm(regex).reduce()
    assert len(fsm.states) < 16 * count + 20  # the minimal automaton stays linear
    keys = [f"field_{i:02d}" for i in range(count)]
    rng = random.Random(count)
    for _ in range(30):
        chosen = {k: rng.randint(-5, 5) for k in keys if rng.random() < 0.4}
        assert fullmatch(regex, dumps(chosen))
        if len(chosen) > 1:
            swapped = dict(reversed(list(chosen.items())))
            assert not fullmatch(regex, dumps(swapped))


def test_pattern_properties_exclude_the_declared_names_they_match() -> None:
    """Extra names come from the pattern minus the declared names (the pattern's DFA
    crossed with the trie of those names); a declared name must satisfy both schemas."""
    schema = {
        "type": "object",
        "properties": {"ab": {"type": "integer"}, "a": {"minimum": 0}},
        "patternProperties": {"^a": {"type": "integer", "maximum": 9}},
        "additionalProperties": False,
    }
    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    validator = validator_for(schema)
    for value in [{"ab": 1}, {"ab": 1, "a": 2, "ac": 3}, {"abc": 4}, {"a": 0, "aab": 9}, {}]:
        assert validator.is_valid(value)
        assert automaton.matches(dumps(value).encode()), value
    for value in [{"ab": 10}, {"a": -1}, {"ac": "x"}, {"b": 1}]:
        assert not automaton.matches(dumps(value).encode()), value
    assert not automaton.matches(b'{"ab":1,"ab":2}')  # a declared name once, in its place


@pytest.mark.parametrize("mode", ["specification", "generation"])
def test_extras_beside_pattern_properties_follow_additional_properties(mode: str) -> None:
    """A name that matches no ``patternProperties`` key and is not declared is an extra:
    its value follows ``additionalProperties``. Over random names and values, the
    automaton accepts exactly what jsonschema accepts (a name matching a pattern takes
    that pattern's schema; a name matching ``S_$`` wide, ``S_`` + line feed, is never an
    extra)."""
    schema = {
        "type": "object",
        "properties": {"sdk": {"type": "boolean"}},
        "patternProperties": {"sdkrel:.*": {"type": "string"}, "^S_$": {"type": "null"}},
        "additionalProperties": {"type": "integer"},
    }
    automaton = LazyAutomaton(schema_to_regex(schema, mode=mode))
    validator = validator_for(schema)
    rng = random.Random(7)
    pieces = ["sdk", "rel", ":", "S_", "\n", "x", "é", ""]
    values: list[Any] = [1, "s", None, True]
    verdicts = set()
    for _ in range(400):
        name = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 3))).replace("\\n", "\n")
        value = {name: rng.choice(values)}
        expected = validator.is_valid(value)
        if name == "S_\n":  # Python's re finds ^S_$ in it; ECMAScript does not
            expected = False
        assert automaton.matches(dumps(value).encode()) is expected, value
        verdicts.add(expected)
    assert verdicts == {True, False}
    assert automaton.matches(b'{"sdk":true,"sdkrel:a":"v","plain":3}')
    assert not automaton.matches(b'{"plain":"v"}')


def test_extras_beside_pattern_properties_in_plain_spelling_past_the_limits() -> None:
    """When the complement of the patterns, spelled with every JSON escape, is past the
    regex limits, extras are still produced in the plain spelling."""
    names = ["ActiveFine", "BoostUsed", "Factions", "FuelLevel", "JumpDist", "Latitude"]
    names += ["Longitude", "StarPos", "StarSystem", "SystemAddress", "event", "timestamp"]
    schema = {
        "type": "object",
        "properties": {name: {"type": "integer"} for name in names},
        "patternProperties": {"^(Materials|Economies)$": {"type": "array"}, "_Localised$": False},
        "additionalProperties": True,
    }
    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    assert automaton.matches(b'{"event":1,"StationName":"London","Materials":[]}')
    assert automaton.matches(b'{"Materials2":null}')
    assert not automaton.matches(b'{"Name_Localised":"x"}')
    assert not automaton.matches(b'{"Materials":"x"}')
    assert not automaton.matches(b'{"event":"x"}')  # a declared name is no extra


_KEY_PATTERNS = ["^x-", "^[a-z]+$", "^[0-9]{3}$", "^\\d+$", "^S_", "^S_[A-Z]", "é", "^(ab)+$"]


_KEY_PATTERNS += ["^$", "[^a-z]", "^.{2}$", "^a\\.b", "^[^\\x00-\\x7f]+$"]


def _interegular_disjoint(a: str, b: str) -> bool:
    """The answer of interegular's character automata (which regex_disjoint once used)."""
    first, second = interegular.parse_pattern(a), interegular.parse_pattern(b)
    flags = REFlags(0)
    alphabet = Alphabet.union(first.get_alphabet(flags), second.get_alphabet(flags))[0]
    return bool(first.to_fsm(alphabet).isdisjoint(second.to_fsm(alphabet)))


def test_regex_disjoint_agrees_with_interegular() -> None:
    """Key regexes of patternProperties (JSON string tokens), pairwise: the walk over
    the two byte automata answers as interegular's character automata do."""
    keys = [pattern_for_key(p, "", "patternProperties") for p in _KEY_PATTERNS]
    answers = []
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            assert a is not None and b is not None
            expected = _interegular_disjoint(a, b)
            assert regex_disjoint(a, b) is expected, (a, b)
            assert regex_disjoint(b, a) is expected, (b, a)
            answers.append(expected)
    assert True in answers and False in answers


def test_regex_disjoint_gives_up_past_its_step_bound() -> None:
    """A walk that would visit more pairs of states than allowed stops and answers
    "not proven disjoint" (sound), even for disjoint regexes."""
    a = '"[ab]*a[ab]{6}x"'  # 2**7 states each, and as many pairs reachable together
    b = '"[ab]*a[ab]{6}y"'
    assert regex_disjoint(a, b)
    assert not regex_disjoint(a, b, max_pairs=100)
    assert regex_disjoint(a, b, max_pairs=1_000)

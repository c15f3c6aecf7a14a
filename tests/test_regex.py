"""Tests for formcast.regex: JSON Schema -> regex.

Three kinds of checks, over many schemas:

* hand-written valid documents (compact, keys in declaration order) must fully match,
  hand-written invalid documents must not;
* soundness: random strings sampled from the regex's automaton (a random walk over the
  interegular FSM, driven by Hypothesis) must parse as JSON and validate with jsonschema,
  and with the Pydantic model when there is one;
* unsupported keywords raise ``UnsupportedSchemaError`` naming keyword and pointer.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import functools
import ipaddress
import json
import random
import re
import uuid
import warnings
from collections import defaultdict, deque
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import interegular
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interegular.fsm import Alphabet, anything_else
from interegular.patterns import REFlags
from pydantic import (
    AnyUrl,
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    TypeAdapter,
    conint,
    conlist,
    constr,
)

from formcast.automaton import LazyAutomaton
from formcast.errors import InvalidOptionError, SchemaError, UnsupportedSchemaError
from formcast.regex import (
    ANY_VALUE_DEPTH,
    INTEGER,
    NUMBER,
    STRING,
    WHITESPACE_DEFAULT,
    escape_literal,
    inline_definitions,
)
from formcast.regex.numbers import int_range as _int_range
from formcast.regex.numbers import number_range as _number_range
from formcast.regex.objects import pattern_for_key, regex_disjoint
from formcast.regex.translator import schema_to_regex
from formcast.schema import load_schema, validator_class

MASKBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "maskbench"


# ----------------------------------------------------------------------------- helpers


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@functools.lru_cache(maxsize=512)
def _matcher(regex: str) -> Callable[[str], bool]:
    """Python's ``re`` on the inlined regex, or formcast's automaton where inlining the
    definitions would be too large (unconstrained values nesting many levels)."""
    try:
        compiled = re.compile(inline_definitions(regex, max_length=300_000))
    except ValueError:
        automaton = LazyAutomaton(regex)
        return lambda text: automaton.matches(text.encode())
    return lambda text: compiled.fullmatch(text) is not None


def fullmatch(regex: str, text: str) -> bool | None:
    """Whether ``regex`` fully matches ``text`` (None when not, like ``re.fullmatch``)."""
    return True if _matcher(regex)(text) else None


@functools.lru_cache(maxsize=512)
def compile_fsm(regex: str) -> Any:
    return interegular.parse_pattern(inline_definitions(regex)).to_fsm()


_EXOTIC = ["é", "ñ", "中", "😀", "Z", "q", "~", " ", "7", "A", "\u2028", "ß", "\x7f"]


@functools.lru_cache(maxsize=512)
def _walk_tables(regex: str) -> tuple[Any, dict[int, int], dict[Any, list[str]]]:
    fsm = compile_fsm(regex)
    reverse: dict[int, set[int]] = defaultdict(set)
    for state, transitions in fsm.map.items():
        for target in transitions.values():
            reverse[target].add(state)
    distance = {state: 0 for state in fsm.finals}
    queue = deque(fsm.finals)
    while queue:
        state = queue.popleft()
        for previous in reverse[state]:
            if previous not in distance:
                distance[previous] = distance[state] + 1
                queue.append(previous)
    explicit = {c for c in fsm.alphabet if c is not anything_else}
    chars: dict[Any, list[str]] = {}
    for key, symbols in fsm.alphabet.by_transition.items():
        pool = [s for s in symbols if s is not anything_else]
        if anything_else in symbols:
            pool += [c for c in _EXOTIC if c not in explicit]
        chars[key] = pool
    return fsm, distance, chars


def sample(regex: str, rng: random.Random, count: int, max_len: int = 300) -> list[str]:
    """Random strings fully matched by ``regex``: a random walk over its automaton that may
    stop in any accepting state and heads for the nearest one after ``max_len`` chars."""
    fsm, distance, chars = _walk_tables(regex)
    assert fsm.initial in distance, "the regex matches nothing"
    out = []
    for _ in range(count):
        state, text = fsm.initial, []
        stop = rng.choice([0.05, 0.2, 0.5])
        while True:
            if state in fsm.finals and (rng.random() < stop or not fsm.map.get(state)):
                break
            options = [
                (key, target)
                for key, target in fsm.map.get(state, {}).items()
                if target in distance and chars[key]
            ]
            if len(text) >= max_len:
                options = [o for o in options if distance[o[1]] < distance[state]]
            if not options:
                assert state in fsm.finals
                break
            key, state = rng.choice(options)
            text.append(rng.choice(chars[key]))
        out.append("".join(text))
    return out


def validator_for(schema: Any) -> Any:
    cls = validator_class(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def assert_parses(regex: str) -> None:
    compile_fsm(regex)
    re.compile(inline_definitions(regex))
    for forbidden in (r"\d", r"\w", r"\s", r"\u", "(?=", "(?!", "(?<"):
        assert forbidden not in regex.replace("\\\\", ""), forbidden


# ----------------------------------------------------------------------------- hand-written cases

Case = tuple[str, Any, list[Any], list[Any]]

CASES: list[Case] = [
    (
        "string",
        {"type": "string"},
        ["", "abc", "é ñ 中 😀", 'q"uote', "back\\slash", "nl\n", "\x01"],
        [1, None, True],
    ),
    ("integer", {"type": "integer"}, [0, -1, 7, 1234567890123456789012], [1.5, "1", True, None]),
    (
        "number",
        {"type": "number"},
        [0, -1, 1.5, -0.25, 1e14, 3.0e-5, 1.5e99, 1e100],
        ["1", True, None],
    ),
    (
        "number as repr(float) writes it",
        {"type": "number"},
        [1e15, 9999999999999998.0, 1.5e300, 5e-324, 9.5e307, -2.5e-300],
        ["x"],
    ),
    (
        "number one-sided bound with exponents",
        {"type": "number", "minimum": -273.15},
        [-273.15, 0, 6.02e23, 1e-7, 1.5e300],
        [-273.16, -1e20, -6.02e23],
    ),
    (
        "number upper bound with exponents",
        {"type": "number", "maximum": 0},
        [0, -6.02e23, -1e-7],
        [1e-7, 6.02e23],
    ),
    (
        "number exclusive lower bound 0: no exponent",
        {"type": "number", "exclusiveMinimum": 0},
        [1.5, 0.001],
        [0, -1.0],
    ),
    (
        "number multipleOf integer",
        {"type": "number", "multipleOf": 2},
        [4.0, -6.0, 0.0, 10],
        [3, 4.5],
    ),
    ("boolean", {"type": "boolean"}, [True, False], [0, 1, "true", None]),
    ("null", {"type": "null"}, [None], [0, "", False]),
    ("type list", {"type": ["string", "null"]}, ["x", None], [1, True]),
    ("true schema", True, [1, "x", None, [1, "2"], {"a": 1}, [], {}], []),
    ("empty schema", {}, [1, "x", None, [], {}], []),
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
    (
        "int range 0..255",
        {"type": "integer", "minimum": 0, "maximum": 255},
        [0, 9, 10, 99, 100, 199, 200, 249, 250, 255],
        [-1, 256, 1000, 300],
    ),
    (
        "int range -20..-3",
        {"type": "integer", "minimum": -20, "maximum": -3},
        [-20, -19, -10, -3],
        [-2, -21, 0, 3, -100],
    ),
    (
        "int range -15..1234",
        {"type": "integer", "minimum": -15, "maximum": 1234},
        [-15, -1, 0, 5, 999, 1000, 1234],
        [-16, 1235, 2000, -100],
    ),
    ("int >= 1", {"type": "integer", "minimum": 1}, [1, 2, 9, 10, 123456789], [0, -1]),
    ("int <= 100", {"type": "integer", "maximum": 100}, [100, 0, -5, -99999], [101, 1000]),
    (
        "int exclusive",
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
        [1, 9],
        [0, 10],
    ),
    (
        "int fractional bounds",
        {"type": "integer", "minimum": 1.5, "maximum": 4.5},
        [2, 3, 4],
        [1, 5],
    ),
    (
        "int draft4 exclusive",
        {
            "type": "integer",
            "minimum": 5,
            "exclusiveMinimum": True,
            "maximum": 8,
            "exclusiveMaximum": True,
        },
        [6, 7],
        [5, 8],
    ),
    ("int single value", {"type": "integer", "minimum": 42, "maximum": 42}, [42], [41, 43]),
    (
        "int big range",
        {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
        [0, 2**63 - 1, -(2**63)],
        [2**63, -(2**63) - 1],
    ),
    ("int32 format", {"type": "integer", "format": "int32"}, [0, 2**31 - 1, -(2**31)], [2**31]),
    (
        "int multipleOf 5",
        {"type": "integer", "multipleOf": 5},
        [0, 5, -5, 10, 125, -1000],
        [1, 7, -3, 12],
    ),
    (
        "int multipleOf 4 >= 0",
        {"type": "integer", "multipleOf": 4, "minimum": 0},
        [0, 4, 8, 100, 112],
        [2, -4, 6, 102],
    ),
    (
        "int multipleOf 7 small range",
        {"type": "integer", "multipleOf": 7, "minimum": 0, "maximum": 100},
        [0, 7, 98],
        [1, 105, -7],
    ),
    ("number multipleOf 1", {"type": "number", "multipleOf": 1}, [1, 0, -3], [1.5]),
    (
        "number 0..1",
        {"type": "number", "minimum": 0, "maximum": 1},
        [0, 1, 0.5, 0.0, 1.0, 0.999],
        [-0.1, 1.01, 2, -1],
    ),
    ("number > 0", {"type": "number", "exclusiveMinimum": 0}, [0.001, 1, 5.5, 1e-3], [0, -1, 0.0]),
    (
        "number 1.5..3.25",
        {"type": "number", "minimum": 1.5, "maximum": 3.25},
        [1.5, 2, 2.999, 3.25, 3.2],
        [1.49, 3.26, 1, 4],
    ),
    (
        "number -2.5..-0.5",
        {"type": "number", "minimum": -2.5, "maximum": -0.5},
        [-2.5, -1, -0.5, -0.75],
        [-0.4, -3, 0],
    ),
    (
        "number < 10 exclusive",
        {"type": "number", "exclusiveMaximum": 10},
        [9.99, -100, 0],
        [10, 10.0, 11],
    ),
    (
        "number -1..1",
        {"type": "number", "minimum": -1, "maximum": 1},
        [-1, -0.5, 0, 0.5, 1],
        [-1.5, 1.5],
    ),
    (
        "number 0.1 exclusive",
        {"type": "number", "exclusiveMinimum": 0.1, "maximum": 0.3},
        [0.2, 0.3, 0.10001],
        [0.1, 0.31],
    ),
    (
        "string lengths",
        {"type": "string", "minLength": 2, "maxLength": 4},
        ["ab", "abcd", "é😀", "\n\t"],
        ["a", "abcde"],
    ),
    ("string maxLength 0", {"type": "string", "maxLength": 0}, [""], ["a"]),
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
    (
        "date",
        {"type": "string", "format": "date"},
        ["2024-02-29", "2023-12-31", "0001-01-01", "2000-02-29"],
        ["2023-02-29", "2023-13-01", "1900-02-29", "2023-04-31", "20230101"],
    ),
    (
        "time",
        {"type": "string", "format": "time"},
        ["12:30:00Z", "23:59:59.123+05:30"],
        ["24:00:00Z", "12:30", "12:60:00Z"],
    ),
    (
        "date-time",
        {"type": "string", "format": "date-time"},
        ["2024-01-01T00:00:00Z", "1999-12-31T23:59:59.5-08:00"],
        ["2024-01-01 00:00:00Z", "2024-01-01T00:00:00"],
    ),
    (
        "duration",
        {"type": "string", "format": "duration"},
        ["P1D", "PT1H30M", "P1Y2M3DT4H5M6S", "P2W"],
        ["P", "PT", "1D", "P1H"],
    ),
    (
        "uuid",
        {"type": "string", "format": "uuid"},
        ["123e4567-e89b-12d3-a456-426614174000"],
        ["123e4567e89b12d3a456426614174000", "xyz"],
    ),
    (
        "email",
        {"type": "string", "format": "email"},
        ["john.doe@example.com", "a+b@mail.co.uk"],
        ["john", "a@b", "x@host.test"],
    ),
    (
        "ipv4",
        {"type": "string", "format": "ipv4"},
        ["127.0.0.1", "255.255.255.255", "0.0.0.0"],
        ["256.1.1.1", "01.1.1.1", "1.1.1"],
    ),
    (
        "ipv6",
        {"type": "string", "format": "ipv6"},
        ["::1", "::", "fe80::1:2", "1:2:3:4:5:6:7:8", "1::"],
        ["1:2:3", ":::", "12345::"],
    ),
    (
        "hostname",
        {"type": "string", "format": "hostname"},
        ["example.com", "a-b.c"],
        ["-ab.com", "a..b"],
    ),
    (
        "uri",
        {"type": "string", "format": "uri"},
        ["https://example.com/a/b", "http://a.b.io:8080/"],
        ["example.com", "ftp:/x"],
    ),
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
    ("nullable", {"type": "string", "nullable": True}, ["a", None], [1]),
    (
        "false property",
        {"type": "object", "properties": {"a": False, "b": {"type": "null"}}},
        [{}, {"b": None}],
        [{"a": 1}],
    ),
    (
        "not type",
        {"not": {"type": ["string", "object", "array", "null"]}},
        [1, 1.5, True],
        ["a", None, [], {}],
    ),
    (
        "not enum string",
        {"type": "string", "not": {"enum": ["a", "b"]}, "maxLength": 2},
        ["", "c", "ab", "aa"],
        ["a", "b"],
    ),
    (
        "not const integer",
        {"type": "integer", "minimum": 0, "maximum": 5, "not": {"const": 3}},
        [0, 2, 4, 5],
        [3, 6],
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
    ("if without then", {"type": "integer", "if": {"minimum": 3}}, [1, 5], ["a"]),
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


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), CASES, ids=[c[0] for c in CASES])
def test_hand_written_cases(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    regex = schema_to_regex(schema)
    assert_parses(regex)
    validator = validator_for(schema)
    for value in valid:
        if "nullable" not in name:
            assert validator.is_valid(value), f"test bug: {value!r} is not valid"
        assert fullmatch(regex, dumps(value)), f"valid {value!r} does not match"
    for value in invalid:
        assert fullmatch(regex, dumps(value)) is None, f"invalid {value!r} matches"


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), CASES, ids=[c[0] for c in CASES])
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32))
def test_samples_are_valid(
    name: str, schema: Any, valid: list[Any], invalid: list[Any], seed: int
) -> None:
    regex = schema_to_regex(schema)
    validator = validator_for(schema)
    for text in sample(regex, random.Random(seed), 20):
        value = json.loads(text)
        if "nullable" in name and value is None:
            continue
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, f"sample {text!r} is invalid: {errors}"
        _check_formats(schema, value)


def _check_formats(schema: Any, value: Any) -> None:
    """Stricter format checks than jsonschema's (which skips some formats)."""
    if not isinstance(schema, dict) or not isinstance(value, str):
        return
    checks = {
        "duration": lambda v: TypeAdapter(datetime.timedelta).validate_python(v),
        "email": lambda v: TypeAdapter(EmailStr).validate_python(v),
        "uri": lambda v: TypeAdapter(AnyUrl).validate_python(v),
        "ipv6": ipaddress.IPv6Address,
        "ipv4": ipaddress.IPv4Address,
        "uuid": uuid.UUID,
        "date": datetime.date.fromisoformat,
        "date-time": lambda v: TypeAdapter(datetime.datetime).validate_python(v),
        "time": lambda v: TypeAdapter(datetime.time).validate_python(v),
        "hostname": lambda v: (
            fullmatch(
                r"(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*",
                v,
            )
            or (_ for _ in ()).throw(ValueError(v))
        ),
    }
    check = checks.get(schema.get("format", ""))
    if check is not None:
        check(value)


# ----------------------------------------------------------------------------- pydantic models


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 10


class Address(BaseModel):
    street: str
    city: str
    zip: str | None = None


class Person(BaseModel):
    name: str
    age: int
    height: float
    active: bool
    nickname: str | None = None
    email: EmailStr | None = None
    address: Address
    previous: list[Address] = []


class Everything(BaseModel):
    literal: Literal["a", "b"]
    color: Color
    level: Level
    counts: dict[str, int]
    tags: conlist(str, min_length=1, max_length=3)  # type: ignore[valid-type]
    code: constr(pattern=r"^[A-Z]{2}-\d{3}$")  # type: ignore[valid-type]
    short: Annotated[str, Field(min_length=2, max_length=5)]
    percent: Annotated[int, Field(ge=0, le=100)]
    positive: conint(gt=0)  # type: ignore[valid-type]
    ratio: Annotated[float, Field(ge=0, le=1)]
    price: Annotated[float, Field(gt=0)]
    when: datetime.date
    at: datetime.datetime
    clock: datetime.time
    span: datetime.timedelta
    ident: uuid.UUID
    pair: tuple[int, str]
    anything: Any
    union: int | str
    maybe_list: list[int] | None = None


class Node(BaseModel):
    value: int
    children: list[Node] = []
    parent: Node | None = None


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Pet(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    others: list[Annotated[Cat | Dog, Field(discriminator="kind")]] = []


class Many(BaseModel):
    model_config = ConfigDict(extra="forbid")

    f01: int | None = None
    f02: str | None = None
    f03: bool | None = None
    f04: float | None = None
    f05: int | None = None
    f06: str | None = None
    f07: bool | None = None
    f08: float | None = None


class Money(BaseModel):
    amount: decimal.Decimal
    currency: Literal["EUR", "USD"]


# A valid Everything; the cases change one field at a time.
_EVERYTHING: dict[str, Any] = {
    "literal": "a",
    "color": "red",
    "level": 10,
    "counts": {},
    "tags": ["t"],
    "code": "AB-123",
    "short": "abc",
    "percent": 100,
    "positive": 1,
    "ratio": 0.5,
    "price": 9.99,
    "when": "2024-02-29",
    "at": "2024-01-01T12:00:00Z",
    "clock": "08:00:00Z",
    "span": "PT1H",
    "ident": "123e4567-e89b-12d3-a456-426614174000",
    "pair": [1, "x"],
    "anything": 1,
    "union": 1,
}

MODEL_CASES: list[tuple[type[BaseModel], list[dict[str, Any]], list[dict[str, Any]]]] = [
    (
        Person,
        [
            {
                "name": "José Ñúñez",
                "age": 30,
                "height": 1.8,
                "active": True,
                "address": {"street": "Main", "city": "X"},
            },
            {
                "name": "A",
                "age": -1,
                "height": 2,
                "active": False,
                "nickname": None,
                "email": "a@b.com",
                "address": {"street": "s", "city": "c", "zip": "123"},
                "previous": [{"street": "s", "city": "c"}],
            },
        ],
        [
            {
                "name": "A",
                "age": 1.5,
                "height": 2,
                "active": False,
                "address": {"street": "s", "city": "c"},
            },
            {
                "age": 1,
                "name": "A",
                "height": 2,
                "active": False,
                "address": {"street": "s", "city": "c"},
            },
        ],
    ),
    (
        Everything,
        [
            {
                **_EVERYTHING,
                "counts": {"x": 1},
                "clock": "08:00:00+01:00",
                "anything": {"deep": 1},
                "union": "s",
            }
        ],
        [
            {**_EVERYTHING, "literal": "c"},
            {**_EVERYTHING, "tags": []},
            {**_EVERYTHING, "percent": 101},
            {**_EVERYTHING, "positive": 0},
        ],
    ),
    (
        Node,
        [{"value": 1}, {"value": 1, "children": [{"value": 2}], "parent": {"value": 0}}],
        [{"value": 1, "extra": 2}],
    ),
    (
        Pet,
        [
            {"pet": {"kind": "cat", "lives": 9}},
            {"pet": {"kind": "dog", "good": True}, "others": [{"kind": "cat", "lives": 1}]},
        ],
        [{"pet": {"kind": "cat", "good": True}}, {"pet": {"kind": "bird"}}],
    ),
    (
        Many,
        [{}, {"f01": 1}, {"f08": 1.5}, {"f02": "x", "f05": None, "f08": 2}],
        [{"f09": 1}, {"f02": 1}],
    ),
    (
        Money,
        [{"amount": 1.5, "currency": "EUR"}, {"amount": "1.5", "currency": "EUR"}],
        [{"amount": "1.5.", "currency": "EUR"}, {"amount": "x", "currency": "EUR"}],
    ),
]


def _model_regex(model: type[BaseModel]) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return schema_to_regex(model)


@pytest.mark.parametrize(
    ("model", "valid", "invalid"), MODEL_CASES, ids=[m[0].__name__ for m in MODEL_CASES]
)
def test_pydantic_models(
    model: type[BaseModel], valid: list[dict[str, Any]], invalid: list[dict[str, Any]]
) -> None:
    regex = _model_regex(model)
    assert_parses(regex)
    for value in valid:
        model.model_validate(value)
        assert fullmatch(regex, dumps(value)), f"valid {value!r} does not match"
    for value in invalid:
        assert fullmatch(regex, dumps(value)) is None, f"invalid {value!r} matches"


@pytest.mark.parametrize(
    ("model", "valid", "invalid"), MODEL_CASES, ids=[m[0].__name__ for m in MODEL_CASES]
)
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32))
def test_pydantic_samples_validate(
    model: type[BaseModel], valid: list[Any], invalid: list[Any], seed: int
) -> None:
    regex = _model_regex(model)
    # generation mode compiles load_schema(model): Pydantic's own forms (naive datetimes,
    # durations such as -P1D, decimals as strings) where its JSON Schema formats differ
    validator = validator_for(load_schema(model))
    for text in sample(regex, random.Random(seed), 20):
        model.model_validate_json(text)
        value = json.loads(text)
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, f"sample {text!r} is invalid: {errors}"


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


def test_generation_mode_ignores_extra_keys_and_keeps_order() -> None:
    regex = schema_to_regex(Address)
    assert fullmatch(regex, '{"street":"a","city":"b"}')
    assert not fullmatch(regex, '{"city":"b","street":"a"}')
    assert not fullmatch(regex, '{"street":"a","city":"b","other":1}')


# ----------------------------------------------------------------------------- modes and options


def test_specification_mode_allows_extra_properties_after_declared() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    regex = schema_to_regex(schema, mode="specification")
    assert fullmatch(regex, '{"a":1,"b":null}')
    assert fullmatch(regex, '{"a":1,"b":1,"c":"x"}')
    # an extra key may not repeat a declared name (that would bypass its schema)
    assert not fullmatch(regex, '{"a":1,"a":"x"}')
    assert not fullmatch(schema_to_regex(schema), '{"a":1,"b":1}')


SPEC_CASES: list[tuple[str, Any, list[Any], list[Any]]] = [
    # maskbench Github_easy---o21725: {"type": "object"} holding a nested document
    (
        "unconstrained object nests",
        {"type": "object", "properties": {"s": {"type": "object"}}, "additionalProperties": False},
        [{"s": {"k": {"j": 1}}}, {"s": {"k": [1, None]}}, {"s": {}}],
        [{"s": 1}, {"t": {}}],
    ),
    ("true nests two levels", True, [[[1]], {"a": {"b": None}}], []),
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
    # maskbench Github_easy---o51165, o78130: any RFC 3986 URI
    (
        "uri is RFC 3986",
        {"type": "string", "format": "uri"},
        [
            "file:///path/to/file1.js",
            "https://example.com/upload/0123456789abcdef0123456789abcdef",
            "urn:isbn:0451450523",
            "mailto:a@b.c",
            "http://[::1]:80/a?b=c#d",
            "a:",
        ],
        ["/relative", "http://a b", "1a:b", "http://%zz", "", "é:x"],
    ),
    (
        "uri-reference",
        {"type": "string", "format": "uri-reference"},
        ["/relative/path", "rel", "", "#frag", "?q", "http://x.y/z", "/a:b"],
        ["a b", "1a:b", "%g0"],
    ),
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


@pytest.mark.parametrize(
    ("name", "schema", "valid", "invalid"), SPEC_CASES, ids=[c[0] for c in SPEC_CASES]
)
def test_specification_mode_cases(
    name: str, schema: Any, valid: list[Any], invalid: list[Any]
) -> None:
    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    validator = validator_for(schema)
    for value in valid:
        assert validator.is_valid(value), f"test bug: {value!r} is not valid"
        assert automaton.matches(dumps(value).encode()), f"valid {value!r} does not match"
    for value in invalid:
        assert not automaton.matches(dumps(value).encode()), f"invalid {value!r} matches"


def test_unconstrained_values_nest_to_the_depth_limit_in_large_schemas() -> None:
    """Each level of an unconstrained value is one definition, so a schema with many open
    members stays small and every member nests ANY_VALUE_DEPTH levels, extras too."""
    members = {f"p{i}": {"type": "object"} for i in range(40)}
    regex = schema_to_regex({"type": "object", "properties": members}, mode="specification")
    assert len(regex) < 100_000
    automaton = LazyAutomaton(regex)

    def nested(depth: int) -> Any:
        return 1 if depth == 0 else {"k": [nested(depth - 2)]} if depth >= 2 else [1]

    for depth in range(1, ANY_VALUE_DEPTH + 1):
        assert automaton.matches(dumps({"p0": {"a": nested(depth)}}).encode()), depth
        assert automaton.matches(dumps({"p0": {}, "extra": nested(depth)}).encode()), depth
    assert not automaton.matches(dumps({"p0": {"a": nested(ANY_VALUE_DEPTH + 1)}}).encode())
    assert not automaton.matches(dumps({"extra": nested(ANY_VALUE_DEPTH + 1)}).encode())
    # generation mode keeps depth 1, and plain regex syntax
    assert fullmatch(schema_to_regex(True), '{"a":[1]}') is None


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


@pytest.mark.parametrize(
    ("whitespace", "limit"), [(True, WHITESPACE_DEFAULT), (1, 1), (2, 2), (0, 0)]
)
def test_whitespace_option(whitespace: bool | int, limit: int) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "array", "items": {"type": "integer"}}},
        "required": ["a"],
    }
    regex = schema_to_regex(schema, whitespace=whitespace)
    assert fullmatch(regex, '{"a":[1,2]}')
    spaced = (
        "{"
        + " " * limit
        + '"a"'
        + "\n" * limit
        + ":"
        + "\t" * limit
        + "["
        + " " * limit
        + "1"
        + " " * limit
        + "]"
        + " " * limit
        + "}"
    )
    assert fullmatch(regex, spaced)
    too_much = "{" + " " * (limit + 1) + '"a":[1]}'
    assert not fullmatch(regex, too_much)
    assert not fullmatch(regex, ' {"a":[1]}')
    empty = "{" + ' "a":[' + " " * limit + "]}"
    assert bool(fullmatch(regex, empty)) is (limit >= 1)


def test_compact_is_default() -> None:
    regex = schema_to_regex({"type": "array", "items": {"type": "integer"}})
    assert fullmatch(regex, "[1,2]")
    assert not fullmatch(regex, "[1, 2]")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "strict"},
        {"whitespace": -1},
        {"whitespace": "yes"},
        {"max_recursion_depth": -1},
        {"max_recursion_depth": 1.5},
    ],
)
def test_invalid_options(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidOptionError):
        schema_to_regex({"type": "string"}, **kwargs)


def test_schema_errors_propagate() -> None:
    with pytest.raises(SchemaError):
        schema_to_regex("{not json")
    with pytest.raises(SchemaError):
        schema_to_regex(int)  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        schema_to_regex({"type": "nope"})


def test_json_text_and_bool_inputs() -> None:
    assert fullmatch(schema_to_regex('{"type": "integer"}'), "12")
    assert fullmatch(schema_to_regex(True), '{"a":[1]}') is None  # nesting depth 1
    assert fullmatch(schema_to_regex(True), '{"a":1,"b":"c"}')


def test_unknown_format_warns_in_generation_mode() -> None:
    with pytest.warns(UserWarning, match="unknown format 'color'"):
        regex = schema_to_regex({"type": "string", "format": "color"})
    assert fullmatch(regex, '"anything"')


def test_unknown_format_refused_in_specification_mode() -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(
            {"type": "object", "properties": {"c": {"type": "string", "format": "color"}}},
            mode="specification",
        )
    assert (info.value.keyword, info.value.pointer) == ("format", "/properties/c")


def test_unique_items_depends_on_mode() -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    assert fullmatch(schema_to_regex(schema), "[1,2]")
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(schema, mode="specification")
    assert info.value.keyword == "uniqueItems"
    assert fullmatch(schema_to_regex({**schema, "maxItems": 1}, mode="specification"), "[1]")


# ----------------------------------------------------------------------------- recursion


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_depth(v) for v in value), default=0)
    return 0


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
        schema_to_regex(schema)
    assert info.value.keyword == "$ref"
    assert info.value.pointer == "/$defs/a/properties/next"
    assert "max_recursion_depth=3" in str(info.value)


def test_recursion_through_min_items_is_refused() -> None:
    schema = {
        "$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}, "minItems": 1}},
        "$ref": "#/$defs/t",
    }
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(schema)
    assert info.value.keyword == "$ref"


# ----------------------------------------------------------------------------- unsupported


UNSUPPORTED: list[tuple[Any, str, str, str]] = [
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
    ({"type": "string", "format": "date", "maxLength": 5}, "maxLength", "/", "generation"),
    (
        {"type": "string", "allOf": [{"pattern": "a"}, {"pattern": "b"}]},
        "pattern",
        "/allOf/1",
        "generation",
    ),
    ({"type": "string", "format": "date", "pattern": "^2"}, "pattern", "/", "generation"),
    ({"type": "string", "format": "x-custom"}, "format", "/", "specification"),
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
    ({"type": "number", "multipleOf": 0.01}, "multipleOf", "/", "generation"),
    ({"type": "integer", "multipleOf": 3}, "multipleOf", "/", "generation"),
    ({"type": "integer", "multipleOf": 2, "minimum": 10}, "multipleOf", "/", "generation"),
    ({"if": {"pattern": "^a"}, "then": {"minLength": 2}}, "if", "/", "generation"),
    ({"oneOf": [{"pattern": "a"}, {"pattern": "b"}]}, "oneOf", "/", "specification"),
    (
        {
            "$defs": {"x": {"oneOf": [{"type": "string"}, {"type": "string", "pattern": "^a"}]}},
            "$ref": "#/$defs/x",
        },
        "oneOf",
        "/$defs/x",
        "generation",
    ),
    ({"$ref": "https://example.com/other.json"}, "$ref", "/", "generation"),
    ({"$dynamicRef": "#node"}, "$dynamicRef", "/", "generation"),
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
    (
        {"type": "object", "properties": {"a": {"type": "null"}}, "maxProperties": 0},
        "maxProperties",
        "/",
        "generation",
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "null"}, "b": {"type": "null"}},
            "minProperties": 2,
        },
        "minProperties",
        "/",
        "generation",
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
    ({"not": {"pattern": "a"}}, "not", "/not", "generation"),
    ({"type": "number", "not": {"const": 1.5}}, "not", "/", "generation"),
    (False, "false", "/", "generation"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "minimum", "/", "generation"),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "type", "/allOf/0", "generation"),
    ({"enum": [1, 2], "type": "string"}, "enum", "/", "generation"),
]


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer", "mode"),
    UNSUPPORTED,
    ids=[f"{u[1]}-{i}" for i, u in enumerate(UNSUPPORTED)],
)
def test_unsupported_keywords(schema: Any, keyword: str, pointer: str, mode: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(schema, mode=mode)  # type: ignore[arg-type]
    assert info.value.keyword == keyword, str(info.value)
    assert info.value.pointer == pointer, str(info.value)


def test_annotations_and_unknown_keywords_are_ignored() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/s",
        "$comment": "c",
        "title": "T",
        "description": "D",
        "examples": [1],
        "default": 1,
        "deprecated": True,
        "readOnly": True,
        "writeOnly": False,
        "x-vendor": {"anything": 1},
        "type": "integer",
    }
    assert schema_to_regex(schema) == schema_to_regex({"type": "integer"})


# ----------------------------------------------------------------------------- building blocks


@pytest.mark.parametrize(
    ("lo", "hi"),
    [
        (0, 0),
        (0, 9),
        (0, 255),
        (1, 100),
        (-5, 5),
        (-128, 127),
        (17, 4321),
        (-999, -10),
        (0, None),
        (1, None),
        (37, None),
        (None, 0),
        (None, -7),
        (None, 250),
        (-40, None),
        (None, None),
        (99, 1001),
        (10**17, 10**18 + 5),
    ],
)
def test_int_range_exact(lo: int | None, hi: int | None) -> None:
    regex = _int_range(lo, hi)
    assert regex is not None
    assert_parses(regex)
    probe = {0, 1, -1, 9, 10, 99, 100, 101, 999, 1000, 1001, 10**18, 10**18 + 5, 10**18 + 6}
    for bound in (lo, hi):
        if bound is not None:
            probe |= {
                bound - 11,
                bound - 10,
                bound - 2,
                bound - 1,
                bound,
                bound + 1,
                bound + 2,
                bound + 10,
            }
    for value in sorted(probe) + list(range(-300, 300)):
        inside = (lo is None or value >= lo) and (hi is None or value <= hi)
        assert bool(fullmatch(regex, str(value))) is inside, value


@given(st.integers(-(10**6), 10**6), st.integers(0, 10**5), st.integers(-(10**7), 10**7))
@settings(max_examples=300, deadline=None)
def test_int_range_property(lo: int, width: int, probe: int) -> None:
    hi = lo + width
    regex = _int_range(lo, hi)
    assert regex is not None
    for value in (probe, lo, hi, lo - 1, hi + 1, (lo + hi) // 2):
        assert bool(fullmatch(regex, str(value))) is (lo <= value <= hi)
    assert not fullmatch(regex, "-0") and not fullmatch(regex, "007")


@given(
    st.one_of(st.none(), st.decimals(-1000, 1000, places=3)),
    st.one_of(st.none(), st.decimals(-1000, 1000, places=3)),
    st.decimals(-1100, 1100, places=4),
)
@settings(max_examples=400, deadline=None)
def test_number_range_property(lo: Any, hi: Any, probe: Any) -> None:
    regex = _number_range(lo, hi)
    if lo is not None and hi is not None and lo > hi:
        assert regex is None
        return
    assert regex is not None
    for value in [probe, *(b for b in (lo, hi) if b is not None)]:
        text = format(value.normalize(), "f")
        if text.startswith("-0") and value == 0:
            continue
        inside = (lo is None or value >= lo) and (hi is None or value <= hi)
        assert bool(fullmatch(regex, text)) is inside, (text, lo, hi)


@given(st.floats(-1e6, 1e6, allow_nan=False), st.booleans(), st.booleans())
@settings(max_examples=200, deadline=None)
def test_float_bounds_are_exact_after_parsing(bound: float, lower: bool, strict: bool) -> None:
    keyword = (
        ("exclusiveMinimum" if strict else "minimum")
        if lower
        else ("exclusiveMaximum" if strict else "maximum")
    )
    schema = {"type": "number", keyword: bound}
    regex = schema_to_regex(schema)
    validator = validator_for(schema)
    rng = random.Random(int(bound * 1000))
    for text in sample(regex, rng, 30, max_len=40):
        assert validator.is_valid(json.loads(text)), (text, schema)
    # the bound itself, written as Python writes it, is in or out as it should be
    text = format(decimal.Decimal(repr(bound)), "f")
    if not text.startswith("-0") and len(text.partition(".")[2]) <= 15:
        assert bool(fullmatch(regex, text)) is (not strict), (text, schema)


def test_escape_literal() -> None:
    text = 'a.b*c+d?e(f)g[h]i{j}k|l^m$n\\o"p\x00\x1f\x7fé😀'
    assert fullmatch(escape_literal(text), text)
    assert_parses(escape_literal(text))


def test_public_constants_match_json() -> None:
    assert fullmatch(INTEGER, "-12") and not fullmatch(INTEGER, "012")
    assert fullmatch(NUMBER, "-1.5e+10") and not fullmatch(NUMBER, "1.")
    assert not fullmatch(NUMBER, "1e400") and not fullmatch(NUMBER, "1" * 400 + ".5")
    assert fullmatch(STRING, '"a\\"b\\u00e9"') and not fullmatch(STRING, '"\\ud800"')


# ----------------------------------------------------------------------------- sizes


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
    import math

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


# ----------------------------------------------------------------------------- maskbench


def _maskbench_files() -> list[Path]:
    if not MASKBENCH.is_dir():
        return []
    files = sorted(MASKBENCH.glob("*.json"))
    return files[:: max(1, len(files) // 60)]


def _property_order(schema: Any) -> dict[str, int]:
    order: dict[str, int] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                for name in properties:
                    order.setdefault(name, len(order))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return order


def _reorder(value: Any, order: dict[str, int]) -> Any:
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (order.get(k, len(order)), 0))
        return {k: _reorder(value[k], order) for k in keys}
    if isinstance(value, list):
        return [_reorder(v, order) for v in value]
    return value


@pytest.mark.skipif(not MASKBENCH.is_dir(), reason=f"maskbench data not found at {MASKBENCH}")
@pytest.mark.parametrize("path", _maskbench_files(), ids=lambda p: p.stem)
def test_maskbench_sample(path: Path) -> None:
    data = json.loads(path.read_text())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            regex = schema_to_regex(data["schema"], mode="specification")
    except UnsupportedSchemaError:
        return
    if len(regex) > 200_000:
        pytest.skip("regex too large for a quick interegular parse")
    order = _property_order(data["schema"])
    for test in data["tests"]:
        text = dumps(_reorder(test["data"], order))
        matched = fullmatch(regex, text) is not None
        if not test["valid"]:
            assert not matched, f"invalid instance matches: {text[:200]}"


def test_exponential_anyof_distribution_is_refused_not_run() -> None:
    """allOf of 16 two-way anyOfs distributes into 65,536 conjunctions: refused."""
    parts = [{"anyOf": [{"maxLength": 9}, {"maxLength": 8 + i}]} for i in range(16)]
    with pytest.raises(UnsupportedSchemaError) as raised:
        schema_to_regex({"type": "string", "allOf": parts}, mode="specification")
    assert raised.value.keyword == "anyOf"
    assert raised.value.pointer.startswith("/allOf/")
    assert "sub-schemas" in str(raised.value)


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


@pytest.mark.parametrize(
    ("pattern", "low", "alphabet"),
    [(r"^(\d+\.\d+\.\d+.*)$", 7, "1.a"), (r"^[a-z]([-a-z0-9]*[a-z0-9])?$", 3, "a1-")],
)
def test_min_length_alone_combines_with_a_pattern(pattern: str, low: int, alphabet: str) -> None:
    schema = {"type": "string", "pattern": pattern, "minLength": low}
    _assert_agrees_on_random_strings(schema, alphabet, low + 6, seed=5)


# ----------------------------------------------------------------------------- disjointness

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

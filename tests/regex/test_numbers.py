"""Tests for formcast.regex.numbers: integer and decimal ranges, float bounds, multipleOf."""

from __future__ import annotations

import decimal
import json
import random
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from regex_checks import (
    Case,
    Unsupported,
    assert_parses,
    case_tests,
    fullmatch,
    sample,
    unsupported_tests,
    validator_for,
)

from formcast.automaton import LazyAutomaton
from formcast.errors import UnsupportedSchemaError
from formcast.regex.numbers import int_range, number_range
from formcast.regex.translator import schema_to_regex

CASES: list[Case] = [
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
        "not const integer",
        {"type": "integer", "minimum": 0, "maximum": 5, "not": {"const": 3}},
        [0, 2, 4, 5],
        [3, 6],
    ),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


UNSUPPORTED: list[Unsupported] = [
    ({"type": "number", "multipleOf": 2.5}, "multipleOf", "/", "generation"),
    ({"type": "number", "multipleOf": 0.3}, "multipleOf", "/", "generation"),
    ({"type": "number", "multipleOf": 0.0001}, "multipleOf", "/", "generation"),
    ({"type": "integer", "multipleOf": 13}, "multipleOf", "/", "generation"),
    ({"type": "integer", "multipleOf": 101, "minimum": 10}, "multipleOf", "/", "generation"),
    ({"type": "number", "not": {"const": 1.5}}, "not", "/", "generation"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "minimum", "/", "generation"),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)


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
    regex = int_range(lo, hi)
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
    regex = int_range(lo, hi)
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
    regex = number_range(lo, hi)
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


def test_specification_numbers_include_long_integers() -> None:
    """A third-party document may hold an integer of any length where a number goes
    (jsonschema accepts ``234567890123456789`` as a number). Specification mode accepts
    it, with no fraction or exponent, in typed and in unconstrained values; generation
    mode keeps to numbers a Python float holds."""
    from formcast.automaton import LazyAutomaton
    from formcast.regex.translator import schema_to_regex

    long = b"234567890123456789"
    for schema in [{"type": "number"}, {}, {"type": "object"}]:
        text = long if schema != {"type": "object"} else b'{"v":' + long + b"}"
        spec = LazyAutomaton(schema_to_regex(schema, mode="specification"))
        assert spec.matches(text), schema
        assert spec.matches(b"-" + long) or schema == {"type": "object"}
        assert not spec.matches(long + b".5")
        assert not spec.matches(b"0" + long)
    generation = LazyAutomaton(schema_to_regex({"type": "number"}))
    assert not generation.matches(long)
    assert generation.matches(b"2345678901234567")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "multipleOf": 0.01},
        {"type": "number", "multipleOf": 0.25, "minimum": 0.25},
        {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 99.99},
        {
            "type": "number",
            "multipleOf": 0.5,
            "exclusiveMaximum": 3,
            "allOf": [{"multipleOf": 0.2}],
        },
        {"type": "number", "multipleOf": 0.125, "minimum": -2},
    ],
)
def test_fractional_multiples_are_exact(schema: dict[str, Any]) -> None:
    """A step that divides 1 (0.01, 0.25, 0.125; several steps combine to their least
    common multiple) admits exactly the numbers that are whole multiples of it by exact
    decimal arithmetic, as the specification says, within the bounds; Pydantic accepts
    every such value of a ``multiple_of`` float."""
    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    steps = [Decimal(repr(schema["multipleOf"]))]
    steps += [Decimal(repr(p["multipleOf"])) for p in schema.get("allOf", [])]
    low = schema.get("minimum")
    high = schema.get("maximum")
    rng = random.Random(3)
    verdicts = set()
    for _ in range(3000):
        text = f"{rng.randint(-400, 400) / rng.choice([1, 2, 4, 8, 10, 20, 100, 1000]):.4f}"
        text = text.rstrip("0") if rng.random() < 0.5 else text
        text = text.rstrip(".") if text.endswith(".") else text
        value = Decimal(text)
        expected = all(value % step == 0 for step in steps)
        expected = expected and (low is None or value >= Decimal(repr(low)))
        expected = expected and (high is None or value <= Decimal(repr(high)))
        if "exclusiveMaximum" in schema:
            expected = expected and value < schema["exclusiveMaximum"]
        assert automaton.matches(text.encode()) is expected, text
        verdicts.add(expected)
    assert verdicts == {True, False}


def test_pydantic_accepts_generated_fractional_multiples() -> None:
    """Every value the generation-mode automaton admits for ``multiple_of=0.01`` up to
    four integer digits is accepted by Pydantic (whose float check has a tolerance)."""

    class Price(BaseModel):
        amount: float = Field(multiple_of=0.01, ge=0, le=9999.99)

    automaton = LazyAutomaton(schema_to_regex(Price.model_json_schema()))
    for cents in range(0, 1_000_000, 37):
        text = f'{{"amount":{cents // 100}.{cents % 100:02d}}}'
        assert automaton.matches(text.encode()), text
        Price.model_validate_json(text)
    assert not automaton.matches(b'{"amount":1.001}')


@pytest.mark.parametrize(
    ("step", "low", "high"),
    [
        (3, None, None),
        (7, None, None),
        (12, 0, None),
        (10, None, 99),
        (2, 10, None),
        (30, -1000, 5000),
    ],
)
def test_whole_multiples_by_remainder_automaton(
    step: int, low: int | None, high: int | None
) -> None:
    """Steps that no power of ten is a multiple of, or bounds far from zero, take the
    automaton that keeps the remainder of the digits read so far; the integers it
    admits are exactly the multiples within the bounds (no ``-0``, no leading zero)."""
    schema: dict[str, Any] = {"type": "integer", "multipleOf": step}
    if low is not None:
        schema["minimum"] = low
    if high is not None:
        schema["maximum"] = high
    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    for value in range(-2500, 2500):
        expected = value % step == 0 and (low is None or value >= low)
        expected = expected and (high is None or value <= high)
        assert automaton.matches(str(value).encode()) is expected, value
    assert automaton.matches(str(step * 10**20).encode()) is (high is None)
    assert not automaton.matches(b"-0") and not automaton.matches(f"0{step}".encode())


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "not": {"multipleOf": 3}},
        {"type": "number", "not": {"multipleOf": 2}, "minimum": 0, "maximum": 10},
        {"type": "integer", "multipleOf": 3, "not": {"anyOf": [{"multipleOf": 2}]}},
        {"not": {"multipleOf": 2}},
        {"type": "number", "multipleOf": 4, "not": {"multipleOf": 8}, "minimum": 1},
        {"oneOf": [{"multipleOf": 2}, {"multipleOf": 3}]},
        {"type": "integer", "not": {"anyOf": [{"multipleOf": 6}, {"multipleOf": 10}]}},
    ],
)
def test_excluded_multiples_are_exact(schema: dict[str, Any]) -> None:
    """``not: {multipleOf: k}`` (also reached by negating ``anyOf`` or a ``oneOf``
    branch) is written by remainders: over integers, quarters and other types the
    automaton accepts exactly what jsonschema accepts, except integers spelled with a
    fraction (``4.0``), which it does not produce."""
    automaton = LazyAutomaton(schema_to_regex(schema, mode="specification"))
    validator = validator_for(schema)
    values: list[Any] = [x / 4 for x in range(-120, 120) if x % 4] + list(range(-300, 300))
    values += ["a", None, [1], 10**20 + 1]
    for value in values:
        assert automaton.matches(json.dumps(value).encode()) is validator.is_valid(value), value


def test_excluded_multiples_past_a_hundred_remainders_are_refused() -> None:
    """Excluding the multiples of 3 and 5 keeps 15 remainders; 7, 11 and 13 would need
    1,001, past 100: refused by name."""
    schema = {"type": "integer", "not": {"anyOf": [{"multipleOf": 3}, {"multipleOf": 5}]}}
    assert LazyAutomaton(schema_to_regex(schema, mode="specification")).matches(b"13")
    schema = {"type": "integer", "not": {"anyOf": [{"multipleOf": k} for k in (7, 11, 13)]}}
    with pytest.raises(UnsupportedSchemaError) as caught:
        schema_to_regex(schema, mode="specification")
    assert caught.value.keyword == "not"

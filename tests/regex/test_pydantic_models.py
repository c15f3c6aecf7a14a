"""Tests for Pydantic models through formcast.regex (generation mode)."""

from __future__ import annotations

import datetime
import decimal
import enum
import json
import random
import uuid
import warnings
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, EmailStr, Field, conint, conlist, constr
from regex_checks import (
    UNROLLED,
    Node,
    assert_parses,
    dumps,
    fullmatch,
    sample,
    validator_for,
)

from formcast.automaton import compile_automaton
from formcast.regex.translator import schema_to_regex
from formcast.schema import load_schema


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


def _model_regex(model: type[BaseModel], max_recursion_depth: int | None = UNROLLED) -> str:
    """The model's regex, recursion unrolled by default (Python's ``re`` and the sampler
    read finite regexes only)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return schema_to_regex(model, max_recursion_depth=max_recursion_depth)


@pytest.mark.parametrize(
    ("model", "valid", "invalid"), MODEL_CASES, ids=[m[0].__name__ for m in MODEL_CASES]
)
def test_pydantic_models(
    model: type[BaseModel], valid: list[dict[str, Any]], invalid: list[dict[str, Any]]
) -> None:
    regex = _model_regex(model)
    assert_parses(regex)
    exact = compile_automaton(_model_regex(model, max_recursion_depth=None))
    for value in valid:
        model.model_validate(value)
        assert fullmatch(regex, dumps(value)), f"valid {value!r} does not match"
        assert exact.matches(dumps(value).encode()), f"valid {value!r} does not match exactly"
    for value in invalid:
        assert fullmatch(regex, dumps(value)) is None, f"invalid {value!r} matches"
        assert not exact.matches(dumps(value).encode()), f"invalid {value!r} matches exactly"


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


def test_generation_mode_ignores_extra_keys_and_keeps_order() -> None:
    regex = schema_to_regex(Address)
    assert fullmatch(regex, '{"street":"a","city":"b"}')
    assert not fullmatch(regex, '{"city":"b","street":"a"}')
    assert not fullmatch(regex, '{"street":"a","city":"b","other":1}')

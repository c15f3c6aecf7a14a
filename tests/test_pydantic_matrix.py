"""A matrix over the Pydantic field types people write, in both compilation modes.

Every case is a small model with one field ``value`` (or a hand-written model). For each
case and each mode (``generation``: ``formcast.compile(Model, tokenizer)``;
``specification``: ``formcast.compile(Model.model_json_schema(), tokenizer,
mode="specification")``):

* random decoding: a cursor is walked with seeded random choices among the allowed tokens
  (budget-safe, sometimes heading for the nearest ending, stopping at random once
  accepting); the text must validate with ``jsonschema`` (formats checked) against the
  schema that was compiled: in ``generation`` mode with ``Model.model_validate_json`` too,
  and against ``formcast.schema.load_schema(Model)`` (the schema generation mode compiles:
  Pydantic's own forms of decimals, durations, naive datetimes, URLs with their schemes,
  dict keys, sets of enums) and, unless the case says Pydantic's forms leave it, against
  ``Model.model_json_schema()``; in ``specification`` mode the JSON Schema alone decides
  (``Model.model_json_schema()``: e.g. ``dict[int, str]``'s schema allows any key);
* hand-written valid values, serialized by Pydantic (``model_dump_json()``, compact), are
  accepted token by token with the real tokenizer and end in an accepting state;
* hand-written invalid documents are rejected.

In ``specification`` mode the constraint is the JSON Schema, so only values that the JSON
Schema (with format checking) also accepts, and documents it also rejects, are used there.
Documented refusals (``uniqueItems`` in specification mode, fractional ``multipleOf`` in
both) are asserted explicitly, keyword and
JSON pointer included. Failures are collected per case, so one run lists all of them; no
case is marked xfail.
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import json
import pathlib
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum, IntEnum
from typing import Annotated, Any, Literal, Optional, Union

import jsonschema  # type: ignore[import-untyped, unused-ignore]
import numpy as np
import pydantic
import pytest
from pydantic import (
    UUID4,
    AnyUrl,
    BaseModel,
    EmailStr,
    Field,
    HttpUrl,
    StringConstraints,
    condecimal,
    confloat,
    conint,
    constr,
)

import formcast
from formcast.errors import TokenNotAllowedError, UnsupportedSchemaError
from formcast.index import TokenIndex
from formcast.schema import load_schema

SEEDS = range(20)
"""Random walks per case and mode."""

MAX_SLACK = 24
"""Tokens allowed beyond the shortest completion, drawn per walk in ``[0, MAX_SLACK)``."""

MODES = ("generation", "specification")
FIELD_POINTER = "/properties/value"


# ----------------------------------------------------------------------------- models


class Color(str, Enum):
    RED = "red"
    GREEN = "green"
    LIGHT_BLUE = "light blue"
    QUOTED = 'say "hi"'


class Priority(IntEnum):
    LOW = 1
    MEDIUM = 5
    HIGH = 10


class Cat(BaseModel):
    lives: int


class Dog(BaseModel):
    name: str
    good: bool


class TaggedCat(BaseModel):
    kind: Literal["cat"]
    lives: Annotated[int, Field(ge=0, le=9)]


class TaggedDog(BaseModel):
    kind: Literal["dog"]
    name: str


class TaggedBird(BaseModel):
    kind: Literal["bird"]
    wingspan: float | None = None


class Item(BaseModel):
    sku: Annotated[str, Field(pattern=r"^[A-Z]{3}-[0-9]{4}$")]
    quantity: Annotated[int, Field(ge=1)]
    price: Annotated[float, Field(ge=0)]


class Address(BaseModel):
    street: str
    city: str
    postcode: Annotated[str, Field(pattern=r"^[0-9]{5}$")]


class Person(BaseModel):
    name: str
    address: Address
    previous: list[Address] = []
    billing: Address | None = None


class WithDefaults(BaseModel):
    name: str
    nickname: str | None = None
    age: Annotated[int, Field(ge=0, le=150)] = 0
    tags: list[str] = Field(default_factory=list)
    ratio: float = 0.5
    active: bool = True


class TreeNode(BaseModel):
    label: str
    children: list[TreeNode] = []


class LinkedNode(BaseModel):
    value: int
    next: LinkedNode | None = None


# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One model, with hand-written valid values and invalid documents.

    ``valid`` holds inputs of ``model.model_validate`` (dumped with ``model_dump_json``);
    ``valid_json`` and ``invalid`` hold raw JSON documents. ``refusals`` maps a mode to
    the (keyword, pointer) of the documented :class:`UnsupportedSchemaError`.
    """

    id: str
    model: type[BaseModel]
    valid: tuple[Any, ...] = ()
    valid_json: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()
    refusals: dict[str, tuple[str, str]] = field(default_factory=dict)
    pydantic_forms: bool = False
    """Generation mode writes Pydantic's own forms (naive datetimes, ``-P1D``), which the
    format in ``Model.model_json_schema()`` refuses; its output is checked against Pydantic
    and formcast's generation schema only."""
    spec_drops_strings: bool = False
    """The JSON Schema's string branch has a lookahead pattern, which ``specification``
    mode drops (documented): valid string values are not expected there."""
    spec_only_json: tuple[str, ...] = ()
    """Valid documents that only ``specification`` mode accepts (generation mode writes a
    decimal's fraction as a string, as Pydantic does)."""

    def valid_documents(self) -> list[str]:
        dumped = [self.model.model_validate(v).model_dump_json() for v in self.valid]
        return dumped + list(self.valid_json)


def field_case(
    case_id: str,
    annotation: Any,
    valid: Sequence[Any] = (),
    invalid: Sequence[str] = (),
    valid_json: Sequence[str] = (),
    refusals: dict[str, tuple[str, str]] | None = None,
    pydantic_forms: bool = False,
    spec_drops_strings: bool = False,
    spec_only_json: Sequence[str] = (),
) -> Case:
    """A case whose model has one required field ``value`` of type ``annotation``;
    ``invalid`` and ``valid_json`` are JSON texts of the field value."""
    name = "M_" + "".join(ch if ch.isalnum() else "_" for ch in case_id)
    model = pydantic.create_model(name, value=(annotation, ...))
    return Case(
        id=case_id,
        model=model,
        valid=tuple({"value": v} for v in valid),
        valid_json=tuple(f'{{"value":{text}}}' for text in valid_json),
        invalid=tuple(f'{{"value":{text}}}' for text in invalid),
        refusals=refusals or {},
        pydantic_forms=pydantic_forms,
        spec_drops_strings=spec_drops_strings,
        spec_only_json=tuple(f'{{"value":{text}}}' for text in spec_only_json),
    )


UTC = dt.timezone.utc
PLUS_2 = dt.timezone(dt.timedelta(hours=2))
MINUS_0530 = dt.timezone(-dt.timedelta(hours=5, minutes=30))
SAMPLE_UUID = "12345678-1234-5678-1234-567812345678"
SPEC_ONLY_UNIQUE = {"specification": ("uniqueItems", FIELD_POINTER)}
FRACTIONAL_MULTIPLE = {mode: ("multipleOf", FIELD_POINTER) for mode in MODES}

CASES: list[Case] = [
    # --- scalars
    field_case(
        "str",
        str,
        valid=[
            "",
            "hello world",
            "José Ñúñez",
            "emoji 🎉 and 中文",
            'quote " backslash \\ slash /',
            "tab\tnewline\ncarriage\r",
            "controls \x00\x01\x1f\x7f",
            "separators \u2028\u2029 bom \ufeff",
            "max code point \U0010ffff",
            "x" * 120,
        ],
        invalid=["1", "null", '"bad \\x escape"', '"raw\ttab"', '"unterminated'],
    ),
    field_case(
        "int",
        int,
        valid=[0, -1, 7, -(2**31), 2**53 + 1, 10**15, -(10**20)],
        invalid=["1.5", '"abc"', "null", "01", "-"],
    ),
    field_case(
        "float",
        float,
        valid=[
            0.0,
            -0.0,
            3.0,
            -1.5,
            0.1,
            123456.789,
            1e-7,
            2.5e20,
            1e16,
            1e15,
            1.5e300,
            5e-324,
            -2.5e-300,
        ],
        valid_json=["1", "-2", "1.5E3", "0.5e-2"],
        invalid=['"abc"', "null", "[1]", "1.", ".5"],
    ),
    field_case("bool", bool, valid=[True, False], invalid=["2", "null", '"maybe"']),
    field_case("none", None, valid=[None], invalid=["0", '"null"', "false"]),
    field_case(
        "optional-int",
        Optional[int],  # noqa: UP045 - the spelling people write
        valid=[None, 0, -5],
        invalid=['"a"', "1.5", "[]"],
    ),
    field_case("int-or-none", int | None, valid=[None, 42], invalid=['"x"']),
    # --- unions and literals
    field_case(
        "union-int-str",
        Union[int, str],  # noqa: UP007 - the spelling people write
        valid=[5, -3, "five", "", "5"],
        invalid=["1.5", "null", "[]"],
    ),
    field_case(
        "union-models",
        Cat | Dog,
        valid=[{"lives": 9}, {"name": "Rex", "good": True}],
        invalid=['{"lives":"x"}', "{}", '{"name":"Rex"}'],
    ),
    field_case(
        "discriminated-union",
        Annotated[TaggedCat | TaggedDog | TaggedBird, Field(discriminator="kind")],
        valid=[
            {"kind": "cat", "lives": 9},
            {"kind": "cat", "lives": 0},
            {"kind": "dog", "name": "Rex"},
            {"kind": "bird"},
            {"kind": "bird", "wingspan": 0.35},
        ],
        valid_json=['{"kind":"bird"}'],
        invalid=[
            '{"kind":"cow"}',
            '{"kind":"cat","name":"x"}',
            '{"kind":"cat","lives":10}',
            '{"lives":3}',
        ],
    ),
    field_case(
        "list-of-discriminated-union",
        list[Annotated[TaggedCat | TaggedDog, Field(discriminator="kind")]],
        valid=[[], [{"kind": "dog", "name": "a"}, {"kind": "cat", "lives": 1}]],
        invalid=['[{"kind":"bird"}]'],
    ),
    field_case(
        "literal-str",
        Literal["red", "green", "blue sky"],
        valid=["red", "green", "blue sky"],
        invalid=['"purple"', '"Red"', "1"],
    ),
    field_case(
        "literal-mixed",
        Literal[1, "one", None, 2.5],
        valid=[1, "one", None, 2.5],
        invalid=["2", '"two"', "false"],
    ),
    field_case(
        "enum-str",
        Color,
        valid=list(Color),
        invalid=['"purple"', '"RED"', "null"],
    ),
    field_case(
        "intenum",
        Priority,
        valid=list(Priority),
        invalid=["2", "1.5", "null"],
    ),
    # --- containers
    field_case(
        "list-int",
        list[int],
        valid=[[], [0], [-1, 2, 10**12]],
        invalid=['[1,"a"]', "{}", "[1,]", "null"],
    ),
    field_case(
        "list-str-bounded",
        Annotated[list[str], Field(min_length=1, max_length=3)],
        valid=[["a"], ["", "b", "ç"]],
        invalid=["[]", '["a","b","c","d"]', "[1]"],
    ),
    field_case(
        "list-list-float",
        list[list[float]],
        valid=[[], [[]], [[1.5], [-2.0, 0.0]]],
        invalid=["[1.5]", '[["x"]]'],
    ),
    field_case(
        "tuple-fixed",
        tuple[int, str, bool],
        valid=[(1, "a", True), (-5, "", False)],
        invalid=['[1,"a"]', '[1,"a",true,2]', '["a",1,true]'],
    ),
    field_case(
        "tuple-variadic",
        tuple[float, ...],
        valid=[(), (1.5, -2.0), (0.0,)],
        invalid=['["a"]', "{}"],
    ),
    field_case(
        "set-int",
        set[int],
        valid=[set(), {1, 2, 3}, {-7}],
        invalid=['[1,"a"]', "[1.5]", "{}"],
        refusals=SPEC_ONLY_UNIQUE,
    ),
    field_case(
        "set-of-literals",
        set[Literal["a", "b", "c"]],
        valid=[set(), {"a"}, {"a", "b", "c"}],
        invalid=['["d"]', '"a"'],
    ),
    field_case(
        "frozenset-str",
        frozenset[str],
        valid=[frozenset(), frozenset({"a", "b"}), frozenset({"é"})],
        invalid=["[1]", '"a"'],
        refusals=SPEC_ONLY_UNIQUE,
    ),
    field_case(
        "dict-str-int",
        dict[str, int],
        valid=[{}, {"a": 1, "b": -2}, {"ключ": 3, "": 0}, {"with space": 10}],
        invalid=['{"a":"x"}', "[]", '{"a":1.5}'],
    ),
    field_case(
        "dict-bounded",
        Annotated[dict[str, int], Field(min_length=1, max_length=3)],
        valid=[{"a": 1}, {"a": 1, "b": 2, "c": 3}],
        invalid=["{}", '{"a":1,"b":2,"c":3,"d":4}'],
    ),
    field_case(
        "dict-str-model",
        dict[str, Item],
        valid=[{}, {"first": {"sku": "ABC-0001", "quantity": 2, "price": 9.99}}],
        invalid=['{"x":{"sku":"abc","quantity":1,"price":1.0}}', '{"x":{}}'],
    ),
    field_case(
        "dict-int-str",
        dict[int, str],
        valid=[{}, {1: "a", -2: "b"}],
        invalid=['{"a":"x"}', '{"1":2}'],
    ),
    # --- nested and recursive models
    Case(
        id="nested-model",
        model=Person,
        valid=(
            {
                "name": "Ann",
                "address": {"street": "1 Main St", "city": "Zürich", "postcode": "08001"},
            },
            {
                "name": "Bob",
                "address": {"street": "", "city": "X", "postcode": "12345"},
                "previous": [{"street": "a", "city": "b", "postcode": "00000"}],
                "billing": {"street": "c", "city": "d", "postcode": "99999"},
            },
        ),
        valid_json=('{"name":"Ann","address":{"street":"s","city":"c","postcode":"12345"}}',),
        invalid=(
            '{"name":"Ann","address":{"street":"s","city":"c","postcode":"1234"}}',
            '{"name":"Ann"}',
            '{"name":"Ann","address":null}',
        ),
    ),
    field_case(
        "list-nested-model",
        list[Item],
        valid=[[], [{"sku": "ABC-0001", "quantity": 1, "price": 0.0}]],
        invalid=['[{"sku":"ABC-0001","quantity":0,"price":1.0}]'],
    ),
    Case(
        id="self-referencing-tree",
        model=TreeNode,
        valid=(
            {"label": "root"},
            {"label": "a", "children": [{"label": "b"}, {"label": "c", "children": []}]},
            {"label": "1", "children": [{"label": "2", "children": [{"label": "3"}]}]},
        ),
        valid_json=('{"label":"x"}',),
        invalid=('{"children":[]}', '{"label":"a","children":[{"children":[]}]}'),
    ),
    Case(
        id="self-referencing-linked",
        model=LinkedNode,
        valid=(
            {"value": 1},
            {"value": 1, "next": {"value": 2, "next": {"value": -3}}},
        ),
        valid_json=('{"value":1,"next":null}',),
        invalid=('{"value":1,"next":{"value":"x"}}', '{"next":null}'),
    ),
    Case(
        id="optional-fields-with-defaults",
        model=WithDefaults,
        valid=(
            {"name": "a"},
            {
                "name": "b",
                "nickname": "bb",
                "age": 150,
                "tags": ["x", "y"],
                "ratio": -2.5,
                "active": False,
            },
        ),
        valid_json=(
            '{"name":"a"}',
            '{"name":"a","age":4}',
            '{"name":"a","nickname":null,"tags":[],"ratio":1.0}',
            '{"name":"a","active":false}',
        ),
        invalid=("{}", '{"name":"a","age":-1}', '{"name":"a","age":151}', '{"name":null}'),
    ),
    field_case("int-with-default", Annotated[int, Field(default=5)], valid=[5, -1]),
    # --- dates, times, identifiers
    field_case(
        "datetime",
        dt.datetime,
        valid=[
            dt.datetime(2024, 2, 29, 12, 0, tzinfo=UTC),
            dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=PLUS_2),
            dt.datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=MINUS_0530),
            dt.datetime(2024, 2, 29, 12, 0),
        ],
        invalid=['"2023-02-29T00:00:00Z"', '"2024-01-01T25:00:00Z"', '"yesterday"'],
        pydantic_forms=True,
    ),
    field_case(
        "date",
        dt.date,
        valid=[
            dt.date(2024, 2, 29),
            dt.date(2000, 2, 29),
            dt.date(1, 1, 1),
            dt.date(9999, 12, 31),
        ],
        invalid=['"2023-02-29"', '"1900-02-29"', '"2024-13-01"', '"2024-04-31"'],
    ),
    field_case(
        "time",
        dt.time,
        valid=[
            dt.time(12, 30, tzinfo=UTC),
            dt.time(23, 59, 59, 999999, tzinfo=PLUS_2),
            dt.time(1, 2, 3, 500000, tzinfo=MINUS_0530),
            dt.time(8, 0),
        ],
        invalid=['"24:00:00Z"', '"12:60:00Z"', '"noon"'],
        pydantic_forms=True,
    ),
    field_case(
        "timedelta",
        dt.timedelta,
        valid=[
            dt.timedelta(0),
            dt.timedelta(days=1, hours=2),
            dt.timedelta(minutes=1, seconds=30),
            dt.timedelta(weeks=3),
            dt.timedelta(seconds=1.5),
            dt.timedelta(days=-1),
            dt.timedelta(days=400, microseconds=1),
        ],
        invalid=["null", '"P"', '"one day"'],
        pydantic_forms=True,
    ),
    field_case(
        "uuid",
        uuid.UUID,
        valid=[uuid.UUID(SAMPLE_UUID), uuid.UUID(int=0)],
        valid_json=[f'"{SAMPLE_UUID.upper()}"'],
        invalid=['"not-a-uuid"', f'"{SAMPLE_UUID[:-1]}"', f'"g{SAMPLE_UUID[1:]}"'],
    ),
    field_case(
        "uuid4",
        UUID4,
        valid=[uuid.UUID("9c0e3282-2af7-4a81-b566-b00ee6d2a9b1")],
        invalid=['"a8098c1a-f86e-11da-bd1a-00112444be1e"', '"x"'],
    ),
    field_case(
        "decimal",
        Decimal,
        valid=[Decimal("1.5"), Decimal("-0.001"), Decimal("100")],
        valid_json=["1.5", "-2", "0.25"],
        invalid=['"abc"', "null", "[]"],
        spec_drops_strings=True,
    ),
    field_case(
        "condecimal-digits",
        condecimal(max_digits=5, decimal_places=2),
        valid=[Decimal("123.45"), Decimal("-0.5")],
        valid_json=['"1.25"', "-999", '"0.5"'],
        invalid=["1.234", "123456", '"1.234"', '"1234"', '"abc"'],
        spec_drops_strings=True,
        spec_only_json=["1.25"],
    ),
    field_case(
        "email",
        EmailStr,
        valid=["user@example.com", "first.last+tag@sub.example.org", "a_b-c@example.co"],
        invalid=['"not-an-email"', '"a@b"', '"@example.com"', "1"],
    ),
    field_case(
        "httpurl",
        HttpUrl,
        valid=[
            "https://example.com",
            "http://example.com:8080/path/to",
            "https://sub.example.co.uk/a-b_c~d.e",
            "https://example.com/search?q=1&x=y",
        ],
        invalid=['"ftp://example.com"', '"example.com"', '"http://"', '""'],
    ),
    field_case(
        "anyurl",
        AnyUrl,
        valid=[
            "https://example.com/",
            "ftp://files.example.com/pub",
            "postgres://user:pass@localhost:5432/db",
        ],
        invalid=['"not a url"', '""', "1"],
    ),
    field_case(
        "bytes",
        bytes,
        valid=[b"", b"hello", "é".encode()],
        invalid=["1", "null"],
    ),
    field_case(
        "ip-address",
        pydantic.IPvAnyAddress,
        valid=["192.168.0.1", "0.0.0.0", "::1", "2001:db8::ff00:42:8329"],
        invalid=['"256.1.1.1"', '"1.2.3"', '"host"'],
    ),
    # --- constrained types
    field_case(
        "constr-lengths",
        constr(min_length=2, max_length=5),
        valid=["ab", "abcde", "ñandú", "🎉🎉", 'a"\\b'],
        invalid=['"a"', '"abcdef"', '""', "12"],
    ),
    field_case(
        "field-pattern",
        Annotated[str, Field(pattern=r"^[A-Z]{2}-[0-9]{3}$")],
        valid=["AB-123", "ZZ-000"],
        invalid=['"ab-123"', '"AB-1234"', '"AB123"'],
    ),
    field_case(
        "field-pattern-unanchored",
        Annotated[str, Field(pattern=r"[0-9]{3}")],
        valid=["123", "abc123def", "1234"],
        invalid=['"12"', '"a1b2c3"'],
    ),
    field_case(
        "field-pattern-and-lengths",
        Annotated[str, Field(pattern=r"^[a-z]+$", min_length=3, max_length=8)],
        valid=["abc", "abcdefgh"],
        invalid=['"ab"', '"abcdefghi"', '"abC"'],
    ),
    field_case(
        "field-pattern-unicode-class",
        Annotated[str, Field(pattern=r"^[A-Za-zÀ-ÿ ]+$")],
        valid=["José", "Ñandú Ö", "abc"],
        invalid=['"中文"', '""', '"a1"'],
    ),
    field_case(
        "string-constraints",
        Annotated[str, StringConstraints(min_length=1, max_length=10, pattern=r"^[a-z_ ]+$")],
        valid=["hello", "snake_case", "a b"],
        invalid=['""', '"Hello"', '"abcdefghijk"'],
    ),
    field_case(
        "conint-ge-le",
        conint(ge=-10, le=10),
        valid=[-10, 10, 0, -1],
        invalid=["-11", "11", "1.5"],
    ),
    field_case(
        "conint-gt-lt",
        conint(gt=0, lt=100),
        valid=[1, 99, 50],
        invalid=["0", "100", "-1"],
    ),
    field_case(
        "conint-multiple-of",
        conint(multiple_of=5),
        valid=[0, -15, 100, 10**9],
        invalid=["7", "-1"],
    ),
    field_case(
        "conint-multiple-of-ten",
        conint(multiple_of=10),
        valid=[0, -20, 10, 1000],
        invalid=["-", "5", "-0.5"],
    ),
    field_case(
        "field-ge-le-multiple-of",
        Annotated[int, Field(ge=0, le=1000, multiple_of=25)],
        valid=[0, 975, 1000],
        invalid=["1025", "30", "-25"],
    ),
    field_case(
        "confloat-ge-le",
        confloat(ge=0, le=1),
        valid=[0.0, 1.0, 0.5, 1e-05, 0.333],
        invalid=["-0.1", "1.01", "2"],
    ),
    field_case(
        "confloat-gt-lt",
        confloat(gt=-1.5, lt=2.5),
        valid=[-1.49, 2.4999, 0.0],
        invalid=["-1.5", "2.5", "3"],
    ),
    field_case(
        "field-ge-float",
        Annotated[float, Field(ge=-273.15)],
        valid=[-273.15, 0.0, 1e10, 6.02e23],
        invalid=["-273.16", "-1000"],
    ),
    field_case(
        "confloat-multiple-of-integer",
        confloat(multiple_of=2),
        valid=[4.0, -6.0, 0.0],
        invalid=["3", "4.5"],
    ),
    field_case(
        "confloat-multiple-of-fraction",
        confloat(multiple_of=0.5),
        valid=[1.5, -2.0, 0.0, 0.5, 12.5],
        invalid=["0.25", "1.2", "-0.3"],
    ),
    field_case(
        "confloat-multiple-of-cents",
        Annotated[float, Field(ge=0, le=100, multiple_of=0.01)],
        valid=[0.07, 99.99, 100.0, 12.5],
        invalid=["0.001", "100.01", "-0.01"],
    ),
    field_case(
        "confloat-multiple-of-fraction-over-one",
        confloat(multiple_of=2.5),
        refusals=FRACTIONAL_MULTIPLE,
    ),
    field_case(
        "annotated-stacked-fields",
        Annotated[int, Field(ge=1), Field(le=5)],
        valid=[1, 5, 3],
        invalid=["0", "6"],
    ),
    field_case(
        "annotated-list-of-positive",
        Annotated[list[Annotated[int, Field(gt=0)]], Field(max_length=3)],
        valid=[[], [1, 2, 3]],
        invalid=["[0]", "[1,2,3,4]"],
    ),
    field_case(
        "optional-constr-default",
        Annotated[Optional[constr(max_length=3)], Field(default=None)],  # noqa: UP045
        valid=[None, "abc", ""],
        invalid=['"abcd"', "1"],
    ),
]

CASES_BY_ID = {case.id: case for case in CASES}
assert len(CASES_BY_ID) == len(CASES), "case ids must be unique"


def _params(refused: bool) -> list[Any]:
    return [
        pytest.param(mode, case, id=f"{mode}-{case.id}")
        for mode in MODES
        for case in CASES
        if (mode in case.refusals) == refused
    ]


COMPILED_PARAMS = _params(refused=False)
REFUSED_PARAMS = _params(refused=True)


# ----------------------------------------------------------------------------- helpers


_DIGITS = "[0-9]+"
_DUR_TIME = f"T(?:{_DIGITS}H(?:{_DIGITS}M(?:{_DIGITS}S)?)?|{_DIGITS}M(?:{_DIGITS}S)?|{_DIGITS}S)"
_DUR_DATE = f"(?:{_DIGITS}D|{_DIGITS}M(?:{_DIGITS}D)?|{_DIGITS}Y(?:{_DIGITS}M(?:{_DIGITS}D)?)?)"
RFC3339_DURATION = re.compile(f"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|{_DIGITS}W)")
"""The ``duration`` ABNF of RFC 3339 appendix A, which JSON Schema's format refers to."""

URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s\"<>\\^`{|}]*")
"""A loose RFC 3986 absolute URI (scheme, colon, no forbidden characters)."""


RFC3339_TIME = re.compile(
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
"""RFC 3339 ``full-time``: a time with a mandatory offset."""


def _rfc3339_date_time(value: object) -> bool:
    """RFC 3339 ``date-time``: a real calendar date, ``T``, and a ``full-time``."""
    if not isinstance(value, str):
        return True
    date, _, time = value.replace("t", "T").partition("T")
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", date):
        return False
    try:
        dt.date.fromisoformat(date)
    except ValueError:
        return False
    return bool(RFC3339_TIME.fullmatch(time))


def _format_checker() -> jsonschema.FormatChecker:
    """jsonschema's draft 2020-12 checker, plus ``duration``, ``uri``, ``date-time`` and
    ``time`` when their optional checker packages (isoduration, rfc3987,
    rfc3339-validator) are not installed, so the oracle is the same on every machine.

    (``jsonschema.FormatChecker()`` would mix in older drafts' checkers, such as draft 3's
    ``time`` without an offset.)
    """
    checker = jsonschema.FormatChecker(formats=())
    checker.checkers = dict(jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers)
    if "duration" not in checker.checkers:
        checker.checks("duration")(
            lambda v: not isinstance(v, str) or bool(RFC3339_DURATION.fullmatch(v))
        )
    if "uri" not in checker.checkers:
        checker.checks("uri")(lambda v: not isinstance(v, str) or bool(URI.fullmatch(v)))
    if "date-time" not in checker.checkers:
        checker.checks("date-time")(_rfc3339_date_time)
    if "time" not in checker.checkers:
        checker.checks("time")(lambda v: not isinstance(v, str) or bool(RFC3339_TIME.fullmatch(v)))
    return checker


FORMAT_CHECKER = _format_checker()


@functools.cache
def _schema_validator(model: type[BaseModel], generation: bool = False) -> Any:
    """A validator for ``Model.model_json_schema()``, or with ``generation`` for the schema
    that generation mode compiles (``formcast.schema.load_schema(Model)``)."""
    schema = load_schema(model) if generation else model.model_json_schema()
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=FORMAT_CHECKER)


def _pydantic_accepts(model: type[BaseModel], text: str) -> bool:
    try:
        model.model_validate_json(text)
    except pydantic.ValidationError:
        return False
    return True


def _schema_accepts(model: type[BaseModel], text: str) -> bool:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return False
    return bool(_schema_validator(model).is_valid(document))


def _compile(case: Case, mode: str, tokenizer: Any) -> TokenIndex:
    if mode == "generation":
        return formcast.compile(case.model, tokenizer)
    return formcast.compile(case.model.model_json_schema(), tokenizer, mode="specification")


def _problems(case: Case, mode: str, text: str) -> list[str]:
    """Why ``text`` is not a valid document for ``case`` in ``mode`` (empty when it is).

    ``specification``: ``Model.model_json_schema()`` decides alone. ``generation``:
    Pydantic, the generation schema and, unless the case writes Pydantic's own forms,
    ``Model.model_json_schema()``.
    """
    found: list[str] = []
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        return [f"not JSON: {error}"]
    oracles = [("jsonschema", False)]
    if mode == "generation":
        oracles = [("generation schema", True)]
        if not case.pydantic_forms:
            oracles.append(("jsonschema", False))
    for name, generation in oracles:
        errors = sorted(_schema_validator(case.model, generation).iter_errors(document), key=str)
        found += [f"{name}: {e.message} at {list(e.absolute_path)}" for e in errors[:2]]
    if mode == "generation":
        try:
            case.model.model_validate_json(text)
        except pydantic.ValidationError as error:
            found.append(f"pydantic: {error.errors()[0]['msg']} at {error.errors()[0]['loc']}")
    return found


def random_walk(index: TokenIndex, seed: int) -> tuple[bytes, str | None]:
    """Decode with seeded random choices among the allowed tokens, within a budget.

    Each walk draws its own budget slack, its chance to stop once the output is complete,
    and its chance to take a step towards the nearest ending. Returns the output bytes and
    a description of any cursor misbehaviour (None when the walk ended with EOS).
    """
    rng = np.random.default_rng(seed)
    cursor = index.cursor()
    token_bytes = index.vocabulary.token_bytes
    eos = np.fromiter(sorted(index.eos_token_ids), dtype=np.int32)
    budget = cursor.min_tokens_to_accept() + int(rng.integers(0, MAX_SLACK))
    stop_chance = float(rng.uniform(0.05, 0.6))
    shortest_chance = float(rng.uniform(0.0, 0.5))
    out = bytearray()
    while True:
        limit = budget
        if rng.random() < shortest_chance:
            limit = max(1, min(budget, cursor.min_tokens_to_accept()))
        allowed = cursor.allowed_token_ids(tokens_left=limit)
        eos_allowed = np.searchsorted(allowed, eos) < allowed.size
        if cursor.is_accepting() and not eos_allowed.all():
            return bytes(out), "EOS not allowed in an accepting state"
        tokens = allowed
        for eos_id in eos:
            tokens = tokens[tokens != eos_id]
        if cursor.is_accepting() and (tokens.size == 0 or rng.random() < stop_chance):
            cursor.advance(int(eos[0]))
            return bytes(out), None if cursor.is_finished else "EOS did not finish the cursor"
        if tokens.size == 0:
            return bytes(out), f"no allowed token in a non-accepting state ({budget} left)"
        token = int(rng.choice(tokens))
        cursor.advance(token)
        out += token_bytes[token]
        budget -= 1


def walk_document(index: TokenIndex, tokenizer: Any, text: str) -> str | None:
    """Feed ``text`` token by token (the tokenizer's own split); None if the cursor accepts
    it and ends accepting, else what went wrong."""
    data = text.encode()
    token_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    token_bytes = index.vocabulary.token_bytes
    if b"".join(token_bytes[t] for t in token_ids) != data:
        return "the tokenizer does not round-trip this text (test problem)"
    cursor = index.cursor()
    done = 0
    for token in token_ids:
        try:
            cursor.advance(token)
        except TokenNotAllowedError:
            state = index.initial_state
            offset = 0
            for offset in range(len(data)):
                state = index.walk_bytes(state, data[offset : offset + 1])
                if state < 0:
                    break
            shown = data[:offset].decode(errors="replace") + "⟪HERE⟫"
            shown += data[offset:].decode(errors="replace")
            return (
                f"token {token} ({token_bytes[token]!r}) after {done} bytes refused; "
                f"first refused byte at offset {offset}: {shown}"
            )
        done += len(token_bytes[token])
    if not cursor.is_accepting():
        return "all tokens accepted but the cursor is not accepting at the end"
    return None


def _report(case: Case, mode: str, title: str, lines: list[str]) -> str:
    return f"[{mode}] {case.id} ({case.model.__name__}): {title}\n  " + "\n  ".join(lines)


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_case_values_are_what_they_claim(case: Case) -> None:
    """The hand-written values are valid (for Pydantic) and the invalid ones are not."""
    for text in case.valid_documents() + list(case.spec_only_json):
        assert _pydantic_accepts(case.model, text), text
    for text in case.invalid:
        assert not _pydantic_accepts(case.model, text), text


@pytest.mark.parametrize(("mode", "case"), COMPILED_PARAMS)
def test_random_decoding_validates(mode: str, case: Case, tokenizer: Any) -> None:
    index = _compile(case, mode, tokenizer)
    failures: list[str] = []
    for seed in SEEDS:
        data, trouble = random_walk(index, seed)
        try:
            text = data.decode()
        except UnicodeDecodeError as error:
            failures.append(f"seed {seed}: output is not UTF-8 ({error}): {data!r}")
            continue
        found = ([trouble] if trouble else []) + _problems(case, mode, text)
        if found:
            failures.append(f"seed {seed}: {text!r}: {'; '.join(found)}")
    assert not failures, _report(case, mode, "generated output does not validate", failures)


@pytest.mark.parametrize(("mode", "case"), COMPILED_PARAMS)
def test_valid_values_are_accepted(mode: str, case: Case, tokenizer: Any) -> None:
    index = _compile(case, mode, tokenizer)
    documents = case.valid_documents()
    if mode == "specification":
        documents = [
            t for t in documents + list(case.spec_only_json) if _schema_accepts(case.model, t)
        ]
        if case.spec_drops_strings:
            documents = [t for t in documents if not isinstance(json.loads(t)["value"], str)]
    failures = []
    for text in documents:
        trouble = walk_document(index, tokenizer, text)
        if trouble:
            failures.append(f"{text!r}: {trouble}")
    assert not failures, _report(case, mode, "valid document rejected", failures)


@pytest.mark.parametrize(("mode", "case"), COMPILED_PARAMS)
def test_invalid_values_are_rejected(mode: str, case: Case, tokenizer: Any) -> None:
    index = _compile(case, mode, tokenizer)
    documents = list(case.invalid)
    if mode == "specification":
        documents = [t for t in documents if not _schema_accepts(case.model, t)]
    failures = [text for text in documents if walk_document(index, tokenizer, text) is None]
    assert not failures, _report(case, mode, "invalid document accepted", failures)


@pytest.mark.parametrize(("mode", "case"), REFUSED_PARAMS)
def test_documented_refusals(mode: str, case: Case, tokenizer: Any) -> None:
    keyword, pointer = case.refusals[mode]
    with pytest.raises(UnsupportedSchemaError) as caught:
        _compile(case, mode, tokenizer)
    assert caught.value.keyword == keyword
    assert caught.value.pointer == pointer
    assert keyword in str(caught.value)


# ----------------------------------------------------------------------------- the type zoo
#
# Generation mode over the types Pydantic offers, each alone and in compositions: every
# output of a budget-safe random walk must validate with Pydantic (the promise of
# generation mode), and the types formcast cannot enforce are refused at compile time,
# naming the keyword and the field.


class Shade(str, Enum):
    LIGHT = "light"
    DARK = "dark"


class Level(IntEnum):
    ONE = 1
    TWO = 2


class Server(BaseModel):
    network: pydantic.IPvAnyNetwork
    interface: pydantic.IPvAnyInterface
    dsn: pydantic.PostgresDsn
    contact: pydantic.NameEmail
    pattern: re.Pattern[str]
    token: pydantic.Base64Str
    limit: pydantic.ByteSize


class Payment(BaseModel):
    card: pydantic.PaymentCardNumber
    expires: pydantic.FutureDate
    issued: pydantic.PastDate
    amounts: pydantic.Json[list[int]]
    secret: pydantic.SecretStr
    shade: Shade
    level: Level


ZOO: dict[str, Any] = {
    # formats Pydantic writes
    "re.Pattern": re.Pattern[str],
    "IPvAnyNetwork": pydantic.IPvAnyNetwork,
    "IPvAnyInterface": pydantic.IPvAnyInterface,
    "IPv4Network": ipaddress.IPv4Network,
    "IPv6Network": ipaddress.IPv6Network,
    "IPv4Interface": ipaddress.IPv4Interface,
    "IPv6Interface": ipaddress.IPv6Interface,
    "IPvAnyAddress": pydantic.IPvAnyAddress,
    "Base64Str": pydantic.Base64Str,
    "Base64Bytes": pydantic.Base64Bytes,
    "Base64UrlStr": pydantic.Base64UrlStr,
    "Base64UrlBytes": pydantic.Base64UrlBytes,
    "NameEmail": pydantic.NameEmail,
    "EmailStr": EmailStr,
    # checks that are no format
    "Json[int]": pydantic.Json[int],
    "Json[list[float]]": pydantic.Json[list[float]],
    "Json[bool | None]": pydantic.Json[bool | None],
    "PaymentCardNumber": pydantic.PaymentCardNumber,
    "ByteSize": pydantic.ByteSize,
    "PastDate": pydantic.PastDate,
    "FutureDate": pydantic.FutureDate,
    "PastDatetime": pydantic.PastDatetime,
    "FutureDatetime": pydantic.FutureDatetime,
    "AwareDatetime": pydantic.AwareDatetime,
    "NaiveDatetime": pydantic.NaiveDatetime,
    # URLs and DSNs
    "AnyUrl": AnyUrl,
    "HttpUrl": HttpUrl,
    "FileUrl": pydantic.FileUrl,
    "PostgresDsn": pydantic.PostgresDsn,
    "MongoDsn": pydantic.MongoDsn,
    "RedisDsn": pydantic.RedisDsn,
    "AmqpDsn": pydantic.AmqpDsn,
    # secrets, bytes, identifiers, paths
    "SecretStr": pydantic.SecretStr,
    "SecretBytes": pydantic.SecretBytes,
    "bytes": bytes,
    "UUID1": pydantic.UUID1,
    "UUID4": UUID4,
    "UUID5": pydantic.UUID5,
    "Path": pathlib.Path,
    "Decimal": Decimal,
    # constrained and strict types
    "constr": constr(min_length=2, max_length=6, pattern=r"^[a-z]+$"),
    "conint": conint(gt=-5, le=500, multiple_of=5),
    "confloat": confloat(ge=0, lt=1),
    "condecimal": condecimal(max_digits=5, decimal_places=2),
    "conlist": pydantic.conlist(int, min_length=1, max_length=3),
    "conset": pydantic.conset(Literal["a", "b", "c"], max_length=2),
    "conbytes": pydantic.conbytes(max_length=4),
    "condate": pydantic.condate(gt=dt.date(2000, 1, 1), lt=dt.date(2001, 1, 1)),
    "condate-ge-le": pydantic.condate(ge=dt.date(2024, 2, 28), le=dt.date(2024, 3, 1)),
    "datetime-gt-lt": Annotated[
        dt.datetime, Field(gt=dt.datetime(2020, 1, 1, 12), lt=dt.datetime(2020, 1, 9, tzinfo=UTC))
    ],
    "bytes-max-length": Annotated[bytes, Field(max_length=3)],
    "StrictInt": pydantic.StrictInt,
    "StrictBool": pydantic.StrictBool,
    "PositiveInt": pydantic.PositiveInt,
    "NegativeFloat": pydantic.NegativeFloat,
    "FiniteFloat": pydantic.FiniteFloat,
    "Field(min_length)": Annotated[str, Field(min_length=3, max_length=5)],
    "Field(ge, le)": Annotated[int, Field(ge=10, le=20)],
    # enums, literals and compositions
    "Enum": Shade,
    "IntEnum": Level,
    "Literal": Literal["x", 2, None],
    "list[IPvAnyNetwork]": Annotated[list[pydantic.IPvAnyNetwork], Field(max_length=2)],
    "dict[str, ByteSize]": Annotated[dict[str, pydantic.ByteSize], Field(max_length=2)],
    "PastDate | None": pydantic.PastDate | None,
    "tuple[PaymentCardNumber, Base64UrlStr]": tuple[
        pydantic.PaymentCardNumber, pydantic.Base64UrlStr
    ],
    "Server": Server,
    "Payment": Payment,
}

ZOO_SEEDS = range(20)

ZOO_REFUSED: dict[str, tuple[Any, str, str]] = {
    "FilePath": (pydantic.FilePath, "format", FIELD_POINTER),
    "DirectoryPath": (pydantic.DirectoryPath, "format", FIELD_POINTER),
    "NewPath": (pydantic.NewPath, "format", FIELD_POINTER),
    "SocketPath": (pydantic.SocketPath, "format", FIELD_POINTER),
    "time with bounds": (Annotated[dt.time, Field(gt=dt.time(8))], "format", FIELD_POINTER),
    "timedelta with bounds": (
        Annotated[dt.timedelta, Field(le=dt.timedelta(days=1))],
        "format",
        FIELD_POINTER,
    ),
    "ImportString": (pydantic.ImportString, "format", FIELD_POINTER),
    "Json[str]": (pydantic.Json[str], "contentSchema", FIELD_POINTER + "/contentSchema"),
    "Json[model]": (pydantic.Json[Cat], "contentSchema", FIELD_POINTER + "/contentSchema"),
    "custom format": (
        Annotated[str, pydantic.WithJsonSchema({"type": "string", "format": "color"})],
        "format",
        FIELD_POINTER,
    ),
}


def _zoo_model(name: str, annotation: Any) -> type[BaseModel]:
    return pydantic.create_model(
        "Z_" + "".join(ch if ch.isalnum() else "_" for ch in name), value=(annotation, ...)
    )


@pytest.mark.filterwarnings("ignore::pydantic.PydanticDeprecatedSince20")  # PaymentCardNumber
@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_random_decoding_validates_with_pydantic(name: str, tokenizer: Any) -> None:
    model = _zoo_model(name, ZOO[name])
    index = formcast.compile(model, tokenizer)
    failures = []
    for seed in ZOO_SEEDS:
        data, trouble = random_walk(index, seed)
        text = data.decode(errors="replace")
        if trouble:
            failures.append(f"seed {seed}: {text!r}: {trouble}")
        elif not _pydantic_accepts(model, text):
            try:
                model.model_validate_json(text)
            except pydantic.ValidationError as error:
                failures.append(f"seed {seed}: {text!r}: {error.errors()[0]['msg']}")
    assert not failures, f"{name}: generated output Pydantic rejects\n  " + "\n  ".join(failures)


@pytest.mark.parametrize("name", list(ZOO_REFUSED))
def test_zoo_types_that_cannot_be_enforced_are_refused(name: str, tokenizer: Any) -> None:
    annotation, keyword, pointer = ZOO_REFUSED[name]
    with pytest.raises(UnsupportedSchemaError) as caught:
        formcast.compile(_zoo_model(name, annotation), tokenizer)
    assert (caught.value.keyword, caught.value.pointer) == (keyword, pointer), str(caught.value)


def test_zoo_relative_dates_name_the_compile_day() -> None:
    """The schema (so the cache key) of a past or future date holds the compile day."""
    schema = load_schema(_zoo_model("PastDate", pydantic.PastDate))
    assert dt.date.today().isoformat() in json.dumps(schema)

"""Tests for formcast.regex.translator: the type dispatch, the options, the modes, the size
budgets, and the maskbench sample."""

from __future__ import annotations

import contextlib
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from regex_checks import (
    MASKBENCH,
    UNROLLED,
    Case,
    Unsupported,
    case_tests,
    dumps,
    fullmatch,
    specification_tests,
    unsupported_tests,
)

from formcast.automaton import LazyAutomaton, compile_automaton
from formcast.errors import InvalidOptionError, SchemaError, UnsupportedSchemaError
from formcast.regex import (
    ANY_VALUE_DEPTH,
    WHITESPACE_DEFAULT,
)
from formcast.regex.translator import schema_to_regex

CASES: list[Case] = [
    ("boolean", {"type": "boolean"}, [True, False], [0, 1, "true", None]),
    ("null", {"type": "null"}, [None], [0, "", False]),
    ("type list", {"type": ["string", "null"]}, ["x", None], [1, True]),
    ("true schema", True, [1, "x", None, [1, "2"], {"a": 1}, [], {}], []),
    ("empty schema", {}, [1, "x", None, [], {}], []),
    ("nullable", {"type": "string", "nullable": True}, ["a", None], [1]),
]


test_hand_written_cases, test_samples_are_valid = case_tests(CASES)


SPEC_CASES: list[Case] = [
    ("true nests two levels", True, [[[1]], {"a": {"b": None}}], []),
]


test_specification_mode_cases = specification_tests(SPEC_CASES)


UNSUPPORTED: list[Unsupported] = [
    (False, "false", "/", "generation"),
    ({"allOf": [{"type": "string"}, {"type": "integer"}]}, "type", "/allOf/0", "generation"),
]


test_unsupported_keywords = unsupported_tests(UNSUPPORTED)


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
    # the default translation (exact recursion) through formcast's automaton, and for a
    # recursive schema the unrolled one through Python's re as well
    exact = compile_automaton(regex)
    unrolled = schema_to_regex(data["schema"], mode="specification", max_recursion_depth=UNROLLED)
    order = _property_order(data["schema"])
    for test in data["tests"]:
        text = dumps(_reorder(test["data"], order))
        if not test["valid"]:
            assert not exact.matches(text.encode()), f"invalid instance matches: {text[:200]}"
            assert fullmatch(unrolled, text) is None, f"invalid instance matches: {text[:200]}"


def _made_by_formcast(thing: object) -> bool:
    module = getattr(thing, "__module__", None) or type(thing).__module__
    return isinstance(module, str) and module.startswith("formcast")


def test_a_translation_leaves_no_reference_cycle_behind() -> None:
    """What a translation builds is freed as soon as it is dropped, by reference counts:
    no cycle is left for the garbage collector, whose full collections (10-30 ms in a
    long-running process) were the slowest masks of long maskbench runs. The schemas
    reach the helpers that recursed through nested functions (enum keys, the words an
    undeclared key must avoid, a pattern's DFA, fractional bounds, distinct arrays) and
    the refusals a disjunction keeps (a dropped branch; every branch refused)."""
    import gc

    schemas: list[Any] = [
        {
            "type": "object",
            "properties": {"apiVersion": {"type": "string"}, "kind": {"enum": ["Job", 1.0]}},
            "additionalProperties": {"type": "integer"},
        },
        {"enum": [{"a": [2.0, {"b": 3.0}]}, [1.0, "x"], None]},
        {"type": "string", "pattern": "^[a-f]{2,4}(x|yz)*$"},
        {"type": "number", "minimum": 0.25, "exclusiveMaximum": 7.125},
        {"type": "array", "items": {"enum": ["a", "b", 3]}, "uniqueItems": True},
        {"anyOf": [{"type": "string", "pattern": "(?=a)b"}, {"type": "integer"}]},
        {"anyOf": [{"type": "string", "pattern": "(?=a)b"}, {"pattern": "(?!c)d"}]},
    ]
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a dropped branch warns
            for schema in schemas:
                # every branch refused: the first refusal is raised
                with contextlib.suppress(UnsupportedSchemaError):
                    schema_to_regex(schema)
        gc.collect()
        left = [thing for thing in gc.garbage if _made_by_formcast(thing)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert [getattr(thing, "__qualname__", type(thing).__name__) for thing in left] == []

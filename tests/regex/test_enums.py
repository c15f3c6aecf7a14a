"""Tests for formcast.regex.enums: enum and const, filtered by every sibling keyword."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from regex_checks import (
    Case,
    case_ids,
    check_hand_written,
    check_samples,
    check_unsupported,
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


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), CASES, ids=case_ids(CASES))
def test_hand_written_cases(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    check_hand_written(name, schema, valid, invalid)


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), CASES, ids=case_ids(CASES))
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32))
def test_samples_are_valid(
    name: str, schema: Any, valid: list[Any], invalid: list[Any], seed: int
) -> None:
    check_samples(name, schema, seed)


UNSUPPORTED: list[tuple[Any, str, str, str]] = [
    ({"enum": [1, 2], "type": "string"}, "enum", "/", "generation"),
]


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer", "mode"),
    UNSUPPORTED,
    ids=[f"{u[1]}-{i}" for i, u in enumerate(UNSUPPORTED)],
)
def test_unsupported_keywords(schema: Any, keyword: str, pointer: str, mode: str) -> None:
    check_unsupported(schema, keyword, pointer, mode)

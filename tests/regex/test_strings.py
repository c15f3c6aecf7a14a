"""Tests for formcast.regex.strings: lengths, excluded strings, and what cannot be combined."""

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
    (
        {"type": "string", "allOf": [{"pattern": "a"}, {"pattern": "b"}]},
        "pattern",
        "/allOf/1",
        "generation",
    ),
    ({"type": "string", "format": "date", "pattern": "^2"}, "pattern", "/", "generation"),
]


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer", "mode"),
    UNSUPPORTED,
    ids=[f"{u[1]}-{i}" for i, u in enumerate(UNSUPPORTED)],
)
def test_unsupported_keywords(schema: Any, keyword: str, pointer: str, mode: str) -> None:
    check_unsupported(schema, keyword, pointer, mode)

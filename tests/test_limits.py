"""formcast.Limits: the bounds of a compile, passed through compile(limits=...)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import formcast
from formcast.compiler import clear_memory_cache
from formcast.limits import DEFAULT_LIMITS, Limits
from formcast.regex.translator import schema_to_regex
from formcast.vocabulary import Vocabulary

TOKENS = [bytes([b]) for b in range(32, 127)] + [b""]
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {f"field_{k}": {"type": "string", "maxLength": 5} for k in range(12)},
    "required": [f"field_{k}" for k in range(12)],
}


@pytest.fixture
def vocabulary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Vocabulary:
    monkeypatch.setenv("FORMCAST_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FORMCAST_DISK_CACHE", raising=False)
    clear_memory_cache()
    return Vocabulary.from_token_bytes(TOKENS, [len(TOKENS) - 1])


def test_defaults_give_the_same_regex_as_no_limits() -> None:
    assert schema_to_regex(SCHEMA, limits=Limits()) == schema_to_regex(SCHEMA)


def test_a_smaller_regex_length_refuses_the_schema_and_names_the_limit(
    vocabulary: Vocabulary,
) -> None:
    length = len(schema_to_regex(SCHEMA))
    formcast.compile(SCHEMA, vocabulary, limits=Limits(max_regex_length=length + 10))
    with pytest.raises(formcast.UnsupportedSchemaError, match="max_regex_length=100 "):
        formcast.compile(SCHEMA, vocabulary, limits=Limits(max_regex_length=100))


def test_the_automaton_reads_its_copy_limit(vocabulary: Vocabulary) -> None:
    regex = formcast.Regex("(?:ab){0,50}")
    assert formcast.compile(regex, vocabulary).cursor() is not None
    with pytest.raises(formcast.SchemaError, match="more than 10 copies"):
        formcast.compile(regex, vocabulary, limits=Limits(max_copies=10))


def test_pattern_limits_reach_the_pattern_translation() -> None:
    schema = {"type": "string", "pattern": "^(ab|c)*$", "maxLength": 9}  # a DFA x a counter
    assert schema_to_regex(schema).startswith("(?(DEFINE)")
    with pytest.raises(formcast.UnsupportedSchemaError, match="cannot be combined with pattern"):
        schema_to_regex(schema, limits=Limits(max_pattern_dfa_states=2))
    with pytest.raises(formcast.UnsupportedSchemaError, match="cannot be combined with pattern"):
        schema_to_regex(schema, limits=Limits(max_length_product=5))


def test_other_limits_are_other_cache_entries(vocabulary: Vocabulary, tmp_path: Path) -> None:
    formcast.compile(SCHEMA, vocabulary)
    clear_memory_cache()
    formcast.compile(SCHEMA, vocabulary, limits=Limits(concrete_copy_limit=0))
    assert len(list((tmp_path / "constraints").glob("*.fcidx"))) == 2
    clear_memory_cache()
    formcast.compile(SCHEMA, vocabulary, limits=Limits())  # the defaults: the first entry
    assert len(list((tmp_path / "constraints").glob("*.fcidx"))) == 2


@pytest.mark.parametrize("value", [-1, 1.5, True, "10"])
def test_a_bad_limit_is_an_error_naming_it(value: Any) -> None:
    with pytest.raises(formcast.InvalidOptionError, match=r"Limits\.max_copies"):
        Limits(max_copies=value)


def test_key_lists_only_the_limits_that_differ() -> None:
    assert DEFAULT_LIMITS.key() == ""
    assert Limits(max_copies=5, any_value_depth=2).key() == "any_value_depth=2,max_copies=5"
    assert DEFAULT_LIMITS.replace(max_copies=5) == Limits(max_copies=5)

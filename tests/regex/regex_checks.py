"""Shared checks for the tests of formcast.regex (JSON Schema -> regex).

Three kinds of checks, over many schemas:

* hand-written valid documents (compact, keys in declaration order) must fully match,
  hand-written invalid documents must not;
* soundness: random strings sampled from the regex's automaton (a random walk over the
  interegular FSM, driven by Hypothesis) must parse as JSON and validate with jsonschema,
  and with the Pydantic model when there is one;
* unsupported keywords raise ``UnsupportedSchemaError`` naming keyword and pointer.

Each test module lists its cases and gets the tests over them from :func:`case_tests`,
:func:`specification_tests` and :func:`unsupported_tests`.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
import json
import random
import re
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import interegular
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interegular.fsm import anything_else
from pydantic import AnyUrl, BaseModel, EmailStr, TypeAdapter

from formcast.automaton import LazyAutomaton, compile_automaton
from formcast.errors import UnsupportedSchemaError
from formcast.regex import inline_definitions
from formcast.regex.translator import schema_to_regex
from formcast.schema import validator_class

MASKBENCH = Path(__file__).resolve().parents[3] / "shared" / "data" / "maskbench"


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


# recursive: the Pydantic model cases and the recursion tests both use it
class Node(BaseModel):
    value: int
    children: list[Node] = []
    parent: Node | None = None


Case = tuple[str, Any, list[Any], list[Any]]
#: (schema, keyword, pointer, mode): a schema refused for ``keyword`` at ``pointer``.
Unsupported = tuple[Any, str, str, str]
TestFunction = Callable[..., None]
_CASE_FIELDS = ("name", "schema", "valid", "invalid")


def case_ids(cases: list[Case]) -> list[str]:
    return [case[0] for case in cases]


UNROLLED = 3
"""The recursion bound of the checks whose oracles read finite regexes only (Python's
``re``, interegular): a recursive schema is unrolled this many times there, and its exact
translation (the default) is checked through formcast's own automaton."""


def check_hand_written(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    """The generation-mode regex matches the valid values and none of the invalid ones:
    unrolled under Python's ``re``, and as translated by default (exact recursion) under
    formcast's automaton."""
    regex = schema_to_regex(schema, max_recursion_depth=UNROLLED)
    assert_parses(regex)
    exact = compile_automaton(schema_to_regex(schema))
    validator = validator_for(schema)
    for value in valid:
        if "nullable" not in name:
            assert validator.is_valid(value), f"test bug: {value!r} is not valid"
        assert fullmatch(regex, dumps(value)), f"valid {value!r} does not match"
        assert exact.matches(dumps(value).encode()), f"valid {value!r} does not match exactly"
    for value in invalid:
        assert fullmatch(regex, dumps(value)) is None, f"invalid {value!r} matches"
        assert not exact.matches(dumps(value).encode()), f"invalid {value!r} matches exactly"


def check_samples(name: str, schema: Any, seed: int) -> None:
    """20 random strings of the generation-mode regex (recursion unrolled: the sampler
    walks a finite automaton) are valid JSON values."""
    regex = schema_to_regex(schema, max_recursion_depth=UNROLLED)
    validator = validator_for(schema)
    for text in sample(regex, random.Random(seed), 20):
        value = json.loads(text)
        if "nullable" in name and value is None:
            continue
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, f"sample {text!r} is invalid: {errors}"
        _check_formats(schema, value)


def check_specification_case(schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    """The specification-mode automaton accepts the valid values and none of the others."""
    automaton = compile_automaton(schema_to_regex(schema, mode="specification"))
    validator = validator_for(schema)
    for value in valid:
        assert validator.is_valid(value), f"test bug: {value!r} is not valid"
        assert automaton.matches(dumps(value).encode()), f"valid {value!r} does not match"
    for value in invalid:
        assert not automaton.matches(dumps(value).encode()), f"invalid {value!r} matches"


def check_unsupported(schema: Any, keyword: str, pointer: str, mode: str) -> None:
    """``schema`` is refused, naming ``keyword`` at ``pointer``."""
    with pytest.raises(UnsupportedSchemaError) as info:
        schema_to_regex(schema, mode=mode)  # type: ignore[arg-type]
    assert info.value.keyword == keyword, str(info.value)
    assert info.value.pointer == pointer, str(info.value)


def case_tests(cases: list[Case]) -> tuple[TestFunction, TestFunction]:
    """The tests of a module's generation-mode cases: its hand-written values
    (:func:`check_hand_written`) and random samples (:func:`check_samples`, 15 seeds)."""

    @pytest.mark.parametrize(_CASE_FIELDS, cases, ids=case_ids(cases))
    def hand_written(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
        check_hand_written(name, schema, valid, invalid)

    @pytest.mark.parametrize(_CASE_FIELDS, cases, ids=case_ids(cases))
    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32))
    def samples(name: str, schema: Any, valid: list[Any], invalid: list[Any], seed: int) -> None:
        check_samples(name, schema, seed)

    return cast(TestFunction, hand_written), cast(TestFunction, samples)


def specification_tests(cases: list[Case]) -> TestFunction:
    """The test of a module's specification-mode cases (:func:`check_specification_case`)."""

    @pytest.mark.parametrize(_CASE_FIELDS, cases, ids=case_ids(cases))
    def specification(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
        check_specification_case(schema, valid, invalid)

    return cast(TestFunction, specification)


def unsupported_tests(cases: list[Unsupported]) -> TestFunction:
    """The test of a module's refused schemas (:func:`check_unsupported`)."""

    @pytest.mark.parametrize(
        ("schema", "keyword", "pointer", "mode"),
        cases,
        ids=[f"{case[1]}-{i}" for i, case in enumerate(cases)],
    )
    def unsupported(schema: Any, keyword: str, pointer: str, mode: str) -> None:
        check_unsupported(schema, keyword, pointer, mode)

    return cast(TestFunction, unsupported)

"""FromText with a pattern or a format: values written in the text that also match it.

The product automaton against a direct reading (a substring of the text, at word
boundaries, that the pattern matches), its distances against an enumeration, the schema
stage's shapes, the error for a text without such a value, and random-token decoding.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Optional

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from formcast import FromText, NoTextValueError, UnsupportedSchemaError
from formcast.automaton import UNREACHABLE, LazyAutomaton
from formcast.automaton.bound import BoundAutomaton
from formcast.automaton.shaped import ShapedText, slot_automaton
from formcast.automaton.text import TextAutomaton
from formcast.compiler import compile as compile_index
from formcast.regex.translator import schema_to_regex
from formcast.text import TextSlot, text_slots
from formcast.vocabulary import Vocabulary
from test_from_text import decode_randomly  # (transformers-cfg installs a package named tests)

ALL_BYTES = np.ones(256, dtype=bool)
DATE = r"^[0-9]{1,2}[/-][0-9]{1,2}[/-][0-9]{2,4}$"
RECEIPT = "TAN WOON YANN\nINDAH GIFT\n19/10/2018 20:49:59 #01\nDue 2018-10-19, or 1/2/19."


class Dated(BaseModel):
    company: Annotated[str, FromText()]
    date: Annotated[str, FromText(), Field(pattern=DATE)]


def walk(automaton: TextAutomaton | ShapedText, value: str) -> int:
    """The state after ``value`` as written inside a JSON string (0: refused)."""
    state = automaton.initial
    for byte in json.dumps(value, ensure_ascii=False)[1:-1].encode():
        state = int(automaton.row(state)[byte])
        if state == 0:
            break
    return state


def accepts(automaton: TextAutomaton | ShapedText, value: str) -> bool:
    state = walk(automaton, value)
    return state != 0 and automaton.is_accepting(state)


def shaped(text: str, pattern: str, options: FromText | None = None) -> ShapedText:
    schema = {"type": "string", "pattern": pattern, "x-formcast-from-text": True}
    shape = text_slots(schema_to_regex(schema))[0].shape
    slot = TextSlot("string", options or FromText(), shape=shape)
    automaton = slot_automaton(text, slot, ALL_BYTES)
    assert isinstance(automaton, ShapedText)
    return automaton


# -- the product automaton -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("19/10/2018", True),
        ("1/2/19", True),
        ("20:49:59", False),  # in the text, not a date
        ("2018-10-19", False),  # in the text, the pattern wants the day first
        ("19/10/201", False),  # a date's shape, not at a word boundary
        ("25/12/2018", False),  # a date, not in the text
        ("19/10/2018 20", False),
    ],
)
def test_values_are_in_the_text_and_match_the_pattern(value: str, allowed: bool) -> None:
    assert accepts(shaped(RECEIPT, DATE), value) is allowed


WORDS = st.text(st.sampled_from("ab1/ .-é"), min_size=1, max_size=24)
PATTERNS = st.sampled_from([r"^[0-9]+$", r"[a-z]/[0-9]", r"^a.*b$", r"é|1", r"^[^ ]{2,3}$"])


@settings(max_examples=120, deadline=None)
@given(text=WORDS, pattern=PATTERNS, data=st.data())
def test_shaped_values_are_plain_values_the_pattern_matches(
    text: str, pattern: str, data: Any
) -> None:
    options = FromText(whitespace="exact", word_boundaries=False)
    plain = TextAutomaton(text, TextSlot("string", options), ALL_BYTES)
    both = shaped(text, pattern, options)
    start = data.draw(st.integers(0, len(text) - 1))
    value = text[start : data.draw(st.integers(start + 1, len(text)))]
    other = data.draw(WORDS)
    for candidate in (value, other):
        expected = accepts(plain, candidate) and re.search(pattern, candidate) is not None
        assert accepts(both, candidate) is expected


def _enumerated_distance(automaton: ShapedText, text: str, prefix: str) -> int:
    """Fewest bytes after ``prefix`` to a value: the shortest accepted substring of the
    text that starts with it (the oracle of ``distance``)."""
    substrings = [text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1)]
    spelled = [json.dumps(value, ensure_ascii=False)[1:-1] for value in substrings]
    lengths = [
        len(v.encode()) - len(prefix.encode())
        for v in spelled
        if v.startswith(prefix) and accepts(automaton, json.loads(f'"{v}"'))
    ]
    return min(lengths, default=UNREACHABLE)


@pytest.mark.parametrize("prefix", ["", "1", "19", "19/10/", "2", "20", "T"])
def test_distances_are_exact(prefix: str) -> None:
    automaton = shaped(RECEIPT, DATE)
    state = walk(automaton, prefix) if prefix else automaton.initial
    expected = _enumerated_distance(automaton, RECEIPT, prefix)
    assert automaton.distance(state) == (expected if state else UNREACHABLE)


# -- the schema stage and binding ------------------------------------------------------------


def test_a_pattern_or_format_becomes_the_slots_shape() -> None:
    slots = text_slots(schema_to_regex(Dated))
    assert [s.shape is None for s in slots] == [True, False]
    assert LazyAutomaton(slots[1].shape or "").matches(b"19/10/2018")
    email = {"type": "string", "format": "email", "x-formcast-from-text": True}
    (slot,) = text_slots(schema_to_regex(email))
    assert slot.shape is not None and LazyAutomaton(slot.shape).matches(b"ana@example.com")
    assert TextSlot.from_json(slot.to_json()) == slot


def test_the_from_text_option_leaves_shaped_strings_alone() -> None:
    class Mixed(BaseModel):
        name: str
        code: Annotated[str, Field(pattern="^[A-Z]{3}$")]

    slots = text_slots(schema_to_regex(Mixed, from_text=True))
    assert [s.pointers for s in slots] == [("/properties/name",)]


def test_enumerations_are_still_refused() -> None:
    schema = {"type": "string", "enum": ["a"], "x-formcast-from-text": True}
    with pytest.raises(UnsupportedSchemaError) as caught:
        schema_to_regex(schema)
    assert caught.value.keyword == "enum"


def test_a_text_without_a_matching_value_is_refused_before_decoding(
    vocabulary: Vocabulary,
) -> None:
    index = compile_index(Dated, vocabulary)
    with pytest.raises(NoTextValueError) as caught:
        index.cursor(text="INDAH GIFT, paid 20:49:59")
    assert caught.value.pointers == ("/properties/date",)
    assert "matches its pattern" in str(caught.value)

    class Maybe(BaseModel):
        date: Optional[Annotated[str, FromText(), Field(pattern=DATE)]]  # noqa: UP045

    cursor = compile_index(Maybe, vocabulary).cursor(text="no date here")
    assert cursor.index.automaton.matches(b'{"date":null}')


def test_the_bound_automaton_checks_both(vocabulary: Vocabulary) -> None:
    index = compile_index(Dated, vocabulary)
    bound = index.cursor(text=RECEIPT).index.automaton
    assert isinstance(bound, BoundAutomaton)
    assert bound.matches(b'{"company":"INDAH GIFT","date":"19/10/2018"}')
    assert not bound.matches(b'{"company":"INDAH GIFT","date":"20:49:59"}')
    assert not bound.matches(b'{"company":"19/10/2018 20","date":"25/12/2018"}')


# -- decoding --------------------------------------------------------------------------------

DATED_TEXTS = st.text(st.sampled_from("ab 12/-:"), max_size=30).map(
    lambda t: f"{t}\nPaid 3/4/2021 at 10:30, ref 12-05-99 {t[:5]}"
)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(texts=st.lists(DATED_TEXTS, min_size=2, max_size=2), seed=st.integers(0, 2**16),
       slack=st.integers(0, 40))  # fmt: skip
def test_random_logits_write_shaped_values_from_the_text(
    texts: list[str], seed: int, slack: int, vocabulary: Vocabulary, tokenizer: Any
) -> None:
    index = compile_index(Dated, vocabulary)
    for text, output in zip(
        texts, decode_randomly(index, texts, seed, slack, tokenizer), strict=True
    ):
        value = Dated.model_validate_json(output)  # validates the pattern too
        collapsed = re.sub(r"\s+", " ", text)
        assert value.date in collapsed and value.company in collapsed

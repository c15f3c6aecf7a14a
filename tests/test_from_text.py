"""FromText: values copied from the request's text.

The text automaton against a direct reading of the rules, the schema stage's slots and
refusals, binding a text to a compiled index, and decoding: random logits through bound
cursors always give output that validates and whose copied values are in the text.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, Optional

import numpy as np
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import formcast
from formcast import FromText, NoTextValueError, UnsupportedSchemaError
from formcast.automaton.text import TextAutomaton, number_candidates
from formcast.automaton.text_states import PythonTextStates, native_states
from formcast.compiler import compile as compile_index
from formcast.decode.logits import (
    ForcedTokenizer,
    FormcastLogitsProcessor,
    SamplingOptions,
    generate,
)
from formcast.errors import InvalidOptionError, SchemaError
from formcast.regex.translator import schema_to_regex
from formcast.text import TextSlot, text_slots
from formcast.vocabulary import Vocabulary
from support.index_oracle import brute_force_row, index_row
from test_properties import RandomLogitsModel  # (transformers-cfg installs a package named tests)

ALL_BYTES = np.ones(256, dtype=bool)


def accepts(automaton: TextAutomaton, value: str) -> bool:
    """Whether ``value`` (already JSON-escaped, as written inside the quotes) is allowed."""
    state = automaton.initial
    for byte in value.encode():
        state = int(automaton.row(state)[byte])
        if state == 0:
            return False
    return automaton.is_accepting(state)


def inside(value: str) -> str:
    """``value`` as written between the quotes of a JSON string."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


RECEIPT = 'AEON CO. (M) BHD\nDate: 18/04/2018\nTOTAL   RM31.00  "quoted" back\\slash José 東京都 😀'


# -- the text automaton ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("AEON CO. (M) BHD", True),
        ("AEON", True),
        ("EON", False),  # starts inside a word
        ("AEO", False),  # ends inside a word
        ("BHD Date", True),  # a line break reads as one space
        ("BHD\nDate", False),  # ... and is written as one
        ("TOTAL RM31.00", True),
        ("TOTAL   RM31.00", False),
        ("31.00", True),  # letters then digits: a boundary
        ('"quoted"', True),
        ("back\\slash", True),
        ("back", False),  # a backslash between letters joins them
        ("18/04/2018", True),
        ("04/2018", False),  # a slash between digits joins them
        ("Date", True),  # a colon between a letter and a digit does not
        ("José", True),
        ("東京都", True),
        ("京", True),  # each CJK character is a word
        ("😀", True),
        (" AEON", False),  # never starts or ends with whitespace
        ("AEON ", False),
        ("", False),  # at least one character by default
        ("aeon", False),  # case-sensitive by default
        ("NOT THERE", False),
        ("(M)", True),
    ],
)
def test_string_values_are_substrings_at_word_boundaries(value: str, allowed: bool) -> None:
    automaton = TextAutomaton(RECEIPT, TextSlot("string"), ALL_BYTES)
    assert accepts(automaton, inside(value)) is allowed


def test_string_options() -> None:
    exact = TextAutomaton(RECEIPT, TextSlot("string", FromText(whitespace="exact")), ALL_BYTES)
    assert accepts(exact, inside("BHD\nDate"))
    assert not accepts(exact, inside("BHD Date"))
    assert accepts(exact, inside("TOTAL   RM31.00"))
    anywhere = TextSlot("string", FromText(word_boundaries=False))
    assert accepts(TextAutomaton(RECEIPT, anywhere, ALL_BYTES), "EO")
    assert accepts(TextAutomaton(RECEIPT, anywhere, ALL_BYTES), "04/20")
    caseless = TextAutomaton(RECEIPT, TextSlot("string", FromText(case_sensitive=False)), ALL_BYTES)
    for value in ("aeon co.", "Aeon", "JOSÉ", "josé"):
        assert accepts(caseless, inside(value))
    micro = TextAutomaton("5 µg", TextSlot("string", FromText(case_sensitive=False)), ALL_BYTES)
    for value in ("µg", "μg", "ΜG"):  # the micro sign folds to Greek mu
        assert accepts(micro, inside(value))
    dotless = TextAutomaton("ılık", TextSlot("string", FromText(case_sensitive=False)), ALL_BYTES)
    assert accepts(dotless, inside("ılık"))
    assert not accepts(dotless, inside("Ilık"))  # "I" lowers to "i", not to "ı"
    bounded = TextAutomaton(
        RECEIPT, TextSlot("string", FromText(min_length=4, max_length=8)), ALL_BYTES
    )
    assert accepts(bounded, "AEON")
    assert accepts(bounded, "AEON CO.")
    assert not accepts(bounded, "CO.")  # 3 characters
    assert not accepts(bounded, "AEON CO. (M)")  # 12 characters
    empty_ok = TextAutomaton(RECEIPT, TextSlot("string", FromText(min_length=0)), ALL_BYTES)
    assert accepts(empty_ok, "")


LINES_TEXT = "  AEON CO. (M) BHD\nNO. 8, JALAN 4,\r\n  TAMAN MELATI  \n\nTOTAL 31.00 x\u2028END"


def whole_lines(text: str) -> set[str]:
    """Direct reading of ``whole_lines`` (whitespace collapsed): the runs of consecutive
    non-blank lines, each line stripped and collapsed, joined by one space."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    return {" ".join(lines[a:b]) for a in range(len(lines)) for b in range(a + 1, len(lines) + 1)}


@pytest.mark.parametrize("case_sensitive", [True, False])  # the vectorized and general builds
@pytest.mark.parametrize(
    ("value", "allowed"),
    [
        ("AEON CO. (M) BHD", True),
        ("AEON CO. (M) BHD NO. 8, JALAN 4,", True),  # two lines
        ("NO. 8, JALAN 4, TAMAN MELATI TOTAL 31.00 x", True),  # past a blank line
        ("TAMAN MELATI", True),
        ("END", True),  # U+2028 ends a line
        ("TOTAL 31.00 x END", True),
        ("AEON", False),  # ends inside a line
        ("CO. (M) BHD", False),  # starts inside one
        ("31.00", False),
        ("NO. 8, JALAN 4, TAMAN", False),
        ("BHD NO. 8", False),
    ],
)
def test_whole_lines(value: str, allowed: bool, case_sensitive: bool) -> None:
    options = FromText(whole_lines=True, case_sensitive=case_sensitive)
    automaton = TextAutomaton(LINES_TEXT, TextSlot("string", options), ALL_BYTES)
    assert accepts(automaton, inside(value)) is allowed
    assert (value in whole_lines(LINES_TEXT)) is allowed


def test_whole_lines_with_exact_whitespace() -> None:
    options = FromText(whole_lines=True, whitespace="exact")
    automaton = TextAutomaton(LINES_TEXT, TextSlot("string", options), ALL_BYTES)
    assert accepts(automaton, inside("AEON CO. (M) BHD\nNO. 8, JALAN 4,"))
    assert accepts(automaton, inside("JALAN 4,\r\n  TAMAN MELATI")) is False
    assert accepts(automaton, inside("NO. 8, JALAN 4,\r\n  TAMAN MELATI"))
    assert not accepts(automaton, inside("AEON CO. (M) BHD NO. 8, JALAN 4,"))


@pytest.mark.parametrize(
    ("line", "number"),
    [
        ("31.00", "31.00"),
        ("  RM 31.00 ", "31.00"),
        ("$31.00", "31.00"),
        ("€ 5", "5"),
        ("31.00 USD", "31.00"),
        ("-5.00", "-5.00"),
        ("1,234.50", "1234.50"),
        ("TOTAL 31.00", None),  # a word of four letters
        ("RM 31.00 X", None),  # marks on both sides
        ("12-01-19", None),  # a date, not a number
        ("1.00 1.00", None),
        ("12,5", None),
        ("RM", None),
    ],
)
def test_whole_lines_numbers_stand_alone_on_a_line(line: str, number: str | None) -> None:
    text = f"TOTAL:\n{line}\nCASH 10.00"
    assert number_candidates(text, whole_lines=True) == ([number] if number else [])
    slot = TextSlot("number", FromText(whole_lines=True))
    if number is not None:
        assert accepts(TextAutomaton(text, slot, ALL_BYTES), number)
    assert not accepts(TextAutomaton(text, slot, ALL_BYTES), "10.00")


def test_whole_lines_reaches_number_slots() -> None:
    schema = {"type": "number", "x-formcast-from-text": {"whole_lines": True}}
    assert text_slots(schema_to_regex(schema))[0].options == FromText(whole_lines=True)
    either = {"type": ["string", "integer"], "x-formcast-from-text": {"whole_lines": True}}
    assert [s.options.whole_lines for s in text_slots(schema_to_regex(either))] == [True, True]


def test_escapes_are_the_only_spelling() -> None:
    text = 'say "hi"\tthen\\go\x07'
    automaton = TextAutomaton(text, TextSlot("string", FromText(whitespace="exact")), ALL_BYTES)
    assert accepts(automaton, inside('say "hi"\tthen\\go\x07'))
    assert inside("\x07") == "\\u0007"
    assert not accepts(automaton, "say \\u0022hi\\u0022")  # escapes other than JSON's own
    assert not accepts(automaton, 'say "hi')  # a raw quote would end the string


@pytest.mark.parametrize(
    ("text", "numbers", "integers"),
    [
        ("TOTAL RM31.00", ["31.00"], ["31"]),
        ("Total: 1,234.50 and 2,000", ["1234.50", "2000"], ["2000"]),
        ("change -5 of x-3", ["-5", "3"], ["-5", "3"]),
        ("date 2018-04-18 code 007", ["2018", "4", "18", "7"], ["2018", "4", "18", "7"]),
        ("12,5 and 1234,567", ["12", "5", "1234", "567"], ["12", "5", "1234", "567"]),
        ("no numbers here", [], []),
        ("digits of other scripts: ੧ ٣", [], []),
    ],
)
def test_numbers_written_in_the_text(text: str, numbers: list[str], integers: list[str]) -> None:
    assert number_candidates(text) == numbers
    assert number_candidates(text, integer=True) == integers
    for candidate in numbers:
        json.loads(candidate)  # every candidate is a JSON number


def test_number_bounds_filter_candidates() -> None:
    slot = TextSlot("number", bounds=(("minimum", "10"), ("multipleOf", "0.5")))
    automaton = TextAutomaton("pay 7.5 or 12.5 or 13.25", slot, ALL_BYTES)
    assert accepts(automaton, "12.5")
    assert not accepts(automaton, "7.5")
    assert not accepts(automaton, "13.25")
    assert not accepts(automaton, "12")  # a prefix of a number is not a number of the text


def _shortest(automaton: TextAutomaton, state: int) -> int:
    """Breadth-first search over the automaton: the oracle of ``distance``."""
    frontier, seen, depth = [state], {state}, 0
    while frontier:
        if any(automaton.is_accepting(s) for s in frontier):
            return depth
        following = []
        for s in frontier:
            for t in automaton.row(s).tolist():
                if t and t not in seen:
                    seen.add(t)
                    following.append(t)
        frontier, depth = following, depth + 1
    return formcast.automaton.UNREACHABLE


@pytest.mark.parametrize("options", [FromText(), FromText(min_length=3, max_length=6)])
def test_distances_are_exact(options: FromText) -> None:
    automaton = TextAutomaton(RECEIPT, TextSlot("string", options), ALL_BYTES)
    states = [automaton.initial]
    for byte in inside("TOTAL RM31.0").encode():
        states.append(int(automaton.row(states[-1])[byte]))
    for state in [s for s in states if s]:
        assert automaton.distance(state) == _shortest(automaton, state)


# -- property: any text, any substring at a boundary ------------------------------------------

TEXT_CHARS = st.characters(
    codec="utf-8", categories=("L", "N", "P", "S", "Zs", "Cc"), exclude_characters="\x00"
)


@settings(max_examples=150, deadline=None)
@given(text=st.text(TEXT_CHARS, min_size=1, max_size=40), data=st.data())
def test_every_substring_without_outer_whitespace_is_accepted(text: str, data: Any) -> None:
    slot = TextSlot("string", FromText(whitespace="exact", word_boundaries=False))
    automaton = TextAutomaton(text, slot, ALL_BYTES)
    start = data.draw(st.integers(0, len(text) - 1))
    stop = data.draw(st.integers(start + 1, len(text)))
    value = text[start:stop]
    expected = value == value.strip() and value.strip() != ""
    if not expected:
        value = value.strip() or value
        expected = bool(value.strip()) and value in text
    assert accepts(automaton, inside(value)) is expected
    other = data.draw(st.text(TEXT_CHARS, min_size=1, max_size=6))
    allowed = other in text and other == other.strip()
    assert accepts(automaton, inside(other)) is allowed


LINE_CHARS = st.sampled_from(list("ab1 .\n\r\t\u2028"))


@settings(max_examples=150, deadline=None)
@given(text=st.text(LINE_CHARS, min_size=1, max_size=30), data=st.data())
def test_whole_lines_are_exactly_the_runs_of_lines(text: str, data: Any) -> None:
    options = FromText(whole_lines=True, word_boundaries=data.draw(st.booleans()))
    automaton = TextAutomaton(text, TextSlot("string", options), ALL_BYTES)
    expected = whole_lines(text)
    collapsed = " ".join(text.split())
    start = data.draw(st.integers(0, len(collapsed)))
    candidates = {collapsed[start : data.draw(st.integers(start, len(collapsed)))], *expected}
    for value in candidates:
        assert accepts(automaton, inside(value)) is (value in expected)


# -- the schema stage --------------------------------------------------------------------------


class Receipt(BaseModel):
    company: Annotated[str, FromText()]
    date: Annotated[str, FromText()]
    total: Annotated[float, FromText()]


def test_slots_and_their_table() -> None:
    regex = schema_to_regex(Receipt)
    slots = text_slots(regex)
    assert [s.value for s in slots] == ["string", "number"]
    assert slots[0].pointers == ("/properties/company", "/properties/date")
    assert slots[1].pointers == ("/properties/total",)
    assert text_slots(schema_to_regex({"type": "string"})) == ()


def test_json_schema_keyword() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "x-formcast-from-text": {"case_sensitive": False}},
            "count": {"type": "integer", "minimum": 1, "x-formcast-from-text": True},
        },
        "required": ["name", "count"],
    }
    slots = text_slots(schema_to_regex(schema))
    assert slots[0].options == FromText(case_sensitive=False)
    assert (slots[1].value, slots[1].bounds) == ("integer", (("minimum", "1"),))


@pytest.mark.parametrize(
    ("annotation", "keyword"),
    [
        (Annotated[bool, FromText()], "x-formcast-from-text"),
        (Annotated[Receipt, FromText()], "x-formcast-from-text"),
        (Annotated[list[str], FromText()], "x-formcast-from-text"),
        (Annotated[Literal["a", "b"], FromText()], "enum"),
    ],
)
def test_types_it_cannot_apply_to_are_refused(annotation: Any, keyword: str) -> None:
    model = pydantic.create_model("Bad", value=(annotation, ...))
    with pytest.raises(UnsupportedSchemaError) as caught:
        schema_to_regex(model)
    assert caught.value.keyword == keyword
    assert caught.value.pointer.startswith("/")


def test_bad_options_are_refused() -> None:
    with pytest.raises(SchemaError, match="whitespace"):
        FromText(whitespace="squeeze")  # type: ignore[arg-type]
    with pytest.raises(SchemaError, match="max_length"):
        FromText(min_length=5, max_length=2)
    with pytest.raises(SchemaError, match="options among"):
        schema_to_regex({"type": "string", "x-formcast-from-text": {"spaces": 1}})


def test_from_text_option_applies_to_plain_strings_only() -> None:
    class Mixed(BaseModel):
        name: str
        nickname: Optional[str]  # noqa: UP045
        code: Annotated[str, Field(pattern="^[A-Z]{3}$")]
        kind: Literal["a", "b"]
        count: int

    slots = text_slots(schema_to_regex(Mixed, from_text=FromText(case_sensitive=False)))
    assert len(slots) == 1
    assert slots[0].pointers == ("/properties/name", "/properties/nickname/anyOf/0")
    assert slots[0].options.case_sensitive is False


# -- binding a text -------------------------------------------------------------------------


def test_cursor_needs_the_text(vocabulary: Vocabulary) -> None:
    index = compile_index(Receipt, vocabulary)
    with pytest.raises(InvalidOptionError, match=r"cursor\(text=\.\.\.\)"):
        index.cursor()
    plain = compile_index(pydantic.create_model("Plain", x=(str, ...)), vocabulary)
    with pytest.raises(InvalidOptionError, match="copies none"):
        plain.cursor(text="anything")


def test_a_text_without_a_required_value_is_refused_before_decoding(vocabulary: Vocabulary) -> None:
    index = compile_index(Receipt, vocabulary)
    with pytest.raises(NoTextValueError) as caught:
        index.cursor(text="ACME HARDWARE, no amount at all")
    assert caught.value.pointers == ("/properties/total",)
    assert "/properties/total" in str(caught.value)

    class Maybe(BaseModel):
        total: Optional[Annotated[float, FromText()]]  # noqa: UP045

    cursor = compile_index(Maybe, vocabulary).cursor(text="no amount")
    assert cursor.forced_bytes() == b'{"total":null}'


def test_walking_a_gold_output(vocabulary: Vocabulary, tokenizer: Any) -> None:
    text = "BOOK TA .K(TAMAN DAYA) SDN BND\n25/12/2018 13:45\nTOTAL: RM 9.00"
    cursor = compile_index(Receipt, vocabulary).cursor(text=text)
    output = '{"company":"BOOK TA .K(TAMAN DAYA) SDN BND","date":"25/12/2018","total":9.00}'
    for token in tokenizer.encode(output, add_special_tokens=False):
        cursor.advance(token)
    assert cursor.is_accepting()
    rejected = compile_index(Receipt, vocabulary).cursor(text=text)
    with pytest.raises(formcast.TokenNotAllowedError):
        for token in tokenizer.encode('{"company":"ACME', add_special_tokens=False):
            rejected.advance(token)


def test_bound_rows_match_brute_force(
    vocabulary: Vocabulary, tokenizer: Any, trie_walk: str
) -> None:
    """Along a gold output through a text with escapes, accents, CJK and an emoji, each
    row of the bound index (whose transitions are built entry by entry) holds exactly the
    tokens a byte-by-byte walk allows, with the C walk and with numpy."""
    index = compile_index(Receipt, vocabulary).bind(RECEIPT)
    output = '{"company":"José 東京都 😀","date":"18/04/2018","total":31.00}'
    state = index.initial_state
    for token in tokenizer.encode(output, add_special_tokens=False):
        assert index_row(index, state) == brute_force_row(index, state)
        state = index.next_state(state, token)
    assert index.is_accepting(state)


def test_budget_distances_count_the_text(vocabulary: Vocabulary) -> None:
    index = compile_index(Receipt, vocabulary)
    short = index.cursor(text="A 1/1 TOTAL 5")
    long = index.cursor(text="LONGCOMPANYNAME 11/11/2011 TOTAL 12345.678")
    shortest = len('{"company":"A","date":"1","total":5}')
    assert short.min_tokens_to_accept() == shortest
    # in the long text the shortest words are "TOTAL" (the slashes join "11/11/2011"),
    # and the shortest number is "11"
    assert long.min_tokens_to_accept() == shortest + 4 + 4 + 1


# -- decoding ----------------------------------------------------------------------------------


class Item(BaseModel):
    name: Annotated[str, FromText()]
    tags: list[Annotated[str, FromText(case_sensitive=False, max_length=12)]] = Field(max_length=2)


class Order(BaseModel):
    customer: Annotated[str, FromText(whitespace="exact")]
    store: Annotated[str, FromText(whole_lines=True)]
    items: list[Item] = Field(max_length=2)
    total: Optional[Annotated[float, FromText()]]  # noqa: UP045
    count: Annotated[int, FromText(), Field(ge=0)]
    note: str


def _collapsed(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _check_copied(order: Order, text: str) -> None:
    assert order.customer in text
    assert order.store in whole_lines(text)
    for item in order.items:
        assert item.name in _collapsed(text)
        for tag in item.tags:
            assert tag.casefold() in _collapsed(text).casefold()
    numbers = [float(n) for n in number_candidates(text)]
    assert order.total is None or order.total in numbers
    assert order.count in [int(n) for n in number_candidates(text, integer=True)]


ORDER_TEXTS = st.text(TEXT_CHARS, max_size=60).map(lambda t: f"{t} qty 3\nTotal: 1,250.75 {t[:9]}")


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(texts=st.lists(ORDER_TEXTS, min_size=2, max_size=2), seed=st.integers(0, 2**16),
       slack=st.integers(0, 60))  # fmt: skip
def test_random_logits_copy_values_from_each_rows_text(
    texts: list[str], seed: int, slack: int, vocabulary: Vocabulary, tokenizer: Any
) -> None:
    index = compile_index(Order, vocabulary)
    for text, output in zip(
        texts, decode_randomly(index, texts, seed, slack, tokenizer), strict=True
    ):
        _check_copied(Order.model_validate_json(output), text)


def decode_randomly(
    index: formcast.TokenIndex, texts: list[str], seed: int, slack: int, tokenizer: Any
) -> list[str]:
    """One output per text: random logits through cursors bound to the texts, with a
    budget ``slack`` tokens above the fewest any of them needs (checked to hold)."""
    cursors = [index.cursor(text=text) for text in texts]
    budget = max(c.min_tokens_to_accept() for c in cursors) + slack
    results = generate(
        RandomLogitsModel(index.vocabulary.size + 64, seed),
        [[1, 2, 3]] * len(texts),
        cursors,
        max_new_tokens=budget,
        forced_tokenizer=ForcedTokenizer(tokenizer, index.vocabulary),
        sampling=SamplingOptions(temperature=1.0, seed=seed),
    )
    assert all(result.completion_tokens <= budget for result in results)
    return [result.text for result in results]


def test_extract_many_binds_each_rows_text(tiny_extractor: Any) -> None:
    texts = ["ACME HARDWARE\nTOTAL 20.00", "KEDAI ALI\nTOTAL RM 5.50", "no amount here"]
    results = list(tiny_extractor.extract_many(Receipt, texts, batch_size=3, progress=False))
    assert [r.ok for r in results] == [True, True, False]
    assert isinstance(results[2].error, NoTextValueError)
    for result, text in zip(results[:2], texts, strict=False):
        value = result.value
        assert value.company in _collapsed(text) and value.date in _collapsed(text)
        assert str(value.total) in text or f"{value.total:.2f}" in text


def test_from_text_option_and_decorator(tiny_extractor: Any) -> None:
    class Person(BaseModel):
        name: str
        city: Optional[str]  # noqa: UP045

    text = "Ana Lima moved to Porto in May."
    person = tiny_extractor.extract(Person, text, from_text=True, max_new_tokens=40)
    assert person.name in text and (person.city is None or person.city in text)

    @tiny_extractor.function(max_new_tokens=24)
    def city_of(sentence: str) -> Annotated[str, FromText()]:
        """Which city is named in the sentence?"""

    assert city_of(text) in text


def test_logits_processor_with_texts(tiny_model: Any, tokenizer: Any) -> None:
    from transformers import LogitsProcessorList

    index = formcast.compile(Receipt, tokenizer)
    texts = ["SHOP ONE 01/02/2020 TOTAL 3.50", "SHOP TWO 03/04/2021 TOTAL 7"]
    with pytest.raises(InvalidOptionError, match="texts"):
        FormcastLogitsProcessor(index)
    processor = FormcastLogitsProcessor(index, max_new_tokens=48, texts=texts)
    prompt = tokenizer(["Extract:", "Extract:"], return_tensors="pt")
    output = tiny_model.generate(
        **prompt,
        logits_processor=LogitsProcessorList([processor]),
        max_new_tokens=48,
        do_sample=False,
        pad_token_id=2,
    )
    for row, text in zip(output, texts, strict=True):
        generated = tokenizer.decode(row[prompt["input_ids"].shape[1] :], skip_special_tokens=True)
        receipt = Receipt.model_validate_json(generated)
        assert receipt.company in text and receipt.date in text


@pytest.mark.slow
def test_default_model_copies_receipt_fields(default_extractor: Any, sroie_dir: Any) -> None:
    class Fields(BaseModel):
        company: Annotated[str, FromText()]
        date: Annotated[str, FromText()]
        total: Annotated[float, FromText()]

    text = (sroie_dir / "000.txt").read_text()
    result = default_extractor.run(Fields, text, max_new_tokens=120)
    assert result.ok, result.error
    value = result.value
    assert value.company in _collapsed(text) and value.date in _collapsed(text)
    assert value.total in [float(n) for n in number_candidates(text)]
    assert value.date.startswith("25/12/2018")  # the receipt's date, as written on it


class GeneralText(TextAutomaton):
    """The general build (several spellings per character) for every string."""

    def _build_linear(self, chars: str, options: FromText, usable: Any) -> Any:
        from formcast.automaton.text import _string_lines

        return self._build(_string_lines(chars, options), usable)


@settings(max_examples=60, deadline=None)
@given(text=st.text(TEXT_CHARS, min_size=1, max_size=30), data=st.data())
def test_the_vectorized_text_agrees_with_the_general_one(text: str, data: Any) -> None:
    """Case-sensitive strings take a vectorized path; the general one must read the same
    text the same way."""
    options = data.draw(st.sampled_from([FromText(), FromText(whitespace="exact", min_length=2)]))
    fast = TextAutomaton(text, TextSlot("string", options), ALL_BYTES)
    slow = GeneralText(text, TextSlot("string", options), ALL_BYTES)
    start = data.draw(st.integers(0, len(text) - 1))
    candidates = [text[start : start + k] for k in range(1, 6)]
    candidates.append(data.draw(st.text(TEXT_CHARS, min_size=1, max_size=4)))
    for candidate in candidates:
        value = inside(candidate)
        assert accepts(fast, value) == accepts(slow, value)
        states = [fast.initial, slow.initial]
        for byte in value[: len(value) // 2].encode():
            states = [int(fast.row(states[0])[byte]), int(slow.row(states[1])[byte])]
        assert fast.distance(states[0]) == slow.distance(states[1])


TEXT_OPTIONS = [
    FromText(),
    FromText(whitespace="exact", min_length=2, max_length=5),
    FromText(case_sensitive=False, max_length=4),
    FromText(word_boundaries=False, min_length=3),
]


def reachable(automaton: TextAutomaton, limit: int = 200) -> list[int]:
    """Up to ``limit`` states reached from the initial one, depth first, in the order the
    walk first meets them (which builds their rows)."""
    seen, frontier, order = {automaton.initial}, [automaton.initial], []
    while frontier and len(order) < limit:
        state = frontier.pop()
        order.append(state)
        for _, target in automaton.sparse_row(state):
            if target not in seen:
                seen.add(target)
                frontier.append(target)
    return order


@pytest.mark.skipif(native_states is None, reason="formcast._text_states was not built")
@settings(max_examples=80, deadline=None)
@given(text=st.text(TEXT_CHARS, min_size=1, max_size=40), data=st.data())
def test_text_states_in_c_agree_with_python(text: str, data: Any) -> None:
    """The C states number and build exactly as the Python ones: the same rows, counts,
    nodes and acceptance for every state reached, in every layout (strings of each
    spelling and case, numbers)."""
    kind = data.draw(st.sampled_from(["string", "number", "integer"]))
    options = data.draw(st.sampled_from(TEXT_OPTIONS)) if kind == "string" else FromText()
    spelling = data.draw(st.sampled_from(["json", "raw"])) if kind == "string" else "json"
    if kind != "string":
        text += " " + " ".join(data.draw(st.lists(st.sampled_from(NUMBERS), max_size=4)))
    slot = TextSlot(kind, options, spelling=spelling)
    in_c = TextAutomaton(text, slot, ALL_BYTES)
    in_python = TextAutomaton(text, slot, ALL_BYTES, native=False)
    assert not isinstance(in_c._states, PythonTextStates)
    assert isinstance(in_python._states, PythonTextStates)
    assert in_c.initial == in_python.initial
    for state in reachable(in_python):
        assert in_c.sparse_row(state) == in_python.sparse_row(state)
        assert in_c.is_accepting(state) == in_python.is_accepting(state)
        assert in_c._states.count(state) == in_python._states.count(state)
        assert in_c._states.nodes(state) == in_python._states.nodes(state)
        assert in_c.distance(state) == in_python.distance(state)
    assert in_c.num_states == in_python.num_states


NUMBERS = ["12", "3.50", "1,234.00", "-7", "007", "RM31.00", "18/04/2018"]


def test_text_states_in_c_refuse_bad_input() -> None:
    """The C states check what they are given: node ids within the text's NFA, ascending,
    and states that exist."""
    if native_states is None:
        pytest.skip("formcast._text_states was not built")
    automaton = TextAutomaton("ab cd", TextSlot("string", FromText()), ALL_BYTES)
    states = automaton._states
    with pytest.raises(ValueError, match="ascending distinct node ids"):
        states.intern(np.array([3, 1], dtype=np.int32), 1)
    with pytest.raises(ValueError, match="ascending distinct node ids"):
        states.intern(np.array([10**6], dtype=np.int32), 1)
    with pytest.raises(ValueError, match="expected a state in"):
        states.sparse_row(len(states))


def test_bound_entries_built_one_by_one_agree_with_whole_rows(vocabulary: Vocabulary) -> None:
    """A bound automaton builds the entries a walk asks for alone; built entry by entry in
    a shuffled order, it must be the same automaton as one built a whole row at a time (the
    same transitions and acceptance, up to the numbering of the states)."""
    constraint = compile_index(Receipt, vocabulary)
    by_rows = constraint.bind(RECEIPT).automaton
    by_entries = constraint.bind(RECEIPT).automaton
    rng = np.random.default_rng(7)
    names = {by_rows.initial: by_entries.initial}
    frontier = [by_rows.initial]
    while frontier and len(names) < 400:
        state = frontier.pop(0)
        other = names[state]
        assert by_rows.is_accepting(state) == by_entries.is_accepting(other)
        row = by_rows.row(state)
        for byte in rng.permutation(256).tolist():
            moved = int(by_entries.step(np.array([other], np.int32), np.array([byte], np.uint8))[0])
            target = int(row[byte])
            assert (target == 0) == (moved == 0), (state, byte)
            if target and target not in names:
                names[target] = moved
                frontier.append(target)
            assert names.get(target, 0) == moved, (state, byte)


NUMBER_VALUES = st.lists(st.text("0123456789.,-", min_size=1, max_size=6), max_size=6)


@settings(max_examples=80, deadline=None)
@given(values=NUMBER_VALUES, unusable=st.sets(st.sampled_from(b"0123456789.,-"), max_size=2))
def test_number_values_are_laid_out_as_the_general_build_does(
    values: list[str], unusable: set[int]
) -> None:
    """The numbers a slot may copy are laid out vectorized; the general build of the same
    values as lines must give the same nodes, edges and distance tables."""
    from formcast.automaton.text import _number_lines

    usable = ALL_BYTES.copy()
    usable[sorted(unusable)] = False
    slot = TextSlot("number", FromText())
    fast = TextAutomaton("", slot, usable)
    slow = TextAutomaton("", slot, usable)
    fast_starts = fast._build_whole_values(values, usable)
    slow_starts = slow._build(_number_lines(values), usable)
    assert fast_starts.tolist() == slow_starts.tolist()
    names = ("_ebyte", "_edst", "_efirst", "_offsets", "_end_node", "_gate", "_left")
    for name in (*names, "_prefix", "_next_end"):
        assert getattr(fast, name).tolist() == getattr(slow, name).tolist(), name
    assert fast._units == slow._units

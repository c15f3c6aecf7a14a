"""Provenance: ``ExtractionResult.spans``, where each ``FromText`` value came from."""

from __future__ import annotations

import itertools
import json
import re
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import formcast
from formcast import Extractor, FromText
from formcast.automaton.bound import BoundAutomaton
from formcast.extraction.provenance import json_leaves, text_spans
from support.decoding_cases import ASSISTANT
from support.scripted_model import ScriptedModel, following


class Line(BaseModel):
    name: Annotated[str, FromText()]
    qty: int


class Order(BaseModel):
    shop: Annotated[str, FromText(case_sensitive=False)]
    note: str
    lines: list[Line]
    total: Annotated[float, FromText()]


TEXT = "KEDAI  Ali\nbolt x 3\nnut x 2, bolt again\nTOTAL 9.50"
OUTPUT = (
    '{"shop":"kedai ali","note":"bolt","lines":[{"name":"bolt","qty":3},'
    '{"name":"nut","qty":2}],"total":9.50}'
)


def test_json_leaves_name_strings_and_numbers_by_pointer() -> None:
    raw = '{"a":"x","b/c":[1, {"d":"\\"q"}],"e":true}'
    leaves = {p: raw[s:e] for p, s, e in json_leaves(raw)}
    assert leaves == {"/a": "x", "/b~1c/0": "1", "/b~1c/1/d": '\\"q'}


def test_spans_of_every_copied_value(tokenizer: Any) -> None:
    bound = formcast.compile(Order, tokenizer).bind(TEXT).automaton
    assert isinstance(bound, BoundAutomaton)
    slots = bound.slot_bytes(OUTPUT.encode())
    spans = text_spans(TEXT, OUTPUT, slots, [s.options for s in bound.slots])
    bolt, again, nut, total = (TEXT.index(w) for w in ("bolt", "bolt again", "nut", "9.50"))
    assert spans == {
        "/shop": ((0, 10),),  # case and whitespace as the slot's options allow
        "/lines/0/name": ((bolt, bolt + 4), (again, again + 4)),  # twice: both occurrences
        "/lines/1/name": ((nut, nut + 3),),
        "/total": ((total, total + 4),),
    }  # "/note" is not copied, though "bolt" is in the text


def test_extract_reports_spans(tokenizer: Any) -> None:
    model = ScriptedModel(following(tokenizer, [OUTPUT], ASSISTANT))
    extractor = Extractor(model, tokenizer, max_new_tokens=80)
    result = extractor.run(Order, TEXT)
    assert result.ok and result.raw_text == OUTPUT
    assert result.spans["/lines/1/name"] == ((TEXT.index("nut"), TEXT.index("nut") + 3),)
    assert TEXT[slice(*result.spans["/total"][0])] == "9.50"
    texts = [TEXT, "TOTAL 9.50 kedai ali nut bolt"]
    many = list(extractor.extract_many(Order, texts, progress=False))
    assert many[0].spans == result.spans

    class Plain(BaseModel):
        shop: str

    assert extractor.run(Plain, TEXT).spans == {}  # nothing copied


_WORDS = st.sampled_from(["bolt", "Nut", "ACME", "kedai", "9.50", "x", "42", "é", "-"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    words=st.lists(_WORDS, min_size=1, max_size=12),
    spaces=st.lists(st.sampled_from([" ", "  ", "\n", ", "]), min_size=12, max_size=12),
    cut=st.tuples(st.integers(0, 11), st.integers(1, 12)),
    case_sensitive=st.booleans(),
    whitespace=st.sampled_from(["collapse", "exact"]),
)
def test_every_span_slices_the_text_to_its_value(
    vocabulary: Any,
    words: list[str],
    spaces: list[str],
    cut: tuple[int, int],
    case_sensitive: bool,
    whitespace: Any,
) -> None:
    text = "".join(w + s for w, s in zip(words, spaces, strict=False)).strip()
    start, length = min(cut[0], len(words) - 1), cut[1]
    chosen = words[start : start + length]
    value = " ".join(chosen) if whitespace == "collapse" else None
    if value is None:  # exact: the value as the text writes it
        first = sum(len(w) + len(s) for w, s in zip(words[:start], spaces, strict=False))
        value = text[first:].split(chosen[-1], 1)[0] + chosen[-1] if chosen else ""
    options = FromText(case_sensitive=case_sensitive, whitespace=whitespace)
    model = _model(options)
    index = formcast.compile(model, vocabulary).bind(text)
    bound = index.automaton
    assert isinstance(bound, BoundAutomaton)
    written = value.lower() if not case_sensitive else value
    raw = json.dumps({"name": written}, ensure_ascii=False, separators=(",", ":"))
    if not bound.matches(raw.encode()):
        return  # not a value this slot allows (a word boundary, say)
    spans = text_spans(text, raw, bound.slot_bytes(raw.encode()), [options])
    assert spans.get("/name"), (text, raw)
    for begin, end in spans["/name"]:
        found = text[begin:end]
        if whitespace == "collapse":
            found = re.sub(r"\s+", " ", found)
        assert (found if case_sensitive else found.lower()) == written


def _model(options: FromText) -> type[BaseModel]:
    class Named(BaseModel):
        name: Annotated[str, options]

    return Named


@pytest.mark.slow
def test_spans_on_the_default_model(default_extractor: Any) -> None:
    class Receipt(BaseModel):
        company: Annotated[str, FromText()]
        total: Annotated[float, FromText()]

    text = "ACME HARDWARE SDN BHD\nDate: 12/03/2019\nHammer  2 x 10.00\nTOTAL: 20.00"
    result = default_extractor.run(Receipt, text, max_new_tokens=64)
    value = result.unwrap()
    assert set(result.spans) <= {"/company", "/total"} and "/company" in result.spans
    for start, end in result.spans["/company"]:
        assert " ".join(text[start:end].split()) == value.company


def test_json_leaves_of_a_prefix_are_its_closed_values() -> None:
    raw = '{"a":"x","b":[12, {"d":"ope'
    assert {p: raw[s:e] for p, s, e in json_leaves(raw)} == {"/a": "x", "/b/0": "12"}
    assert json_leaves('{"a":"x","n":12') == [("/a", 6, 7)]  # 12 may still grow


def test_streamed_partials_carry_the_spans_of_closed_values(tokenizer: Any) -> None:
    """Each partial's spans are those of the values closed so far (the result's, for
    those values), each slicing the text to its value."""
    model = ScriptedModel(following(tokenizer, [OUTPUT], ASSISTANT))
    extractor = Extractor(model, tokenizer, max_new_tokens=80)
    items = list(extractor.stream(Order, TEXT, every=1))
    partials, final = items[:-1], items[-1]
    assert isinstance(final, Order)
    final_spans = extractor.run(Order, TEXT).spans
    assert partials[0].spans == {} and len(partials[-1].spans) >= len(final_spans) - 1
    assert all(p.spans.items() <= final_spans.items() for p in partials)
    grown = [set(p.spans) for p in partials]
    assert all(a <= b for a, b in itertools.pairwise(grown))
    for partial in partials:
        for pointer, found in partial.spans.items():
            value = partial.model_dump()
            for step in pointer.strip("/").split("/"):
                value = value[int(step) if isinstance(value, list) else step]
            assert value is not None
            for start, end in found:
                assert " ".join(TEXT[start:end].lower().split()) == str(value).lower()
    streamed = [item for _, item in extractor.stream_many(Order, [TEXT], every=1)]
    assert [p.spans for p in streamed[:-1]] == [p.spans for p in partials]
    assert isinstance(streamed[-1], formcast.ExtractionResult)
    assert streamed[-1].spans == final_spans

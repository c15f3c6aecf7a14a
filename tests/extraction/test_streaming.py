"""Streaming partial objects: ``Extractor.stream`` and ``stream_many``, ``formcast.Partial``.

The scripted model (:mod:`support.scripted_model`) writes known outputs, so the partials a
stream yields can be checked one by one; one test runs the tiny random Llama.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import formcast
from formcast import Extractor, Partial
from formcast.errors import InvalidOptionError
from formcast.extraction.partial import partial_of, read_prefix
from support.decoding_cases import ASSISTANT, DMY, ISO, Event
from support.scripted_model import ScriptedModel, following


class Item(BaseModel):
    name: str
    price: float


class Order(BaseModel):
    shop: str
    kind: Literal["cash", "card"]
    items: list[Item]
    total: float


ORDER = Order(
    shop="Kedai Ali Bin Abu Trading",
    kind="card",
    items=[Item(name="steel bolt", price=1.5), Item(name="nut", price=0.25)],
    total=1.75,
)


def _extractor(tokenizer: Any, targets: Any) -> Extractor:
    return Extractor(ScriptedModel(following(tokenizer, targets, ASSISTANT)), tokenizer)


def test_partial_types_make_every_field_optional() -> None:
    empty = Partial[Order]()
    assert empty.shop is None and empty.items is None
    assert Partial[Order] is Partial[Order] and isinstance(empty, Partial[Order])
    assert not isinstance(empty, Order) and not isinstance(ORDER, Partial[Order])
    with pytest.raises(TypeError, match="Pydantic model"):
        Partial[int]


def test_a_prefix_holds_closed_values_and_the_open_string() -> None:
    text = ORDER.model_dump_json()
    assert read_prefix(text) == json.loads(text)
    cut = text[: text.index("nut") + 2]
    assert read_prefix(cut) == {
        "shop": ORDER.shop,
        "kind": "card",
        "items": [{"name": "steel bolt", "price": 1.5}, {"name": "nu"}],
    }
    assert read_prefix(text[: text.index("1.75") + 2]).get("total") is None  # a number may go on
    assert read_prefix('{"a":"x\\') == {"a": "x"}  # an escape cut in the middle
    # A value the partial type rejects (the start of a Literal) is left out, not raised.
    partial = partial_of(Order, read_prefix('{"shop":"K","kind":"ca'))
    assert partial.shop == "K" and partial.kind is None


def test_stream_yields_growing_partials_then_the_model(tokenizer: Any) -> None:
    target = ORDER.model_dump_json()
    items = list(_extractor(tokenizer, [target]).stream(Order, "receipt text", every=2))
    *partials, last = items
    assert last == ORDER and type(last) is Order
    assert partials and all(isinstance(p, Partial[Order]) for p in partials)
    # every partial is the dump of a prefix of the output: never a value it did not write
    for partial in partials:
        dumped = partial.model_dump(exclude_none=True)
        assert read_prefix(target[: len(json.dumps(dumped))]) is not None
        if "shop" in dumped:
            assert ORDER.shop.startswith(dumped["shop"])
    shops = [p.shop for p in partials if p.shop is not None]
    assert len(set(shops)) > 2 and shops[-1] == ORDER.shop  # the string grew in steps
    assert any(p.items and len(p.items) == 2 for p in partials)


def test_a_rolled_back_value_is_taken_back(tokenizer: Any) -> None:
    items = list(_extractor(tokenizer, [ISO, DMY]).stream(Event, "On 12/03/2018 in Paris"))
    dates = [p.date for p in items[:-1]]
    first = next(i for i, d in enumerate(dates) if d and d.startswith("2018-03"))
    # the ISO date was written, then rejected by the field validator and rolled back:
    assert None in dates[first:]  # taken back in the next partial
    assert all(d is None or "12/03/2018".startswith(d) for d in dates[dates.index(None, first) :])
    assert items[-1] == Event(date="12/03/2018", city="Paris")


def test_stream_many_interleaves_rows_and_ends_each_with_its_result(tokenizer: Any) -> None:
    def targets(prompt: str) -> list[str]:
        return [ISO.replace("Paris", "Lyon") if "Lyon" in prompt else DMY]

    extractor = _extractor(tokenizer, targets)
    texts = ["On 12/03/2018 in Paris", "", "On 12/03/2018 in Lyon"]
    pairs = list(extractor.stream_many(Event, texts, batch_size=2, max_field_retries=0))
    last: dict[int, Any] = {}
    for index, item in pairs:
        assert not isinstance(last.get(index), formcast.ExtractionResult)  # nothing after it
        last[index] = item
    assert set(last) == {0, 1, 2}
    assert last[0].value == Event(date="12/03/2018", city="Paris")
    assert last[1].error is not None  # the empty text fails alone
    assert last[2].error is not None  # ISO dates fail the validator
    assert any(isinstance(item, Partial[Event]) for index, item in pairs if index == 2)


def test_stream_refuses_what_it_cannot_stream(tokenizer: Any) -> None:
    extractor = _extractor(tokenizer, [DMY])
    with pytest.raises(InvalidOptionError, match="Pydantic model"):
        next(extractor.stream(int, "3"))  # type: ignore[type-var]
    with pytest.raises(InvalidOptionError, match="every"):
        next(extractor.stream(Event, "3", every=0))


def test_stream_on_the_tiny_model(tiny_extractor: Any) -> None:
    items = list(tiny_extractor.stream(Order, "Kedai Ali, card, bolt 1.50", max_new_tokens=80))
    assert isinstance(items[-1], Order)
    assert all(isinstance(p, Partial[Order]) for p in items[:-1])

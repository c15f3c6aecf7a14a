"""Extractor, decorator, batch extraction and error paths, on a tiny random model.

The tiny model writes nonsense, but the constraint makes every output valid: these tests
check the plumbing (types, unwrapping, order, errors), not the answers.
"""

from __future__ import annotations

import datetime as dt
import enum
import re
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field, field_validator

import formcast
from formcast import (
    ContextLengthError,
    EmptyInputError,
    Extractor,
    InvalidOptionError,
    OutputValidationError,
    PromptTemplate,
    Regex,
    SchemaError,
)
from formcast.extraction.options import KNOWN_OPTIONS, ExtractOptions


class Item(BaseModel):
    name: str = Field(max_length=12)
    quantity: int = Field(ge=0, le=99)


class Receipt(BaseModel):
    company: str = Field(max_length=20)
    total: float
    items: list[Item] = Field(max_length=2)


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


def test_extract_returns_a_validated_instance(tiny_extractor: Extractor) -> None:
    receipt = tiny_extractor.extract(Receipt, "ACME, 2 apples, total 3.50", seed=1)
    assert isinstance(receipt, Receipt)
    assert len(receipt.items) <= 2


def test_run_reports_tokens_timings_and_raw_text(tiny_extractor: Extractor) -> None:
    result = tiny_extractor.run(Receipt, "ACME total 3.50")
    assert result.ok and isinstance(result.value, Receipt)
    assert Receipt.model_validate_json(result.raw_text) == result.value
    assert result.prompt_tokens > 10
    assert 0 < result.forced_tokens < result.completion_tokens <= tiny_extractor.max_new_tokens
    assert result.finish_reason in ("stop", "length")
    assert result.seconds > 0


def test_output_rejected_by_validators_carries_raw_text(tiny_extractor: Extractor) -> None:
    class Picky(BaseModel):
        word: str = Field(max_length=5)

        @field_validator("word")
        @classmethod
        def never(cls, value: str) -> str:
            raise ValueError("no word is good enough")

    result = tiny_extractor.run(Picky, "hello")
    assert not result.ok and isinstance(result.error, OutputValidationError)
    assert result.error.raw_text == result.raw_text and result.raw_text.startswith('{"word":"')
    assert result.attempts == 3 and result.error.attempts == result.history
    assert result.generated_tokens <= 3 * tiny_extractor.max_new_tokens
    with pytest.raises(OutputValidationError, match="no word is good enough"):
        tiny_extractor.extract(Picky, "hello", max_attempts=1)


@pytest.mark.parametrize(
    ("output", "check"),
    [
        (int, lambda v: type(v) is int),
        (float, lambda v: isinstance(v, float)),
        (bool, lambda v: isinstance(v, bool)),
        (Literal["yes", "no"], lambda v: v in ("yes", "no")),
        (Colour, lambda v: isinstance(v, Colour)),
        (int | None, lambda v: v is None or type(v) is int),
        (dt.date, lambda v: isinstance(v, dt.date)),
        (list[Item], lambda v: isinstance(v, list) and all(isinstance(i, Item) for i in v)),
    ],
)
def test_non_model_outputs_are_wrapped_and_unwrapped(
    tiny_extractor: Extractor, output: Any, check: Any
) -> None:
    value = tiny_extractor.extract(output, "some text", max_new_tokens=80, seed=2)
    assert check(value), value


def test_regex_output(tiny_extractor: Extractor) -> None:
    value = tiny_extractor.extract(Regex(r"[0-9]{3}-[A-Z]{2}"), "code?")
    assert re.fullmatch(r"[0-9]{3}-[A-Z]{2}", value)


def test_decorator_uses_signature_docstring_and_return_type(tiny_extractor: Extractor) -> None:
    @tiny_extractor.function(max_new_tokens=40)
    def sentiment(review: str) -> Literal["positive", "negative"]:
        """Classify the sentiment of the review."""

    @tiny_extractor.function
    def pick_item(order: str, shop: str) -> Item:
        """Pick the first item of the order."""

    assert sentiment("Great!") in ("positive", "negative")
    assert isinstance(pick_item("2 pears", shop="Fruity"), Item)
    assert sentiment.__name__ == "sentiment"


def test_decorator_without_return_annotation_is_an_error(tiny_extractor: Extractor) -> None:
    with pytest.raises(SchemaError, match="return annotation"):

        @tiny_extractor.function
        def nothing(text: str):  # type: ignore[no-untyped-def]
            """No return type."""


def test_extract_many_keeps_order_and_isolates_failures(tiny_extractor: Extractor) -> None:
    texts = (t for t in ["first", "", "third", "fourth", "   ", "sixth"])  # a generator
    results = list(tiny_extractor.extract_many(Item, texts, batch_size=4, progress=False))
    assert len(results) == 6
    assert [r.ok for r in results] == [True, False, True, True, False, True]
    assert isinstance(results[1].error, EmptyInputError)
    single = tiny_extractor.run(Item, "third")
    assert results[2].raw_text == single.raw_text  # batching does not change greedy output


def test_extract_many_is_lazy(tiny_extractor: Extractor) -> None:
    consumed: list[str] = []

    def texts() -> Any:
        for text in ["a", "b", "c", "d"]:
            consumed.append(text)
            yield text

    stream = tiny_extractor.extract_many(
        Item, texts(), batch_size=2, order="completion", progress=False
    )
    assert consumed == []
    first = next(stream)  # one text per row; none read ahead of a free row
    assert first.ok and consumed == ["a", "b"]


def test_empty_text_is_an_error(tiny_extractor: Extractor) -> None:
    with pytest.raises(EmptyInputError, match="non-empty text"):
        tiny_extractor.extract(Item, "  \n")


def test_text_longer_than_context_is_an_error(tiny_extractor: Extractor) -> None:
    with pytest.raises(ContextLengthError, match="context window"):
        tiny_extractor.extract(Item, "word " * 2000)


def test_non_pydantic_class_is_an_error(tiny_extractor: Extractor) -> None:
    class Plain:
        pass

    with pytest.raises(SchemaError, match="expected a Pydantic model class"):
        tiny_extractor.extract(Plain, "text")


@pytest.mark.parametrize("schema", [{"type": "strnig"}, '{"type": ', {"minLength": -1}])
def test_invalid_json_schema_is_an_error(tiny_extractor: Extractor, schema: Any) -> None:
    with pytest.raises(SchemaError):
        tiny_extractor.extract(schema, "text")


def test_json_schema_dict_output(tiny_extractor: Extractor) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["n"],
    }
    value = tiny_extractor.extract(schema, "a number")
    assert isinstance(value, dict) and 1 <= value["n"] <= 9


def test_max_new_tokens_too_small_is_an_error(tiny_extractor: Extractor) -> None:
    with pytest.raises(InvalidOptionError, match="max_new_tokens >= "):
        tiny_extractor.extract(Receipt, "text", max_new_tokens=5)


def test_unknown_option_is_an_error(tiny_extractor: Extractor) -> None:
    with pytest.raises(InvalidOptionError, match="max_tokens"):
        tiny_extractor.extract(Item, "text", max_tokens=5)


@pytest.mark.parametrize(
    ("options", "found"),
    [
        ({"max_new_tokens": "64"}, "max_new_tokens to be an int >= 1, found '64'"),
        ({"max_new_tokens": 0}, "max_new_tokens to be an int >= 1, found 0"),
        ({"temperature": "hot"}, "temperature to be a number, found 'hot'"),
        ({"top_p": True}, "top_p to be a number, found True"),
        ({"seed": 1.5}, "seed to be an int or None, found 1.5"),
        ({"jump_forward": 1}, "jump_forward to be True or False, found 1"),
        ({"instructions": ["Find it."]}, "instructions to be a str, found"),
    ],
)
def test_option_of_the_wrong_type_is_an_error(
    tiny_extractor: Extractor, options: dict[str, Any], found: str
) -> None:
    with pytest.raises(InvalidOptionError, match=re.escape(found)):
        tiny_extractor.run(Item, "text", **options)


def test_known_options_are_the_typed_options_and_the_guides_table() -> None:
    assert not ExtractOptions.__required_keys__  # every option may be left out
    guide = (Path(__file__).parents[2] / "docs" / "guide.md").read_text(encoding="utf-8")
    table = guide.split("| option | type | default | meaning |", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)) == KNOWN_OPTIONS


def test_the_instructions_option_replaces_the_decorated_docstring(
    tiny_extractor: Extractor, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[str] = []
    run = tiny_extractor.run

    def record(output: Any, text: str, **options: Any) -> Any:
        sent.append(options["instructions"])
        return run(output, text, **options)

    monkeypatch.setattr(tiny_extractor, "run", record)

    @tiny_extractor.function(instructions="Name the fruit.")
    def fruit(order: str) -> Item:
        """Pick the first item of the order."""

    @tiny_extractor.function
    def first(order: str) -> Item:
        """Pick the first item of the order."""

    assert isinstance(fruit("2 pears"), Item) and isinstance(first("2 pears"), Item)
    assert sent == ["Name the fruit.", "Pick the first item of the order."]


def test_prompt_template_is_used(tiny_model: Any, tokenizer: Any) -> None:
    template = PromptTemplate(system=None, user="FIELDS={fields} TEXT={text}")
    extractor = Extractor(tiny_model, tokenizer, prompt_template=template)
    messages = template.messages(text="abc", fields="- x (integer)", instructions="")
    assert messages == [{"role": "user", "content": "FIELDS=- x (integer) TEXT=abc"}]
    assert extractor.run(Item, "abc").ok


def test_module_level_functions_accept_an_extractor(tiny_extractor: Extractor) -> None:
    item = formcast.extract(Item, "one pear", model=tiny_extractor)
    assert isinstance(item, Item)
    results = list(formcast.extract_many(Item, ["a", "b"], model=tiny_extractor, progress=False))
    assert all(r.ok for r in results)


def test_extract_many_checks_the_call_before_reading_items(tiny_extractor: Extractor) -> None:
    def never_read() -> Any:
        raise AssertionError("items must not be read when the call is wrong")
        yield ""

    with pytest.raises(InvalidOptionError, match="batch_size"):
        tiny_extractor.extract_many(Item, never_read(), batch_size=0)
    with pytest.raises(InvalidOptionError, match="max_tokens"):
        tiny_extractor.extract_many(Item, never_read(), max_tokens=3)
    with pytest.raises(SchemaError):
        tiny_extractor.extract_many({"type": "nope"}, never_read())


def test_decorator_checks_the_budget_when_decorating(tiny_extractor: Extractor) -> None:
    with pytest.raises(InvalidOptionError, match="max_new_tokens >= "):

        @tiny_extractor.function(max_new_tokens=4)
        def classify(text: str) -> Literal["positive", "negative"]:
            """Classify."""

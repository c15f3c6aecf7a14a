"""Calls that type-check, and the types they return (checked by mypy, never run)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel
from typing_extensions import assert_type

import formcast
from formcast import ExtractionResult, Extractor, FromText, Grammar, LoopGuard, Partial, Regex
from formcast.extraction.options import ExtractOptions


class Receipt(BaseModel):
    company: str
    total: float


def module_functions() -> None:
    receipt = formcast.extract(
        Receipt,
        "ACME, total 3.50",
        max_new_tokens=64,
        temperature=0.7,
        top_p=0.9,
        seed=1,
        jump_forward=False,
        mode="specification",
        whitespace=2,
        from_text=FromText(),
        loop_guard=LoopGuard(max_repeats=4),
        max_attempts=2,
        max_total_tokens=256,
        max_field_retries=0,
        instructions="Read the receipt.",
    )
    assert_type(receipt, Receipt)
    assert_type(formcast.extract(Regex(r"[0-9]+"), "call 555"), str)
    assert_type(formcast.extract(Grammar("root ::= [0-9]+"), "call 555"), str)
    assert_type(formcast.extract(Receipt, "text", model="some/checkpoint", seed=None), Receipt)

    results = formcast.extract_many(Receipt, ["a", "b"], batch_size=2, progress=False)
    assert_type(results, Iterator[ExtractionResult[Receipt]])
    for result in results:
        assert_type(result.value, Receipt | None)
        assert_type(result.unwrap(), Receipt)
        assert_type(result.finish_reason, Literal["stop", "length"])
        for attempt in result.history:
            assert_type(attempt.finish_reason, Literal["stop", "length"])
    phones = formcast.extract_many(Regex(r"[0-9]+"), iter(["555"]), loop_guard=False)
    assert_type(phones, Iterator[ExtractionResult[str]])
    digits = formcast.extract_many(Grammar("start: /[0-9]+/", syntax="lark"), ["555"])
    assert_type(digits, Iterator[ExtractionResult[str]])
    streamed = formcast.extract_many(
        Receipt, ["a"], order="completion", batching="static", share_prefix=False
    )
    assert_type(formcast.extract(Receipt, "t", max_recursion_depth=3), Receipt)
    assert_type(formcast.extract(Receipt, "t", max_recursion_depth=None), Receipt)
    for done in streamed:
        assert_type(done.index, int)


def decorators() -> None:
    @formcast.function
    def company_of(receipt: str) -> Receipt:
        """Read the receipt."""
        raise NotImplementedError

    @formcast.function(max_new_tokens=64, from_text=True)
    def total_of(receipt: str, currency: str = "EUR") -> float:
        """The receipt's total."""
        raise NotImplementedError

    assert_type(company_of("ACME, total 3.50"), Receipt)
    assert_type(total_of("ACME, total 3.50", currency="USD"), float)
    for item in company_of.stream("ACME, total 3.50"):
        print(item)


def streams(extractor: Extractor) -> None:
    assert_type(formcast.stream(Receipt, "t", every=2), Iterator[Partial[Receipt] | Receipt])
    for item in extractor.stream(Receipt, "t", max_new_tokens=64):
        if isinstance(item, Receipt):
            assert_type(item.total, float)
    pairs = extractor.stream_many(Receipt, ["t"], batch_size=4)
    assert_type(pairs, Iterator[tuple[int, Partial[Receipt] | ExtractionResult[Receipt]]])


def extractor_methods(extractor: Extractor) -> None:
    assert_type(extractor.extract(Receipt, "text", max_new_tokens=64), Receipt)
    assert_type(extractor.extract(Regex(r"[0-9]+"), "text"), str)
    assert_type(extractor.run(Receipt, "text", seed=3), ExtractionResult[Receipt])
    assert_type(extractor.run(Regex(r"[0-9]+"), "text"), ExtractionResult[str])
    assert_type(extractor.run(Grammar('root ::= "a"'), "text"), ExtractionResult[str])
    assert_type(
        extractor.extract_many(Receipt, ["text"], max_attempts=1),
        Iterator[ExtractionResult[Receipt]],
    )
    assert_type(
        extractor.extract_many(Receipt, ["text"], order="completion", batching="continuous"),
        Iterator[ExtractionResult[Receipt]],
    )

    @extractor.function(temperature=0.0)
    def is_paid(receipt: str) -> bool:
        """Whether the receipt says it is paid."""
        raise NotImplementedError

    assert_type(is_paid("PAID"), bool)


def options_passed_on(extractor: Extractor, options: ExtractOptions) -> None:
    """Options gathered in a typed dict pass through as keywords."""
    assert_type(extractor.extract(Receipt, "text", **options), Receipt)

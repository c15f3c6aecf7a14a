"""The masked decoding loop on a tiny random Llama with the real SmolLM2 tokenizer."""

from __future__ import annotations

import re
from typing import Any

import pytest

from formcast.automaton import LazyAutomaton
from formcast.decode.logits import (
    ForcedTokenizer,
    SamplingOptions,
    generate,
)
from formcast.errors import InvalidOptionError
from formcast.index import TokenIndex
from formcast.vocabulary import Vocabulary
from support.decoding_cases import JSON_STRING, RECEIPT
from support.generate_support import sample_under_processor


@pytest.fixture(scope="module")
def receipt_index(vocabulary: Vocabulary) -> TokenIndex:
    return TokenIndex(LazyAutomaton(RECEIPT), vocabulary)


def _prompts(tokenizer: Any) -> list[list[int]]:
    texts = ["short", "a somewhat longer prompt, with several more tokens in it", "mid size one"]
    return [tokenizer.encode(t) for t in texts]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("jump_forward", [True, False])
def test_sampled_outputs_always_match(
    seed: int,
    jump_forward: bool,
    tiny_model: Any,
    tokenizer: Any,
    vocabulary: Vocabulary,
    receipt_index: TokenIndex,
) -> None:
    prompts = _prompts(tokenizer)
    forced = ForcedTokenizer(tokenizer, vocabulary) if jump_forward else None
    results = generate(
        tiny_model,
        prompts,
        [receipt_index.cursor() for _ in prompts],
        max_new_tokens=48,
        forced_tokenizer=forced,
        sampling=SamplingOptions(temperature=1.0, seed=seed),
    )
    assert len(results) == len(prompts)
    for result in results:
        assert re.fullmatch(RECEIPT, result.text), result.text
        assert result.finish_reason in ("stop", "length")
        assert result.completion_tokens <= 48
        assert (result.forced_tokens > 0) == jump_forward


def test_batch_equals_one_by_one(
    tiny_model: Any, tokenizer: Any, receipt_index: TokenIndex
) -> None:
    prompts = _prompts(tokenizer)
    alone = [
        generate(tiny_model, [p], [receipt_index.cursor()], max_new_tokens=40)[0].token_ids
        for p in prompts
    ]
    batched = generate(
        tiny_model, prompts, [receipt_index.cursor() for _ in prompts], max_new_tokens=40
    )
    assert [g.token_ids for g in batched] == alone


def test_jump_forward_uses_the_tokenizers_own_tokens(
    tokenizer: Any, vocabulary: Vocabulary
) -> None:
    forced = ForcedTokenizer(tokenizer, vocabulary)
    text = '","total":'
    assert forced(text.encode()) == tokenizer.encode(text, add_special_tokens=False)
    # An incomplete UTF-8 tail is left for the model to write.
    assert forced("ab\xe9".encode()[:-1]) == tokenizer.encode("ab", add_special_tokens=False)


@pytest.mark.parametrize("extra", [0, 1, 2, 5, 9, 15])
def test_budget_safe_ending_is_still_complete(
    extra: int, tiny_model: Any, tokenizer: Any, receipt_index: TokenIndex
) -> None:
    budget = receipt_index.min_tokens_to_accept(receipt_index.initial_state) + extra
    prompts = _prompts(tokenizer)
    results = generate(
        tiny_model,
        prompts,
        [receipt_index.cursor() for _ in prompts],
        max_new_tokens=budget,
        sampling=SamplingOptions(temperature=1.5, seed=budget),
    )
    for result in results:
        assert re.fullmatch(RECEIPT, result.text), result.text
        assert result.completion_tokens <= budget


def test_budget_below_the_shortest_output_is_an_error(
    tiny_model: Any, tokenizer: Any, receipt_index: TokenIndex
) -> None:
    needed = receipt_index.min_tokens_to_accept(receipt_index.initial_state)
    with pytest.raises(InvalidOptionError, match=f"max_new_tokens >= {needed}"):
        generate(
            tiny_model, [tokenizer.encode("x")], [receipt_index.cursor()], max_new_tokens=needed - 1
        )


def test_bad_sampling_options_are_rejected() -> None:
    with pytest.raises(InvalidOptionError, match="temperature"):
        SamplingOptions(temperature=-1)
    with pytest.raises(InvalidOptionError, match="top_p"):
        SamplingOptions(top_p=0)


def test_top_p_and_seed_are_repeatable(
    tiny_model: Any, tokenizer: Any, receipt_index: TokenIndex
) -> None:
    def run(seed: int) -> list[int]:
        return generate(
            tiny_model,
            [tokenizer.encode("p")],
            [receipt_index.cursor()],
            max_new_tokens=60,
            sampling=SamplingOptions(temperature=1.0, top_p=0.9, seed=seed),
        )[0].token_ids

    assert run(3) == run(3)


@pytest.mark.parametrize("seed", range(3))
def test_logits_processor_with_model_generate(
    seed: int, tiny_model: Any, tokenizer: Any, receipt_index: TokenIndex
) -> None:
    for text in sample_under_processor(tiny_model, tokenizer, receipt_index, "receipt:", 40, seed):
        assert re.fullmatch(RECEIPT, text), text


def test_budget_cut_reports_length(tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary) -> None:
    index = TokenIndex(LazyAutomaton(r'\{"summary":' + JSON_STRING + r"\}"), vocabulary)
    budget = index.min_tokens_to_accept(index.initial_state) + 3
    results = generate(
        tiny_model,
        _prompts(tokenizer),
        [index.cursor() for _ in range(3)],
        max_new_tokens=budget,
        sampling=SamplingOptions(temperature=1.0, seed=0),
    )
    for result in results:
        assert re.fullmatch(r'\{"summary":' + JSON_STRING + r"\}", result.text)
        assert result.completion_tokens <= budget
        # Random logits rarely pick the closing quote: the budget had to end the string.
        assert result.finish_reason == "length", result.text

"""Sampling with ``model.generate`` under formcast's logits processor, for the tests of
the transformers integration (the tiny model of ``conftest.py``: token 2 pads and ends)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import LogitsProcessorList

from formcast import FormcastLogitsProcessor
from formcast.index import TokenIndex

TINY_END = 2
"""The tiny model's padding and end-of-text token id (``conftest.tiny_model``)."""


def sample_under_processor(
    model: Any, tokenizer: Any, index: TokenIndex, prompt: str, max_new_tokens: int, seed: int
) -> list[str]:
    """The texts ``model.generate`` samples (``do_sample=True``) for two copies of
    ``prompt`` under a :class:`FormcastLogitsProcessor` of ``index``, decoded without
    the end token. ``seed`` seeds torch's global generator first."""
    torch.manual_seed(seed)
    prompt_ids = torch.tensor([tokenizer.encode(prompt)] * 2)
    processor = FormcastLogitsProcessor(index, max_new_tokens=max_new_tokens)
    out = model.generate(
        prompt_ids,
        attention_mask=torch.ones_like(prompt_ids),
        logits_processor=LogitsProcessorList([processor]),
        max_new_tokens=max_new_tokens,
        do_sample=True,
        pad_token_id=TINY_END,
        eos_token_id=TINY_END,
    )
    rows = out[:, prompt_ids.shape[1] :].tolist()
    return [tokenizer.decode([token for token in row if token != TINY_END]) for row in rows]

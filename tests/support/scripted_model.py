"""A deterministic stand-in for a causal language model, for tests of the decoding loop.

:class:`ScriptedModel` takes the ``forward`` arguments the decoding loop passes (input
ids, a 2-D attention mask, position ids, a transformers ``Cache``) and returns logits
computed by a Python function of the tokens each row can *see*: the cached and new
tokens whose attention-mask column is 1. Like a real model it stores its "keys" in the
cache it is given (``cache.update``): the token ids themselves, one column per fed token,
so it sees exactly what the loop's cache holds after rows joined, left, were compacted
or rolled back. It checks on every call that the mask covers every cached column and
that the position ids of the new tokens continue the visible sequence, so a decoding
loop that hides or numbers a row's tokens wrongly fails loudly.

:func:`following` builds such a function from target texts: after a marker (the end of
the prompt), the model prefers the next token of the first target the text written so
far is a prefix of, then the second, and so on; when none fits, it prefers ending
the string and the object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import torch

Scores = Callable[[list[int]], dict[int, float]]


class ScriptedModel(torch.nn.Module):
    def __init__(self, scores: Scores, width: int = 49_216) -> None:
        super().__init__()
        self.scores = scores
        self.width = width
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # gives the module a device
        self.seen: list[list[int]] = []  # the visible tokens of each row, last call
        self.calls: list[tuple[int, int]] = []  # (rows, new columns) of each call

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        past_key_values: Any,
        **_: Any,
    ) -> SimpleNamespace:
        batch, new = input_ids.shape
        self.calls.append((batch, new))
        keys = input_ids.to(torch.float64)[:, None, :, None]
        cached, _ = past_key_values.update(keys, keys, 0)
        columns = cached[:, 0, :, 0].to(torch.long)
        assert attention_mask.shape == columns.shape, "the mask must cover every cached column"
        logits = torch.full((batch, 1, self.width), -10.0)
        self.seen = []
        for i in range(batch):
            mask = attention_mask[i].tolist()
            tokens = columns[i].tolist()
            old = len(tokens) - new
            visible = [t for t, m in zip(tokens[:old], mask[:old], strict=True) if m]
            for j in range(new):
                if mask[old + j]:
                    assert position_ids[i, j].item() == len(visible), "positions must continue"
                    visible.append(tokens[old + j])
            self.seen.append(visible)
            for token, score in self.scores(visible).items():
                logits[i, 0, token] = score
        return SimpleNamespace(logits=logits, past_key_values=past_key_values)


def following(
    tokenizer: Any,
    targets: Callable[[str], Sequence[str]] | Sequence[str],
    marker: str,
    endings: Sequence[str] = ('"}', '"'),
) -> Scores:
    """Scores that follow ``targets`` (a list, or a function of the prompt text) after the
    last ``marker`` in the visible text."""

    def first_token(text: str) -> int:
        return int(tokenizer.encode(text, add_special_tokens=False)[0])

    ending_ids = [first_token(e) for e in endings]

    def scores(visible: list[int]) -> dict[int, float]:
        text = tokenizer.decode(visible)
        cut = text.rfind(marker)
        prompt, written = text[: cut + len(marker)], text[cut + len(marker) :]
        wanted = targets(prompt) if callable(targets) else targets
        out = {token: 0.0 for token in ending_ids}
        for rank, target in enumerate(wanted):
            if target.startswith(written) and len(target) > len(written):
                token = first_token(target[len(written) :])
                out[token] = max(out.get(token, -10.0), 10.0 - rank)
        return out

    return scores

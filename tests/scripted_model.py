"""A deterministic stand-in for a causal language model, for tests of the decoding loop.

:class:`ScriptedModel` takes the ``forward`` arguments ``generate`` passes (input ids,
a 2-D attention mask, position ids, its own cache) and returns logits computed by a
Python function of the tokens each row can *see*: the cached and new tokens whose
attention-mask column is 1. It checks on every call that the mask covers every cached
column and that the position ids of the new tokens continue the visible sequence, so a
decoding loop that hides or numbers a row's tokens wrongly fails loudly.

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


class ScriptedCache:
    """The tokens in each cache column of each row (pads included)."""

    def __init__(self, rows: list[list[int]]) -> None:
        self.rows = rows

    def batch_select_indices(self, index: torch.Tensor) -> None:
        self.rows = [self.rows[i] for i in index.tolist()]


class ScriptedModel(torch.nn.Module):
    def __init__(self, scores: Scores, width: int = 49_216) -> None:
        super().__init__()
        self.scores = scores
        self.width = width
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # gives the module a device
        self.seen: list[list[int]] = []  # the visible tokens of each row, last call

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        past_key_values: ScriptedCache | None = None,
        **_: Any,
    ) -> SimpleNamespace:
        batch, new = input_ids.shape
        cache = past_key_values or ScriptedCache([[] for _ in range(batch)])
        logits = torch.full((batch, 1, self.width), -10.0)
        self.seen = []
        for i in range(batch):
            before = cache.rows[i]
            mask = attention_mask[i].tolist()
            assert len(mask) == len(before) + new, "the mask must cover every cached column"
            visible = [t for t, m in zip(before, mask, strict=False) if m]
            tokens = input_ids[i].tolist()
            for j, (token, shown) in enumerate(zip(tokens, mask[len(before) :], strict=True)):
                if shown:
                    assert position_ids[i, j].item() == len(visible), "positions must continue"
                    visible.append(token)
            cache.rows[i] = before + tokens
            self.seen.append(visible)
            for token, score in self.scores(visible).items():
                logits[i, 0, token] = score
        return SimpleNamespace(logits=logits, past_key_values=cache)


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

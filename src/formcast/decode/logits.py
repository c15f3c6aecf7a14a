"""The masked generation loop's parts, :func:`generate`, and a transformers ``LogitsProcessor``.

:func:`generate` runs a causal language model with its KV cache over a batch of prompts,
one :class:`~formcast.cursor.Cursor` per row (the loop itself is
:class:`formcast.decode.batching.BatchDecoder`, which also lets rows join as others end):

* every step, each row's logits are masked to the tokens its cursor allows (banned
  tokens at ``-inf``; embedding-padding ids always banned; EOS only where the output is
  complete), then a token is chosen (greedy by default; temperature / top-p / seed);
* **jump-forward**: bytes the constraint forces (``","total":``) are tokenized the way
  the tokenizer would tokenize that text and fed in the same forward pass as the
  sampled token, without sampling them, except the last forced token, which the model
  chooses (token healing);
* **budget-safe ending**: with ``tokens_left`` tokens left, only tokens after which the
  output can still be completed in time are allowed, so a length-limited result is still
  complete, valid output (``finish_reason="length"``);
* rows are left-padded; a finished row leaves the batch (its KV cache rows are dropped)
  without stalling the others;
* **loop guard** (:class:`LoopGuard`, optional): inside a JSON string, a token that would
  repeat one chunk of tokens once too often is banned;
* **field-level steering** (:class:`FieldSteering`, optional, per row): when a top-level
  value of the JSON object closes and the row's check rejects it, the row rolls back to
  the value's start and writes it again, with the first token of each rejected value
  banned there. A batch shares one KV cache: the rolled-back positions of that row are
  hidden by its attention mask and its position ids restart from the rollback point, so
  the cache stays exact for every row (hidden columns are compacted away when they
  take too much room).

torch is imported here and in nothing upstream of this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from formcast.cursor import Cursor
from formcast.decode.batching import BatchDecoder, RowRequest
from formcast.decode.forcing import ForcedTokenizer
from formcast.decode.kvcache import SharedPrefix
from formcast.decode.masks import allowed_mask
from formcast.decode.records import (
    FieldSteering,
    FinishReason,
    Generation,
    LoopGuard,
    SamplingOptions,
    row_seed,
)
from formcast.errors import InvalidOptionError
from formcast.index import TokenIndex

__all__ = [
    "FieldSteering",
    "FinishReason",
    "ForcedTokenizer",
    "FormcastLogitsProcessor",
    "Generation",
    "LoopGuard",
    "SamplingOptions",
    "generate",
]


def generate(
    model: Any,
    prompts: Sequence[Sequence[int]],
    cursors: Sequence[Cursor],
    *,
    max_new_tokens: int,
    forced_tokenizer: ForcedTokenizer | None = None,
    sampling: SamplingOptions | None = None,
    pad_token_id: int = 0,
    loop_guard: LoopGuard | None = None,
    steering: Sequence[FieldSteering | None] | None = None,
    prefix: SharedPrefix | None = None,
) -> list[Generation]:
    """Constrained generation for a batch of tokenized prompts, one cursor each.

    All rows run together in one :class:`~formcast.decode.batching.BatchDecoder` (a static
    batch); use the decoder itself to let rows join as others end.

    Args:
        model: a transformers causal LM (anything whose ``forward`` takes ``input_ids``,
            ``attention_mask``, ``position_ids``, ``past_key_values`` and returns ``logits``).
        prompts: token ids of each prompt (chat template already applied).
        cursors: one fresh cursor per prompt; advanced in place (a steered row that
            rolls back continues on a replayed copy). Rows may use different constraints.
        max_new_tokens: generation budget per row, forced tokens included.
        forced_tokenizer: enables jump-forward when given.
        sampling: greedy by default; with a seed, row ``i`` samples with its own
            generator (seeded from the seed and ``i``), so its output does not depend on
            the other rows.
        pad_token_id: any valid id; pad positions are masked out.
        loop_guard: bans tokens that repeat a chunk inside a JSON string once too often
            (off when None).
        steering: one :class:`FieldSteering` (or None) per prompt: field-level validation
            with rollback of the top-level values of a JSON object output.
        prefix: a :class:`~formcast.decode.kvcache.SharedPrefix` whose keys and values stand for
            the leading tokens the prompts share with it (computed once).

    Returns:
        One :class:`Generation` per prompt, in order. Every row ends in an accepting state
        of its constraint: ``finish_reason`` is ``"stop"`` when the model ended (EOS, or
        nothing could follow) on its own, and ``"length"`` when the budget ran out or had
        to steer the output towards a complete ending.

    Raises:
        InvalidOptionError: ``max_new_tokens`` is smaller than the fewest tokens a complete
            output needs.
    """
    if len(prompts) != len(cursors):
        raise InvalidOptionError(
            f"expected one cursor per prompt, found {len(prompts)} prompts and "
            f"{len(cursors)} cursors"
        )
    if max_new_tokens < 1:
        raise InvalidOptionError(f"expected max_new_tokens >= 1, found {max_new_tokens}")
    steerings = list(steering) if steering is not None else [None] * len(prompts)
    if len(steerings) != len(prompts):
        raise InvalidOptionError(
            f"expected one steering entry per prompt, found {len(steerings)} for "
            f"{len(prompts)} prompts"
        )
    sampling = sampling or SamplingOptions()
    decoder = BatchDecoder(
        model,
        capacity=max(1, len(prompts)),
        max_new_tokens=max_new_tokens,
        forced_tokenizer=forced_tokenizer,
        sampling=sampling,
        pad_token_id=pad_token_id,
        loop_guard=loop_guard,
        prefix=prefix,
    )
    seed = sampling.seed
    for i, (prompt, cursor) in enumerate(zip(prompts, cursors, strict=True)):
        row_key = None if seed is None else row_seed(seed, i)
        decoder.add(RowRequest(i, prompt, cursor, steerings[i], row_key))
    generations: dict[int, Generation] = {}
    while decoder.busy:
        for done in decoder.step():
            generations[done.key] = done.generation
    return [generations[i] for i in range(len(prompts))]


class FormcastLogitsProcessor:
    """A transformers ``LogitsProcessor`` that applies a compiled constraint per row.

    Use it with ``model.generate(..., logits_processor=LogitsProcessorList([proc]))``.
    The first call records the prompt length; each later call advances every row's
    cursor over the token generated since. Rows that already ended may only emit EOS
    (``generate`` keeps padding them). With ``max_new_tokens`` given, endings are
    budget-safe like :func:`generate`. One processor serves one ``generate`` call; make a
    new one (cheap: the index is shared) for the next.

    ``texts`` (one per row, in batch order) is required when the index copies values from
    the text (``FromText``): each row's constraint is bound to its own text. With
    ``num_return_sequences`` or beams, repeat each text as ``generate`` repeats its row.
    """

    def __init__(
        self,
        index: TokenIndex,
        *,
        max_new_tokens: int | None = None,
        texts: Sequence[str] | None = None,
    ) -> None:
        # each text is bound here, once: a text without a value fails before generate
        self._bound = None if texts is None else [index.bind(text) for text in texts]
        if texts is None and index.text_slots:
            raise InvalidOptionError(
                f"expected texts=[...] (one per row) for {index.description!r}, which copies "
                "values from the text (FromText), found none"
            )
        self.index = index
        self.max_new_tokens = max_new_tokens
        self._cursors: list[Cursor] | None = None
        self._prompt_length = 0

    def _fresh_cursors(self, batch: int) -> list[Cursor]:
        if self._bound is None:
            return [Cursor(self.index) for _ in range(batch)]
        if len(self._bound) != batch:
            raise InvalidOptionError(
                f"expected one text per row, found {len(self._bound)} texts for {batch} rows"
            )
        return [Cursor(bound) for bound in self._bound]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        batch = input_ids.shape[0]
        if self._cursors is None:
            self._cursors = self._fresh_cursors(batch)
            self._prompt_length = input_ids.shape[1]
        else:
            last = input_ids[:, -1].tolist()
            for cursor, token in zip(self._cursors, last, strict=True):
                if not cursor.is_finished:
                    cursor.advance(int(token))
        generated = input_ids.shape[1] - self._prompt_length
        tokens_left = None if self.max_new_tokens is None else self.max_new_tokens - generated
        width = scores.shape[-1]
        rows = []
        eos = sorted(self.index.eos_token_ids)
        for cursor in self._cursors:
            if cursor.is_finished:
                only_eos = torch.zeros(width, dtype=torch.bool, device=scores.device)
                only_eos[eos] = True
                rows.append(only_eos)
            else:
                rows.append(allowed_mask(cursor, width, scores.device, tokens_left))
        mask = torch.stack(rows)
        return scores.masked_fill(~mask, float("-inf"))

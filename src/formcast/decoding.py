"""The masked generation loop, and a transformers ``LogitsProcessor``.

:func:`generate` runs a causal language model with its KV cache over a batch of prompts,
one :class:`~formcast.guide.Cursor` per row:

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
  the cache grows but stays exact for every row.

torch is imported here and in nothing upstream of this module.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from formcast.errors import ExtractionRuntimeError, InvalidOptionError
from formcast.guide import Cursor
from formcast.index import UNREACHABLE, TokenIndex
from formcast.jsonscan import Member
from formcast.steering import FieldSteer, RowText
from formcast.vocabulary import Vocabulary

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

#: Why a generation ended: ``"stop"`` (the model ended the output) or ``"length"`` (the
#: token budget ran out; the output is still complete and valid).
FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingOptions:
    """How tokens are chosen among the allowed ones.

    ``temperature=0`` (the default) is greedy decoding. ``top_p`` keeps the smallest set of
    tokens whose probability mass reaches ``top_p``. ``seed`` makes sampling repeatable.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise InvalidOptionError(f"expected temperature >= 0, found {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise InvalidOptionError(f"expected 0 < top_p <= 1, found {self.top_p}")


@dataclass(frozen=True)
class LoopGuard:
    """Keeps a model from repeating one chunk inside a JSON string until the budget ends.

    Small models under a constraint often loop inside a free string
    (``"DOMINOS.COM.MY/DOMINOS.COM.MY/..."``). The rule: inside a JSON string (a value,
    or a key the schema leaves free), a token is banned when it would make the string's
    last ``ngram`` tokens one more occurrence of a chunk that already occurs
    ``max_repeats`` times in that string (occurrences that do not overlap). A chunk
    repeated back to back, whatever its length, repeats its ``ngram``-token pieces, so
    any loop is cut after at most about ``max_repeats`` turns of it.

    The string's tokens are counted from the one after its opening quote; forced
    (jump-forward) tokens count too. Outside strings the guard does nothing. It never
    bans the last token the constraint (and the budget) still allow: validity and the
    budget-safe ending come first. Cost: one dict lookup per token inside strings.

    Attributes:
        ngram: tokens in the chunks counted (>= 1).
        max_repeats: how many times one chunk may occur in one string (>= 1).
    """

    ngram: int = 4
    max_repeats: int = 3

    def __post_init__(self) -> None:
        if self.ngram < 1:
            raise InvalidOptionError(f"expected LoopGuard.ngram >= 1, found {self.ngram}")
        if self.max_repeats < 1:
            raise InvalidOptionError(
                f"expected LoopGuard.max_repeats >= 1, found {self.max_repeats}"
            )


@dataclass(frozen=True)
class FieldSteering:
    """Field-level validation of one row whose output is a JSON object.

    Attributes:
        check: ``(key, value's JSON text) -> accepted``, called each time a top-level
            value closes (its following ``,`` or ``}`` was written). It may keep state
            (one instance per row and generation).
        max_retries: how many times one field may be rolled back and written again.
        max_generated_tokens: a rollback happens only while the row's generated tokens,
            rolled-back ones included, stay within this limit even if the rest of the
            output takes the whole budget; None for no limit besides ``max_retries``.
    """

    check: Callable[[str, str], bool]
    max_retries: int = 2
    max_generated_tokens: int | None = None


@dataclass
class Generation:
    """What one row produced.

    ``token_ids`` and the counts other than ``generated_tokens`` describe the final
    output; ``generated_tokens`` counts every token generated, rolled-back ones included.
    """

    token_ids: list[int] = field(default_factory=list)
    text_bytes: bytes = b""
    finish_reason: FinishReason = "stop"
    prompt_tokens: int = 0
    forced_tokens: int = 0
    seconds: float = 0.0
    generated_tokens: int = 0
    rollbacks: int = 0  # field-level rollbacks
    guard_bans: int = 0  # steps at which the loop guard removed an allowed token

    @property
    def completion_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def text(self) -> str:
        return self.text_bytes.decode("utf-8", errors="replace")


class ForcedTokenizer:
    """Tokenizes forced bytes the way the tokenizer would tokenize that text.

    Falls back to single-byte tokens when the tokenizer's own encoding does not reproduce
    the bytes exactly (SentencePiece prefix spaces, normalizers). Results are memoised.
    """

    def __init__(self, tokenizer: Any, vocabulary: Vocabulary) -> None:
        self._tokenizer = tokenizer
        self._vocabulary = vocabulary
        self._memo: dict[bytes, list[int]] = {}

    def __call__(self, forced: bytes) -> list[int]:
        forced = _complete_utf8_prefix(forced)
        if not forced:
            return []
        cached = self._memo.get(forced)
        if cached is None:
            cached = self._encode(forced)
            self._memo[forced] = cached
        return cached

    def _encode(self, forced: bytes) -> list[int]:
        table = self._vocabulary.token_bytes
        try:
            text = forced.decode("utf-8")
        except UnicodeDecodeError:  # starts inside a character the last token began
            text = None
        if self._tokenizer is not None and text is not None:
            ids = list(self._tokenizer.encode(text, add_special_tokens=False))
            if b"".join(table[i] for i in ids) == forced:
                return ids
        singles = self._vocabulary.single_byte_tokens
        fallback = [int(singles[b]) for b in forced]
        return fallback if min(fallback) >= 0 else []


def _complete_utf8_prefix(data: bytes) -> bytes:
    """The longest prefix of ``data`` that ends on a UTF-8 character boundary."""
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte & 0xC0 != 0x80:  # a lead byte or ASCII
            expected = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if expected <= back else data[: end - back]
    return data


_mask_cache: weakref.WeakKeyDictionary[TokenIndex, dict[tuple[int, int, str], torch.Tensor]] = (
    weakref.WeakKeyDictionary()
)


def budget_restricts(cursor: Cursor, tokens_left: int | None) -> bool:
    """Whether the budget removes any token from the cursor's current row."""
    if tokens_left is None:
        return False
    return cursor.index.budget_binds(cursor.state, tokens_left)


def allowed_mask(
    cursor: Cursor, width: int, device: torch.device, tokens_left: int | None
) -> torch.Tensor:
    """The cursor's boolean mask on ``device``; cached per (state, width, device) unless the
    budget restricts the row, so steady-state decoding does no host-to-device copy."""
    if budget_restricts(cursor, tokens_left):
        return cursor.mask(width, tokens_left=tokens_left).to(device)
    per_index = _mask_cache.setdefault(cursor.index, {})
    key = (cursor.state, width, str(device))
    mask = per_index.get(key)
    if mask is None:
        mask = cursor.mask(width).to(device)
        per_index[key] = mask
    return mask


def _choose(logits: torch.Tensor, options: SamplingOptions, rng: torch.Generator | None) -> Any:
    """One token id per row from already-masked logits."""
    if options.temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / options.temperature, dim=-1)
    if options.top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        cumulative = sorted_probs.cumsum(dim=-1)
        drop = cumulative - sorted_probs > options.top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return torch.multinomial(probs, 1, generator=rng).squeeze(-1)


@dataclass
class _Row:
    """Bookkeeping of one sequence in the batch."""

    position: int  # index in the caller's list
    cursor: Cursor
    pending: list[int]  # tokens to feed in the next forward pass
    seen: int  # real tokens already in the KV cache
    generation: Generation
    started: float
    budget_bound: bool = False  # the budget removed a choice at some step
    text: RowText | None = None  # the emitted bytes read as JSON (guard or steering)
    steer: FieldSteer | None = None
    limit: int | None = None  # FieldSteering.max_generated_tokens
    start: Cursor | None = None  # the cursor before any output token (for replays)
    start_token: int = 0  # the prompt's last token (fed again on a rollback to the start)
    columns: list[int] = field(default_factory=list)  # cache column of each fed token
    forced: list[bool] = field(default_factory=list)  # per output token (with text only)
    closed: list[Member] = field(default_factory=list)  # members closed, not yet judged


def _new_row(
    position: int,
    prompt: Sequence[int],
    cursor: Cursor,
    guard: LoopGuard | None,
    steering: FieldSteering | None,
) -> _Row:
    generation = Generation(prompt_tokens=len(prompt))
    row = _Row(position, cursor, list(prompt), 0, generation, time.perf_counter())
    if guard is not None or steering is not None:
        rule = None if guard is None else (guard.ngram, guard.max_repeats)
        row.text = RowText(cursor.index.vocabulary.token_bytes, rule)
    if steering is not None and prompt:
        row.steer = FieldSteer(steering.check, steering.max_retries)
        row.limit = steering.max_generated_tokens
        row.start = cursor.copy()
        row.start_token = prompt[-1]
    return row


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
) -> list[Generation]:
    """Constrained generation for a batch of tokenized prompts, one cursor each.

    Args:
        model: a transformers causal LM (anything whose ``forward`` takes ``input_ids``,
            ``attention_mask``, ``position_ids``, ``past_key_values`` and returns ``logits``).
        prompts: token ids of each prompt (chat template already applied).
        cursors: one fresh cursor per prompt; advanced in place (a steered row that
            rolls back continues on a replayed copy).
        max_new_tokens: generation budget per row, forced tokens included.
        forced_tokenizer: enables jump-forward when given.
        sampling: greedy by default.
        pad_token_id: any valid id; pad positions are masked out.
        loop_guard: bans tokens that repeat a chunk inside a JSON string once too often
            (off when None).
        steering: one :class:`FieldSteering` (or None) per prompt: field-level validation
            with rollback of the top-level values of a JSON object output.

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
    device = _model_device(model)
    rng = None
    if sampling.seed is not None:
        rng = torch.Generator(device=device).manual_seed(sampling.seed)
    rows = []
    for position, (prompt, cursor) in enumerate(zip(prompts, cursors, strict=True)):
        row = _new_row(position, prompt, cursor, loop_guard, steerings[position])
        _check_budget(cursor, max_new_tokens)
        _jump_forward(row, forced_tokenizer, max_new_tokens)
        rows.append(row)
    finished = [r for r in rows if _is_done(r, max_new_tokens)]
    active = [r for r in rows if r not in finished]
    cache: Any = None
    attention = torch.zeros((len(active), 0), dtype=torch.long, device=device)
    with torch.inference_mode():
        while active:
            logits, cache, attention = _forward(model, active, cache, attention, pad_token_id)
            width = logits.shape[-1]
            allowed = torch.stack([_row_mask(r, width, device, max_new_tokens) for r in active])
            chosen = _choose(logits.masked_fill(~allowed, float("-inf")), sampling, rng).tolist()
            keep: list[int] = []
            for i, (row, token) in enumerate(zip(active, chosen, strict=True)):
                _accept(row, int(token), forced_tokenizer, max_new_tokens)
                _steer(row, i, attention, max_new_tokens)
                if _is_done(row, max_new_tokens):
                    finished.append(row)
                else:
                    keep.append(i)
            if len(keep) < len(active):
                active = [active[i] for i in keep]
                cache, attention = _select_rows(cache, attention, keep)
    for row in finished:
        _finish(row)
    return [row.generation for row in sorted(finished, key=lambda r: r.position)]


def _row_mask(row: _Row, width: int, device: torch.device, budget: int) -> torch.Tensor:
    """The row's allowed tokens: the constraint's (budget-safe) mask, less the loop
    guard's and the field steering's bans unless they would leave nothing allowed."""
    tokens_left = budget - row.generation.completion_tokens
    row.budget_bound |= budget_restricts(row.cursor, tokens_left)
    mask = allowed_mask(row.cursor, width, device, tokens_left)
    if row.text is None:
        return mask
    looping = row.text.loop_bans()
    banned = looping + (row.steer.bans(row.text) if row.steer is not None else [])
    if not banned:
        return mask
    trimmed = mask.clone()
    trimmed[torch.tensor(banned, dtype=torch.long, device=device)] = False
    if not bool(trimmed.any()):
        return mask  # validity first: never ban the last allowed token
    if looping and bool(mask[torch.tensor(looping, dtype=torch.long, device=device)].any()):
        row.generation.guard_bans += 1
    return trimmed


def _model_device(model: Any) -> torch.device:
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    return next(model.parameters()).device  # type: ignore[no-any-return]


def _check_budget(cursor: Cursor, max_new_tokens: int) -> None:
    needed = cursor.min_tokens_to_accept()
    if needed >= UNREACHABLE:
        raise InvalidOptionError(
            f"expected a constraint this vocabulary can complete, found "
            f"{cursor.index.description[:80]!r}, whose every completion needs bytes that "
            "no single token carries"
        )
    if needed > max_new_tokens:
        raise InvalidOptionError(
            f"expected max_new_tokens >= {needed} (the fewest tokens a complete output of "
            f"{cursor.index.description[:80]!r} needs), found max_new_tokens={max_new_tokens}"
        )


def _jump_forward(row: _Row, forced_tokenizer: ForcedTokenizer | None, budget: int) -> None:
    """Queue the tokens of the bytes the constraint forces, without sampling them.

    The last token of the forced text is left to the model (token healing): what follows
    may merge with it (after ``","date":"`` the model may write the token ``"0``), and a
    token boundary forced there pushes the model off the tokenization it was trained on.
    The constraint still allows only tokens that start with the forced bytes."""
    if forced_tokenizer is None:
        return
    forced = forced_tokenizer(row.cursor.forced_bytes())[:-1]
    tokens_left = budget - row.generation.completion_tokens
    if not forced or len(forced) > tokens_left:
        return
    for token in forced:
        row.cursor.advance(token)
    row.pending.extend(forced)
    _emit(row, forced, forced=True)
    row.generation.forced_tokens += len(forced)


def _accept(row: _Row, token: int, forced: ForcedTokenizer | None, budget: int) -> None:
    row.cursor.advance(token)
    if row.cursor.is_finished:  # EOS: not part of the output text
        return
    _emit(row, [token], forced=False)
    row.pending = [token]
    _jump_forward(row, forced, budget)


def _emit(row: _Row, tokens: list[int], *, forced: bool) -> None:
    """Append output tokens; read them as JSON when the row tracks its text."""
    row.generation.token_ids.extend(tokens)
    row.generation.generated_tokens += len(tokens)
    if row.text is not None:
        row.forced.extend([forced] * len(tokens))
        for token in tokens:
            row.closed.extend(row.text.push(token))


def _steer(row: _Row, i: int, attention: torch.Tensor, budget: int) -> None:
    """Judge the top-level values the last tokens closed; roll back to the first one
    rejected (when its field has retries left and the token limit allows)."""
    closed, row.closed = row.closed, []
    if row.steer is None or row.text is None:
        return
    for member in closed:
        keep = row.steer.judge(member, row.text)
        if keep is None:
            continue
        spent = row.generation.generated_tokens + budget - keep
        if row.limit is not None and spent > row.limit:
            continue
        row.steer.rolled_back(member, row.text, row.generation.token_ids)
        _rollback(row, i, attention, keep)
        return


def _rollback(row: _Row, i: int, attention: torch.Tensor, keep: int) -> None:
    """Forget all but the first ``keep`` output tokens of row ``i``.

    The last kept token (or the prompt's last) is fed again, at its own position, so the
    next logits are those after it; its old cache column and those of every forgotten
    token are hidden by the row's attention mask."""
    generation = row.generation
    refeed = generation.prompt_tokens + keep - 1
    hidden = row.columns[refeed:]
    if hidden:
        attention[i, torch.tensor(hidden, dtype=torch.long, device=attention.device)] = 0
    del row.columns[refeed:]
    assert row.start is not None and row.text is not None
    last = generation.token_ids[keep - 1] if keep else row.start_token
    row.pending = [last]
    row.seen = refeed
    del generation.token_ids[keep:]
    del row.forced[keep:]
    generation.forced_tokens = sum(row.forced)
    generation.rollbacks += 1
    row.cursor = row.start.copy()
    row.text = row.text.fresh()
    for token in generation.token_ids:
        row.cursor.advance(token)
        row.text.push(token)


def _is_done(row: _Row, budget: int) -> bool:
    cursor = row.cursor
    if cursor.is_finished:
        return True
    if row.generation.completion_tokens >= budget:
        return True
    # Accepting with nothing that could follow: the output is complete without EOS.
    return cursor.is_accepting() and cursor.index.row(cursor.state)[0].size == 0


def _finish(row: _Row) -> None:
    generation = row.generation
    cursor = row.cursor
    closed = cursor.is_finished or cursor.index.row(cursor.state)[0].size == 0
    generation.finish_reason = "stop" if closed and not row.budget_bound else "length"
    vocabulary = cursor.index.vocabulary
    generation.text_bytes = b"".join(vocabulary.token_bytes[t] for t in generation.token_ids)
    generation.seconds = time.perf_counter() - row.started
    if not cursor.is_finished and not cursor.is_accepting():
        raise ExtractionRuntimeError(
            "expected generation to end in an accepting state (the budget guarantees it), "
            f"found state {cursor.state} after {generation.completion_tokens} tokens"
        )


def _forward(
    model: Any, rows: list[_Row], cache: Any, attention: torch.Tensor, pad_token_id: int
) -> tuple[torch.Tensor, Any, torch.Tensor]:
    """Feed every row's pending tokens, left-padded to one width; return last logits."""
    device = attention.device
    width = max(len(r.pending) for r in rows)
    input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    new_attention = torch.zeros((len(rows), width), dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    base = attention.shape[1]
    for i, row in enumerate(rows):
        k = len(row.pending)
        input_ids[i, width - k :] = torch.tensor(row.pending, dtype=torch.long)
        new_attention[i, width - k :] = 1
        positions[i, width - k :] = torch.arange(row.seen, row.seen + k)
        positions[i, : width - k] = row.seen
        row.seen += k
        row.pending = []
        if row.steer is not None:
            row.columns.extend(range(base + width - k, base + width))
    attention = torch.cat([attention, new_attention.to(device)], dim=1)
    out = model(
        input_ids=input_ids.to(device),
        attention_mask=attention,
        position_ids=positions.to(device),
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    return out.logits[:, -1, :], out.past_key_values, attention


def _select_rows(cache: Any, attention: torch.Tensor, keep: list[int]) -> tuple[Any, torch.Tensor]:
    index = torch.tensor(keep, dtype=torch.long, device=attention.device)
    cache.batch_select_indices(index)
    return cache, attention.index_select(0, index)


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

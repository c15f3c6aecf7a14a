"""What a decoding loop needs besides the loop itself.

Its options (:class:`SamplingOptions`, :class:`LoopGuard`, :class:`FieldSteering`), what
a row produced (:class:`Generation`), jump-forward's tokenizer (:class:`ForcedTokenizer`),
and the boolean masks on the model's device, cached per automaton state
(:func:`allowed_mask`). :mod:`formcast.decoding` re-exports the public names;
:mod:`formcast.batching` runs the loop.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from formcast.errors import InvalidOptionError
from formcast.guide import Cursor
from formcast.index import TokenIndex
from formcast.kvcache import upload
from formcast.vocabulary import Vocabulary

__all__ = [
    "FieldSteering",
    "FinishReason",
    "ForcedTokenizer",
    "Generation",
    "LoopGuard",
    "SamplingOptions",
    "allowed_mask",
    "budget_restricts",
    "model_device",
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


#: Per index: the device masks, keyed ``(state, width, device, tokens_left)``;
#: ``tokens_left`` is None for a state's full row and set only where the budget binds.
_mask_cache: weakref.WeakKeyDictionary[
    TokenIndex, dict[tuple[int, int, str, int | None], torch.Tensor]
] = weakref.WeakKeyDictionary()


def budget_restricts(cursor: Cursor, tokens_left: int | None) -> bool:
    """Whether the budget removes any token from the cursor's current row."""
    if tokens_left is None:
        return False
    return cursor.index.budget_binds(cursor.state, tokens_left)


def allowed_mask(
    cursor: Cursor, width: int, device: torch.device, tokens_left: int | None
) -> torch.Tensor:
    """The cursor's boolean mask on ``device``, cached per index: a (state, width,
    device) seen before costs a dict lookup and no host-to-device copy. Where the budget
    binds (the last tokens of a row), the budget-safe mask is cached under the tokens
    left as well: at most one mask per state and count of tokens left below the state's
    longest distance to an accepting state. A new mask is uploaded without waiting for
    the device (see :func:`upload`). Do not modify the returned tensor."""
    limit = tokens_left if budget_restricts(cursor, tokens_left) else None
    per_index = _mask_cache.setdefault(cursor.index, {})
    key = (cursor.state, width, str(device), limit)
    mask = per_index.get(key)
    if mask is None:
        mask = upload(cursor.mask(width, tokens_left=limit), device)
        per_index[key] = mask
    return mask


def model_device(model: Any) -> torch.device:
    """The device of a model's parameters (``model.device`` when it has one)."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    return next(model.parameters()).device  # type: ignore[no-any-return]

"""The plain records of decoding, without torch.

Its options (:class:`SamplingOptions`, :class:`LoopGuard`, :class:`FieldSteering`), what
a row produced (:class:`Generation`, :class:`FinishReason`) and a row's seed
(:func:`row_seed`). The extractor's options and results read these without loading
torch; :mod:`formcast.decode.logits` re-exports the public names and
:mod:`formcast.decode.batching` runs the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from formcast.errors import InvalidOptionError

__all__ = [
    "FieldSteering",
    "FinishReason",
    "Generation",
    "LoopGuard",
    "SamplingOptions",
    "row_seed",
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


def row_seed(seed: int, *parts: int) -> int:
    """A seed for one row, derived from a call's ``seed`` and the row's place (its index,
    its attempt): equal inputs give equal seeds, different places different streams."""
    value = seed & 0xFFFFFFFFFFFFFFFF
    for part in parts:
        value = (value * 0x100000001B3 ^ (part & 0xFFFFFFFF)) & 0xFFFFFFFFFFFFFFFF
    return value

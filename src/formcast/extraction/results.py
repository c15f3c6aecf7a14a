"""The record an extraction returns: an :class:`ExtractionResult`, holding one
:class:`Attempt` per generation."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from formcast.decode.records import FinishReason
from formcast.errors import FormcastError

__all__ = ["Attempt", "ExtractionResult"]

T = TypeVar("T")


@dataclass(frozen=True)
class Attempt:
    """One generation of an extraction; validators that steer may make several.

    Attributes:
        raw_text: the text generated.
        error: why the output was rejected, or None when it was accepted.
        finish_reason: ``"stop"`` or ``"length"``, as in :class:`ExtractionResult`.
        completion_tokens: tokens of the output (forced tokens included).
        generated_tokens: tokens generated, those of rolled-back field values included.
        field_rollbacks: how many times a field's value was rejected, rolled back and
            written again.
        seconds: wall time of the generation.
    """

    raw_text: str
    error: FormcastError | None
    finish_reason: FinishReason
    completion_tokens: int
    generated_tokens: int
    field_rollbacks: int
    seconds: float


@dataclass(frozen=True)
class ExtractionResult(Generic[T]):
    """The record of one extraction.

    Attributes:
        value: the validated value, or None when ``error`` is set.
        error: what went wrong for this item (batch extraction never raises per item).
        raw_text: the generated text.
        finish_reason: ``"stop"`` (the model ended the output) or ``"length"`` (the token
            budget ended the output, or changed a token the model would have chosen; the
            output is still complete and valid).
        prompt_tokens, completion_tokens, forced_tokens: token counts; forced tokens were
            appended by jump-forward without sampling and are part of completion_tokens.
        seconds: wall time of the final attempt's generation, from the moment its row
            joined the batch to its end (the rows of a batch share each forward pass).
        compile_seconds: time spent compiling the constraint (0 on a cache hit).
        attempts: generations made (more than 1 when the output's validators rejected
            an output and a new attempt was made; 0 when the item failed before any).
        history: one :class:`Attempt` per generation, in order.
        generated_tokens: tokens generated over every attempt, rolled-back ones included.
        index: the text's position in the input of ``extract_many`` (0 for ``run`` and
            ``extract``), so results taken in completion order can be matched to their
            texts.
        spans: where each value copied from the text (``FromText``) came from: its JSON
            pointer in the output (``/company``, ``/items/2/name``) -> ``(start, end)``
            character offsets into the input, ``text[start:end]`` being the value up to
            its ``FromText`` whitespace and case options. A value the text holds several
            times has every occurrence, in text order (a substring automaton cannot tell
            equal substrings apart); a number the text writes in another form has none.
            Empty without ``FromText`` values or without a value.

    The fields before ``attempts`` describe the final attempt.
    """

    value: T | None
    error: FormcastError | None = None
    raw_text: str = ""
    finish_reason: FinishReason = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    forced_tokens: int = 0
    seconds: float = 0.0
    compile_seconds: float = 0.0
    attempts: int = 0
    history: tuple[Attempt, ...] = ()
    generated_tokens: int = 0
    index: int = 0
    spans: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> T:
        """The value, or raise the item's error."""
        if self.error is not None:
            raise self.error
        return typing.cast(T, self.value)

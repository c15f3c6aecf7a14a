"""Attempts: what one generation of an item gave, whether the item gets another, and the
record of every attempt.

The extractor prepares each item (its prompt, and its cursor when the output copies from
the text) as a :class:`Request`; :mod:`formcast.extraction.scheduler` runs it, reads each
generation with :func:`outcome`, asks :func:`next_attempt` whether the validators'
rejection earns it another attempt within the call's
:class:`~formcast.extraction.options.Plan`, and :func:`to_result` turns its attempts into
its :class:`~formcast.extraction.results.ExtractionResult`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from formcast.constraint import OutputSpec
from formcast.cursor import Cursor
from formcast.decode.records import FieldSteering, Generation
from formcast.decode.steering import feedback_message, field_checker
from formcast.errors import FormcastError, OutputValidationError
from formcast.extraction.options import Plan
from formcast.extraction.results import Attempt, ExtractionResult

__all__ = [
    "Outcome",
    "Request",
    "generated_tokens",
    "next_attempt",
    "outcome",
    "steering_for",
    "to_result",
]


@dataclass
class Request:
    """One prepared item of a batch: its prompt, or the error that keeps it from running."""

    position: int
    prompt: list[int] = field(default_factory=list)
    error: FormcastError | None = None
    cursor: Cursor | None = None  # bound to the item's text when the output copies from it


@dataclass
class Outcome:
    """One attempt at one item."""

    generation: Generation
    value: Any
    error: FormcastError | None


#: The request of an item's next attempt, given the feedback on its rejected output.
Reprompt = Callable[[Request, str], Request]


def steering_for(spec: OutputSpec, plan: Plan, spent: int) -> FieldSteering | None:
    """How an item's field values are checked as they are written: by the output model's
    own validators, within the retries and the tokens the plan leaves it after ``spent``
    generated tokens (None: not checked, the output is not a model or field retries are
    off)."""
    if spec.model is None or plan.max_field_retries <= 0:
        return None
    return FieldSteering(
        field_checker(spec.model), plan.max_field_retries, plan.max_total_tokens - spent
    )


def generated_tokens(history: list[Outcome]) -> int:
    """Tokens generated over the attempts, rolled-back ones included."""
    return sum(o.generation.generated_tokens for o in history)


def to_result(
    history: list[Outcome], compile_seconds: float, index: int = 0
) -> ExtractionResult[Any]:
    """The result of the item at ``index``: its final attempt, with the record of every
    attempt."""
    final = history[-1]
    generation = final.generation
    attempts = tuple(_attempt(o) for o in history)
    if isinstance(final.error, OutputValidationError):
        final.error.attempts = attempts
    return ExtractionResult(
        final.value,
        final.error,
        generation.text,
        generation.finish_reason,
        generation.prompt_tokens,
        generation.completion_tokens,
        generation.forced_tokens,
        generation.seconds,
        compile_seconds,
        len(history),
        attempts,
        generated_tokens(history),
        index,
    )


def next_attempt(
    request: Request, history: list[Outcome], plan: Plan, reprompt: Reprompt
) -> Request | None:
    """The request of the item's next attempt, or None when it is done or out of limits."""
    error = history[-1].error
    if not isinstance(error, OutputValidationError) or len(history) >= plan.max_attempts:
        return None
    if generated_tokens(history) + plan.budget > plan.max_total_tokens:
        return None
    again = reprompt(request, feedback_message(error))
    return again if again.error is None else None


def outcome(generation: Generation, parse: Callable[[str], Any]) -> Outcome:
    """One generation read as the output type (its value, or the parse's error)."""
    try:
        return Outcome(generation, parse(generation.text), None)
    except FormcastError as e:
        return Outcome(generation, None, e)


def _attempt(outcome: Outcome) -> Attempt:
    generation = outcome.generation
    return Attempt(
        generation.text,
        outcome.error,
        generation.finish_reason,
        generation.completion_tokens,
        generation.generated_tokens,
        generation.rollbacks,
        generation.seconds,
    )

"""Attempts: generating for a batch of prepared items, again for those whose output the
validators rejected, and the record of every attempt.

The extractor prepares each item (its prompt, and its cursor when the output copies from
the text) as a :class:`Request`; :func:`run_attempts` drives the generations within the
call's :class:`~formcast.options.Plan` and :func:`to_result` turns an item's attempts into
its :class:`~formcast.results.ExtractionResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from formcast.constraint import OutputView
from formcast.decoding import FieldSteering, Generation
from formcast.errors import FormcastError, OutputValidationError
from formcast.guide import Cursor
from formcast.options import Plan
from formcast.results import Attempt, ExtractionResult
from formcast.steering import feedback_message, field_checker

__all__ = [
    "Outcome",
    "Request",
    "run_attempts",
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


#: Generates once for a batch of requests: ``(requests, attempt number, tokens each item
#: has generated so far by position)`` -> the generation of each item, by position.
GenerateBatch = Callable[[list[Request], int, Mapping[int, int]], dict[int, Generation]]
#: The request of an item's next attempt, given the feedback on its rejected output.
Reprompt = Callable[[Request, str], Request]


def run_attempts(
    ready: list[Request],
    plan: Plan,
    generate_batch: GenerateBatch,
    parse: Callable[[str], Any],
    reprompt: Reprompt,
) -> dict[int, list[Outcome]]:
    """Generate for every item; again, as one smaller batch, for the items whose output
    the validators rejected, while their limits allow. Returns each item's attempts, by
    position, in order."""
    outcomes: dict[int, list[Outcome]] = {r.position: [] for r in ready}
    batch = ready
    for attempt in range(plan.max_attempts):
        if not batch:
            break
        spent = {r.position: generated_tokens(outcomes[r.position]) for r in batch}
        generations = generate_batch(batch, attempt, spent)
        retry = []
        for request in batch:
            history = outcomes[request.position]
            history.append(_outcome(generations[request.position], parse))
            again = _next_attempt(request, history, plan, reprompt)
            if again is not None:
                retry.append(again)
        batch = retry
    return outcomes


def steering_for(
    requests: Sequence[Request], spec: OutputView, plan: Plan, spent: Mapping[int, int]
) -> list[FieldSteering | None]:
    """Per request, how its fields' values are checked as they are written: by the output
    model's own validators, within the retries and tokens the plan leaves it (None: not
    checked, the output is not a model or field retries are off)."""
    if spec.model is None or plan.max_field_retries <= 0:
        return [None] * len(requests)
    return [
        FieldSteering(
            field_checker(spec.model),
            plan.max_field_retries,
            plan.max_total_tokens - spent[r.position],
        )
        for r in requests
    ]


def generated_tokens(history: list[Outcome]) -> int:
    """Tokens generated over the attempts, rolled-back ones included."""
    return sum(o.generation.generated_tokens for o in history)


def to_result(history: list[Outcome], compile_seconds: float) -> ExtractionResult[Any]:
    """The result of an item: its final attempt, with the record of every attempt."""
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
    )


def _next_attempt(
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


def _outcome(generation: Generation, parse: Callable[[str], Any]) -> Outcome:
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

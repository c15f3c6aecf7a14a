"""The options of an extraction call: their names, how they are checked, and the
:class:`Plan` they become.

Every call (``extract``, ``run``, ``extract_many``, the function decorator) reads its
options through :func:`check_options` and :func:`read_plan`, once, before any text is
read, so a bad option fails the call before any generation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from formcast.decoding import LoopGuard, SamplingOptions
from formcast.errors import InvalidOptionError

__all__ = ["KNOWN_OPTIONS", "Plan", "check_options", "read_plan"]

KNOWN_OPTIONS = frozenset(
    {
        "instructions",
        "max_new_tokens",
        "temperature",
        "top_p",
        "seed",
        "jump_forward",
        "mode",
        "whitespace",
        "from_text",
        "loop_guard",
        "max_attempts",
        "max_total_tokens",
        "max_field_retries",
    }
)


@dataclass(frozen=True)
class Plan:
    """The generation options of one call, read and checked once."""

    budget: int
    sampling: SamplingOptions
    jump_forward: bool
    loop_guard: LoopGuard | None
    max_attempts: int
    max_total_tokens: int
    max_field_retries: int

    def sampling_for(self, attempt: int) -> SamplingOptions:
        """A new seed for each attempt, so a retry with sampling draws anew."""
        seed = self.sampling.seed
        if seed is None or attempt == 0:
            return self.sampling
        return SamplingOptions(self.sampling.temperature, self.sampling.top_p, seed + attempt)


def check_options(options: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidOptionError` naming every option that is not one of
    :data:`KNOWN_OPTIONS`."""
    unknown = set(options) - KNOWN_OPTIONS
    if unknown:
        raise InvalidOptionError(
            f"expected options among {sorted(KNOWN_OPTIONS)}, found {sorted(unknown)}"
        )


def read_plan(options: Mapping[str, Any], max_new_tokens: int, jump_forward: bool = True) -> Plan:
    """Read and check the generation options of a call; ``max_new_tokens`` and
    ``jump_forward`` are the extractor's defaults."""
    budget = int(options.get("max_new_tokens", max_new_tokens))
    sampling = SamplingOptions(
        temperature=float(options.get("temperature", 0.0)),
        top_p=float(options.get("top_p", 1.0)),
        seed=options.get("seed"),
    )
    attempts = _count_option(options, "max_attempts", 3, minimum=1)
    total = options.get("max_total_tokens")
    total = attempts * budget if total is None else _count_option(options, "max_total_tokens", 0)
    if total < budget:
        raise InvalidOptionError(
            f"expected max_total_tokens >= max_new_tokens ({budget}), found {total}"
        )
    return Plan(
        budget=budget,
        sampling=sampling,
        jump_forward=bool(options.get("jump_forward", jump_forward)),
        loop_guard=_loop_guard(options.get("loop_guard", True)),
        max_attempts=attempts,
        max_total_tokens=total,
        max_field_retries=_count_option(options, "max_field_retries", 2, minimum=0),
    )


def _count_option(options: Mapping[str, Any], name: str, default: int, minimum: int = 0) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOptionError(f"expected {name} to be an int >= {minimum}, found {value!r}")
    return value


def _loop_guard(value: Any) -> LoopGuard | None:
    if isinstance(value, LoopGuard):
        return value
    if isinstance(value, bool):
        return LoopGuard() if value else None
    raise InvalidOptionError(f"expected loop_guard to be a bool or a LoopGuard, found {value!r}")

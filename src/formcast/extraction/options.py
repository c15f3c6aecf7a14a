"""The options of an extraction call: their names, how they are checked, and the
:class:`Plan` they become.

Every call (``extract``, ``run``, ``extract_many``, the function decorator) reads its
options through :func:`check_options` and :func:`read_plan`, once, before any text is
read, so a bad option fails the call before any generation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, cast

from formcast.decode.records import LoopGuard, SamplingOptions, row_seed
from formcast.errors import InvalidOptionError
from formcast.schema import Mode
from formcast.text import FromText

__all__ = [
    "KNOWN_OPTIONS",
    "BatchOptions",
    "Batching",
    "ExtractManyOptions",
    "ExtractOptions",
    "Order",
    "Plan",
    "check_options",
    "read_batch_options",
    "read_plan",
]

#: The order ``extract_many`` yields results in.
Order = Literal["input", "completion"]
#: How ``extract_many`` fills its batch: a text joins as soon as a row is free
#: (``"continuous"``), or a new batch starts when every row of the last one has ended
#: (``"static"``).
Batching = Literal["continuous", "static"]


class ExtractOptions(TypedDict, total=False):
    """The keyword options of ``extract``, ``run``, ``extract_many`` and ``function``
    (module functions and :class:`~formcast.Extractor` methods alike); every one may be
    left out. Their meanings and defaults are in the guide's options table.

    The calls take them as ``**options: Unpack[ExtractOptions]``, so a type checker
    reports a misspelled option or a value of the wrong type; at run time,
    :func:`check_options` and :func:`read_plan` raise :class:`InvalidOptionError` for
    the same mistakes.
    """

    instructions: str
    max_new_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    jump_forward: bool
    mode: Mode
    whitespace: bool | int
    max_recursion_depth: int | None
    from_text: bool | FromText
    loop_guard: bool | LoopGuard
    max_attempts: int
    max_total_tokens: int
    max_field_retries: int
    share_prefix: bool


class ExtractManyOptions(ExtractOptions, total=False):
    """The keyword options of ``extract_many``: those of :class:`ExtractOptions`, and
    how the texts are batched (defaults: ``batch_size=8``, ``progress=True``,
    ``order="input"``, ``batching="continuous"``; see :meth:`Extractor.extract_many`)."""

    batch_size: int
    progress: bool
    order: Order
    batching: Batching


#: The names of :class:`ExtractOptions`, for the run-time check.
KNOWN_OPTIONS = frozenset(ExtractOptions.__annotations__)


@dataclass(frozen=True)
class BatchOptions:
    """How ``extract_many`` batches its texts, read and checked once."""

    batch_size: int = 8
    progress: bool = True
    order: Order = "input"
    batching: Batching = "continuous"


def read_batch_options(options: ExtractManyOptions) -> tuple[BatchOptions, ExtractOptions]:
    """Split the options of ``extract_many`` into its batching and the options of each
    extraction, checking the batching ones.

    Raises:
        InvalidOptionError: a batching option's value is of the wrong type or out of range.
    """
    rest = dict(options)
    defaults = BatchOptions()
    batch = BatchOptions(
        batch_size=_count_option(rest, "batch_size", defaults.batch_size, minimum=1),
        progress=_bool_option(rest, "progress", defaults.progress),
        order=_choice(rest, "order", defaults.order, ("input", "completion")),
        batching=_choice(rest, "batching", defaults.batching, ("continuous", "static")),
    )
    for name in ("batch_size", "progress", "order", "batching"):
        rest.pop(name, None)
    return batch, cast(ExtractOptions, rest)


@dataclass(frozen=True)
class Plan:
    """The options of one call, read and checked once."""

    budget: int
    sampling: SamplingOptions
    jump_forward: bool
    loop_guard: LoopGuard | None
    max_attempts: int
    max_total_tokens: int
    max_field_retries: int
    instructions: str | None  # None: the default instruction for the output type
    share_prefix: bool

    def seed_for(self, position: int, attempt: int) -> int | None:
        """The sampling seed of one attempt at one text: its own stream, so a text's
        samples do not depend on the texts it shares a batch with, and a retry draws
        anew (None without a seed)."""
        seed = self.sampling.seed
        return None if seed is None else row_seed(seed, position, attempt)


def check_options(options: Mapping[str, object]) -> None:
    """Raise :class:`InvalidOptionError` naming every option that is not one of
    :data:`KNOWN_OPTIONS` (a type checker reports them already; this is for callers
    without one)."""
    unknown = set(options) - KNOWN_OPTIONS
    if unknown:
        raise InvalidOptionError(
            f"expected options among {sorted(KNOWN_OPTIONS)}, found {sorted(unknown)}"
        )


def read_plan(
    options: Mapping[str, object], max_new_tokens: int, jump_forward: bool = True
) -> Plan:
    """Read and check the generation options of a call; ``max_new_tokens`` and
    ``jump_forward`` are the extractor's defaults. ``mode``, ``whitespace``,
    ``max_recursion_depth`` and ``from_text`` are checked where the output type is
    compiled.

    Raises:
        InvalidOptionError: an option's value is of the wrong type or out of range.
    """
    budget = _count_option(options, "max_new_tokens", max_new_tokens, minimum=1)
    sampling = SamplingOptions(
        temperature=_number_option(options, "temperature", 0.0),
        top_p=_number_option(options, "top_p", 1.0),
        seed=_seed(options.get("seed")),
    )
    attempts = _count_option(options, "max_attempts", 3, minimum=1)
    total = _count_option(options, "max_total_tokens", attempts * budget, minimum=1)
    if total < budget:
        raise InvalidOptionError(
            f"expected max_total_tokens >= max_new_tokens ({budget}), found {total}"
        )
    return Plan(
        budget=budget,
        sampling=sampling,
        jump_forward=_bool_option(options, "jump_forward", jump_forward),
        loop_guard=_loop_guard(options.get("loop_guard", True)),
        max_attempts=attempts,
        max_total_tokens=total,
        max_field_retries=_count_option(options, "max_field_retries", 2, minimum=0),
        instructions=_instructions(options.get("instructions")),
        share_prefix=_bool_option(options, "share_prefix", True),
    )


def _count_option(options: Mapping[str, object], name: str, default: int, minimum: int) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOptionError(f"expected {name} to be an int >= {minimum}, found {value!r}")
    return value


def _number_option(options: Mapping[str, object], name: str, default: float) -> float:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOptionError(f"expected {name} to be a number, found {value!r}")
    return float(value)


def _bool_option(options: Mapping[str, object], name: str, default: bool) -> bool:
    value = options.get(name, default)
    if not isinstance(value, bool):
        raise InvalidOptionError(f"expected {name} to be True or False, found {value!r}")
    return value


def _seed(value: object) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise InvalidOptionError(f"expected seed to be an int or None, found {value!r}")


def _instructions(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    raise InvalidOptionError(f"expected instructions to be a str, found {value!r}")


def _loop_guard(value: object) -> LoopGuard | None:
    if isinstance(value, LoopGuard):
        return value
    if isinstance(value, bool):
        return LoopGuard() if value else None
    raise InvalidOptionError(f"expected loop_guard to be a bool or a LoopGuard, found {value!r}")


def _choice(
    options: Mapping[str, object], name: str, default: str, choices: tuple[str, ...]
) -> Any:
    value = options.get(name, default)
    if value not in choices:
        expected = " or ".join(repr(choice) for choice in choices)
        raise InvalidOptionError(f"expected {name}={expected}, found {value!r}")
    return value

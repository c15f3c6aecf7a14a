"""The columns a data pipeline adds to each row: shared by :mod:`formcast.pipelines.cli` and
:mod:`formcast.ray`, so that both write the same ones.

A row goes in with a text (and any other fields, which are kept) and comes out with:

| column | type | meaning |
|---|---|---|
| ``value`` | str or null | the validated value as JSON text; null when ``error`` is set |
| ``error`` | str or null | ``"<ErrorClass>: <message>"``; null when the extraction worked |
| ``finish_reason`` | str or null | ``"stop"`` or ``"length"``; null when nothing was generated |
| ``prompt_tokens`` | int | tokens of the final attempt's prompt (0 when nothing was generated) |
| ``generated_tokens`` | int | tokens generated over every attempt, forced ones included |
| ``spans`` | str or null | where ``FromText`` values came from (JSON text, see below) |

``spans`` maps the JSON pointer of each ``FromText`` value to its ``[start, end]``
character offsets in the text (``{"/company": [[0, 21]]}``, ``ExtractionResult.spans``);
it is null when ``error`` is set.

``value`` is JSON text rather than a nested column because a dataset's column needs one
type in every block: an optional field that is null in one block and a string in the
next, a union, a ``Regex`` output (a string) or a failed row would each give Arrow
another type, and the job would fail when blocks are joined or written. JSON text is one
type, loses nothing (dates, decimals and enums as the model's JSON encodes them) and
reads back with ``json.loads`` or ``Model.model_validate_json``. The command line writes
JSON lines, which hold nested values without a schema, so there ``value`` (and ``spans``)
is written as the JSON value itself.

This module imports neither click nor ray.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pydantic_core
from typing_extensions import Unpack

from formcast.errors import ExtractionRuntimeError, InvalidOptionError, UserError

if TYPE_CHECKING:  # not at run time: the command line starts without torch
    from formcast.extraction.extractor import ExtractionResult, Extractor
    from formcast.extraction.options import ExtractOptions

__all__ = [
    "ERROR",
    "FINISH_REASON",
    "GENERATED_TOKENS",
    "OUTPUT_COLUMNS",
    "PROMPT_TOKENS",
    "SPANS",
    "VALUE",
    "check_input_columns",
    "describe_error",
    "error_columns",
    "extract_columns",
    "result_columns",
]

VALUE = "value"
ERROR = "error"
FINISH_REASON = "finish_reason"
PROMPT_TOKENS = "prompt_tokens"
GENERATED_TOKENS = "generated_tokens"
SPANS = "spans"
#: The columns added to every row, in this order.
OUTPUT_COLUMNS = (VALUE, ERROR, FINISH_REASON, PROMPT_TOKENS, GENERATED_TOKENS, SPANS)

_log = logging.getLogger(__name__)


def describe_error(error: BaseException) -> str:
    """The ``error`` column of a failed row: ``"<ErrorClass>: <message>"``."""
    return f"{type(error).__name__}: {error}"


def result_columns(result: ExtractionResult[Any]) -> dict[str, Any]:
    """The output columns of one :class:`~formcast.ExtractionResult`."""
    generated = result.attempts > 0
    return {
        VALUE: None if result.error is not None else _json_text(result.value),
        ERROR: None if result.error is None else describe_error(result.error),
        FINISH_REASON: result.finish_reason if generated else None,
        PROMPT_TOKENS: result.prompt_tokens if generated else 0,
        GENERATED_TOKENS: result.generated_tokens,
        SPANS: None if result.error is not None else _json_text(dict(result.spans)),
    }


def error_columns(error: BaseException) -> dict[str, Any]:
    """The output columns of a row that failed before any generation."""
    return {
        VALUE: None,
        ERROR: describe_error(error),
        FINISH_REASON: None,
        PROMPT_TOKENS: 0,
        GENERATED_TOKENS: 0,
        SPANS: None,
    }


def check_input_columns(columns: Iterable[str]) -> None:
    """Refuse input columns that the output columns would overwrite.

    Raises:
        InvalidOptionError: an input column is named like an output column.
    """
    clash = sorted(set(columns) & set(OUTPUT_COLUMNS))
    if clash:
        raise InvalidOptionError(
            f"expected input columns other than formcast's output columns "
            f"{list(OUTPUT_COLUMNS)}, found {clash}; rename them first"
        )


def extract_columns(
    extractor: Extractor,
    output: Any,
    texts: Sequence[str | Exception],
    *,
    batch_size: int = 8,
    **options: Unpack[ExtractOptions],
) -> list[dict[str, Any]]:
    """The output columns of each text, in order.

    An exception in place of a text is that row's error (a row its reader could not
    read, an :class:`~formcast.InvalidRowError`). The texts go through
    :meth:`Extractor.extract_many <formcast.Extractor.extract_many>` (``options`` are its
    options; no progress bar), so a text that fails on its own (empty, too long for the
    context window, rejected by the output's validators) gets its error and the others
    are unaffected. When ``extract_many`` itself raises an error that is not a
    :class:`~formcast.UserError` (the runtime failed: out of memory, a crash inside the
    model), the texts it had not answered yet are tried one at a time, so that a text
    that breaks the model costs only its own row.

    Cost: the extraction; the one-at-a-time fallback only after such a failure.

    Raises:
        UserError: the output type or the options are wrong (for every row alike).
    """
    columns: list[dict[str, Any] | None] = [None] * len(texts)
    pending: list[tuple[int, str]] = []
    for position, text in enumerate(texts):
        if isinstance(text, str):
            pending.append((position, text))
        else:
            columns[position] = error_columns(text)
    done = 0
    try:
        results = extractor.extract_many(
            output, [text for _, text in pending], batch_size=batch_size, progress=False, **options
        )
        for result in results:
            columns[pending[done][0]] = result_columns(result)
            done += 1
    except UserError:
        raise
    except Exception as error:
        _log.warning(
            "extract_many failed for a batch (%s); extracting its %d remaining texts one at a time",
            describe_error(error),
            len(pending) - done,
        )
        for position, text in pending[done:]:
            columns[position] = _extract_alone(extractor, output, text, options)
    return [_filled(c) for c in columns]


def _extract_alone(
    extractor: Extractor, output: Any, text: str, options: ExtractOptions
) -> dict[str, Any]:
    try:
        (result,) = extractor.extract_many(output, [text], batch_size=1, progress=False, **options)
    except UserError:
        raise
    except Exception as error:
        failure = ExtractionRuntimeError(f"the extraction failed: {describe_error(error)}")
        return error_columns(failure)
    return result_columns(result)


def _filled(columns: dict[str, Any] | None) -> dict[str, Any]:
    if columns is None:  # extract_many yielded fewer results than texts
        raise ExtractionRuntimeError("expected one extraction result per text, found fewer")
    return columns


def _json_text(value: Any) -> str:
    """JSON text of a validated value (a model, a list, a date, a str...), as pydantic
    serialises it."""
    return pydantic_core.to_json(value).decode("utf-8")

"""Every error formcast raises, in one tree.

```
FormcastError                      base of everything below
├── UserError                      the caller made a mistake; fix the call
│   ├── SchemaError                not a Pydantic class, not valid JSON Schema, bad regex
│   │   ├── UnsupportedSchemaError a valid schema keyword formcast cannot enforce
│   │   └── GrammarError           a GBNF or Lark grammar formcast cannot read or enforce
│   ├── InvalidOptionError         an option out of range (max_new_tokens too small, ...)
│   ├── TokenNotAllowedError       Cursor.advance with a token the constraint forbids
│   ├── EmptyInputError            an empty or blank text to extract from
│   ├── NoTextValueError           the text holds no value a FromText field must take
│   └── InvalidRowError            a row of a pipeline's input cannot be read
└── ExtractionRuntimeError         the model or the runtime failed
    ├── ModelLoadError             weights or tokenizer could not be loaded
    ├── ContextLengthError         the prompt does not fit the model's context window
    └── OutputValidationError      the model class's own validators rejected the output
```

`UserError` also derives from `ValueError` and `ExtractionRuntimeError` from
`RuntimeError`, so code that already catches those keeps working. Messages always
say what was expected and what was found.

Warnings (``warnings.warn``) say what formcast did not enforce although it could go on:

```
FormcastWarning (UserWarning)      base of every warning formcast emits (a dropped
│                                  anyOf/oneOf branch, recursion unrolled fewer times)
└── UnknownFormatWarning           a `format` formcast does not know: any string is allowed
```

A compiled index keeps the warnings its compilation emitted and a cache hit emits them
again (:func:`warn`, :func:`recording_warnings`).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from formcast.extraction.results import Attempt

__all__ = [
    "ContextLengthError",
    "EmptyInputError",
    "ExtractionRuntimeError",
    "FormcastError",
    "FormcastWarning",
    "GrammarError",
    "InvalidOptionError",
    "InvalidRowError",
    "ModelLoadError",
    "NoTextValueError",
    "OutputValidationError",
    "SchemaError",
    "TokenNotAllowedError",
    "UnknownFormatWarning",
    "UnsupportedSchemaError",
    "UserError",
]


class FormcastError(Exception):
    """Base class of every error raised by formcast."""


class UserError(FormcastError, ValueError):
    """The caller made a mistake: the arguments, the schema or the options are wrong."""


class SchemaError(UserError):
    """The output type is not something formcast can read as a constraint.

    Raised for a class that is not a Pydantic model, a string that is not JSON, a
    document that is not a valid JSON Schema, or a regular expression that does not parse.
    """


class UnsupportedSchemaError(SchemaError):
    """A schema keyword (or keyword value) that formcast cannot enforce exactly.

    formcast never skips or loosens a constraint silently; it refuses the schema and says
    which keyword, where.

    Attributes:
        keyword: the JSON Schema keyword, e.g. ``"uniqueItems"``.
        pointer: the JSON pointer of the schema object holding it, e.g. ``"/properties/tags"``.
        reason: why it cannot be enforced.
    """

    def __init__(self, keyword: str, pointer: str, reason: str = "") -> None:
        self.keyword = keyword
        self.pointer = pointer or "/"
        self.reason = reason
        detail = f": {reason}" if reason else ""
        super().__init__(f"unsupported schema keyword {keyword!r} at {self.pointer}{detail}")


class GrammarError(SchemaError):
    """A grammar (:class:`formcast.Grammar`) that formcast cannot read or enforce exactly:
    a syntax error, an undefined rule, a missing start rule, left recursion that cannot
    be rewritten, a rule that can never finish, or a feature refused by name.

    Attributes:
        line: 1-based line of the grammar text where the problem is (0: not tied to
            one place, e.g. a start rule that does not exist).
        column: 1-based column on that line (0 likewise).
        detail: the message without the position.
    """

    def __init__(self, detail: str, line: int = 0, column: int = 0) -> None:
        self.line = line
        self.column = column
        self.detail = detail
        where = f"line {line}, column {column}: " if line else ""
        super().__init__(f"grammar error: {where}{detail}")


class InvalidOptionError(UserError):
    """An option has a value formcast cannot use (e.g. ``max_new_tokens`` too small)."""


class TokenNotAllowedError(UserError):
    """A token was passed to ``Cursor.advance`` that the constraint does not allow there."""


class EmptyInputError(UserError):
    """The text to extract from is empty or only whitespace."""


class NoTextValueError(UserError):
    """No value of a required ``FromText`` field is written in the text (a text without
    any number for a ``FromText`` number, say), so no output can be produced from it.

    Raised when the text is bound, before any token is generated.

    Attributes:
        pointers: JSON pointers of the schema objects of the fields without a value.
    """

    def __init__(self, pointers: tuple[str, ...], message: str) -> None:
        self.pointers = pointers
        super().__init__(message)


class InvalidRowError(UserError):
    """A row of a pipeline's input cannot be read: a malformed JSON line, a row without
    its text field (or whose text is not a string), a file that cannot be read as UTF-8.

    The command line and :mod:`formcast.ray` record it in the row's ``error`` column
    rather than raising it, so one bad row never stops a job.
    """


class ExtractionRuntimeError(FormcastError, RuntimeError):
    """The model or the runtime failed while the call itself was valid."""


class ModelLoadError(ExtractionRuntimeError):
    """The model or tokenizer could not be loaded (missing package, file, or bad weights)."""


class ContextLengthError(ExtractionRuntimeError):
    """The prompt plus the generation budget does not fit the model's context window."""

    def __init__(self, prompt_tokens: int, max_new_tokens: int, context_length: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.context_length = context_length
        super().__init__(
            f"expected prompt + max_new_tokens <= {context_length} tokens (the model's context "
            f"window), found a prompt of {prompt_tokens} tokens + max_new_tokens="
            f"{max_new_tokens}; shorten the text or lower max_new_tokens"
        )


class OutputValidationError(ExtractionRuntimeError):
    """The generated JSON matched the schema but the model class's own validators rejected it.

    Attributes:
        raw_text: the text the model generated (in the last attempt).
        validation_error: the underlying ``pydantic.ValidationError``.
        attempts: every attempt of the extraction (:class:`~formcast.extraction.results.Attempt`),
            set when an extraction gives up after its retries; empty otherwise.
    """

    def __init__(self, raw_text: str, validation_error: Exception) -> None:
        self.raw_text = raw_text
        self.validation_error = validation_error
        self.attempts: tuple[Attempt, ...] = ()
        super().__init__(
            f"the output matched the schema but the model's validators rejected it: "
            f"{validation_error}\nraw output: {raw_text!r}"
        )


class FormcastWarning(UserWarning):
    """Base class of every warning formcast emits (filter them all with this class)."""


class UnknownFormatWarning(FormcastWarning):
    """A string ``format`` formcast does not know is not enforced: any string is allowed.

    JSON Schema treats an unknown format as an annotation (see the guide's "Schema
    modes"), so a schema using one is compiled rather than refused.

    Attributes:
        format: the format's name.
        pointer: the JSON pointer of the schema object holding it (``""``: the root).
    """

    def __init__(self, format: str, pointer: str, message: str) -> None:
        self.format = format
        self.pointer = pointer
        super().__init__(message)


_recording: ContextVar[list[FormcastWarning] | None] = ContextVar(
    "formcast_recorded_warnings", default=None
)


def warn(warning: FormcastWarning, stacklevel: int = 1) -> None:
    """Emit ``warning`` (``stacklevel`` as :func:`warnings.warn` counts it from the
    caller) and add it to the list of :func:`recording_warnings` in progress, so that an
    index read back from a cache can say it again."""
    recorded = _recording.get()
    if recorded is not None:
        recorded.append(warning)
    warnings.warn(warning, stacklevel=stacklevel + 1)


@contextlib.contextmanager
def recording_warnings() -> Iterator[list[FormcastWarning]]:
    """The warnings :func:`warn` emits in this context (this thread or task only)."""
    recorded: list[FormcastWarning] = []
    token = _recording.set(recorded)
    try:
        yield recorded
    finally:
        _recording.reset(token)


def warning_data(warning: FormcastWarning) -> dict[str, str]:
    """``warning`` as plain strings, for a cache entry (see :func:`warning_from_data`)."""
    if isinstance(warning, UnknownFormatWarning):
        return {"format": warning.format, "pointer": warning.pointer, "message": str(warning)}
    return {"message": str(warning)}


def warning_from_data(data: dict[str, str]) -> FormcastWarning:
    """The warning :func:`warning_data` wrote."""
    if "format" in data:
        return UnknownFormatWarning(data["format"], data["pointer"], data["message"])
    return FormcastWarning(data["message"])

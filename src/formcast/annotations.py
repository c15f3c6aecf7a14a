"""The annotations users write in a model or give as an output type: :class:`Regex` and
:class:`Choice`.

``FromText`` (values copied from the text) lives with its slot encoding in
:mod:`formcast.text`, and ``Grammar`` with the grammar stage in :mod:`formcast.grammar`;
``formcast.Regex``, ``formcast.Choice``, ``formcast.FromText`` and ``formcast.Grammar``
are these classes. This module imports nothing of formcast but its errors, so the
grammar stage (which embeds a ``Regex``) and :mod:`formcast.constraint` (which reads
grammars as output types) both import it without a cycle.

**Choice.** ``Annotated[str, Choice(names)]`` is a string among many names, without a
``Literal``. A ``Literal`` of 100,000 names costs seconds in ``typing`` and pydantic before formcast
sees it (``typing`` deduplicates the values, pydantic builds a literal validator and a
JSON Schema ``enum`` value by value). :class:`Choice` gives pydantic a plain ``str``
with one membership check against a ``frozenset``, and writes the JSON Schema ``enum``
itself, as one list: what formcast compiles is the same ``enum`` (see the guide's
section on choices), at a small part of the cost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import CoreSchema, core_schema

from formcast.errors import SchemaError

__all__ = ["Choice", "Regex"]


class Choice:
    """Annotation: the string must be one of ``names`` (order kept, repeats dropped).

    Use it as ``Annotated[str, Choice(names)]``, in a model's field or as an output type.
    Validation is one ``frozenset`` lookup; the JSON Schema is ``{"type": "string",
    "enum": names}``. Two choices are equal when they hold the same names in the same
    order. Building one costs one pass over the names at C speed (~10 ms for 100,000).

    Raises:
        SchemaError: ``names`` is a single string, holds a value that is not a str, or is
            empty; or the annotated type is not ``str``.
    """

    __slots__ = ("_members", "names")

    def __init__(self, names: Iterable[str]) -> None:
        if isinstance(names, str | bytes):
            raise SchemaError(
                "expected an iterable of names for Choice, found the single "
                f"{type(names).__name__} {names[:40]!r}"
            )
        values = tuple(dict.fromkeys(names))
        if not values:
            raise SchemaError("expected at least one name in Choice, found none")
        if set(map(type, values)) != {str}:
            wrong = next(value for value in values if type(value) is not str)
            raise SchemaError(
                f"expected only str names in Choice, found {type(wrong).__name__} {wrong!r}"
            )
        self.names: tuple[str, ...] = values
        self._members = frozenset(values)

    def __contains__(self, value: object) -> bool:
        return value in self._members

    def __len__(self) -> int:
        return len(self.names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Choice) and self.names == other.names

    def __hash__(self) -> int:
        return hash(self.names)

    def __repr__(self) -> str:
        shown = ", ".join(repr(name) for name in self.names[:3])
        more = f", ... ({len(self.names)} names)" if len(self.names) > 3 else ""
        return f"Choice([{shown}{more}])"

    def _check(self, value: str) -> str:
        if value not in self._members:
            raise ValueError(f"expected one of the {len(self.names)} names, found {value!r}")
        return value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        if source is not str:
            raise SchemaError(f"expected Choice on str, found it on {source!r}")
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        json_schema = handler.resolve_ref_schema(handler(schema))
        json_schema["enum"] = list(self.names)
        return json_schema


@dataclass(frozen=True)
class Regex:
    """Constrain the output to a regular expression (Python ``re`` syntax, full match).

    The result of an extraction with a ``Regex`` output type is the matched ``str``.

    >>> Regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}").pattern
    '[0-9]{4}-[0-9]{2}-[0-9]{2}'
    """

    pattern: str

    def __post_init__(self) -> None:
        if not isinstance(self.pattern, str) or not self.pattern:
            raise SchemaError(f"expected a non-empty regex string, found {self.pattern!r}")

"""The values the translation passes between its modules, and the keyword tables.

A schema for one value is translated as a conjunction: a list of :class:`Part` (``allOf``
and ``$ref`` flattened into it). A translation returns a :data:`Result`: the regex text,
or a :class:`Never` saying which keyword left no value at all (an optional property or an
``anyOf`` branch can then be dropped; at the top it becomes an
:class:`~formcast.errors.UnsupportedSchemaError`). :class:`TooLarge` stops a translation
whose regex outgrows its budget. Pure data: no formcast module imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Part:
    """One conjunct of the schema for a value.

    ``synthetic`` parts were built by the translator (negations, dependencies); the others
    are the schema at ``pointer``, possibly with keywords removed that other parts of the
    same conjunction re-express.
    """

    schema: Any
    pointer: str
    synthetic: bool = False


@dataclass(frozen=True)
class Never:
    """The empty language, with the keyword and pointer that made it empty."""

    keyword: str
    pointer: str
    reason: str


Result = str | Never
"""A regex, or the empty language."""


class TooLarge(Exception):
    """Raised as soon as a partial regex exceeds ``MAX_REGEX_LENGTH`` (or the work budget:
    ``final``, since unrolling recursion less would not help)."""

    def __init__(self, keyword: str, pointer: str, reason: str, final: bool = False) -> None:
        super().__init__(keyword, pointer, reason)
        self.keyword = keyword
        self.pointer = pointer
        self.reason = reason
        self.final = final


# ----------------------------------------------------------------------------- keywords

OBJECT_KEYWORDS = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
    }
)
ARRAY_KEYWORDS = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "contains",
        "minContains",
        "maxContains",
        "minItems",
        "maxItems",
        "uniqueItems",
        "unevaluatedItems",
    }
)
STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format"})
NUMBER_KEYWORDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
_GENERIC_KEYWORDS = frozenset(
    {"type", "enum", "const", "nullable", "allOf", "anyOf", "oneOf", "not", "$ref"}
    | {"if", "then", "else"}
)
VALIDATION_KEYWORDS = (  # every keyword with a meaning for validation
    OBJECT_KEYWORDS | ARRAY_KEYWORDS | STRING_KEYWORDS | NUMBER_KEYWORDS | _GENERIC_KEYWORDS
)
REFUSED_KEYWORDS = {
    "$dynamicRef": "dynamic references are not supported",
    "$recursiveRef": "dynamic references are not supported",
    "disallow": "draft 3 keyword",
    "extends": "draft 3 keyword",
    "divisibleBy": "draft 3 keyword",
}
"""Keywords that refuse the whole schema, with the reason."""
ALL_TYPES = frozenset({"null", "boolean", "object", "array", "string", "integer", "number"})

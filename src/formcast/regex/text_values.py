"""Values copied from the request's text (``x-formcast-from-text``, or ``from_text=``).

Such a value is a *slot* (:mod:`formcast.text`): a marker in the regex that the cursor
binds, per request, to the substrings of that request's text. One schema holds at most
``len(KIND_BYTES)`` kinds of slots (string options and length bounds, number bounds);
:class:`TextSlots` numbers them and writes the table that ends the regex.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from decimal import Decimal
from typing import Literal

from formcast.errors import UnsupportedSchemaError
from formcast.regex.context import Translation
from formcast.regex.dialect import NULL, alt
from formcast.regex.numbers import is_number
from formcast.regex.parts import Never, Part, Result
from formcast.regex.strings import string_regex
from formcast.text import (
    FROM_TEXT_KEYWORD,
    KIND_BYTES,
    FromText,
    TextSlot,
    slot_regex,
    slot_table_comment,
)


class TextSlots:
    """The kinds of slots one regex uses, in the order met, with their pointers."""

    def __init__(self) -> None:
        self.kinds: list[TextSlot] = []

    def regex(self, slot: TextSlot, pointer: str) -> str:
        """The regex of ``slot``'s kind, registering the kind and the pointer."""
        for kind, known in enumerate(self.kinds):
            if known.same_kind(slot):
                if pointer not in known.pointers:
                    self.kinds[kind] = dataclasses.replace(
                        known, pointers=(*known.pointers, pointer)
                    )
                return slot_regex(kind)
        if len(self.kinds) == len(KIND_BYTES):
            raise UnsupportedSchemaError(
                FROM_TEXT_KEYWORD,
                pointer,
                f"more than {len(KIND_BYTES)} different kinds of values copied from the text "
                "in one schema",
            )
        self.kinds.append(dataclasses.replace(slot, pointers=(pointer,)))
        return slot_regex(len(self.kinds) - 1)

    def table_comment(self) -> str:
        """The comment that lists the kinds at the end of the regex ("" for none)."""
        return slot_table_comment(self.kinds) if self.kinds else ""


#: Keywords a value copied from the text cannot have (its values come from the text only).
_NOT_FROM_TEXT = frozenset({"enum", "const", "not"})
#: Keywords that give a copied string a shape (:mod:`formcast.shapes`); the ``from_text=``
#: option leaves the strings that have them alone.
_SHAPE_KEYWORDS = frozenset({"pattern", "format"})
_TEXT_BOUND_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def _keywords_in(flat: Sequence[Part], keywords: frozenset[str]) -> bool:
    return any(keyword in part.schema for part in flat for keyword in keywords)


def _text_bounds(flat: Sequence[Part]) -> tuple[tuple[str, str], ...]:
    """The numeric keywords of a number copied from the text, as exact decimal strings."""
    bounds: list[tuple[str, str]] = []
    for part in flat:
        for keyword in _TEXT_BOUND_KEYWORDS:
            value = part.schema.get(keyword)
            if value is None:
                continue
            if not is_number(value):
                raise UnsupportedSchemaError(
                    keyword, part.pointer, f"expected a number with {FROM_TEXT_KEYWORD}"
                )
            bounds.append((keyword, str(Decimal(str(value)))))
    return tuple(bounds)


def text_value(t: Translation, flat: list[Part]) -> Result | None:
    """The slots of a value copied from the text (``x-formcast-from-text``), or None
    when the value is not one. The keyword applies to strings and numbers only, and
    never together with an enumeration or ``not``; a string's ``pattern`` or ``format``
    becomes the slot's shape (the value must be written in the text and match it)."""
    options: FromText | None = None
    pointer = flat[0].pointer
    explicit = False
    for part in flat:
        if FROM_TEXT_KEYWORD in part.schema:
            found = FromText.from_keyword(part.schema[FROM_TEXT_KEYWORD], part.pointer)
            if explicit and found != options:
                raise UnsupportedSchemaError(
                    FROM_TEXT_KEYWORD, part.pointer, "different options for one value"
                )
            options, pointer, explicit = found, part.pointer, True
    if not explicit and t.from_text is None:
        return None
    types = t.types(flat)
    if not explicit:
        plain = types <= {"string", "null"} and "string" in types
        skipped = _NOT_FROM_TEXT | _SHAPE_KEYWORDS
        if t.from_text is None or not plain or _keywords_in(flat, skipped):
            return None
        options = t.from_text
    if options is None:
        return None
    outside = types - {"string", "number", "integer", "null"}
    if outside:
        raise UnsupportedSchemaError(
            FROM_TEXT_KEYWORD,
            pointer,
            f"applies to strings and numbers, found a schema that allows {sorted(outside)}",
        )
    for keyword in sorted(_NOT_FROM_TEXT):
        for part in flat:
            if keyword in part.schema:
                raise UnsupportedSchemaError(
                    keyword, part.pointer, f"cannot be combined with {FROM_TEXT_KEYWORD}"
                )
    alts: list[str] = [NULL] if "null" in types else []
    if "number" in types or "integer" in types:
        value: Literal["number", "integer"] = "number" if "number" in types else "integer"
        number = FromText(whole_lines=options.whole_lines)  # the string options do not apply
        alts.append(t.text_slot(TextSlot(value, number, _text_bounds(flat)), pointer))
    if "string" in types:
        lengths = _text_lengths(flat, options)
        if isinstance(lengths, Never):
            return lengths
        shape = _shape(t, flat)
        if isinstance(shape, Never):
            return shape
        slot = TextSlot("string", lengths, shape=shape)
        alts.append(f'"{t.text_slot(slot, pointer)}"')
    return alt(alts) or ""


def _shape(t: Translation, flat: list[Part]) -> str | Never | None:
    """The JSON string content regex of the value's ``pattern`` or ``format`` (None when
    it has neither): the string keywords compiled as for any string."""
    if not _keywords_in(flat, _SHAPE_KEYWORDS):
        return None
    string = string_regex(t, flat, [])
    if isinstance(string, Never):
        return string
    if "(?&" in string:
        keyword = "pattern" if _keywords_in(flat, frozenset({"pattern"})) else "format"
        raise UnsupportedSchemaError(
            keyword,
            flat[0].pointer,
            f"this {keyword} cannot be combined with {FROM_TEXT_KEYWORD}: its regex calls "
            "shared definitions",
        )
    return string[1:-1]


def _text_lengths(flat: list[Part], options: FromText) -> FromText | Never:
    """``options`` with the value's own ``minLength``/``maxLength`` folded in."""
    low, high = options.min_length, options.max_length
    for part in flat:
        if "minLength" in part.schema:
            low = max(low, int(part.schema["minLength"]))
        if "maxLength" in part.schema:
            limit = int(part.schema["maxLength"])
            high = limit if high is None else min(high, limit)
    if high is not None and high < max(low, 1):
        return Never("maxLength", flat[0].pointer, "no text value fits the length bounds")
    return dataclasses.replace(options, min_length=low, max_length=high)

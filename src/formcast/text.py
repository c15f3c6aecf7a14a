"""Values copied from the input text: the ``FromText`` annotation and its slots.

A ``FromText`` field may only hold a value written in the request's text::

    class Receipt(BaseModel):
        company: Annotated[str, FromText()]      # a substring of the text
        total: Annotated[float, FromText()]      # a number written in the text

The schema stage compiles such a field to a *slot* (see :func:`slot_regex`): marker
bytes that no JSON text contains, ``\\x02 K \\x03``, where ``K`` is one byte naming the
slot's kind (its options). The schema's automaton is compiled once, as for any schema;
each request then binds its text (:mod:`formcast.automaton.bound`), which walks a
:class:`~formcast.automaton.text.TextAutomaton` wherever the schema's automaton reaches
a slot. This module is the compile side: the annotation, and how a slot is written in
the regex and read back from it (the slot table travels as JSON in a regex comment).

What a value may be (documented in the guide):

* **strings**: a substring of the text, JSON-escaped as JSON requires. By default
  (``whitespace="collapse"``) every run of whitespace in the text reads as one space and
  is written as one space; ``whitespace="exact"`` writes it as it stands (``\\n`` escaped).
  A value never starts or ends with whitespace. With ``word_boundaries`` (the default) it
  starts and ends at a word boundary: the ends of the text, either side of whitespace, of
  a punctuation or symbol character (except one between two letters or two digits,
  which joins them: ``18/04/2018``, ``1,234.50``), between letters and digits, and
  around each character of scripts written without spaces (CJK, kana, Thai...).
  With ``whole_lines`` it starts where a line starts (after a run of whitespace holding a
  line break, or at the text's start) and ends where one ends; it may span lines.
  ``case_sensitive=False`` also accepts each character's upper and lower case forms (when
  they encode to one character). ``min_length``/``max_length`` count characters
  (default: at least one).
* **numbers**: a number written in the text, as written: a run of digits with an optional
  decimal point followed by digits. Commas between groups of three digits are thousands
  separators and are dropped (``1,234.50`` -> ``1234.50``); a ``-`` right before the
  digits (not after a letter or digit) makes it negative; currency signs and letters
  around it are not part of it (``RM31.00`` -> ``31.00``); leading zeros are dropped
  (``007`` -> ``7``). A decimal comma is not read as a decimal point. ``integer``
  fields take the numbers without a fractional part, or whose fraction is all zeros
  (``31.00`` -> ``31``). ``minimum``/``maximum``/``exclusiveMinimum``/
  ``exclusiveMaximum``/``multipleOf`` of the field filter the numbers. With
  ``whole_lines``, only the numbers that stand alone on a line, apart from a currency sign
  or a code of one to three capital letters (``RM 31.00``); the string options do not
  apply to numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from formcast.errors import SchemaError

__all__ = [
    "FROM_TEXT_KEYWORD",
    "KIND_BYTES",
    "MARKER_BYTES",
    "SLOT_CLOSE",
    "SLOT_OPEN",
    "FromText",
    "TextSlot",
    "slot_regex",
    "slot_table_comment",
    "text_slots",
]


#: The JSON Schema keyword that marks a value as copied from the text: ``true`` or an
#: object of :class:`FromText` options.
FROM_TEXT_KEYWORD = "x-formcast-from-text"

SLOT_OPEN = 0x02
SLOT_CLOSE = 0x03
#: One byte per slot kind: control characters that JSON never writes unescaped (tab, line
#: feed and carriage return, the only ones JSON whitespace uses, are left out).
KIND_BYTES: bytes = bytes([0x04, 0x05, 0x06, 0x07, 0x08, 0x0B, 0x0C, *range(0x0E, 0x20)])
MARKER_BYTES: frozenset[int] = frozenset({SLOT_OPEN, SLOT_CLOSE, *KIND_BYTES})

_TABLE_PREFIX = "(?#formcast-text-slots:"

Whitespace = Literal["collapse", "exact"]
Spelling = Literal["json", "raw"]


@dataclass(frozen=True)
class FromText:
    """Annotation: the value must be copied from the request's text.

    Use it in ``Annotated[str, FromText()]`` or ``Annotated[float, FromText()]`` (also
    inside lists, nested models and ``Optional``), or as the ``from_text=`` option of an
    extraction, which applies it to every string field without a format, pattern or enum.
    In a JSON Schema, write ``"x-formcast-from-text": true`` or an object of these options.

    Args:
        whitespace: ``"collapse"`` (a run of whitespace in the text is written as one
            space) or ``"exact"`` (written as it stands, JSON-escaped).
        case_sensitive: ``False`` also accepts other upper/lower case forms.
        word_boundaries: values start and end at word boundaries (see the module docs).
        whole_lines: values are whole lines: a string starts where a line of the text
            starts and ends where one ends (it may span several lines); a number stands
            alone on its line, apart from a currency sign or code. For values that stand
            on their own lines, such as a receipt's company name, address or total.
        min_length: the fewest characters of a string value.
        max_length: the most characters of a string value (None: no bound).
    """

    whitespace: Whitespace = "collapse"
    case_sensitive: bool = True
    word_boundaries: bool = True
    whole_lines: bool = False
    min_length: int = 1
    max_length: int | None = None

    def __post_init__(self) -> None:
        if self.whitespace not in ("collapse", "exact"):
            raise SchemaError(
                f"expected FromText whitespace 'collapse' or 'exact', found {self.whitespace!r}"
            )
        for name in ("case_sensitive", "word_boundaries", "whole_lines"):
            if not isinstance(getattr(self, name), bool):
                raise SchemaError(
                    f"expected FromText {name} to be a bool, found {getattr(self, name)!r}"
                )
        if not _is_count(self.min_length):
            raise SchemaError(f"expected FromText min_length >= 0, found {self.min_length!r}")
        if self.max_length is not None and (
            not _is_count(self.max_length) or self.max_length < max(self.min_length, 1)
        ):
            raise SchemaError(
                f"expected FromText max_length >= max(min_length, 1), found {self.max_length!r}"
            )

    def keyword_value(self) -> dict[str, Any]:
        """The options as the JSON object of :data:`FROM_TEXT_KEYWORD`."""
        return asdict(self)

    @classmethod
    def from_keyword(cls, value: Any, pointer: str) -> FromText | None:
        """Read the keyword's value (``true``, ``false`` or an object of options)."""
        if value is True:
            return cls()
        if value is False:
            return None
        if not isinstance(value, Mapping):
            raise SchemaError(
                f"expected {FROM_TEXT_KEYWORD} at {pointer or '/'} to be a boolean or an "
                f"object of options, found {value!r}"
            )
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(value) - known)
        if unknown:
            raise SchemaError(
                f"expected {FROM_TEXT_KEYWORD} options among {sorted(known)} at "
                f"{pointer or '/'}, found {unknown}"
            )
        return cls(**dict(value))

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> Any:
        schema = handler(core_schema)
        schema = handler.resolve_ref_schema(schema)
        schema[FROM_TEXT_KEYWORD] = self.keyword_value()
        return schema


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# -- slots: how the schema stage writes them and how the index reads them back --------------


@dataclass(frozen=True)
class TextSlot:
    """One kind of slot in a compiled schema: what its values are and where it stands.

    Attributes:
        value: ``"string"``, ``"number"`` or ``"integer"``.
        options: the string options (for strings).
        bounds: numeric keywords the number must satisfy, e.g. ``(("minimum", "0"),)``.
        pointers: JSON pointers of the schema objects compiled to this kind.
        shape: for strings with a ``pattern`` or a ``format``, the regex (formcast's
            dialect) of the JSON string content the value must also match
            (:mod:`formcast.automaton.shaped`); None when any substring will do.
        spelling: how a string's characters are written: ``"json"`` as inside a JSON
            string (escaped), ``"raw"`` as their UTF-8 bytes (a span of a grammar's
            output); characters that are marker bytes cannot be written raw.
    """

    value: Literal["string", "number", "integer"]
    options: FromText = field(default_factory=FromText)
    bounds: tuple[tuple[str, str], ...] = ()
    pointers: tuple[str, ...] = ()
    shape: str | None = None
    spelling: Spelling = "json"

    def describe(self) -> str:
        """The slot's fields and what they hold, for error messages."""
        where = ", ".join(p or "/" for p in self.pointers)
        what = f"a {self.value} written in the text"
        if self.value == "string":
            what = "a substring of the text"
        shaped = "" if self.shape is None else " that matches its pattern or format"
        return f"{where} ({what}{shaped})"

    def same_kind(self, other: TextSlot) -> bool:
        return self._kind() == other._kind()

    def _kind(self) -> tuple[Any, ...]:
        return (self.value, self.options, self.bounds, self.shape, self.spelling)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "options": self.options.keyword_value(),
            "bounds": [list(b) for b in self.bounds],
            "pointers": list(self.pointers),
            "shape": self.shape,
            "spelling": self.spelling,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TextSlot:
        return cls(
            data["value"],
            FromText(**data["options"]),
            tuple((str(k), str(v)) for k, v in data["bounds"]),
            tuple(data["pointers"]),
            data.get("shape"),
            data.get("spelling", "json"),
        )


def slot_regex(kind: int) -> str:
    """The regex of slot ``kind``: open marker, kind byte, close marker."""
    if not 0 <= kind < len(KIND_BYTES):
        raise ValueError(f"slot kind {kind} out of range")
    return f"\\x{SLOT_OPEN:02x}\\x{KIND_BYTES[kind]:02x}\\x{SLOT_CLOSE:02x}"


def slot_table_comment(slots: Sequence[TextSlot]) -> str:
    """The regex comment that carries the slot table (appended to the schema's regex)."""
    text = json.dumps([s.to_json() for s in slots], ensure_ascii=True, separators=(",", ":"))
    # ``)`` ends a regex comment; in JSON text it can only stand inside a string.
    return _TABLE_PREFIX + text.replace(")", "\\u0029") + ")"


def text_slots(pattern: str) -> tuple[TextSlot, ...]:
    """The slot table of a compiled schema regex (empty when it has no ``FromText``)."""
    start = pattern.rfind(_TABLE_PREFIX)
    if start < 0 or not pattern.endswith(")"):
        return ()
    data = json.loads(pattern[start + len(_TABLE_PREFIX) : -1])
    return tuple(TextSlot.from_json(item) for item in data)


# -- the text as units with spellings --------------------------------------------------------

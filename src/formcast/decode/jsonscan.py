"""An incremental scanner over generated JSON bytes.

The decoding loop feeds it every byte a row emits (sampled and forced tokens alike) and
reads back two things:

* whether the row is inside a JSON string right now, and where that string opened
  (the loop guard acts only there);
* the members of the top-level object as they close: a value closes when, at depth 1,
  the scanner sees the ``,`` or ``}`` that follows it (field-level validation).

The scanner trusts its input to be a prefix of valid JSON (the constraint guarantees it)
and does no validation of its own. It is pure Python and cheap to copy.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["JsonScanner", "Member"]

_QUOTE = ord('"')
_BACKSLASH = ord("\\")
_OPEN = frozenset(b"{[")
_CLOSE = frozenset(b"}]")
_SPACE = frozenset(b" \t\r\n")
_COLON = ord(":")
_COMMA = ord(",")


@dataclass(frozen=True)
class Member:
    """One closed member of the top-level object, as byte offsets into the output.

    ``key_start:key_end`` is the key with its quotes; ``value_start:value_end`` the value
    (trailing whitespace included, up to the ``,`` or ``}`` that closed it);
    ``content_start`` the first byte that tells values apart: after a string's opening
    quote, else the value's first byte.
    """

    key_start: int
    key_end: int
    value_start: int
    value_end: int
    content_start: int


class JsonScanner:
    """Where a stream of JSON bytes stands. :meth:`feed` it bytes as they come."""

    __slots__ = (
        "_depth",
        "_escaped",
        "_key_end",
        "_key_start",
        "_object",
        "_value_start",
        "_value_string",
        "in_string",
        "offset",
        "string_start",
    )

    def __init__(self) -> None:
        self.offset = 0  # bytes fed so far
        self.in_string = False
        self.string_start = -1  # offset of the opening quote of the current string
        self._escaped = False
        self._depth = 0
        self._object = False  # the top-level value is an object
        self._key_start = -1  # current top-level member: its key's opening quote
        self._key_end = -1  # just after its key's closing quote
        self._value_start = -1  # its value's first byte, once seen
        self._value_string = False  # that value is a string

    def feed(self, data: bytes) -> list[Member]:
        """Consume bytes; return the top-level members they closed, in order."""
        closed: list[Member] = []
        for byte in data:
            if self.in_string:
                self._string_byte(byte)
            elif byte not in _SPACE:
                self._structure_byte(byte, closed)
            self.offset += 1
        return closed

    def value_has_content(self) -> bool:
        """Whether the current top-level member's value has a byte that tells it apart
        from other values yet (a string's opening quote alone does not)."""
        start = self._value_start
        if start < 0:
            return False
        return not self._value_string or self.offset > start + 1

    def current_key(self) -> tuple[int, int] | None:
        """Offsets of the current top-level member's key (quotes included), once that key
        is complete and until its value closes."""
        return (self._key_start, self._key_end) if self._key_end >= 0 else None

    def _string_byte(self, byte: int) -> None:
        if self._escaped:
            self._escaped = False
        elif byte == _BACKSLASH:
            self._escaped = True
        elif byte == _QUOTE:
            self.in_string = False
            if self._key_start == self.string_start and self._key_end < 0:
                self._key_end = self.offset + 1

    def _structure_byte(self, byte: int, closed: list[Member]) -> None:
        top = self._depth == 1 and self._object
        if top and self._key_end >= 0 and self._value_start < 0 and byte != _COLON:
            self._value_start = self.offset
            self._value_string = byte == _QUOTE
        if byte == _QUOTE:
            self.in_string = True
            self.string_start = self.offset
            if top and self._key_start < 0:
                self._key_start = self.offset
        elif byte in _OPEN:
            if self._depth == 0:
                self._object = byte == ord("{")
            self._depth += 1
        elif byte in _CLOSE or byte == _COMMA:
            if top and self._value_start >= 0:
                closed.append(self._close())
            if byte != _COMMA:
                self._depth -= 1

    def _close(self) -> Member:
        start = self._value_start
        member = Member(
            self._key_start, self._key_end, start, self.offset, start + int(self._value_string)
        )
        self._key_start = self._key_end = self._value_start = -1
        self._value_string = False
        return member

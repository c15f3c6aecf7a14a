"""Sets of Unicode code points, and their UTF-8 encodings as byte ranges.

A set is a tuple of inclusive ``(lo, hi)`` code-point ranges. The functions here return
it *normalized*: sorted, disjoint and non-adjacent, so that two equal sets are equal
tuples. Every stage that reads characters uses this one algebra: the ECMAScript pattern
translation and the regex stage's classes (:mod:`formcast.regex`), and the byte automaton
(:mod:`formcast.automaton`), which turns a class into byte transitions through
:func:`utf8_sequences`.

The shorthand tables come in two families, because two dialects meet here:

* the regex dialect the automaton reads (``\\d \\w \\s`` are ASCII: :data:`DIGIT`,
  :data:`WORD`, :data:`SPACE`);
* ECMAScript patterns inside JSON Schemas, where ``\\s`` is Unicode white space
  (:data:`ECMA_SPACE`, :data:`LINE_TERMINATORS`) and a pattern engine may read ``\\d``
  and ``\\s`` with Unicode tables (:func:`unicode_ranges`).
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Iterable
from functools import cache

__all__ = [
    "ANY",
    "DIGIT",
    "ECMA_SPACE",
    "JSON_SPECIAL",
    "LINE_TERMINATORS",
    "MAX_CODE_POINT",
    "SPACE",
    "WORD",
    "ByteSeq",
    "Range",
    "Ranges",
    "complement",
    "contains",
    "from_chars",
    "intersect",
    "minus",
    "normalize",
    "unicode_ranges",
    "utf8_sequences",
]

Range = tuple[int, int]
Ranges = tuple[Range, ...]
# One run of UTF-8 encodings: ((a1, b1), ..., (ak, bk)) stands for the byte strings
# x1..xk with ai <= xi <= bi.
ByteSeq = tuple[Range, ...]

MAX_CODE_POINT = 0x10FFFF


def normalize(ranges: Iterable[Range]) -> Ranges:
    """Sorted, disjoint, non-adjacent ranges covering the same code points.

    Empty ranges (``lo > hi``) are dropped. Cost: a sort of the ranges.
    """
    out: list[Range] = []
    for lo, hi in sorted(r for r in ranges if r[0] <= r[1]):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def complement(ranges: Iterable[Range]) -> Ranges:
    """Code points of ``[0, U+10FFFF]`` outside ``ranges`` (any order, may overlap)."""
    out: list[Range] = []
    start = 0
    for lo, hi in normalize(ranges):
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return tuple(out)


def intersect(a: Iterable[Range], b: Iterable[Range]) -> Ranges:
    """Code points in both ``a`` and ``b``."""
    return complement(complement(a) + complement(b))


def minus(a: Iterable[Range], b: Iterable[Range]) -> Ranges:
    """Code points in ``a`` and not in ``b``."""
    return intersect(a, complement(b))


def from_chars(text: str) -> Ranges:
    """The set of the characters of ``text``."""
    return normalize((ord(c), ord(c)) for c in text)


def contains(ranges: Ranges, code: int) -> bool:
    """Whether the normalized set ``ranges`` holds ``code`` (a binary search)."""
    index = bisect.bisect_right(ranges, (code, MAX_CODE_POINT + 1)) - 1
    return index >= 0 and ranges[index][0] <= code <= ranges[index][1]


ANY: Ranges = ((0, MAX_CODE_POINT),)
# Characters a JSON string must escape: controls, the quote and the backslash.
JSON_SPECIAL: Ranges = normalize([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])

# The ASCII shorthands of the regex dialect the automaton reads.
DIGIT: Ranges = ((0x30, 0x39),)
WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
SPACE: Ranges = ((0x09, 0x0D), (0x20, 0x20))

# White space that both Python's Unicode ``\s`` and ECMAScript's ``\s`` match: tab to
# carriage return, and the Unicode space separators and line/paragraph separators.
_SPACE_CORE: Ranges = (
    (9, 13),
    (160, 160),
    (5760, 5760),
    (8192, 8202),
    (8232, 8233),
    (8239, 8239),
    (8287, 8287),
    (12288, 12288),
)
ECMA_SPACE: Ranges = normalize([*_SPACE_CORE, (32, 32), (65279, 65279)])  # adds the BOM
LINE_TERMINATORS: Ranges = from_chars("\n\r\u2028\u2029")


@cache
def unicode_ranges(predicate_name: str) -> Ranges:
    """Characters that Python's (and Rust's) Unicode ``\\d`` (``"digit"``) or ``\\s``
    (``"space"``) match. The digit table scans the first three planes once (~0.1 s)."""
    if predicate_name == "space":  # Python adds the separators \x1c-\x1f and NEL
        return normalize([*_SPACE_CORE, (28, 32), (133, 133)])
    out: list[Range] = []
    for code in range(0x30000):  # no decimal digits (Nd) beyond the first three planes
        if not 0xD800 <= code <= 0xDFFF and unicodedata.category(chr(code)) == "Nd":
            out.append((code, code))
    return normalize(out)


_LENGTH_SPANS = ((0x0, 0x7F, 1), (0x80, 0x7FF, 2), (0x800, 0xFFFF, 3), (0x10000, 0x10FFFF, 4))


def utf8_sequences(lo: int, hi: int) -> list[ByteSeq]:
    """The UTF-8 encodings of code points ``lo..hi`` (surrogates left out) as byte ranges.

    The sequences are disjoint and, together, exactly the encodings. The range is cut at
    encoding-length boundaries, then, level by level, wherever its ends do not align with
    whole blocks of continuation bytes, so any range costs at most a few dozen sequences.
    """
    pieces = [(lo, hi)]
    if lo <= 0xDFFF and hi >= 0xD800:
        pieces = [(lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)]
    out: list[ByteSeq] = []
    for a, b in pieces:
        for span_lo, span_hi, length in _LENGTH_SPANS:
            x, y = max(a, span_lo), min(b, span_hi)
            if x > y:
                continue
            stack = [(x, y)]
            while stack:
                x, y = stack.pop()
                for level in range(1, length):
                    shift = 6 * level
                    mask = (1 << shift) - 1
                    if x >> shift == y >> shift:
                        continue
                    if x & mask:
                        stack.append(((x | mask) + 1, y))
                        stack.append((x, x | mask))
                        break
                    if y & mask != mask:
                        stack.append((y & ~mask, y))
                        stack.append((x, (y & ~mask) - 1))
                        break
                else:
                    out.append(tuple(zip(chr(x).encode(), chr(y).encode(), strict=True)))
    return out

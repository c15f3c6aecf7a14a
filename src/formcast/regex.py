"""Compile a JSON Schema into a regular expression over characters.

Second stage of the pipeline (see ``DESIGN.md``): ``schema -> regex -> fsm``. The regex
matches JSON *text*; every string it fully matches parses (``json.loads``) to a value that
validates against the schema. The converse does not hold: the regex deliberately accepts
only one spelling of each document shape (see "Restrictions" below).

Contract
--------
``schema_to_regex(schema, mode=..., whitespace=..., max_recursion_depth=...) -> str``

* **Sound.** Whenever a keyword cannot be enforced exactly, :class:`UnsupportedSchemaError`
  is raised naming the keyword and the JSON pointer of the schema object holding it.
  Keywords are never skipped silently; only annotations (``title``, ``description``, ...)
  and unknown non-standard keywords (which JSON Schema defines as annotations) are ignored.
* **Dialect.** Literal characters escaped with ``\\``, ASCII controls as ``\\xNN``,
  character classes with ranges, ``(?:...)``, ``|``, ``? * + {m} {m,} {m,n}``. Never
  ``\\d \\w \\s \\uXXXX``, lookarounds or backreferences; non-ASCII characters appear
  literally. Plus **definitions**: the regex may open with ``(?(DEFINE)(?P<d0>...)
  (?P<d1>...)...)`` and call them with ``(?&d0)`` (PCRE's syntax; a body calls only
  earlier definitions, so nothing recurses). :func:`inline_definitions` turns such a
  regex into one that ``interegular.parse_pattern`` and Python's ``re`` read, as every
  regex without definitions already is.

Keywords
--------
Enforced exactly: ``type`` (and lists, OpenAPI ``nullable``), ``enum``/``const`` of any
JSON value (values are filtered with jsonschema against every sibling keyword, so any
keyword is exact on an enumeration), ``properties``/``required``, ``additionalProperties``
(boolean or schema), ``patternProperties``, ``propertyNames``, ``$ref`` (local pointers,
``$anchor``, ``$id``/``id`` bases, ``definitions``), ``allOf`` (merged), ``anyOf``,
``oneOf`` (branches proven disjoint, or made so by negating the others), ``not`` (of types,
values, ``required``, ``properties``, bounds, lengths, ``anyOf``/``allOf``...),
``if``/``then``/``else`` (when ``if`` can be negated), ``dependentRequired``,
``dependentSchemas`` and ``dependencies``, ``items`` (schema or array form),
``prefixItems``, ``additionalItems``, ``minItems``/``maxItems``, ``contains`` (one schema,
no length bounds), ``minLength``/``maxLength`` (in characters; with a ``pattern``, fitted
to one repetition of it, or else a ``maxLength`` crossed with the pattern's character DFA,
one definition per state and length), ``pattern`` (ECMAScript, unanchored unless
``^``/``$``), integer ``minimum``/``maximum``/``exclusive*`` (digit-range
regexes, draft 4 booleans too), ``multipleOf`` for integers (small ranges, or divisors of
1000 with sign bounds), ``number`` bounds, ``format`` date, time, date-time, duration, uuid
(and uuid1/3/4/5), email, hostname, ipv4, ipv6, uri (``specification`` mode: the whole
RFC 3986 grammar, also for uri-reference, and the ASCII IRIs for iri and iri-reference),
and the OpenAPI integer formats (int32, int64, ...).

Refused with :class:`UnsupportedSchemaError`: lookarounds, backreferences, ``\\b`` and
Unicode property escapes in patterns; a pattern combined with a format, or with lengths
whose product with the pattern's automaton is too large (see ``bounded_pattern`` and
``long_pattern``); several patterns on one string; fractional ``multipleOf``;
``uniqueItems`` (``specification`` mode); unknown formats (``specification`` mode);
``patternProperties`` overlapping declared names past the same limits;
``minContains`` > 1, ``maxContains``; ``minProperties``/``maxProperties`` that would need
counting optional or extra properties; ``oneOf`` branches that can be neither proven
disjoint nor negated; ``$dynamicRef``; references outside the document; recursion that
cannot stop within ``max_recursion_depth``; regexes longer than :data:`MAX_REGEX_LENGTH`.

Restrictions (each keeps the output valid, none loosens a constraint)
--------------------------------------------------------------------
* Object keys appear in declaration order (``properties`` order, merged parts in order,
  required-but-undeclared names last, extra properties after all declared ones).
* Compact JSON by default; ``whitespace=N`` allows at most ``N`` of ``[ \\n\\t]`` at each
  place inside arrays and objects where JSON allows whitespace (``True`` means
  :data:`WHITESPACE_DEFAULT`). No whitespace before or after the top-level value.
* Strings use one spelling per character: ``\\u`` escapes never denote surrogates; inside
  ``pattern``-constrained strings and extra keys each character has exactly one spelling.
* Extra property names escape only what JSON requires (``\\"``, ``\\\\``, controls), and
  not at all when a declared name holds such a character; unconstrained values (schema
  ``true`` / ``{}``, and the extra properties a ``specification``-mode schema tolerates)
  nest at most :data:`ANY_VALUE_DEPTH` levels in ``specification`` mode and one level in
  ``generation`` mode.
* Unbounded numbers are written as ``repr(float)`` writes them and stay finite: at most 16
  integer digits with an optional two-digit exponent, or one integer digit with a
  three-digit exponent up to ``e+307`` (:data:`NUMBER`). Integers
  without bounds have any number of digits (Python and Pydantic ints are unbounded).
  Numbers with bounds have no exponent and stay within +-10**15 on an open side, except
  that a one-sided range holding all non-negative (``minimum <= 0``) or all non-positive
  (``maximum >= 0``) numbers also allows exponents of that sign (``6.02e+23``);
  exclusive bounds on ``number`` are enforced as the nearest inclusive bound that float
  parsing cannot round across (the excluded gap is below one part in 10**15 of the bound);
  bounds are rounded inwards to 20 decimals. ``multipleOf`` makes numbers whole: integers,
  and for ``type: number`` also ``4.0``-style fractions ``.0+`` on up to 15 digits.
* Values a ``not`` excludes from an unconstrained string are avoided by spelling strings
  without escapes.
* Recursive ``$ref`` is unrolled ``max_recursion_depth`` times (a definition may be nested
  inside itself that many times); deeper, the reference is dropped where the schema allows
  (optional property, empty array, ``anyOf`` branch) and otherwise ``$ref`` is refused.
  When the regex would exceed :data:`MAX_REGEX_LENGTH`, or its definitions inlined would
  exceed 2**56 characters (the automaton numbers the states of every copy), recursion is
  unrolled fewer times (with a warning).
* An ``anyOf`` branch that cannot be enforced is dropped with a warning when another branch
  can be (e.g. the ``Decimal`` string branch of Pydantic before 2.14, whose pattern has a
  lookahead).
* The negation of ``type: integer`` excludes all numbers.
* ``generation`` mode: a schema without ``type`` takes the types its keywords constrain
  (``properties`` -> object, ...); ``uniqueItems`` is not enforced (Pydantic's ``set`` and
  ``frozenset`` accept and collapse duplicates; for a Pydantic ``set`` of a small enum or
  ``Literal``, :func:`~formcast.schema.load_schema` lists the arrays without repeats, so
  it is exact there); unknown ``format`` values accept any
  string with a :class:`UserWarning` (``binary``, ``password`` and ``path`` silently, as
  Pydantic accepts any string for them). ``specification`` mode refuses both.
* ``patternProperties``: extra names are produced from the patterns only; names that match
  no pattern are not produced.
* Pydantic models (``generation`` mode) are read through
  :func:`~formcast.schema.load_schema`, whose schema follows what Pydantic accepts and
  writes where its JSON Schema says less or otherwise: ``datetime``/``time`` with or
  without an offset (:data:`PYDANTIC_FORMS`), ``timedelta`` as Pydantic writes it
  (``-P1D``, ``PT1.5S``, weeks and days together), ``Decimal`` as a JSON number or a
  string (``"1.5"``), with ``max_digits``/``decimal_places`` as integers and strings only
  (and with bounds, integers only), ``HttpUrl`` and other URL types with their schemes,
  ``dict`` keys of type ``int``/``float``/``bool`` spelled as Pydantic parses them. URLs
  are an RFC 3986 subset: ``scheme://[user[:password]@]host[:port][/path][?query][#frag]``
  with up to five host labels, six path segments of 20 characters and 40-character
  queries and fragments, no percent-escapes.

Definitions
-----------
Each level of an unconstrained value (in ``specification`` mode) becomes a definition.
When the regex would still exceed 200,000 characters, it is built again with every
sub-schema regex of at least :data:`SHARE_MIN_LENGTH` characters as a definition too
(100 for optional members and extra properties, which are written several times).
Each definition is written once however many places use it, and the automaton copies
it virtually per call (:mod:`formcast.automaton`), so the text and the automaton grow
with the schema, not with its expansion: ten nested arrays of a ``$ref`` no longer
write it 2**10 times, and a value nesting 12 levels costs 12 short definitions where
the inlined regex would be ~4**12 times the scalar's. (Smaller regexes keep their
sub-schemas inline: the automaton walks plain states faster than called ones.)

Costs
-----
Pure string work: milliseconds for Pydantic models, up to a few seconds for the largest
real-world schemas (the first pattern using ``\\D`` or ``[^\\d]`` builds a Unicode table,
~0.1 s). A sub-schema reached through many ``$ref`` is translated once per recursion
context. The output size is linear in the schema for most keywords; ``k`` optional
properties cost ``O(k log k)`` copies of calls to the property regexes (the minimal
automaton stays linear), arrays and repeated extra properties write a call to their
item regex twice, ``anyOf``/``oneOf`` distribute the sibling keywords into each branch,
and unrolled recursion multiplies all of this by the depth.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from functools import cache
from itertools import pairwise
from typing import Any, Literal

import pydantic

from formcast.charset import (
    ANY,
    DIGIT,
    ECMA_SPACE,
    JSON_SPECIAL,
    LINE_TERMINATORS,
    MAX_CODE_POINT,
    WORD,
    Ranges,
    complement,
    contains,
    from_chars,
    intersect,
    minus,
    normalize,
    unicode_ranges,
)
from formcast.errors import InvalidOptionError, SchemaError, UnsupportedSchemaError
from formcast.schema import (
    ANNOTATION_KEYWORDS,
    Mode,
    References,
    join_pointer,
    load_schema,
    validator_class,
)
from formcast.text import (
    FROM_TEXT_KEYWORD,
    KIND_BYTES,
    FromText,
    TextSlot,
    slot_regex,
    slot_table_comment,
)

__all__ = [
    "ANY_VALUE_DEPTH",
    "BOOLEAN",
    "INTEGER",
    "MAX_REGEX_LENGTH",
    "NULL",
    "NUMBER",
    "SHARE_MIN_LENGTH",
    "STRING",
    "STRING_CHAR",
    "WHITESPACE_DEFAULT",
    "escape_literal",
    "inline_definitions",
    "schema_to_regex",
]

WHITESPACE_DEFAULT = 4
"""Whitespace characters allowed at each place when ``whitespace=True``."""

MAX_REGEX_LENGTH = 1_000_000
"""Largest regex :func:`schema_to_regex` returns (characters).

Recursive schemas that would exceed it are unrolled fewer times (with a warning); other
schemas that exceed it are refused with :class:`UnsupportedSchemaError`.
"""

ANY_VALUE_DEPTH = 12
"""Most nesting depth of arrays/objects accepted for an unconstrained value (``true``, ``{}``)
in ``specification`` mode.

Depth 1 allows ``[1,"a"]`` and ``{"k":null}`` but not ``{"k":[1]}``; depth 2 allows
``{"k":[1]}`` but not ``{"k":[{"j":1}]}``. Each level is one definition calling the
level below (see "Definitions" in the module docstring), so the regex grows by a few
hundred characters per level, not fourfold. ``generation`` mode uses depth 1.
"""

SHARE_MIN_LENGTH = 400
"""Sub-schema regexes at least this long become definitions called by ``(?&name)``."""

_SHARE_REPEATED_MIN_LENGTH = 100  # the same, for regexes written several times
# Regexes are first built with definitions only for unconstrained values; past this length
# they are built again with long sub-schema regexes as definitions too. Calls resolve states
# slower than plain copies, so sharing waits until the plain regex grows too large.
_UNSHARED_LIMIT = 200_000
# Calls are virtual copies whose state ids number the whole expansion (see automaton.py);
# past this inlined length, recursion is unrolled fewer times.
_MAX_EXPANDED_LENGTH = 2**56

# ----------------------------------------------------------------------------- regex text

_META = frozenset('\\.^$*+?()[]{}|"')
_CLASS_META = frozenset("\\]^-[")


def _lit_char(char: str) -> str:
    code = ord(char)
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if char in _META:
        return "\\" + char
    return char


# one token of our regex text: an escape, a class, a call (group 1: its name), a group
# (group 2: the name of a named one), a closing parenthesis, or a run of anything else
_TOKEN = re.compile(
    r"\\.|\[(?:\\.|[^\]\\])*\]|\(\?&(\w+)\)|\((?:\?P<(\w+)>|\?:?)?|\)|[^\\\[()]+",
    re.DOTALL,
)
_DEFINE = "(?(DEFINE)"


def _calls(regex: str) -> list[str]:
    """The names of the definitions ``regex`` calls with ``(?&name)``."""
    if "(?&" not in regex:
        return []
    return [m.group(1) for m in _TOKEN.finditer(regex) if m.group(1)]


def _split_definitions(regex: str) -> tuple[dict[str, str], str]:
    """``({name: body}, main)`` of a regex that may open with ``(?(DEFINE)...)``."""
    if not regex.startswith(_DEFINE):
        return {}, regex
    bodies: dict[str, str] = {}
    depth = 0
    name, start = "", 0
    for match in _TOKEN.finditer(regex, len(_DEFINE)):
        token = match.group()
        if token == ")":
            depth -= 1
            if depth == 0:
                bodies[name] = regex[start : match.start()]
            elif depth < 0:
                return bodies, regex[match.end() :]
        elif token.startswith("(") and match.group(1) is None:
            if depth == 0:
                name, start = match.group(2), match.end()
            depth += 1
    raise ValueError("unterminated (?(DEFINE)...)")


def inline_definitions(regex: str, max_length: int = MAX_REGEX_LENGTH) -> str:
    """``regex`` with every ``(?&name)`` call replaced by its definition, and the leading
    ``(?(DEFINE)...)`` dropped: a plain regex for ``re`` and other engines.

    Raises ValueError when the result would exceed ``max_length`` characters (each level of
    an unconstrained value multiplies the inlined text by about four).
    """
    bodies, main = _split_definitions(regex)
    inlined: dict[str, str] = {}

    def expand(text: str) -> str:
        if "(?&" not in text:
            return text
        pieces = []
        for match in _TOKEN.finditer(text):
            name = match.group(1)
            pieces.append(f"(?:{inlined[name]})" if name else match.group())
        out = "".join(pieces)
        if len(out) > max_length:
            raise ValueError(f"the inlined regex would exceed {max_length} characters")
        return out

    for name, body in bodies.items():  # a body calls earlier definitions only
        inlined[name] = expand(body)
    return expand(main)


def escape_literal(text: str) -> str:
    """Escape ``text`` so that the regex matches exactly that text."""
    return "".join(_lit_char(c) for c in text)


def _class_char(code: int) -> str:
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    char = chr(code)
    if char in _CLASS_META:
        return "\\" + char
    return char


def _is_atom(regex: str) -> bool:
    """True when a quantifier may follow ``regex`` directly."""
    if len(regex) == 1:
        return regex not in _META or regex in '"'
    if regex.startswith("\\") and (len(regex) == 2 or (regex[1] == "x" and len(regex) == 4)):
        return True
    if regex[0] not in "[(":
        return False
    depth = 0
    in_class = False
    i = 0
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
                if depth == 0 and regex[0] == "[":
                    return i == len(regex) - 1
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i == len(regex) - 1
        i += 1
    return False


def _group(regex: str) -> str:
    return regex if _is_atom(regex) else f"(?:{regex})"


def _alt(parts: Iterable[str]) -> str | None:
    """Alternation of ``parts`` (deduplicated, order kept); ``None`` for no parts."""
    seen = list(dict.fromkeys(parts))
    if not seen:
        return None
    if len(seen) == 1:
        return seen[0]
    if "" in seen:
        rest = [p for p in seen if p]
        inner = rest[0] if len(rest) == 1 else "|".join(rest)
        return f"(?:{inner})?"
    return "(?:" + "|".join(seen) + ")"


def _opt(regex: str) -> str:
    return "" if not regex else _group(regex) + "?"


def _repeat(regex: str, low: int, high: int | None) -> str:
    if high is not None and high < low:
        raise ValueError("empty repetition")
    if high == 0 or not regex:
        return ""
    atom = _group(regex)
    if low == high:
        return atom if low == 1 else f"{atom}{{{low}}}"
    if high is None:
        return {0: atom + "*", 1: atom + "+"}.get(low, f"{atom}{{{low},}}")
    if (low, high) == (0, 1):
        return atom + "?"
    return f"{atom}{{{low},{high}}}"


def _trie(words: Sequence[str]) -> str | None:
    """Alternation of literal ``words`` with common prefixes factored out."""
    if not words:
        return None
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        alts = []
        for char, child in node.items():
            alts.append("" if char == "" else _lit_char(char) + emit(child))
        return _alt(alts) or ""

    return emit(tree)


# ----------------------------------------------------------------------------- char sets

_SURROGATES = ((0xD800, 0xDFFF),)


def _class(ranges: Ranges) -> str | None:
    """A character class matching exactly ``ranges`` (surrogates excluded), or ``None``."""
    positive = minus(normalize(ranges), _SURROGATES)
    if not positive:
        return None
    if len(positive) == 1 and positive[0][0] == positive[0][1]:
        return _lit_char(chr(positive[0][0]))
    negative = minus(complement(positive), _SURROGATES)

    def body(rs: Ranges) -> str:
        parts = []
        for lo, hi in rs:
            if lo == hi:
                parts.append(_class_char(lo))
            elif hi == lo + 1:
                parts.append(_class_char(lo) + _class_char(hi))
            else:
                parts.append(f"{_class_char(lo)}-{_class_char(hi)}")
        return "".join(parts)

    if len(negative) < len(positive):
        return f"[^{body(negative)}]"
    return f"[{body(positive)}]"


_SHORT_ESCAPES = {0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t", 0x22: '"', 0x5C: "\\"}


def _json_char_escape(code: int) -> str:
    """The canonical JSON spelling of a character that must be escaped, as regex text."""
    short = _SHORT_ESCAPES.get(code)
    text = "\\" + short if short else f"\\u{code:04x}"
    return escape_literal(text)


@functools.lru_cache(maxsize=4096)
def _encoded_set(ranges: Ranges, plain: bool) -> str | None:
    """Regex for one *decoded* character in ``ranges``, as it appears inside a JSON string.

    Each character gets one spelling: itself, or its canonical escape for ``"``, ``\\`` and
    controls. ``plain`` drops the characters that need escaping.
    """
    alts = []
    plain_part = _class(minus(ranges, JSON_SPECIAL))
    if plain_part is not None:
        alts.append(plain_part)
    if not plain:
        special = intersect(ranges, JSON_SPECIAL)
        for lo, hi in special:
            for code in range(lo, hi + 1):
                alts.append(_json_char_escape(code))
    return _alt(alts)


_HEX = "[0-9a-fA-F]"
STRING_CHAR = (
    r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))"
)
"""One character inside a JSON string (``\\u`` escapes of surrogates excluded)."""
_PLAIN_CHAR = r'[^"\\\x00-\x1f]'
_REQUIRED_ESCAPE = r'\\(?:["\\bfnrt]|u00(?:0[0-7be-f]|1[0-9a-f]))'
_ESCAPED_KEY = rf'"{_PLAIN_CHAR}*{_REQUIRED_ESCAPE}(?:{_PLAIN_CHAR}|{_REQUIRED_ESCAPE})*"'
"""A JSON string with at least one escape, each as ``json.dumps`` writes it (short forms,
else lowercase ``\\u00xx``; one spelling per character): its value holds ``"``, ``\\`` or a
control character, so it differs from every name that holds none."""
_ESCAPED_CHAR = re.compile(r'["\\\x00-\x1f]')
STRING = f'"{STRING_CHAR}*"'
"""Any JSON string."""
INTEGER = r"-?(?:0|[1-9][0-9]*)"
"""Any JSON integer literal."""
_LONG_EXPONENTS = r"[1-9](?:\.[0-9]+)?[eE](?:-[0-9]{3}|\+?(?:[0-2][0-9]{2}|30[0-7]))"
"""Unsigned numbers with a three-digit exponent, all finite: one integer digit and
exponents up to 307 (``1.5e+300``, ``5e-324``; not the largest doubles, ``e+308``, which
would lengthen every unconstrained value's regex)."""

_EXPONENT_FORMS = rf"(?:0|[1-9][0-9]{{0,15}})(?:\.[0-9]+)?[eE][+-]?[0-9]{{1,2}}|{_LONG_EXPONENTS}"
"""Unsigned JSON numbers written with an exponent, all finite: up to 16 integer digits with
a two-digit exponent, or :data:`_LONG_EXPONENTS` (as ``repr(float)`` writes them)."""

NUMBER = rf"-?(?:(?:0|[1-9][0-9]{{0,15}})(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{{1,2}})?|{_LONG_EXPONENTS})"
"""JSON numbers as ``repr(float)`` writes them, always finite: at most 16 integer digits
and an optional two-digit exponent, or :data:`_LONG_EXPONENTS`.

(A JSON number such as ``1e400`` parses to ``inf``, which ``Decimal`` and many validators
refuse.)"""
_NUMBER_LIMIT = Decimal(10) ** 15
"""One-sided bounds on ``number`` get this as the other side, so values stay finite."""
BOOLEAN = "(?:true|false)"
NULL = "null"


# ----------------------------------------------------------------------------- ECMAScript patterns


class _PatternUnsupported(Exception):
    """A pattern feature that cannot be translated exactly (message says which)."""


@dataclass(frozen=True)
class _PSet:
    narrow: Ranges  # characters every engine (ECMAScript, Python re, Rust regex) matches
    wide: Ranges  # characters some engine matches


@dataclass(frozen=True)
class _PSeq:
    items: tuple[_PNode, ...]


@dataclass(frozen=True)
class _PAlt:
    options: tuple[_PNode, ...]


@dataclass(frozen=True)
class _PRep:
    node: _PNode
    low: int
    high: int | None


@dataclass(frozen=True)
class _PGroup:
    node: _PNode


@dataclass(frozen=True)
class _PAnchor:
    start: bool


_PNode = _PSet | _PSeq | _PAlt | _PRep | _PGroup | _PAnchor


def _exact(ranges: Ranges) -> _PSet:
    return _PSet(ranges, ranges)


def _shorthand(letter: str) -> _PSet:
    if letter == "d":
        return _PSet(DIGIT, normalize(DIGIT + unicode_ranges("digit")))
    if letter == "w":
        return _PSet(WORD, normalize((*WORD, (128, MAX_CODE_POINT))))
    if letter == "s":
        wide = normalize(ECMA_SPACE + unicode_ranges("space"))
        narrow = minus(intersect(ECMA_SPACE, unicode_ranges("space")), from_chars("\ufeff"))
        return _PSet(narrow, wide)
    positive = _shorthand(letter.lower())
    return _PSet(complement(positive.wide), complement(positive.narrow))


class _PatternParser:
    """Recursive-descent parser for the ECMAScript regex subset used by JSON Schema."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.pos = 0

    def fail(self, what: str) -> _PatternUnsupported:
        return _PatternUnsupported(f"{what} (in {self.text!r} at offset {self.pos})")

    def peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.text[index] if index < len(self.text) else ""

    def parse(self) -> _PNode:
        node = self.alternation()
        if self.pos != len(self.text):
            raise self.fail("unbalanced ')'")
        return node

    def alternation(self) -> _PNode:
        options = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else _PAlt(tuple(options))

    def sequence(self) -> _PNode:
        items: list[_PNode] = []
        while self.pos < len(self.text) and self.peek() not in "|)":
            atom = self.atom()
            quant = self.quantifier()
            if quant is not None:
                if isinstance(atom, _PAnchor):
                    raise self.fail("quantified anchor")
                atom = _PRep(atom, quant[0], quant[1])
            items.append(atom)
        return items[0] if len(items) == 1 else _PSeq(tuple(items))

    def quantifier(self) -> tuple[int, int | None] | None:
        char = self.peek()
        result: tuple[int, int | None] | None = None
        if char == "*":
            result, self.pos = (0, None), self.pos + 1
        elif char == "+":
            result, self.pos = (1, None), self.pos + 1
        elif char == "?":
            result, self.pos = (0, 1), self.pos + 1
        elif char == "{":
            match = re.compile(r"\{(\d+)(?:(,)(\d*))?\}").match(self.text, self.pos)
            if match is None:
                return None
            low = int(match.group(1))
            high = (
                low if match.group(2) is None else (int(match.group(3)) if match.group(3) else None)
            )
            if high is not None and high < low:
                raise self.fail("quantifier range out of order")
            result, self.pos = (low, high), match.end()
        if result is not None and self.peek() == "?":
            self.pos += 1  # lazy: same language
        if result is not None and self.peek() in ("*", "+", "?") and self.peek():
            raise self.fail("nested quantifier")
        return result

    def atom(self) -> _PNode:
        char = self.peek()
        self.pos += 1
        if char == "^":
            return _PAnchor(True)
        if char == "$":
            return _PAnchor(False)
        if char == ".":
            return _exact(complement(LINE_TERMINATORS))
        if char == "(":
            return self.group()
        if char == "[":
            return self.char_class()
        if char == "\\":
            return self.escape(in_class=False)
        if char in "*+?":
            raise self.fail("nothing to repeat")
        if char == "{" and re.compile(r"\{\d*(,\d*)?\}").match(self.text, self.pos - 1):
            raise self.fail("quantifier without operand, or '{,n}' (read differently by engines)")
        return _exact(from_chars(char))

    def group(self) -> _PNode:
        if self.peek() == "?":
            nxt = self.peek(1)
            if nxt == ":":
                self.pos += 2
            elif nxt in "=!" or (nxt == "<" and self.peek(2) in "=!"):
                raise self.fail("lookaround")
            elif nxt == "<" or (nxt == "P" and self.peek(2) == "<"):
                end = self.text.find(">", self.pos)
                if end < 0:
                    raise self.fail("unterminated group name")
                self.pos = end + 1
            else:
                raise self.fail("inline flags or unknown group syntax")
        node = self.alternation()
        if self.peek() != ")":
            raise self.fail("missing ')'")
        self.pos += 1
        return _PGroup(node)

    def class_atom(self) -> _PSet | int:
        char = self.peek()
        self.pos += 1
        if char == "\\":
            result = self.escape(in_class=True)
            single = result.narrow == result.wide and len(result.narrow) == 1
            if single and result.narrow[0][0] == result.narrow[0][1]:
                return result.narrow[0][0]
            return result
        return ord(char)

    def char_class(self) -> _PNode:
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        narrow: list[tuple[int, int]] = []
        wide: list[tuple[int, int]] = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail("unterminated character class")
            if self.peek() == "]":
                self.pos += 1
                break
            start = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                end = self.class_atom()
                if isinstance(start, _PSet) or isinstance(end, _PSet):
                    raise self.fail("character class shorthand in a range")
                if end < start:
                    raise self.fail("character range out of order")
                narrow.append((start, end))
                wide.append((start, end))
            elif isinstance(start, _PSet):
                narrow.extend(start.narrow)
                wide.extend(start.wide)
            else:
                narrow.append((start, start))
                wide.append((start, start))
        if negate:
            return _PSet(complement(normalize(wide)), complement(normalize(narrow)))
        return _PSet(normalize(narrow), normalize(wide))

    def escape(self, in_class: bool) -> _PSet:
        char = self.peek()
        if not char:
            raise self.fail("trailing backslash")
        self.pos += 1
        if char in "dDwWsS":
            return _shorthand(char)
        if char == "b":
            if in_class:
                return _exact(((8, 8),))
            raise self.fail("word boundary \\b")
        if char == "B":
            raise self.fail("word boundary \\B")
        if char.isdigit() and char != "0":
            raise self.fail("backreference")
        if char == "0":
            if self.peek().isdigit():
                raise self.fail("octal escape")
            return _exact(((0, 0),))
        if char == "k" and self.peek() == "<":
            raise self.fail("named backreference")
        if char in "pP" and self.peek() == "{":
            raise self.fail("unicode property escape")
        simple = {"n": 10, "r": 13, "t": 9, "f": 12, "v": 11}
        if char in simple:
            return _exact(((simple[char],) * 2,))
        if char == "c" and self.peek().isalpha() and self.peek().isascii():
            code = ord(self.peek()) % 32
            self.pos += 1
            return _exact(((code, code),))
        if char == "x":
            match = re.compile(r"[0-9a-fA-F]{2}").match(self.text, self.pos)
            if match:
                self.pos = match.end()
                code = int(match.group(0), 16)
                return _exact(((code, code),))
            return _exact(from_chars("x"))
        if char == "u":
            match = re.compile(r"[0-9a-fA-F]{4}").match(self.text, self.pos)
            if match:
                self.pos = match.end()
                code = int(match.group(0), 16)
                if 0xD800 <= code <= 0xDBFF:
                    low = re.compile(r"\\u([dD][c-fC-F][0-9a-fA-F]{2})").match(self.text, self.pos)
                    if not low:
                        raise self.fail("lone surrogate escape")
                    self.pos = low.end()
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low.group(1), 16) - 0xDC00)
                elif 0xDC00 <= code <= 0xDFFF:
                    raise self.fail("lone surrogate escape")
                return _exact(((code, code),))
            if self.peek() == "{":
                raise self.fail("\\u{...} escape")
            return _exact(from_chars("u"))
        if char.isalnum():
            raise self.fail(f"unknown escape \\{char}")
        return _exact(from_chars(char))


def _length_range(node: _PNode) -> tuple[int, float]:
    """Minimum and maximum number of characters matched by ``node``."""
    if isinstance(node, _PSet):
        return (1, 1)
    if isinstance(node, _PAnchor):
        return (0, 0)
    if isinstance(node, _PGroup):
        return _length_range(node.node)
    if isinstance(node, _PSeq):
        ranges = [_length_range(item) for item in node.items]
        return (sum(r[0] for r in ranges), sum(r[1] for r in ranges))
    if isinstance(node, _PAlt):
        ranges = [_length_range(option) for option in node.options]
        return (min(r[0] for r in ranges), max(r[1] for r in ranges))
    low, high = _length_range(node.node)
    top = math.inf if node.high is None else node.high * high
    return (node.low * low, top if node.high != 0 else 0)


@dataclass
class _Alternative:
    """One top-level alternative of a pattern: a sequence with its implicit ``.*`` sides."""

    items: list[_PNode]


def _top_alternatives(node: _PNode) -> list[_PNode]:
    if isinstance(node, _PAlt):
        out: list[_PNode] = []
        for option in node.options:
            out.extend(_top_alternatives(option))
        return out
    if isinstance(node, _PGroup):
        return _top_alternatives(node.node)
    if isinstance(node, _PSeq) and len(node.items) == 1:
        return _top_alternatives(node.items[0])
    return [node]


def _contains_anchor(node: _PNode) -> bool:
    if isinstance(node, _PAnchor):
        return True
    if isinstance(node, _PSeq):
        return any(_contains_anchor(i) for i in node.items)
    if isinstance(node, _PAlt):
        return any(_contains_anchor(i) for i in node.options)
    if isinstance(node, (_PGroup, _PRep)):
        return _contains_anchor(node.node)
    return False


def _matches_empty(node: _PNode) -> bool:
    return _length_range(node)[0] == 0 and not isinstance(node, _PSet)


def _split_anchors(node: _PNode) -> list[_Alternative]:
    """Split a pattern into alternatives with explicit free ``.*`` sides.

    ``^`` may only start and ``$`` only end an alternative (possibly inside a group that is
    the whole alternative); any other anchor is refused.
    """
    out = []
    any_char = _PRep(_exact(ANY), 0, None)
    for alternative in _top_alternatives(node):
        items: list[_PNode] = (
            list(alternative.items) if isinstance(alternative, _PSeq) else [alternative]
        )
        anchored_start = anchored_end = False
        while items and isinstance(items[0], _PAnchor) and items[0].start:
            anchored_start = True
            items.pop(0)
        while items and isinstance(items[-1], _PAnchor) and not items[-1].start:
            anchored_end = True
            items.pop()
        if any(_contains_anchor(item) for item in items):
            raise _PatternUnsupported("anchor in the middle of the pattern")
        if not anchored_start:
            items.insert(0, any_char)
        if not anchored_end:
            items.append(any_char)
        out.append(_Alternative(items))
    return out


def _emit_pattern(node: _PNode, plain: bool) -> str | None:
    """Encoded-string regex for a parsed pattern node; ``None`` if it matches nothing."""
    if isinstance(node, _PSet):
        return _encoded_set(node.narrow, plain)
    if isinstance(node, _PGroup):
        return _emit_pattern(node.node, plain)
    if isinstance(node, _PSeq):
        parts = []
        for item in node.items:
            part = _emit_pattern(item, plain)
            if part is None:
                return None
            parts.append(part)
        return "".join(parts)
    if isinstance(node, _PAlt):
        return _alt(p for p in (_emit_pattern(o, plain) for o in node.options) if p is not None)
    if isinstance(node, _PRep):
        inner = _emit_pattern(node.node, plain)
        if inner is None:
            return "" if node.low == 0 else None
        return _repeat(inner, node.low, node.high)
    raise _PatternUnsupported("anchor in the middle of the pattern")


def _fit_length(items: list[_PNode], low: int, high: int | None) -> list[_PNode] | None:
    """Adjust one variable repetition so the sequence has ``low..high`` characters.

    Returns the new items, ``None`` when the combination cannot be expressed this way.
    Raises ``ValueError`` when no string of the allowed lengths matches.
    """
    ranges = [_length_range(item) for item in items]
    variable = [i for i, (a, b) in enumerate(ranges) if a != b]
    fixed = sum(a for i, (a, _b) in enumerate(ranges) if i not in variable)
    if not variable:
        if fixed < low or (high is not None and fixed > high):
            raise ValueError("length")
        return items
    if len(variable) != 1:
        return None
    index = variable[0]
    item = items[index]
    if not (isinstance(item, _PRep) and _length_range(item.node) == (1, 1)):
        return None
    new_low = max(item.low, low - fixed)
    new_high: int | None = item.high
    if high is not None:
        new_high = high - fixed if new_high is None else min(new_high, high - fixed)
    if new_high is not None and new_high < new_low:
        raise ValueError("length")
    return [*items[:index], _PRep(item.node, new_low, new_high), *items[index + 1 :]]


_MAX_PATTERN_NFA = 4_000  # character NFA states of a pattern built for a length product
_MAX_PATTERN_DFA = 400  # and its DFA states
_MAX_LENGTH_PRODUCT = 8_000  # (DFA state, length) pairs written as definitions


def _pattern_dfa(node: _PNode) -> tuple[list[list[tuple[Ranges, int]]], list[bool]] | None:
    """A DFA over characters for a parsed, anchor-free pattern: per state its moves
    (disjoint code point ranges -> state) and whether it accepts; state 0 starts.
    ``None`` past :data:`_MAX_PATTERN_NFA` NFA or :data:`_MAX_PATTERN_DFA` DFA states."""
    eps: list[list[int]] = [[]]
    moves: list[list[tuple[Ranges, int]]] = [[]]

    def fresh() -> int:
        if len(eps) >= _MAX_PATTERN_NFA:
            raise OverflowError
        eps.append([])
        moves.append([])
        return len(eps) - 1

    def build(item: _PNode, start: int) -> int:
        """Add ``item`` from ``start``; return its end state."""
        if isinstance(item, _PSet):
            end = fresh()
            if item.narrow:
                moves[start].append((item.narrow, end))
            return end
        if isinstance(item, _PGroup):
            return build(item.node, start)
        if isinstance(item, _PSeq):
            for part in item.items:
                start = build(part, start)
            return start
        if isinstance(item, _PAlt):
            end = fresh()
            for option in item.options:
                eps[build(option, start)].append(end)
            return end
        if isinstance(item, _PRep):
            for _ in range(item.low):
                start = build(item.node, start)
            if item.high is None:
                loop = fresh()
                eps[start].append(loop)
                eps[build(item.node, loop)].append(loop)
                return loop
            for _ in range(item.high - item.low):
                end = fresh()
                eps[start].append(end)
                eps[build(item.node, start)].append(end)
                start = end
            return start
        raise _PatternUnsupported("anchor in the middle of the pattern")

    try:
        final = build(node, 0)
    except OverflowError:
        return None

    def closure(states: Iterable[int]) -> frozenset[int]:
        seen = set(states)
        stack = list(seen)
        while stack:
            for target in eps[stack.pop()]:
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return frozenset(seen)

    ids = {closure([0]): 0}
    order = [closure([0])]
    dfa_moves: list[list[tuple[Ranges, int]]] = []
    for members in order:  # grows while iterating
        edges = [edge for state in members for edge in moves[state]]
        points = sorted(
            {lo for ranges, _ in edges for lo, _ in ranges}
            | {hi + 1 for ranges, _ in edges for _, hi in ranges}
        )
        by_target: dict[frozenset[int], list[tuple[int, int]]] = {}
        for lo, next_lo in pairwise(points):
            targets = frozenset(t for ranges, t in edges if contains(ranges, lo))
            if targets:
                by_target.setdefault(closure(targets), []).append((lo, next_lo - 1))
        row = []
        for target, ranges in by_target.items():
            if target not in ids:
                if len(order) >= _MAX_PATTERN_DFA:
                    return None
                ids[target] = len(order)
                order.append(target)
            row.append((normalize(ranges), ids[target]))
        dfa_moves.append(row)
    return dfa_moves, [final in members for members in order]


_MAX_ELIMINATED_STATES = 300  # DFA states turned back into a regex by state elimination
_MAX_ELIMINATED_REGEX = 60_000  # characters of any regex built while eliminating


class _DfaTooLarge(Exception):
    """A DFA, or the regex state elimination builds from it, is past the size limits."""


def _dfa_regex(
    moves: Sequence[Sequence[tuple[Ranges, int]]], accepting: Sequence[bool], plain: bool
) -> str | None:
    """A regex for the JSON string contents spelling the words a character DFA accepts
    from state 0 (``None`` if none), by state elimination (fewest in x out edges first).

    Raises _DfaTooLarge past :data:`_MAX_ELIMINATED_STATES` live states or
    :data:`_MAX_ELIMINATED_REGEX` characters in any intermediate regex."""
    count = len(moves)
    reachable = {0}
    stack = [0]
    while stack:
        for _, target in moves[stack.pop()]:
            if target not in reachable:
                reachable.add(target)
                stack.append(target)
    productive = {q for q in range(count) if accepting[q]}
    changed = True
    while changed:
        changed = False
        for q in reachable - productive:
            if any(t in productive for _, t in moves[q]):
                productive.add(q)
                changed = True
    live = reachable & productive
    if 0 not in live:
        return None
    if len(live) > _MAX_ELIMINATED_STATES:
        raise _DfaTooLarge
    first, last = -1, -2  # the added start and final states
    label: dict[tuple[int, int], str] = {(first, 0): ""}
    for q in live:
        if accepting[q]:
            label[(q, last)] = ""
        for ranges, target in moves[q]:
            char = _encoded_set(ranges, plain) if target in live else None
            if char is not None:
                key = (q, target)
                label[key] = char if key not in label else (_alt([label[key], char]) or "")
    into: dict[int, set[int]] = {q: set() for q in live}
    out_of: dict[int, set[int]] = {q: set() for q in live}
    for a, b in label:
        if b in out_of or b == last:
            if a in out_of:
                out_of[a].add(b)
            if b in into:
                into[b].add(a)
    remaining = set(live)
    while remaining:
        k = min(remaining, key=lambda q: (len(into[q]) * len(out_of[q]), q))
        remaining.discard(k)
        loop = label.pop((k, k), None)
        middle = _repeat(loop, 0, None) if loop else ""
        sources = [a for a in into[k] if a != k]  # the added start included
        targets = [b for b in out_of[k] if b != k]
        for a in sources:
            head = label.pop((a, k))
            for b in targets:
                path = _group_alt(head) + middle + _group_alt(label[(k, b)])
                key = (a, b)
                joined = path if key not in label else (_alt([label[key], path]) or "")
                if len(joined) > _MAX_ELIMINATED_REGEX:
                    raise _DfaTooLarge
                label[key] = joined
                if a in out_of:
                    out_of[a].add(b)
                if b in into:
                    into[b].add(a)
            if a in out_of:
                out_of[a].discard(k)
        for b in targets:
            label.pop((k, b), None)
            if b in into:
                into[b].discard(k)
    return label.get((first, last))


def _group_alt(regex: str) -> str:
    """``regex`` safe to concatenate: alternations at the top level get a group."""
    return regex if not regex or "|" not in regex or _is_atom(regex) else f"(?:{regex})"


def _pattern_union(pattern: str) -> _PNode:
    """The parsed pattern as one anchor-free node (implicit ``.*`` sides made explicit)."""
    alternatives = _split_anchors(_PatternParser(pattern).parse())
    return _PAlt(tuple(_PSeq(tuple(a.items)) for a in alternatives))


def _pattern_except(pattern: str, excluded: Sequence[str]) -> str | None:
    """Regex for the JSON string token (quotes included, plain spelling) of the names that
    match ``pattern`` and are none of ``excluded``: the pattern's DFA crossed with the trie
    of the excluded names. ``None`` if no name remains; raises _DfaTooLarge."""
    built = _pattern_dfa(_pattern_union(pattern))
    if built is None:
        raise _DfaTooLarge
    moves, accepting = built
    trie: list[dict[int, int]] = [{}]
    ends: set[int] = set()
    for word in excluded:
        node = 0
        for char in word:
            node = trie[node].setdefault(ord(char), len(trie))
            if node == len(trie):
                trie.append({})
        ends.add(node)
    ids: dict[tuple[int, int], int] = {(0, 0): 0}
    order = [(0, 0)]
    product_moves: list[list[tuple[Ranges, int]]] = []
    for q, node in order:  # node -1: off the trie
        row: list[tuple[Ranges, int]] = []
        for ranges, target in moves[q]:
            pieces: list[tuple[Ranges, int]] = []
            rest = ranges
            if node >= 0:
                for code, child in trie[node].items():
                    if contains(ranges, code):
                        pieces.append((((code, code),), child))
                        rest = minus(rest, ((code, code),))
            pieces.append((rest, -1))
            for piece, next_node in pieces:
                if not piece:
                    continue
                pair = (target, next_node)
                if pair not in ids:
                    ids[pair] = len(order)
                    order.append(pair)
                row.append((piece, ids[pair]))
        product_moves.append(row)
    final = [accepting[q] and node not in ends for q, node in order]
    body = _dfa_regex(product_moves, final, plain=True)
    return None if body is None else f'"{body}"'


def _pattern_regex(
    pattern: str, low: int, high: int | None, plain: bool
) -> tuple[str | None, str | None]:
    """Regex for the *contents* of a JSON string whose decoded value matches ``pattern``.

    ``pattern`` follows JSON Schema (ECMAScript, unanchored search). Lengths in ``low..high``
    are enforced too. Returns ``(regex, None)`` (regex ``None`` if nothing matches) or
    ``(None, keyword)`` naming the length keyword that cannot be combined with the pattern.
    Raises ``_PatternUnsupported`` for untranslatable syntax.
    """
    alternatives = _split_anchors(_PatternParser(pattern).parse())
    out = []
    for alternative in alternatives:
        items: list[_PNode] | None = alternative.items
        if low > 0 or high is not None:
            a, b = _length_range(_PSeq(tuple(alternative.items)))
            if a < low or (high is not None and b > high):
                try:
                    items = _fit_length(alternative.items, low, high)
                except ValueError:
                    continue
                if items is None:
                    return None, "minLength" if a < low else "maxLength"
        emitted = _emit_pattern(_PSeq(tuple(items or [])), plain)
        if emitted is not None:
            out.append(emitted)
    return _alt(out), None


# ----------------------------------------------------------------------------- integers


def _digits_between(lo: str, hi: str) -> str:
    """Regex for digit strings ``s`` of the same length with ``lo <= s <= hi``."""
    if lo == hi:
        return lo
    i = 0
    while lo[i] == hi[i]:
        i += 1
    prefix, lo, hi = lo[:i], lo[i:], hi[i:]
    rest = len(lo) - 1
    if rest == 0:
        return prefix + _digit_class(lo[0], hi[0])
    alts = []
    first = lo[0]
    if lo[1:] != "0" * rest:
        alts.append(lo[0] + _digits_between(lo[1:], "9" * rest))
        first = chr(ord(lo[0]) + 1)
    last = hi[0]
    tail = None
    if hi[1:] != "9" * rest:
        tail = hi[0] + _digits_between("0" * rest, hi[1:])
        last = chr(ord(hi[0]) - 1)
    if first <= last:
        alts.append(_digit_class(first, last) + _repeat("[0-9]", rest, rest))
    if tail is not None:
        alts.append(tail)
    return prefix + (_alt(alts) or "")


def _digit_class(lo: str, hi: str) -> str:
    if lo == hi:
        return lo
    if (lo, hi) == ("0", "9"):
        return "[0-9]"
    return f"[{lo}{hi}]" if ord(hi) == ord(lo) + 1 else f"[{lo}-{hi}]"


def _nonneg_range(lo: int, hi: int | None) -> str | None:
    """Regex for canonical decimal integers in ``lo..hi`` (``lo >= 0``; ``hi=None``: no bound)."""
    if hi is not None and hi < lo:
        return None
    alts = []
    len_lo = len(str(lo))
    len_hi = len(str(hi)) if hi is not None else len_lo
    for n in range(len_lo, len_hi + 1):
        a = lo if n == len_lo else 10 ** (n - 1)
        b = hi if (hi is not None and n == len_hi) else 10**n - 1
        alts.append(_digits_between(str(a), str(b)))
    if hi is None:
        alts.append("[1-9]" + _repeat("[0-9]", len_lo, None))
    return _alt(alts)


def _int_range(lo: int | None, hi: int | None) -> str | None:
    """Regex for JSON integer literals in ``lo..hi`` (``None``: unbounded side)."""
    if lo is not None and hi is not None and lo > hi:
        return None
    if lo is None and hi is None:
        return INTEGER
    alts = []
    if lo is None or lo < 0:
        top = -1 if hi is None or hi >= 0 else hi
        magnitudes = _nonneg_range(-top, None if lo is None else -lo)
        if magnitudes is not None:
            alts.append("-" + _group(magnitudes))
    if hi is None or hi >= 0:
        positive = _nonneg_range(max(lo, 0) if lo is not None else 0, hi)
        if positive is not None:
            alts.append(positive)
    return _alt(alts)


def _int_multiple(
    k: int, lo: int | None, hi: int | None, digits: int | None = None
) -> str | bool | None:
    """Integers in ``lo..hi`` divisible by ``k``; ``False`` when not expressible here.

    Exact for ``k == 1``, for small bounded ranges (enumerated), and for ``k`` dividing
    1000 when each bound is absent or within ``k`` of zero (e.g. ``>= 0``, ``> 0``).
    ``digits`` limits the magnitude to that many digits.
    """
    top = None if digits is None else 10**digits - 1
    if k == 1:
        if top is not None:
            lo = -top if lo is None else max(lo, -top)
            hi = top if hi is None else min(hi, top)
        return _int_range(lo, hi)
    if lo is not None and hi is not None:
        first = -((-lo) // k) * k
        if first > hi:
            return None
        if (hi - first) // k < 2000:
            values = [v for v in range(first, hi + 1, k) if top is None or abs(v) <= top]
            return _trie([str(v) for v in values])
    power = next((j for j in range(1, 4) if 10**j % k == 0), None)
    if power is None:
        return False
    if lo is not None and not -k < lo <= k:
        return False
    if hi is not None and not -k <= hi < k:
        return False
    short = [str(v) for v in range(k, 10**power, k)]
    suffixes = [str(v).zfill(power) for v in range(0, 10**power, k)]
    longer = ""
    if digits is None or digits > power:
        lead = "[1-9]" + _repeat("[0-9]", 0, None if digits is None else digits - power - 1)
        longer = lead + _group(_trie(suffixes) or "")
    magnitude = _alt([m for m in (_trie(short), longer) if m])
    alts = []
    if lo is None and magnitude is not None:
        alts.append("-" + _group(magnitude))
    if (lo is None or lo <= 0) and (hi is None or hi >= 0):
        alts.append("0")
    if hi is None and magnitude is not None:
        alts.append(magnitude)
    return _alt(alts)


# ----------------------------------------------------------------------------- numbers


def _exact_decimal(value: int | float) -> Decimal:
    return Decimal(value)


def _int_digits(value: Decimal) -> int:
    magnitude = abs(value)
    return 0 if magnitude < 1 else len(str(int(magnitude)))


def _at_most(bound: int | float) -> Decimal:
    """Largest short decimal ``T`` such that ``s <= T`` implies ``s <= bound`` after parsing.

    Parsing means Python's exact ``int`` for integer literals and correctly rounded
    ``float`` otherwise.
    """
    if isinstance(bound, int):
        if abs(bound) < 2**53:
            return Decimal(bound)
        value = float(bound)
        if value > bound:
            value = math.nextafter(value, -math.inf)
        return Decimal(value)
    exact = Decimal(bound)
    short = Decimal(repr(bound))
    if short <= exact or short.to_integral_value(ROUND_FLOOR) <= exact:
        return short
    return exact


def _at_least(bound: int | float) -> Decimal:
    return -_at_most(-bound)


def _below(bound: int | float) -> Decimal:
    """A short decimal ``T < bound`` such that ``s <= T`` implies ``parse(s) < bound``."""
    exact = _exact_decimal(bound)
    digits = _int_digits(exact)
    if digits <= 15:
        step = Decimal(1).scaleb(-(15 - digits))
        with localcontext() as ctx:
            ctx.prec = 2000
            candidate = (exact / step).to_integral_value(ROUND_CEILING) * step - step
            while not (candidate < exact and float(candidate) < bound):
                candidate -= step
        return candidate.normalize() if candidate != 0 else Decimal(0)
    value = math.nextafter(float(bound), -math.inf)
    while not (Decimal(value) < exact and value < bound):
        value = math.nextafter(value, -math.inf)
    return Decimal(value)


def _above(bound: int | float) -> Decimal:
    return -_below(-bound)


_FRACTION_DIGITS = 20
"""Bounds on ``number`` are rounded inwards to this many decimals (keeps regexes shallow)."""


def _split_decimal(value: Decimal) -> tuple[int, str]:
    text = format(value, "f")
    whole, _, fraction = text.partition(".")
    return int(whole), fraction.rstrip("0")


def _fraction(lo: str | None, lo_strict: bool, hi: str | None, hi_strict: bool) -> str | None:
    """Regex for an optional fractional part ``(\\.[0-9]+)?`` with ``lo <= 0.F <= hi``.

    ``lo``/``hi`` are digit strings without trailing zeros (``""`` is 0), ``None`` for no
    bound; ``*_strict`` makes the bound exclusive.
    """

    def digit(bound: str, i: int) -> int:
        return int(bound[i]) if i < len(bound) else 0

    def end_ok(i: int, tl: bool, th: bool) -> bool:
        if tl and lo is not None and (i < len(lo) or lo_strict):
            return False
        return not (th and hi is not None and i >= len(hi) and hi_strict)

    def digits(i: int, tl: bool, th: bool) -> str | None:
        """At least one more digit, from position ``i``."""
        groups: dict[tuple[bool, bool], list[int]] = {}
        for d in range(10):
            if tl and lo is not None and d < digit(lo, i):
                continue
            if th and hi is not None and d > digit(hi, i):
                continue
            state = (
                tl and lo is not None and d == digit(lo, i),
                th and hi is not None and d == digit(hi, i),
            )
            groups.setdefault(state, []).append(d)
        alts = []
        for (ntl, nth), ds in groups.items():
            rest = remainder(i + 1, ntl, nth)
            if rest is None:
                continue
            cls = (
                _digit_class(str(ds[0]), str(ds[-1]))
                if ds == list(range(ds[0], ds[-1] + 1))
                else ("[" + "".join(map(str, ds)) + "]")
            )
            alts.append(cls + rest)
        return _alt(alts)

    def remainder(i: int, tl: bool, th: bool) -> str | None:
        """Zero or more digits from position ``i``."""
        if not tl and not th:
            return "[0-9]*"
        lo_done = not tl or lo is None or i >= len(lo)
        hi_done = not th or hi is None or i >= len(hi)
        if lo_done and hi_done:
            if tl and th:
                return "0*" if not (lo_strict or hi_strict) else None
            if tl:
                return "0*[1-9][0-9]*" if lo_strict else "[0-9]*"
            return None if hi_strict else "0*"
        more = digits(i, tl, th)
        options = ([""] if end_ok(i, tl, th) else []) + ([more] if more is not None else [])
        return _alt(options)

    tl0, th0 = lo is not None, hi is not None
    options = []
    if end_ok(0, tl0, th0):
        options.append("")
    dotted = digits(0, tl0, th0)
    if dotted is not None:
        options.append(r"\." + dotted)
    return _alt(options)


def _magnitude(a: Decimal, a_strict: bool, c: Decimal | None, c_strict: bool) -> str | None:
    """Regex for unsigned decimals ``I(.F)?`` with value in ``a..c`` (``a >= 0``)."""
    if c is not None and (c < a or (c == a and (a_strict or c_strict))):
        return None
    ia, fa = _split_decimal(a)
    ic: int | None = None
    fc = ""
    if c is not None:
        ic, fc = _split_decimal(c)
        if ia == ic:
            fraction = _fraction(fa, a_strict, fc, c_strict)
            return None if fraction is None else str(ia) + fraction
    alts = []
    low_fraction = _fraction(fa, a_strict, None, False)
    if low_fraction is not None:
        alts.append(str(ia) + low_fraction)
    middle = _nonneg_range(ia + 1, None if ic is None else ic - 1)
    if middle is not None:
        alts.append(_group(middle) + r"(?:\.[0-9]+)?")
    if ic is not None:
        high_fraction = _fraction(None, False, fc, c_strict)
        if high_fraction is not None:
            alts.append(str(ic) + high_fraction)
    return _alt(alts)


def _number_range(lo: Decimal | None, hi: Decimal | None) -> str | None:
    """Regex for JSON numbers with ``lo <= value <= hi``.

    No exponent, except on a one-sided range that holds every non-negative number
    (``lo <= 0``, no ``hi``) or every non-positive one (``hi >= 0``, no ``lo``): there the
    exponent forms of :data:`_EXPONENT_FORMS` of that sign are allowed too.
    """
    with localcontext() as context:
        context.prec = 2000
        regex = _number_range_exact(lo, hi)
    if regex is None or (lo is None) == (hi is None):
        return regex
    if hi is None and lo is not None and lo <= 0:
        return _alt([regex, _EXPONENT_FORMS])
    if lo is None and hi is not None and hi >= 0:
        return _alt([regex, f"-(?:{_EXPONENT_FORMS})"])
    return regex


def _number_range_exact(lo: Decimal | None, hi: Decimal | None) -> str | None:
    if lo is None and hi is None:
        return NUMBER
    if hi is None:
        hi = max(_NUMBER_LIMIT, lo or _NUMBER_LIMIT)
    if lo is None:
        lo = min(-_NUMBER_LIMIT, hi)
    if lo is not None and hi is not None and lo > hi:
        return None
    alts = []
    if lo is None or lo < 0:
        if hi is None or hi >= 0:
            negative = _magnitude(Decimal(0), True, None if lo is None else -lo, False)
        else:
            negative = _magnitude(-hi, False, None if lo is None else -lo, False)
        if negative is not None:
            alts.append("-" + _group(negative))
    if hi is None or hi >= 0:
        positive = _magnitude(
            max(lo, Decimal(0)) if lo is not None else Decimal(0), False, hi, False
        )
        if positive is not None:
            alts.append(positive)
    return _alt(alts)


# ----------------------------------------------------------------------------- formats


def _words_except(words: Iterable[str], low: int, high: int) -> str:
    """Regex for ``[a-z]{low,high}`` minus the given lowercase words."""
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = True

    def emit(node: dict[str, Any], depth: int) -> str | None:
        alts = []
        if low <= depth <= high and "" not in node:
            alts.append("")
        if depth < high:
            children = sorted(k for k in node if k)
            others = minus(from_chars("abcdefghijklmnopqrstuvwxyz"), from_chars("".join(children)))
            cls = _class(others)
            if cls is not None:
                alts.append(cls + _repeat("[a-z]", max(0, low - depth - 1), high - depth - 1))
            for child in children:
                sub = emit(node[child], depth + 1)
                if sub is not None:
                    alts.append(child + sub)
        return _alt(alts)

    return emit(tree, 0) or ""


_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_DATE = (
    f"(?:{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    f"|{_LEAP_YEAR}-02-29)"
)
_TIME = (
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"
    "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
_N = "[0-9]{1,4}"
_DURATION = (
    f"P(?:(?:{_N}D|{_N}M(?:{_N}D)?|{_N}Y(?:{_N}M(?:{_N}D)?)?)"
    f"(?:T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S))?"
    f"|T(?:{_N}H(?:{_N}M(?:{_N}S)?)?|{_N}M(?:{_N}S)?|{_N}S)|{_N}W)"
)
_LOCAL_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?"


def _ordered_parts(parts: Sequence[str]) -> str:
    """Regex for a non-empty subsequence of ``parts``, in order."""
    alts = [
        part + "".join(f"(?:{later})?" for later in parts[i + 1 :]) for i, part in enumerate(parts)
    ]
    return _alt(alts) or ""


_DURATION_DATE = _ordered_parts([f"{_N}Y", f"{_N}M", f"{_N}W", f"{_N}D"])
_DURATION_TIME = _ordered_parts([f"{_N}H", f"{_N}M", rf"{_N}(?:\.[0-9]{{1,6}})?S"])
_PYDANTIC_DURATION = f"-?P(?:{_DURATION_DATE}(?:T{_DURATION_TIME})?|T{_DURATION_TIME})"

PYDANTIC_FORMS: dict[str, str] = {
    "date-time": f"{_DATE}T{_LOCAL_TIME}{_TIME[len(_LOCAL_TIME) :]}?",
    "naive-date-time": f"{_DATE}T{_LOCAL_TIME}",
    "time": f"{_LOCAL_TIME}{_TIME[len(_LOCAL_TIME) :]}?",
    "naive-time": _LOCAL_TIME,
    "duration": _PYDANTIC_DURATION,
}
"""Regexes for the forms Pydantic writes and reads where they differ from the JSON Schema
formats: ``datetime``/``time`` without an offset (naive values), ``timedelta`` with a sign,
weeks next to days and fractional seconds (``-P1D``, ``PT1.5S``, ``P1Y35DT0.000001S``).

:func:`formcast.schema.load_schema` puts them, anchored, into the ``pattern`` of the schema
it generates for a Pydantic model; ``specification`` mode never sees them."""

_UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


def _uuid_version(version: int) -> str:
    hex_ = "[0-9a-fA-F]"
    return f"{hex_}{{8}}-{hex_}{{4}}-{version}{hex_}{{3}}-[89abAB]{hex_}{{3}}-{hex_}{{12}}"


_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_H16 = "[0-9a-fA-F]{1,4}"


def _ipv6() -> str:
    alts = [f"(?:{_H16}:){{7}}{_H16}"]
    # "::" compression with i groups before and j after, i + j <= 7
    for before in range(0, 8):
        for after in range(0, 8 - before):
            head = (
                ""
                if before == 0
                else f"{_H16}" + ("" if before == 1 else f"(?::{_H16}){{{before - 1}}}")
            )
            tail = (
                ""
                if after == 0
                else f"{_H16}" + ("" if after == 1 else f"(?::{_H16}){{{after - 1}}}")
            )
            alts.append(f"{head}::{tail}")
    return _alt(alts) or ""


_LABEL = "[a-zA-Z0-9]{1,20}(?:-[a-zA-Z0-9]{1,20})?"
_HOSTNAME = rf"{_LABEL}(?:\.{_LABEL}){{0,3}}"
_DOMAIN_LABEL = "[a-z0-9]{1,16}(?:-[a-z0-9]{1,16})?"
# email-validator refuses these special-use top-level domains
_TLD = _words_except(["arpa", "local", "onion", "test"], 2, 6)
_DOMAIN = rf"{_DOMAIN_LABEL}\.(?:{_DOMAIN_LABEL}\.)?{_TLD}"
_EMAIL_WORD = "[A-Za-z0-9_+-]{1,24}"
_EMAIL = rf"{_EMAIL_WORD}(?:\.{_EMAIL_WORD})?@{_DOMAIN}"
# URLs: an RFC 3986 subset that Pydantic's URL types (the WHATWG parser) also accept. Host
# labels never hold "--" (no "xn--" punycode) and the last starts with a letter (never
# read as an IPv4 number); "file" URLs (no user or port) are written as file:///path.
_URL_TOP_LABEL = "[a-z][a-z0-9]{0,15}(?:-[a-z0-9]{1,16})?"
_URL_USER = "[A-Za-z0-9._~-]{1,16}(?::[A-Za-z0-9._~-]{1,16})?@"
_URL_AUTHORITY = (
    rf"(?:{_URL_USER})?(?:{_DOMAIN_LABEL}\.){{0,4}}{_URL_TOP_LABEL}(?::[1-9][0-9]{{0,3}})?"
)
_URL_PCHAR = "[A-Za-z0-9._~!$&'()*+,;=:@-]"
_URL_PATH = rf"(?:/{_URL_PCHAR}{{0,20}}){{0,6}}"
_URL_TAIL = rf"(?:\?(?:{_URL_PCHAR}|[/?]){{0,40}})?(?:#(?:{_URL_PCHAR}|[/?]){{0,40}})?"


def _url_regex(schemes: Sequence[str] | None) -> str:
    """Regex for absolute URLs ``scheme://[user[:password]@]host[:port][/path][?query][#fragment]``
    with one of ``schemes`` (lowercase; ``None``: any scheme of 2 to 10 letters)."""
    others = [s for s in schemes or () if s != "file"]
    scheme = (
        _words_except(["file"], 2, 10) if schemes is None else _alt(map(escape_literal, others))
    )
    alts = [] if scheme is None else [f"{_group(scheme)}://{_URL_AUTHORITY}{_URL_PATH}{_URL_TAIL}"]
    if schemes is None or "file" in schemes:
        alts.append(rf"file://(?:/{_URL_PCHAR}{{0,20}}){{1,6}}{_URL_TAIL}")
    return _alt(alts) or ""


_URI = _url_regex(None)

_PCT = "%[0-9A-Fa-f]{2}"
_URI_CHARS = "A-Za-z0-9._~!$&'()*+,;="  # unreserved and sub-delims (RFC 3986)
_PCHAR = f"(?:[{_URI_CHARS}:@-]|{_PCT})"
_URI_HOST = rf"(?:\[(?:{_ipv6()}|v[0-9A-Fa-f]+\.[{_URI_CHARS}:-]+)\]|(?:[{_URI_CHARS}-]|{_PCT})*)"
_URI_AUTHORITY = rf"(?:(?:[{_URI_CHARS}:-]|{_PCT})*@)?{_URI_HOST}(?::[0-9]*)?"
_URI_TAIL = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_URI_PATHS = rf"//{_URI_AUTHORITY}(?:/{_PCHAR}*)*|/?(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
_URI_RFC = rf"[A-Za-z][A-Za-z0-9+.-]*:(?:{_URI_PATHS}){_URI_TAIL}"
_URI_RELATIVE = (
    rf"(?://{_URI_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
    rf"|(?:(?:[{_URI_CHARS}@-]|{_PCT})+(?:/{_PCHAR}*)*)?){_URI_TAIL}"
)

_SPEC_STRING_FORMATS: dict[str, str] = {
    "uri": _URI_RFC,
    "iri": _URI_RFC,
    "uri-reference": f"(?:{_URI_RFC}|{_URI_RELATIVE})",
    "iri-reference": f"(?:{_URI_RFC}|{_URI_RELATIVE})",
}
"""Exact RFC 3986 grammars, used in ``specification`` mode in place of the conservative
``uri`` (IRIs and IRI references get the ASCII subset: every URI is an IRI).

Unbounded in length: with ``maxLength`` the conservative regex is used instead."""

_STRING_FORMATS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": f"{_DATE}T{_TIME}",
    "duration": _DURATION,
    "uuid": _UUID,
    **{f"uuid{v}": _uuid_version(v) for v in (1, 3, 4, 5)},
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _ipv6(),
    "ipvanyaddress": f"(?:{_IPV4}|{_ipv6()})",
    "uri": _URI,
}
"""Regexes (over the decoded string; plain characters only) for the supported formats.

Each is conservative: what it matches passes jsonschema's format checker and the matching
Pydantic type (``date``, ``time``, ``datetime``, ``timedelta``, ``UUID``/``UUIDn``,
``EmailStr`` with email-validator, ``IPv4Address``/``IPv6Address``, ``AnyUrl``).
"""

_FREE_STRING_FORMATS = frozenset({"binary", "password", "path"})
"""Formats Pydantic emits that accept any string (``bytes``, ``SecretStr``, ``Path``)."""

_INTEGER_FORMATS: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
"""OpenAPI integer formats, enforced as ranges on integers (they do not constrain strings)."""

_NUMBER_FORMATS = frozenset({"float", "double", "decimal"})


@cache
def _format_length_of(regex: str) -> tuple[int, float]:
    return _length_range(_PatternParser(regex).parse())


def _format_length(name: str) -> tuple[int, float]:
    return _format_length_of(_STRING_FORMATS[name])


# ----------------------------------------------------------------------------- translator

_OBJECT_KEYWORDS = frozenset(
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
_ARRAY_KEYWORDS = frozenset(
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
_STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format"})
_NUMBER_KEYWORDS = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
)
_GENERIC_KEYWORDS = frozenset(
    {"type", "enum", "const", "nullable", "allOf", "anyOf", "oneOf", "not", "$ref"}
    | {"if", "then", "else"}
)
_VALIDATION_KEYWORDS = (
    _OBJECT_KEYWORDS | _ARRAY_KEYWORDS | _STRING_KEYWORDS | _NUMBER_KEYWORDS | _GENERIC_KEYWORDS
)
_REFUSED_KEYWORDS = {
    "$dynamicRef": "dynamic references are not supported",
    "$recursiveRef": "dynamic references are not supported",
    "disallow": "draft 3 keyword",
    "extends": "draft 3 keyword",
    "divisibleBy": "draft 3 keyword",
}
_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "string", "integer", "number"})
_MAX_CONDITIONAL_DEPENDENCIES = 6


@dataclass(frozen=True)
class _Never:
    """The empty language, with the keyword and pointer that made it empty."""

    keyword: str
    pointer: str
    reason: str


_Result = str | _Never


class _TooLarge(Exception):
    """Raised as soon as a partial regex exceeds ``MAX_REGEX_LENGTH`` (or the work budget:
    ``final``, since unrolling recursion less would not help)."""

    def __init__(self, keyword: str, pointer: str, reason: str, final: bool = False) -> None:
        super().__init__(keyword, pointer, reason)
        self.keyword = keyword
        self.pointer = pointer
        self.reason = reason
        self.final = final


def _blamed_disjunction(parts: Sequence[_Part]) -> tuple[str, str]:
    """The innermost ``anyOf``/``oneOf`` (keyword, pointer) that ``parts`` come from."""
    best = ("anyOf", parts[0].pointer if parts else "")
    deepest = -1
    for part in parts:
        for keyword in ("anyOf", "oneOf"):
            at = part.pointer.rfind(f"/{keyword}/")
            if at > deepest:
                deepest, best = at, (keyword, part.pointer[:at])
    return best


def _main_keyword(parts: Sequence[_Part]) -> str:
    """The keyword to blame when the translation of ``parts`` grows too large."""
    schema = parts[0].schema if parts else {}
    if isinstance(schema, dict):
        for keyword in ("anyOf", "oneOf", "properties", "items", "$ref"):
            if keyword in schema:
                return keyword
    return "$ref"


_MAX_SUBSCHEMAS = 12_000
"""Most sub-schema translations one schema may take (nested ``anyOf``/``oneOf`` distribute
over each other and over ``allOf``, which can grow exponentially); beyond it the schema is
refused in a few seconds instead of running for minutes."""


@dataclass(frozen=True)
class _Part:
    """One conjunct of the schema for a value.

    ``synthetic`` parts were built by the translator (negations, dependencies); the others
    are the schema at ``pointer``, possibly with keywords removed that other parts of the
    same conjunction re-express.
    """

    schema: Any
    pointer: str
    synthetic: bool = False


def _has_validation(schema: Mapping[str, Any]) -> bool:
    return any(
        k in _VALIDATION_KEYWORDS or k in _REFUSED_KEYWORDS or k == FROM_TEXT_KEYWORD
        for k in schema
    )


#: Keywords a value copied from the text cannot have (its values come from the text only).
_NOT_FROM_TEXT = frozenset({"enum", "const", "pattern", "format", "not"})
_TEXT_BOUND_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def _keywords_in(flat: Sequence[_Part], keywords: frozenset[str]) -> bool:
    return any(keyword in part.schema for part in flat for keyword in keywords)


def _text_bounds(flat: Sequence[_Part]) -> tuple[tuple[str, str], ...]:
    """The numeric keywords of a number copied from the text, as exact decimal strings."""
    bounds: list[tuple[str, str]] = []
    for part in flat:
        for keyword in _TEXT_BOUND_KEYWORDS:
            value = part.schema.get(keyword)
            if value is None:
                continue
            if not _is_number(value):
                raise UnsupportedSchemaError(
                    keyword, part.pointer, f"expected a number with {FROM_TEXT_KEYWORD}"
                )
            bounds.append((keyword, str(Decimal(str(value)))))
    return tuple(bounds)


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _canonical(value: Any) -> str:
    """A key equal for JSON-equal values: ``1`` and ``1.0`` meet, ``true`` and ``1`` do not."""

    def normal(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [normal(x) for x in v]
        if isinstance(v, dict):
            return {k: normal(x) for k, x in v.items()}
        return v

    return json.dumps(normal(value), sort_keys=True, separators=(",", ":"))


_SIMPLE_KEYWORDS = frozenset({"type", "enum", "const"}) | ANNOTATION_KEYWORDS


def _simple_check(
    value: Any, schema: Any, enum_keys: Callable[[list[Any]], frozenset[str]]
) -> bool | None:
    """Whether ``value`` satisfies ``schema`` when the schema has only type/enum/const
    (and annotations); ``None`` when it has anything else and needs a full validator."""
    if not isinstance(schema, Mapping) or not schema.keys() <= _SIMPLE_KEYWORDS:
        return None
    kind = schema.get("type")
    if kind is not None:
        kinds = {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else None
        if kinds is None:
            return None
        actual = _json_type(value)
        if actual not in kinds and not (actual == "integer" and "number" in kinds):
            return False
    if "const" in schema and _canonical(schema["const"]) != _canonical(value):
        return False
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list):
            return None
        if _canonical(value) not in enum_keys(values):
            return False
    return True


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _dumps(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def _except(alphabet: Ranges, words: Iterable[str], low: int, high: int | None) -> str | None:
    """Regex for strings over ``alphabet`` of length ``low..high`` that are not in ``words``.

    Memoised: a schema reached through many references asks for the same names often."""
    return _except_cached(alphabet, tuple(sorted(set(words))), low, high)


@functools.lru_cache(maxsize=1024)
def _class_without(alphabet: Ranges, excluded: str) -> str | None:
    """``_class`` of ``alphabet`` minus the characters of ``excluded`` (memoised)."""
    return _class(minus(alphabet, from_chars(excluded)))


@functools.lru_cache(maxsize=256)
def _except_cached(
    alphabet: Ranges, words: tuple[str, ...], low: int, high: int | None
) -> str | None:
    tree: dict[str, Any] = {}
    for word in words:
        if not all(contains(alphabet, ord(c)) for c in word):
            continue
        if high is not None and len(word) > high:
            continue
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = True
    any_char = _class(alphabet)
    if any_char is None:
        return "" if low == 0 and "" not in tree else None

    def emit(node: dict[str, Any], depth: int) -> str | None:
        alts = []
        if depth >= low and "" not in node:
            alts.append("")
        if high is None or depth < high:
            children = [k for k in node if k]
            others = _class_without(alphabet, "".join(sorted(children)))
            if others is not None:
                rest_high = None if high is None else high - depth - 1
                alts.append(others + _repeat(any_char, max(0, low - depth - 1), rest_high))
            for child in children:
                sub = emit(node[child], depth + 1)
                if sub is not None:
                    alts.append(_lit_char(child) + sub)
        return _alt(alts)

    return emit(tree, 0)


_PLAIN = minus(complement(JSON_SPECIAL), _SURROGATES)


@functools.lru_cache(maxsize=4096)
def _regex_disjoint(a: str, b: str) -> bool:
    """True when the two regexes provably match no common string."""
    try:
        import interegular
        from interegular.fsm import Alphabet
        from interegular.patterns import REFlags

        pa, pb = interegular.parse_pattern(a), interegular.parse_pattern(b)
        flags = REFlags(0)
        alphabet = Alphabet.union(pa.get_alphabet(flags), pb.get_alphabet(flags))[0]
        return bool(pa.to_fsm(alphabet).isdisjoint(pb.to_fsm(alphabet)))
    except Exception:
        return False


def _key_regex(name: str) -> str:
    return escape_literal(_dumps(name))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_value_exclusion(schema: Any) -> bool:
    return (
        isinstance(schema, dict)
        and bool(schema)
        and all(k in ("enum", "const") or k in ANNOTATION_KEYWORDS for k in schema)
        and ("enum" in schema or "const" in schema)
    )


_INTERVAL_KEYWORDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "string": (("minLength",), ("maxLength",)),
    "array": (("minItems",), ("maxItems",)),
    "integer": (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")),
    "number": (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")),
}
"""Per JSON type, the keywords bounding a value from below and from above."""


def _interval(
    flat: Sequence[_Part], lows: tuple[str, ...], highs: tuple[str, ...]
) -> tuple[float, float]:
    """A closed interval holding every length/count/value the conjunction allows.

    Exclusive bounds count as inclusive and non-numeric ones (draft 4 booleans) are
    ignored: the interval may only be too wide, so disjoint intervals prove disjointness.
    """
    low, high = -math.inf, math.inf
    for part in flat:
        schema = part.schema
        for keyword in lows:
            value = schema.get(keyword)
            if _is_number(value):
                low = max(low, value)
        for keyword in highs:
            value = schema.get(keyword)
            if _is_number(value):
                high = min(high, value)
    return low, high


class _Translator:
    """Walks one schema document and builds the regex; one instance per call."""

    def __init__(
        self,
        root: Any,
        mode: Mode,
        whitespace: int,
        max_depth: int,
        any_depth: int = 1,
        share_long: bool = True,
        from_text: FromText | None = None,
    ) -> None:
        """``any_depth``: nesting of unconstrained values; ``share_long``: whether long
        sub-schema regexes become definitions (without it, regexes past
        :data:`_UNSHARED_LIMIT` characters raise :class:`_TooLarge`); ``from_text``:
        the options applied to every plain string value without its own keyword."""
        self.root = root
        self.from_text = from_text
        self.text_kinds: list[TextSlot] = []
        self.any_depth = any_depth
        self.share_long = share_long
        self.limit = MAX_REGEX_LENGTH if share_long else _UNSHARED_LIMIT
        # definitions: body -> name, in the order made (a body calls earlier ones only)
        self.definitions: dict[str, str] = {}
        self.defined_length = 0
        self.sharing = True
        self._translated: dict[Any, tuple[bool, str, list[_Part]]] = {}
        self.expanded: dict[str, int] = {}  # definition name -> length with calls inlined
        self.mode = mode
        self.max_depth = max_depth
        self.refs = References(root)
        self.ws = f"[ \\n\\t]{{0,{whitespace}}}" if whitespace else ""
        self.sep = f"{self.ws},{self.ws}"
        self.colon = f"{self.ws}:{self.ws}"
        cls = validator_class(root)
        self.validator = cls(root, format_checker=cls.FORMAT_CHECKER)
        self.plain_strings = False
        self.recursive = False
        self.branches = 0
        self.subschemas = 0
        self._any: dict[int, str] = {}
        self._pattern_cache: dict[tuple[str, bool], str | None] = {}
        self._enum_keys: dict[int, tuple[list[Any], frozenset[str]]] = {}

    # ------------------------------------------------------------------ helpers

    def refuse(self, keyword: str, pointer: str, reason: str) -> UnsupportedSchemaError:
        return UnsupportedSchemaError(keyword, pointer, reason)

    def enum_keys(self, values: list[Any]) -> frozenset[str]:
        """Canonical keys of an ``enum`` list, computed once per list."""
        known = self._enum_keys.get(id(values))
        if known is None or known[0] is not values:
            known = (values, frozenset(_canonical(v) for v in values))
            self._enum_keys[id(values)] = known
        return known[1]

    def valid(self, value: Any, parts: Sequence[_Part]) -> bool:
        """Exact check, with jsonschema, that ``value`` satisfies every part.

        Parts made only of ``type``/``enum``/``const`` (and annotations) are checked
        directly, so a 10,000-value enum costs milliseconds, not a validator call per value.
        """
        for part in parts:
            if part.schema is True:
                continue
            simple = _simple_check(value, part.schema, self.enum_keys)
            if simple is not None:
                if not simple:
                    return False
                continue
            attempts: list[Any] = [part.schema]
            if not part.synthetic and part.schema is not False:
                # the full schema at the pointer (resolves references in nested resources)
                attempts.insert(0, {"$ref": "#" + _quote_pointer(part.pointer)})
            for index, schema in enumerate(attempts):
                try:
                    ok = self.validator.evolve(schema=schema).is_valid(value)
                    break
                except Exception as error:
                    if index == len(attempts) - 1:
                        raise self.refuse(
                            "enum", part.pointer, f"cannot check values against the schema: {error}"
                        ) from None
            if not ok:
                return False
        return True

    def bounded_pattern(self, pattern: str, low: int, high: int | None) -> str | None:
        """String contents matching ``pattern`` with ``low..high`` characters, for patterns
        a length cannot simply be fitted to: the pattern's character DFA times a counter,
        one definition per live (state, characters read) pair, each calling the pairs one
        character on. ``None`` without ``high`` (the counter would loop) or past the size
        limits (:data:`_MAX_PATTERN_DFA`, :data:`_MAX_LENGTH_PRODUCT`, and the inlined
        length of the definitions, which doubles per character where the DFA branches into
        two live states that do not merge)."""
        if high is None:
            return self.long_pattern(pattern, low)
        if not self.sharing:
            return None
        built = _pattern_dfa(_pattern_union(pattern))
        if built is None or len(built[0]) * (high + 1) > _MAX_LENGTH_PRODUCT:
            return None
        moves, accepting = built
        calls: dict[tuple[int, int], str] = {}  # live (state, read) -> its regex
        for read in range(high, -1, -1):
            for state, row in enumerate(moves):
                options = []
                if accepting[state] and read >= low:
                    options.append("")
                for ranges, target in row if read < high else []:
                    after = calls.get((target, read + 1))
                    if after is None:
                        continue
                    char = _encoded_set(ranges, self.plain_strings)
                    if char is not None:
                        options.append(char + after)
                if options:
                    body = _alt(options) or ""
                    try:
                        calls[(state, read)] = self.share(body, force=bool(body))
                    except _TooLarge:  # calls copy their callees: branching DFAs expand
                        return None  # exponentially with the length
        return calls.get((0, 0))

    def long_pattern(self, pattern: str, low: int) -> str | None:
        """String contents matching ``pattern`` with at least ``low`` characters: the
        pattern's DFA crossed with a counter that stops at ``low``, turned back into a
        regex by state elimination (``None`` past its size limits, or when no string
        matches: both are refused by the caller)."""
        built = _pattern_dfa(_pattern_union(pattern))
        if built is None or len(built[0]) * (low + 1) > _MAX_ELIMINATED_STATES:
            return None
        moves, accepting = built
        width = low + 1
        counted = [
            [(ranges, target * width + min(read + 1, low)) for ranges, target in moves[q]]
            for q in range(len(moves))
            for read in range(width)
        ]
        final = [accepting[q] and read >= low for q in range(len(moves)) for read in range(width)]
        try:
            return _dfa_regex(counted, final, self.plain_strings)
        except _DfaTooLarge:
            return None

    def any_value(self, depth: int) -> str:
        """Any JSON value nesting at most ``depth`` arrays/objects (a call to a definition
        per level, each calling the level below)."""
        if depth not in self._any:
            deep = self.any_depth > 1
            scalar = _alt([STRING, NUMBER, "true", "false", NULL]) or ""
            if depth == 0:
                self._any[0] = self.share(scalar, force=deep)
                return self._any[0]
            inner = self.any_value(depth - 1)
            array = rf"\[{self.ws}(?:{inner}(?:{self.sep}{inner})*{self.ws})?\]"
            member = f"{self.share(STRING, force=deep)}{self.colon}{inner}"
            obj = rf"\{{{self.ws}(?:{member}(?:{self.sep}{member})*{self.ws})?\}}"
            alternatives = [self.share(scalar, force=deep), array, obj]
            self._any[depth] = self.share(_alt(alternatives) or "", force=deep)
        return self._any[depth]

    def share(
        self,
        regex: str,
        force: bool = False,
        min_length: int = SHARE_MIN_LENGTH,
        where: tuple[str, str] = ("$ref", ""),
    ) -> str:
        """``(?&name)`` calling a definition of ``regex`` (made once per distinct text),
        for regexes of at least ``min_length`` characters (any, with ``force``);
        ``regex`` itself while sharing is off (regexes that ``re`` must read).

        Raises _TooLarge, blaming ``where`` (keyword, pointer), when the definition's
        inlined length would pass :data:`_MAX_EXPANDED_LENGTH`."""
        if not self.sharing or (not force and (len(regex) < min_length or not self.share_long)):
            return regex
        name = self.definitions.get(regex)
        if name is None:
            expanded = len(regex) + sum(self.expanded[c] for c in _calls(regex))
            if expanded > _MAX_EXPANDED_LENGTH:
                raise _TooLarge(
                    *where,
                    f"the regex would expand to more than {_MAX_EXPANDED_LENGTH:.2e} characters",
                )
            name = self.definitions[regex] = f"d{len(self.definitions)}"
            self.expanded[name] = expanded
            self.defined_length += len(regex)
        return f"(?&{name})"

    def with_definitions(self, main: str) -> str:
        """``main`` preceded by the definitions it calls, directly or through others, and
        followed by the table of its text slots, if any."""
        if self.text_kinds:
            main += slot_table_comment(self.text_kinds)
        bodies = {name: body for body, name in self.definitions.items()}
        used: set[str] = set()
        pending = _calls(main)
        while pending:
            name = pending.pop()
            if name not in used and name in bodies:
                used.add(name)
                pending.extend(_calls(bodies[name]))
        if not used:
            return main
        defined = "".join(
            f"(?P<{name}>{body})" for body, name in self.definitions.items() if name in used
        )
        return f"(?(DEFINE){defined}){main}"

    def literal(self, value: Any) -> str:
        return escape_literal(_dumps(value))

    def pattern_for_key(self, pattern: str, pointer: str, keyword: str) -> str | None:
        """Regex for a JSON string token (with quotes) whose value matches ``pattern``."""
        key = (pattern, True)
        if key not in self._pattern_cache:
            try:
                body, _ = _pattern_regex(pattern, 0, None, plain=True)
            except _PatternUnsupported as error:
                raise self.refuse(keyword, pointer, f"cannot translate pattern: {error}") from None
            self._pattern_cache[key] = None if body is None else f'"{body}"'
        return self._pattern_cache[key]

    def key_matches(self, pattern: str, name: str, pointer: str) -> bool:
        regex = self.pattern_for_key(pattern, pointer, "patternProperties")
        return regex is not None and re.fullmatch(regex, _dumps(name)) is not None

    # ------------------------------------------------------------------ entry

    def gen(self, parts: list[_Part], refs: tuple[str, ...]) -> _Result:
        """Regex for a value satisfying every part (a conjunction)."""
        self.subschemas += 1
        if self.subschemas > _MAX_SUBSCHEMAS:
            raise _TooLarge(
                *_blamed_disjunction(parts),
                f"the schema expands into more than {_MAX_SUBSCHEMAS} sub-schemas (anyOf/oneOf "
                "distributed over each other and over allOf)",
                final=True,
            )
        result = self._gen(parts, refs)
        if isinstance(result, str):
            if len(result) + self.defined_length > self.limit:
                raise _TooLarge(
                    _main_keyword(parts),
                    parts[0].pointer if parts else "",
                    f"the regex would exceed MAX_REGEX_LENGTH={MAX_REGEX_LENGTH} characters",
                )
            where = (_main_keyword(parts), parts[0].pointer if parts else "")
            return self.share(result, where=where)
        return result

    def _gen(self, parts: list[_Part], refs: tuple[str, ...]) -> _Result:
        flat, refs, never = self.flatten(parts, refs)
        if never is not None:
            return never
        # A definition reached through many $refs is translated once per recursion
        # context. The key holds schema ids: the entry keeps those schemas alive.
        key = (tuple((id(p.schema), p.synthetic) for p in flat), refs, self.plain_strings)
        known = self._translated.get(key)
        if known is not None and known[0] == self.sharing:
            return known[1]
        result = self._gen_flat(flat, refs)
        if isinstance(result, str):
            self._translated[key] = (self.sharing, result, flat)
        return result

    def _gen_flat(self, flat: list[_Part], refs: tuple[str, ...]) -> _Result:
        rewritten = self.rewrite(flat)
        if rewritten is not None:
            return self.gen(rewritten, refs)
        for index, part in enumerate(flat):
            for keyword in ("anyOf", "oneOf"):
                if keyword in part.schema:
                    return self.disjunction(flat, index, keyword, refs)
        return self.conjunction(flat, refs)

    def flatten(
        self, parts: list[_Part], refs: tuple[str, ...]
    ) -> tuple[list[_Part], tuple[str, ...], _Never | None]:
        """Expand ``$ref`` and ``allOf`` into a flat list of object schemas."""
        out: list[_Part] = []
        queue = list(parts)
        while queue:
            part = queue.pop(0)
            schema = part.schema
            if schema is True:
                continue
            if schema is False:
                return [], refs, _Never("false", part.pointer, "the schema false allows no value")
            if not isinstance(schema, dict):
                raise SchemaError(
                    f"expected a schema (object or boolean) at {part.pointer or '/'}, found "
                    f"{type(schema).__name__}"
                )
            for keyword, reason in _REFUSED_KEYWORDS.items():
                if keyword in schema:
                    raise self.refuse(keyword, part.pointer, reason)
            expanded: list[_Part] = []
            if "$ref" in schema:
                ref = schema["$ref"]
                if not isinstance(ref, str):
                    raise SchemaError(f"expected a string $ref at {part.pointer or '/'}")
                target, target_pointer = self.refs.resolve(ref, part.pointer)
                if target_pointer in refs:
                    self.recursive = True
                if refs.count(target_pointer) > self.max_depth:
                    return (
                        [],
                        refs,
                        _Never(
                            "$ref",
                            part.pointer,
                            f"recursion deeper than max_recursion_depth={self.max_depth}",
                        ),
                    )
                refs = (*refs, target_pointer)
                expanded.append(_Part(target, target_pointer))
            if "allOf" in schema:
                subs = schema["allOf"]
                if not isinstance(subs, list):
                    raise SchemaError(f"expected a list for allOf at {part.pointer or '/'}")
                for i, sub in enumerate(subs):
                    expanded.append(
                        _Part(sub, join_pointer(part.pointer, "allOf", i), part.synthetic)
                    )
            if expanded:
                rest = {k: v for k, v in schema.items() if k not in ("$ref", "allOf")}
                if _has_validation(rest):
                    expanded.append(_Part(rest, part.pointer, part.synthetic))
                queue[0:0] = expanded
                continue
            if _has_validation(schema):
                out.append(part)
        return out, refs, None

    # ------------------------------------------------------------------ rewrites

    def rewrite(self, flat: list[_Part]) -> list[_Part] | None:
        """Rewrite ``not``, dependencies and ``if`` into plain conjunctions/disjunctions."""
        for index, part in enumerate(flat):
            schema = part.schema
            pointer = part.pointer
            replaced: list[_Part] | None = None
            if "if" in schema or "then" in schema or "else" in schema:
                rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
                replaced = [_Part(rest, pointer, part.synthetic)]
                if "if" in schema and ("then" in schema or "else" in schema):
                    # (if and then) or (not if and else): two disjoint branches
                    condition = schema["if"]
                    try:
                        negated = self.negate(condition, join_pointer(pointer, "if"), 0)
                    except UnsupportedSchemaError as error:
                        raise self.refuse(
                            "if", pointer, f"cannot negate the condition ({error.reason})"
                        ) from None
                    branches = [
                        {"allOf": [condition, schema.get("then", True)]},
                        {"allOf": [negated, schema.get("else", True)]},
                    ]
                    replaced.append(_Part({"anyOf": branches}, pointer, True))
            elif "not" in schema and not _is_value_exclusion(schema["not"]):
                rest = {k: v for k, v in schema.items() if k != "not"}
                negated = self.negate(schema["not"], join_pointer(pointer, "not"), 0)
                replaced = [
                    _Part(rest, pointer, part.synthetic),
                    _Part(negated, join_pointer(pointer, "not"), True),
                ]
            elif any(
                k in schema for k in ("dependentRequired", "dependentSchemas", "dependencies")
            ):
                replaced = self.rewrite_dependencies(flat, part)
            if replaced is not None:
                return flat[:index] + replaced + flat[index + 1 :]
        return None

    def rewrite_dependencies(self, flat: list[_Part], part: _Part) -> list[_Part]:
        schema = part.schema
        required: set[str] = set()
        for other in flat:
            names = other.schema.get("required")
            if isinstance(names, list):
                required.update(n for n in names if isinstance(n, str))
        rest = {
            k: v
            for k, v in schema.items()
            if k not in ("dependentRequired", "dependentSchemas", "dependencies")
        }
        out = [_Part(rest, part.pointer, part.synthetic)]
        conditional = []
        for keyword in ("dependentRequired", "dependentSchemas", "dependencies"):
            table = schema.get(keyword)
            if table is None:
                continue
            if not isinstance(table, dict):
                raise SchemaError(f"expected an object for {keyword} at {part.pointer or '/'}")
            for trigger, value in table.items():
                pointer = join_pointer(part.pointer, keyword, trigger)
                if isinstance(value, list):
                    consequence: Any = {"required": list(value)}
                    consequence_part = _Part(consequence, pointer, True)
                else:
                    consequence = {"allOf": [value]}
                    consequence_part = _Part(value, pointer, part.synthetic)
                if trigger in required:
                    out.append(consequence_part)
                    continue
                conditional.append((keyword, trigger, consequence, pointer))
        if len(conditional) > _MAX_CONDITIONAL_DEPENDENCIES:
            keyword, _, _, pointer = conditional[0]
            raise self.refuse(
                keyword,
                part.pointer,
                f"more than {_MAX_CONDITIONAL_DEPENDENCIES} dependencies on optional properties",
            )
        for _keyword, trigger, consequence, pointer in conditional:
            branches = [
                {"properties": {trigger: False}},
                {"required": [trigger], "allOf": [consequence]},
            ]
            out.append(_Part({"anyOf": branches}, pointer, True))
        return out

    def negate(self, schema: Any, pointer: str, depth: int) -> Any:
        """A schema (synthetic) equivalent to ``{"not": schema}``, or refuse."""
        if depth > 8:
            raise self.refuse("not", pointer, "negation nested too deeply")
        if schema is True:
            return False
        if schema is False:
            return True
        if not isinstance(schema, dict):
            raise SchemaError(f"expected a schema at {pointer or '/'}")
        keys = [k for k in schema if k in _VALIDATION_KEYWORDS or k in _REFUSED_KEYWORDS]
        if not keys:
            return False
        if keys == ["$ref"]:
            target, target_pointer = self.refs.resolve(schema["$ref"], pointer)
            return self.negate(target, target_pointer, depth + 1)
        groups = _negation_groups(schema, keys)
        if len(groups) > 1:
            return {"anyOf": [self.negate_group(schema, g, pointer, depth) for g in groups]}
        return self.negate_group(schema, groups[0], pointer, depth)

    def negate_group(
        self, schema: dict[str, Any], keys: list[str], pointer: str, depth: int
    ) -> Any:
        first = keys[0]
        if first == "$ref":
            target, target_pointer = self.refs.resolve(schema["$ref"], pointer)
            return self.negate(target, target_pointer, depth + 1)
        if first == "type" or first == "nullable":
            types = schema.get("type", list(_ALL_TYPES))
            named = {types} if isinstance(types, str) else set(types)
            if schema.get("nullable") is True:
                named.add("null")
            if "integer" in named or "number" in named:
                named |= {"integer", "number"}
            return {"type": sorted(_ALL_TYPES - named)}
        if first in ("enum", "const"):
            return {"not": {first: schema[first]}}
        if first == "not":
            return schema["not"]
        if first == "anyOf":
            return {
                "allOf": [
                    self.negate(s, join_pointer(pointer, "anyOf", i), depth + 1)
                    for i, s in enumerate(schema["anyOf"])
                ]
            }
        if first == "allOf":
            return {
                "anyOf": [
                    self.negate(s, join_pointer(pointer, "allOf", i), depth + 1)
                    for i, s in enumerate(schema["allOf"])
                ]
            }
        if first == "required":
            names = schema["required"]
            if not names:
                return False
            return {"type": "object", "anyOf": [{"properties": {n: False}} for n in names]}
        if first == "properties" and keys == ["properties"]:
            branches = []
            for name, sub in schema["properties"].items():
                negated = self.negate(sub, join_pointer(pointer, "properties", name), depth + 1)
                branches.append({"required": [name], "properties": {name: negated}})
            return {"type": "object", "anyOf": branches} if branches else False
        if first == "items" and keys == ["items"] and not isinstance(schema["items"], list):
            negated = self.negate(schema["items"], join_pointer(pointer, "items"), depth + 1)
            return {"type": "array", "contains": negated}
        simple: dict[str, tuple[str, str, int]] = {
            "minLength": ("string", "maxLength", -1),
            "maxLength": ("string", "minLength", 1),
            "minItems": ("array", "maxItems", -1),
            "maxItems": ("array", "minItems", 1),
            "minProperties": ("object", "maxProperties", -1),
            "maxProperties": ("object", "minProperties", 1),
        }
        if first in simple and len(keys) == 1:
            kind, opposite, shift = simple[first]
            bound = schema[first] + shift
            if bound < 0:
                return False
            return {"type": kind, opposite: bound}
        if (
            first in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
            and not any(
                isinstance(schema.get(k), bool) for k in ("exclusiveMinimum", "exclusiveMaximum")
            )
            and len(keys) == 1
        ):
            opposite = {
                "minimum": "exclusiveMaximum",
                "exclusiveMinimum": "maximum",
                "maximum": "exclusiveMinimum",
                "exclusiveMaximum": "minimum",
            }[first]
            return {"type": "number", opposite: schema[first]}
        if first in ("if", "then", "else") and "if" not in keys:
            return False
        raise self.refuse("not", pointer, f"cannot negate {', '.join(keys)}")

    # ------------------------------------------------------------------ disjunctions

    def disjunction(
        self, flat: list[_Part], index: int, keyword: str, refs: tuple[str, ...]
    ) -> _Result:
        part = flat[index]
        branches = part.schema[keyword]
        if not isinstance(branches, list) or not branches:
            raise SchemaError(f"expected a non-empty list for {keyword} at {part.pointer or '/'}")
        rest = _Part(
            {k: v for k, v in part.schema.items() if k != keyword}, part.pointer, part.synthetic
        )
        base = [*flat[:index], rest, *flat[index + 1 :]]
        branch_parts = [
            _Part(b, join_pointer(part.pointer, keyword, i), part.synthetic)
            for i, b in enumerate(branches)
        ]
        extra: list[list[_Part]] = [[] for _ in branches]
        if keyword == "oneOf" and len(branches) > 1:
            # exactly one branch: each branch excludes the others it may overlap with,
            # by a proof of disjointness or else by the negation of the other branch
            for i in range(len(branches)):
                for j in range(i + 1, len(branches)):
                    if self.disjoint([*base, branch_parts[i]], [*base, branch_parts[j]], refs, 0):
                        continue
                    for mine, other in ((i, j), (j, i)):
                        try:
                            negated = self.negate(
                                branch_parts[other].schema, branch_parts[other].pointer, 0
                            )
                        except UnsupportedSchemaError as negation_error:
                            raise self.refuse(
                                "oneOf",
                                part.pointer,
                                f"cannot prove that branches {i} and {j} exclude each other, "
                                f"nor negate branch {other} ({negation_error.reason})",
                            ) from None
                        extra[mine].append(_Part(negated, branch_parts[other].pointer, True))
        results: list[str] = []
        nevers: list[_Never] = []
        failures: list[UnsupportedSchemaError] = []
        for branch, exclusions in zip(branch_parts, extra, strict=False):
            try:
                # the branch's properties come where the branch is declared
                result = self.gen(
                    [*base[: index + 1], branch, *exclusions, *base[index + 1 :]], refs
                )
            except UnsupportedSchemaError as error:
                failures.append(error)
                continue
            if isinstance(result, _Never):
                nevers.append(result)
            else:
                results.append(result)
        if not results:
            if failures:
                raise failures[0]
            recursion = [n for n in nevers if n.keyword == "$ref"]
            return (recursion or nevers)[0]
        for failure in failures:
            warnings.warn(
                f"formcast: dropped a {keyword} branch that cannot be enforced ({failure}); the "
                "output uses the remaining branches",
                UserWarning,
                stacklevel=4,
            )
        return _alt(results) or ""

    def possible_types(self, flat: Sequence[_Part], depth: int = 0) -> set[str]:
        """Over-approximation of the JSON types valid for the conjunction (spec semantics).

        ``number`` here means a non-integer number.
        """
        allowed = set(_ALL_TYPES)
        for part in flat:
            schema = part.schema
            declared = schema.get("type")
            if declared is not None:
                named = {declared} if isinstance(declared, str) else set(declared)
                if schema.get("nullable") is True:
                    named.add("null")
                if "number" in named:
                    named.add("integer")
                allowed &= named
            for keyword in ("const", "enum"):
                if keyword in schema:
                    values = [schema["const"]] if keyword == "const" else schema["enum"]
                    allowed &= {_json_type(v) for v in values}
            for keyword in ("anyOf", "oneOf"):
                if keyword in schema and depth < 4 and isinstance(schema[keyword], list):
                    union: set[str] = set()
                    for i, branch in enumerate(schema[keyword]):
                        try:
                            sub, _, never = self.flatten(
                                [_Part(branch, join_pointer(part.pointer, keyword, i))], ()
                            )
                        except SchemaError:
                            union = set(_ALL_TYPES)
                            break
                        if never is None or never.keyword == "$ref":
                            union |= (
                                self.possible_types(sub, depth + 1)
                                if never is None
                                else set(_ALL_TYPES)
                            )
                    allowed &= union
            negated = schema.get("not")
            if (
                isinstance(negated, dict)
                and set(negated) <= {"type"} | ANNOTATION_KEYWORDS
                and "type" in negated
            ):
                named = (
                    {negated["type"]} if isinstance(negated["type"], str) else set(negated["type"])
                )
                if "number" in named:
                    named.add("integer")
                allowed -= named
        return allowed

    def enum_candidates(self, flat: Sequence[_Part]) -> list[Any] | None:
        for part in flat:
            if "const" in part.schema:
                return [part.schema["const"]]
            if "enum" in part.schema:
                values = part.schema["enum"]
                if not isinstance(values, list):
                    raise SchemaError(f"expected a list for enum at {part.pointer or '/'}")
                return list(values)
        return None

    def required_names(self, flat: Sequence[_Part]) -> list[str]:
        names: list[str] = []
        for part in flat:
            listed = part.schema.get("required")
            if isinstance(listed, list):
                names.extend(n for n in listed if isinstance(n, str) and n not in names)
        return names

    def key_parts(self, flat: Sequence[_Part], name: str) -> list[_Part]:
        """The schemas a property ``name`` must satisfy (spec semantics, no gen defaults)."""
        out: list[_Part] = []
        for part in flat:
            schema = part.schema
            properties = schema.get("properties") or {}
            if not isinstance(properties, dict):
                raise SchemaError(f"expected an object for properties at {part.pointer or '/'}")
            matched = False
            if name in properties:
                out.append(
                    _Part(
                        properties[name],
                        join_pointer(part.pointer, "properties", name),
                        part.synthetic,
                    )
                )
                matched = True
            patterns = schema.get("patternProperties") or {}
            for pattern, sub in patterns.items():
                if self.key_matches(pattern, name, part.pointer):
                    out.append(
                        _Part(
                            sub,
                            join_pointer(part.pointer, "patternProperties", pattern),
                            part.synthetic,
                        )
                    )
                    matched = True
            if not matched:
                for keyword in ("additionalProperties", "unevaluatedProperties"):
                    if keyword in schema:
                        out.append(
                            _Part(
                                schema[keyword], join_pointer(part.pointer, keyword), part.synthetic
                            )
                        )
                        break
        return out

    def disjoint(self, a: list[_Part], b: list[_Part], refs: tuple[str, ...], depth: int) -> bool:
        """True when no JSON value can satisfy both conjunctions (a sound, partial test)."""
        if depth > 6:
            return False
        try:
            fa, _, na = self.flatten(a, refs)
            fb, _, nb = self.flatten(b, refs)
        except SchemaError:
            return False
        for never in (na, nb):
            if never is not None:
                return never.keyword != "$ref"
        try:
            common = self.possible_types(fa) & self.possible_types(fb)
            if not common:
                return True
            for mine, theirs in ((fa, fb), (fb, fa)):
                values = self.enum_candidates(mine)
                if values is not None:
                    return not any(self.valid(v, mine) and self.valid(v, theirs) for v in values)
            return all(self.type_disjoint(kind, fa, fb, refs, depth) for kind in common)
        except SchemaError:
            return False

    def type_disjoint(
        self, kind: str, fa: list[_Part], fb: list[_Part], refs: tuple[str, ...], depth: int
    ) -> bool:
        """True when no value of JSON type ``kind`` satisfies both (sound, partial): their
        length, item-count or numeric intervals do not meet, or a property required by one
        has disjoint schemas on both sides."""
        bounds = _INTERVAL_KEYWORDS.get(kind)
        if bounds is not None:
            (a_lo, a_hi), (b_lo, b_hi) = _interval(fa, *bounds), _interval(fb, *bounds)
            return a_hi < b_lo or b_hi < a_lo
        if kind == "object":
            return any(
                self.disjoint(self.key_parts(fa, name), self.key_parts(fb, name), refs, depth + 1)
                for name in self.required_names(fa) + self.required_names(fb)
            )
        return False

    # ------------------------------------------------------------------ conjunction

    def conjunction(self, flat: list[_Part], refs: tuple[str, ...]) -> _Result:
        if not flat:
            return self.any_value(self.any_depth)
        copied = self.text_value(flat)
        if copied is not None:
            return copied
        excluded: list[Any] = []
        for part in flat:
            negated = part.schema.get("not")
            if negated is not None:
                excluded.extend([negated["const"]] if "const" in negated else negated["enum"])
        candidates = self.enum_candidates(flat)
        if candidates is not None:
            return self.enumeration(flat, candidates)
        types = self.types(flat)
        alts: list[str] = []
        nevers: list[_Never] = []
        first = flat[0].pointer

        def add(result: _Result) -> None:
            if isinstance(result, _Never):
                nevers.append(result)
            else:
                alts.append(result)

        if "null" in types and not any(v is None for v in excluded):
            alts.append(NULL)
        if "boolean" in types:
            for word, value in (("true", True), ("false", False)):
                if not any(v is value for v in excluded):
                    alts.append(word)
        if "integer" in types or "number" in types:
            add(self.numeric(flat, "number" not in types, excluded))
        if "string" in types:
            add(self.string(flat, excluded))
        if "array" in types:
            if any(isinstance(v, list) for v in excluded):
                raise self.refuse("not", first, "cannot exclude array values")
            add(self.array(flat, refs))
        if "object" in types:
            if any(isinstance(v, dict) for v in excluded):
                raise self.refuse("not", first, "cannot exclude object values")
            add(self.object(flat, refs))
        if alts:
            return _alt(alts) or ""
        if nevers:
            recursion = [n for n in nevers if n.keyword == "$ref"]
            return (recursion or nevers)[0]
        return _Never("type", first, "no JSON type satisfies every type keyword")

    def types(self, flat: Sequence[_Part]) -> set[str]:
        allowed = set(_ALL_TYPES)
        explicit = False
        for part in flat:
            declared = part.schema.get("type")
            if declared is None:
                continue
            explicit = True
            named = {declared} if isinstance(declared, str) else set(declared)
            if part.schema.get("nullable") is True:
                named.add("null")
            if "number" in named:
                named.add("integer")
            allowed &= named
        if not explicit and self.mode == "generation":
            families: set[str] = set()
            for part in flat:
                keys = set(part.schema)
                if keys & _OBJECT_KEYWORDS:
                    families.add("object")
                if keys & _ARRAY_KEYWORDS:
                    families.add("array")
                if keys & _STRING_KEYWORDS:
                    families.add("string")
                if keys & _NUMBER_KEYWORDS:
                    families |= {"number", "integer"}
            if families:
                allowed &= families
        return allowed

    def enumeration(self, flat: list[_Part], candidates: list[Any]) -> _Result:
        formats = [
            (p.schema["format"], p.pointer) for p in flat if isinstance(p.schema.get("format"), str)
        ]
        kept: list[Any] = []
        seen: set[str] = set()
        for value in candidates:
            key = _canonical(value)
            if key in seen:
                continue
            seen.add(key)
            if isinstance(value, str) and not self.string_formats_accept(value, formats):
                continue
            if self.valid(value, flat):
                kept.append(value)
        if not kept:
            return _Never("enum", flat[0].pointer, "no enum/const value satisfies every keyword")
        return _alt(self.literal(v) for v in kept) or ""

    def string_formats_accept(self, value: str, formats: list[tuple[str, str]]) -> bool:
        for name, pointer in formats:
            regex = self.format_regex(name, 0, None) or _STRING_FORMATS.get(name)
            if regex is not None:
                if re.fullmatch(regex, value) is None:
                    return False
            elif name in _FREE_STRING_FORMATS and self.mode == "generation":
                continue
            else:
                self.unknown_format(name, pointer)
        return True

    def format_regex(self, name: str, low: int, high: int | None) -> str | None:
        """The exact ``specification``-mode regex of format ``name`` when every string it
        matches has ``low..high`` characters, else ``None`` (use :data:`_STRING_FORMATS`)."""
        regex = _SPEC_STRING_FORMATS.get(name) if self.mode == "specification" else None
        if regex is None:
            return None
        f_low, f_high = _format_length_of(regex)
        if f_low < low or (high is not None and f_high > high):
            return None
        return regex

    def unknown_format(self, name: str, pointer: str) -> None:
        if self.mode == "specification":
            raise self.refuse("format", pointer, f"unknown format {name!r}")
        warnings.warn(
            f"formcast: unknown format {name!r} at {pointer or '/'} is not enforced; any "
            "string is allowed",
            UserWarning,
            stacklevel=5,
        )

    # ------------------------------------------------------------------ numbers

    def numeric(self, flat: list[_Part], integer_only: bool, excluded: list[Any]) -> _Result:
        with localcontext() as context:
            context.prec = 2000  # exact arithmetic on any bound JSON can spell
            return self._numeric(flat, integer_only, excluded)

    def _numeric(self, flat: list[_Part], integer_only: bool, excluded: list[Any]) -> _Result:
        int_lo: int | None = None
        int_hi: int | None = None
        dec_lo: Decimal | None = None
        dec_hi: Decimal | None = None
        multiples: list[int] = []
        bound_pointer = flat[0].pointer
        multiple_pointer = flat[0].pointer
        for part in flat:
            schema = part.schema
            lower = schema.get("minimum")
            upper = schema.get("maximum")
            lower_strict = upper_strict = False
            ex_lower = schema.get("exclusiveMinimum")
            ex_upper = schema.get("exclusiveMaximum")
            bounds: list[tuple[Any, bool, bool]] = []  # (value, is_lower, strict)
            if isinstance(ex_lower, bool):
                lower_strict = ex_lower
            elif ex_lower is not None:
                bounds.append((ex_lower, True, True))
            if isinstance(ex_upper, bool):
                upper_strict = ex_upper
            elif ex_upper is not None:
                bounds.append((ex_upper, False, True))
            if lower is not None:
                bounds.append((lower, True, lower_strict))
            if upper is not None:
                bounds.append((upper, False, upper_strict))
            if integer_only and isinstance(schema.get("format"), str):
                fmt_range = _INTEGER_FORMATS.get(schema["format"])
                if fmt_range is not None:
                    bounds += [(fmt_range[0], True, False), (fmt_range[1], False, False)]
            for value, is_lower, strict in bounds:
                if not _is_number(value) or (isinstance(value, float) and not math.isfinite(value)):
                    raise SchemaError(f"expected a number bound at {part.pointer or '/'}")
                bound_pointer = part.pointer
                exact = Decimal(value)
                if is_lower:
                    int_value = (
                        int(exact.to_integral_value(ROUND_FLOOR)) + 1
                        if strict
                        else int(exact.to_integral_value(ROUND_CEILING))
                    )
                    int_lo = int_value if int_lo is None else max(int_lo, int_value)
                    dec = _above(value) if strict else _at_least(value)
                    dec_lo = dec if dec_lo is None else max(dec_lo, dec)
                else:
                    int_value = (
                        int(exact.to_integral_value(ROUND_CEILING)) - 1
                        if strict
                        else int(exact.to_integral_value(ROUND_FLOOR))
                    )
                    int_hi = int_value if int_hi is None else min(int_hi, int_value)
                    dec = _below(value) if strict else _at_most(value)
                    dec_hi = dec if dec_hi is None else min(dec_hi, dec)
            if "multipleOf" in schema:
                step = schema["multipleOf"]
                multiple_pointer = part.pointer
                if not _is_number(step) or step <= 0:
                    raise SchemaError(f"expected a positive multipleOf at {part.pointer or '/'}")
                if isinstance(step, float) and not step.is_integer():
                    raise self.refuse(
                        "multipleOf",
                        part.pointer,
                        "only whole-number multipleOf values can be enforced",
                    )
                multiples.append(int(step))
        # keep at most _FRACTION_DIGITS decimals (rounding inwards: a restriction, still sound)
        quantum = Decimal(1).scaleb(-_FRACTION_DIGITS)
        if dec_lo is not None:
            dec_lo = dec_lo.quantize(quantum, rounding=ROUND_CEILING)
        if dec_hi is not None:
            dec_hi = dec_hi.quantize(quantum, rounding=ROUND_FLOOR)
        step = 1
        for m in multiples:
            step = step * m // math.gcd(step, m)
        numbers = [v for v in excluded if _is_number(v)]
        if multiples or integer_only:
            regex = _int_multiple(step, int_lo, int_hi)
            if regex is False:
                raise self.refuse(
                    "multipleOf",
                    multiple_pointer,
                    f"multipleOf {step} cannot be expressed together with these bounds",
                )
            if numbers and regex is not None:
                inside = sorted(
                    {
                        int(v)
                        for v in numbers
                        if float(v).is_integer()
                        and (int_lo is None or v >= int_lo)
                        and (int_hi is None or v <= int_hi)
                    }
                )
                if inside and step > 1:
                    raise self.refuse("not", bound_pointer, "cannot exclude values from multipleOf")
                if inside:
                    pieces = []
                    start = int_lo
                    for v in [*inside, None]:
                        end = None if v is None else v - 1
                        if v is None:
                            end = int_hi
                        piece = _int_range(start, end)
                        if piece is not None:
                            pieces.append(piece)
                        start = None if v is None else v + 1
                    regex = _alt(pieces)
        else:
            regex = _number_range(dec_lo, dec_hi)
            if regex is not None and any(
                (dec_lo is None or Decimal(v) >= dec_lo)
                and (dec_hi is None or Decimal(v) <= dec_hi)
                for v in numbers
            ):
                raise self.refuse("not", bound_pointer, "cannot exclude single values from numbers")
        if regex is None:
            return _Never("minimum", bound_pointer, "no number satisfies the bounds")
        assert isinstance(regex, str)
        if multiples and not integer_only:
            # a whole multiple may be written as a float (4.0, as repr(float) writes it)
            # while it has at most 15 digits, so that it parses to exactly that float
            floats = _int_multiple(step, int_lo, int_hi, 15)
            if isinstance(floats, str) and not numbers:
                regex = _alt([regex, _group(floats) + r"\.0+"]) or regex
        return regex

    # ------------------------------------------------------------------ strings

    def string(self, flat: list[_Part], excluded: list[Any]) -> _Result:
        low = 0
        high: int | None = None
        length_pointer = {"minLength": flat[0].pointer, "maxLength": flat[0].pointer}
        patterns: list[tuple[str, str]] = []
        formats: list[tuple[str, str]] = []
        for part in flat:
            schema = part.schema
            if "minLength" in schema:
                low = max(low, int(schema["minLength"]))
                length_pointer["minLength"] = part.pointer
            if "maxLength" in schema:
                value = int(schema["maxLength"])
                high = value if high is None else min(high, value)
                length_pointer["maxLength"] = part.pointer
            if isinstance(schema.get("pattern"), str) and schema["pattern"] not in [
                p for p, _ in patterns
            ]:
                patterns.append((schema["pattern"], part.pointer))
            if isinstance(schema.get("format"), str) and schema["format"] not in [
                f for f, _ in formats
            ]:
                formats.append((schema["format"], part.pointer))
        if high is not None and high < low:
            return _Never("maxLength", length_pointer["maxLength"], "maxLength is below minLength")
        known: list[tuple[str, str]] = []
        for name, pointer in formats:
            if name in _STRING_FORMATS or self.format_regex(name, 0, None):
                known.append((name, pointer))
            elif not (name in _FREE_STRING_FORMATS and self.mode == "generation"):
                self.unknown_format(name, pointer)
        if len(known) > 1:
            raise self.refuse("format", known[1][1], "several different formats cannot be combined")
        if known and patterns:
            raise self.refuse(
                "pattern", patterns[0][1], "a pattern cannot be combined with a format"
            )
        if len(patterns) > 1:
            raise self.refuse("pattern", patterns[1][1], "several patterns cannot be intersected")
        one_spelling = True
        if known:
            name, pointer = known[0]
            exact = self.format_regex(name, low, high)
            f_low, f_high = _format_length(name) if name in _STRING_FORMATS else (0, math.inf)
            if exact is not None:
                f_low, f_high = low, high or 0
            if f_low < low:
                raise self.refuse(
                    "minLength",
                    length_pointer["minLength"],
                    f"cannot be combined with format {name!r}",
                )
            if high is not None and f_high > high:
                raise self.refuse(
                    "maxLength",
                    length_pointer["maxLength"],
                    f"cannot be combined with format {name!r}",
                )
            body: str | None = exact or _STRING_FORMATS[name]
        elif patterns:
            pattern, pointer = patterns[0]
            try:
                body, bad = _pattern_regex(pattern, low, high, self.plain_strings)
            except _PatternUnsupported as error:
                raise self.refuse(
                    "pattern", pointer, f"cannot translate pattern: {error}"
                ) from None
            if bad is not None:
                body = self.bounded_pattern(pattern, low, high)
                if body is None:
                    raise self.refuse(
                        bad, length_pointer[bad], f"cannot be combined with pattern {pattern!r}"
                    )
            if body is None:
                return _Never(
                    "pattern", pointer, "no string matches the pattern within the length bounds"
                )
        else:
            one_spelling = self.plain_strings
            char = _PLAIN_CHAR if self.plain_strings else STRING_CHAR
            body = _repeat(char, low, high)
        words = [v for v in excluded if isinstance(v, str)]
        if words:
            if one_spelling:
                assert body is not None
                if "(?&" in body or any(re.fullmatch(body, _dumps(w)[1:-1]) for w in words):
                    raise self.refuse("not", flat[0].pointer, "cannot exclude these strings here")
            else:
                body = _except(_PLAIN, words, low, high)
                if body is None:
                    return _Never("not", flat[0].pointer, "every allowed string is excluded")
        return f'"{body}"'

    # ------------------------------------------------------------------ values from the text

    def text_value(self, flat: list[_Part]) -> _Result | None:
        """The slots of a value copied from the text (``x-formcast-from-text``), or None
        when the value is not one. The keyword applies to strings and numbers only, and
        never together with an enumeration, a pattern, a format or ``not``."""
        options: FromText | None = None
        pointer = flat[0].pointer
        explicit = False
        for part in flat:
            if FROM_TEXT_KEYWORD in part.schema:
                found = FromText.from_keyword(part.schema[FROM_TEXT_KEYWORD], part.pointer)
                if explicit and found != options:
                    raise self.refuse(
                        FROM_TEXT_KEYWORD, part.pointer, "different options for one value"
                    )
                options, pointer, explicit = found, part.pointer, True
        types = self.types(flat)
        if not explicit:
            plain = types <= {"string", "null"} and "string" in types
            if self.from_text is None or not plain or _keywords_in(flat, _NOT_FROM_TEXT):
                return None
            options = self.from_text
        if options is None:
            return None
        outside = types - {"string", "number", "integer", "null"}
        if outside:
            raise self.refuse(
                FROM_TEXT_KEYWORD,
                pointer,
                f"applies to strings and numbers, found a schema that allows {sorted(outside)}",
            )
        for keyword in sorted(_NOT_FROM_TEXT):
            for part in flat:
                if keyword in part.schema:
                    raise self.refuse(
                        keyword, part.pointer, f"cannot be combined with {FROM_TEXT_KEYWORD}"
                    )
        alts: list[str] = [NULL] if "null" in types else []
        if "number" in types or "integer" in types:
            value: Literal["number", "integer"] = "number" if "number" in types else "integer"
            alts.append(self.text_slot(TextSlot(value, FromText(), _text_bounds(flat)), pointer))
        if "string" in types:
            lengths = self.text_lengths(flat, options)
            if isinstance(lengths, _Never):
                return lengths
            alts.append(f'"{self.text_slot(TextSlot("string", lengths), pointer)}"')
        return _alt(alts) or ""

    def text_lengths(self, flat: list[_Part], options: FromText) -> FromText | _Never:
        """``options`` with the value's own ``minLength``/``maxLength`` folded in."""
        low, high = options.min_length, options.max_length
        for part in flat:
            if "minLength" in part.schema:
                low = max(low, int(part.schema["minLength"]))
            if "maxLength" in part.schema:
                limit = int(part.schema["maxLength"])
                high = limit if high is None else min(high, limit)
        if high is not None and high < max(low, 1):
            return _Never("maxLength", flat[0].pointer, "no text value fits the length bounds")
        return dataclasses.replace(options, min_length=low, max_length=high)

    def text_slot(self, slot: TextSlot, pointer: str) -> str:
        """The regex of ``slot``'s kind, registering the kind and the pointer."""
        for kind, known in enumerate(self.text_kinds):
            if known.same_kind(slot):
                if pointer not in known.pointers:
                    self.text_kinds[kind] = dataclasses.replace(
                        known, pointers=(*known.pointers, pointer)
                    )
                return slot_regex(kind)
        if len(self.text_kinds) == len(KIND_BYTES):
            raise self.refuse(
                FROM_TEXT_KEYWORD,
                pointer,
                f"more than {len(KIND_BYTES)} different kinds of values copied from the text "
                "in one schema",
            )
        self.text_kinds.append(dataclasses.replace(slot, pointers=(pointer,)))
        return slot_regex(len(self.text_kinds) - 1)

    # ------------------------------------------------------------------ arrays

    def array(self, flat: list[_Part], refs: tuple[str, ...]) -> _Result:
        min_items = 0
        max_items: int | None = None
        pointer = flat[0].pointer
        layouts: list[tuple[list[_Part], _Part | None]] = []
        contains: list[_Part] = []
        unique_pointer: str | None = None
        for part in flat:
            schema = part.schema
            ptr = part.pointer
            if "minItems" in schema:
                min_items = max(min_items, int(schema["minItems"]))
            if "maxItems" in schema:
                value = int(schema["maxItems"])
                max_items = value if max_items is None else min(max_items, value)
            if schema.get("uniqueItems") is True:
                unique_pointer = ptr
            prefix: list[_Part] = []
            tail: _Part | None = None
            items = schema.get("items")
            if "prefixItems" in schema:
                prefix = [
                    _Part(s, join_pointer(ptr, "prefixItems", i), part.synthetic)
                    for i, s in enumerate(schema["prefixItems"])
                ]
                if "items" in schema:
                    tail = _Part(items, join_pointer(ptr, "items"), part.synthetic)
            elif isinstance(items, list):
                prefix = [
                    _Part(s, join_pointer(ptr, "items", i), part.synthetic)
                    for i, s in enumerate(items)
                ]
                if "additionalItems" in schema:
                    tail = _Part(
                        schema["additionalItems"],
                        join_pointer(ptr, "additionalItems"),
                        part.synthetic,
                    )
            elif "items" in schema:
                tail = _Part(items, join_pointer(ptr, "items"), part.synthetic)
            if tail is None and "unevaluatedItems" in schema:
                tail = _Part(
                    schema["unevaluatedItems"],
                    join_pointer(ptr, "unevaluatedItems"),
                    part.synthetic,
                )
            layouts.append((prefix, tail))
            if "contains" in schema:
                min_contains = schema.get("minContains", 1)
                if "maxContains" in schema:
                    raise self.refuse(
                        "maxContains", ptr, "counting matching items cannot be enforced"
                    )
                if min_contains > 1:
                    raise self.refuse(
                        "minContains", ptr, "counting matching items cannot be enforced"
                    )
                if min_contains == 1:
                    contains.append(
                        _Part(schema["contains"], join_pointer(ptr, "contains"), part.synthetic)
                    )
        many = max_items is None or max_items > 1
        if unique_pointer is not None and many and self.mode == "specification":
            raise self.refuse(
                "uniqueItems", unique_pointer, "an automaton cannot enforce distinct items"
            )
        if max_items is not None and max_items < min_items:
            return _Never("maxItems", pointer, "maxItems is below minItems")
        prefix_length = max((len(p) for p, _ in layouts), default=0)

        def position(i: int) -> list[_Part]:
            out = []
            for prefix, tail in layouts:
                if i < len(prefix):
                    out.append(prefix[i])
                elif tail is not None:
                    out.append(tail)
            return out

        tail_parts = [t for p, t in layouts if t is not None]
        cut: _Never | None = None
        elements: list[str] = []
        limit = prefix_length if max_items is None else min(prefix_length, max_items)
        for i in range(limit):
            result = self.gen(position(i), refs)
            if isinstance(result, _Never):
                cut = result
                break
            elements.append(result)
        tail_regex: str | None = None
        if cut is None and (max_items is None or max_items > len(elements)):
            result = self.gen(tail_parts, refs)
            if isinstance(result, _Never):
                cut = result
            else:
                tail_regex = result
        most = len(elements) if tail_regex is None else max_items
        if most is not None and most < min_items:
            return cut or _Never("minItems", pointer, "no array of minItems items is possible")
        if contains:
            if (
                len({json.dumps(c.schema, sort_keys=True) for c in contains}) > 1
                or prefix_length
                or (max_items is not None or min_items > 1)
            ):
                raise self.refuse(
                    "contains",
                    contains[0].pointer,
                    "contains is only supported with a single items schema and no length bounds",
                )
            matching = self.gen(tail_parts + contains[:1], refs)
            if isinstance(matching, _Never):
                return matching
            if tail_regex is None:
                body = matching
            else:
                body = f"(?:{tail_regex}{self.sep})*{matching}(?:{self.sep}{tail_regex})*"
            return rf"\[{self.ws}{body}{self.ws}\]"
        k = len(elements)
        if k == 0:
            if tail_regex is None:
                return rf"\[{self.ws}\]"
            high = None if most is None else most - 1
            body = tail_regex + _repeat(self.sep + tail_regex, max(0, min_items - 1), high)
            may_be_empty = min_items == 0
        else:
            rest = ""
            if tail_regex is not None:
                rest = _repeat(
                    self.sep + tail_regex,
                    max(0, min_items - k),
                    None if max_items is None else max_items - k,
                )
            for i in reversed(range(k)):
                segment = ("" if i == 0 else self.sep) + elements[i] + rest
                rest = segment if (i < min_items or i == 0) else _opt(segment)
            body = rest
            may_be_empty = min_items == 0
        if may_be_empty:
            return rf"\[{self.ws}(?:{body}{self.ws})?\]"
        return rf"\[{self.ws}{body}{self.ws}\]"

    # ------------------------------------------------------------------ objects

    def object(self, flat: list[_Part], refs: tuple[str, ...]) -> _Result:
        pointer = flat[0].pointer
        names: list[str] = []
        for part in flat:
            properties = part.schema.get("properties") or {}
            if not isinstance(properties, dict):
                raise SchemaError(f"expected an object for properties at {part.pointer or '/'}")
            names.extend(n for n in properties if n not in names)
        required = self.required_names(flat)
        names.extend(n for n in required if n not in names)
        name_parts = [
            _Part(p.schema["propertyNames"], join_pointer(p.pointer, "propertyNames"), p.synthetic)
            for p in flat
            if "propertyNames" in p.schema
        ]
        min_props = 0
        max_props: int | None = None
        count_pointer = {"minProperties": pointer, "maxProperties": pointer}
        for part in flat:
            if "minProperties" in part.schema:
                min_props = max(min_props, int(part.schema["minProperties"]))
                count_pointer["minProperties"] = part.pointer
            if "maxProperties" in part.schema:
                count = int(part.schema["maxProperties"])
                max_props = count if max_props is None else min(max_props, count)
                count_pointer["maxProperties"] = part.pointer

        # declared members
        members: list[tuple[str, bool]] = []
        for name in names:
            is_required = name in required
            if name_parts and not self.valid(name, name_parts):
                if is_required:
                    return _Never(
                        "propertyNames",
                        name_parts[0].pointer,
                        f"required name {name!r} is not allowed",
                    )
                continue
            value = self.gen(self.key_parts(flat, name), refs)
            if isinstance(value, _Never):
                if is_required:
                    return value
                continue
            if not is_required:  # optional members are written O(log k) times each
                value = self.share(
                    value, min_length=_SHARE_REPEATED_MIN_LENGTH, where=("properties", pointer)
                )
            members.append((_key_regex(name) + self.colon + value, is_required))

        extras = self.extras(flat, names, name_parts, refs)
        if extras is not None:
            extras = self.share(  # written twice below
                extras, min_length=_SHARE_REPEATED_MIN_LENGTH, where=("properties", pointer)
            )
        n_required = sum(1 for _, r in members if r)
        n_optional = len(members) - n_required
        extra_limit: int | None = None
        if max_props is not None:
            if n_required > max_props:
                return _Never(
                    "maxProperties",
                    count_pointer["maxProperties"],
                    "more required properties than maxProperties",
                )
            if n_optional == 0:
                extra_limit = max_props - n_required
            elif extras is not None or len(members) > max_props:
                raise self.refuse(
                    "maxProperties",
                    count_pointer["maxProperties"],
                    "cannot count optional properties",
                )
        if extra_limit == 0:
            extras = None
        nonempty = False
        if min_props > n_required:
            if n_required == 0 and min_props == 1 and (members or extras is not None):
                nonempty = True
            else:
                raise self.refuse(
                    "minProperties",
                    count_pointer["minProperties"],
                    "cannot count optional or extra properties",
                )

        # assemble: each element is (first form, comma form, trailing form, required)
        elements: list[tuple[str, str, str, bool]] = []
        for member, is_required in members:
            comma = self.sep + member
            elements.append(
                (
                    member,
                    comma if is_required else _opt(comma),
                    _opt(member + self.sep),
                    is_required,
                )
            )
        if extras is not None:
            more = None if extra_limit is None else extra_limit - 1
            first = extras + _repeat(self.sep + extras, 0, more)
            elements.append((first, _repeat(self.sep + extras, 0, extra_limit), "", False))
        if not elements:
            return rf"\{{{self.ws}\}}"
        required_at = [i for i, e in enumerate(elements) if e[3]]
        if required_at:
            r = required_at[0]
            body = (
                "".join(e[2] for e in elements[:r])
                + elements[r][0]
                + "".join(e[1] for e in elements[r + 1 :])
            )
            return rf"\{{{self.ws}{body}{self.ws}\}}"
        body = _nonempty(elements)
        if nonempty:
            return rf"\{{{self.ws}{body}{self.ws}\}}"
        return rf"\{{{self.ws}(?:{body}{self.ws})?\}}"

    def extras(
        self, flat: list[_Part], names: list[str], name_parts: list[_Part], refs: tuple[str, ...]
    ) -> str | None:
        """Regex for one extra (undeclared) member, or ``None`` if none may appear."""
        has_patterns = any(p.schema.get("patternProperties") for p in flat)
        explicit: list[_Part] = []
        forbidden = False
        for part in flat:
            for keyword in ("additionalProperties", "unevaluatedProperties"):
                if keyword in part.schema:
                    value = part.schema[keyword]
                    if value is False:
                        forbidden = True
                    explicit.append(
                        _Part(value, join_pointer(part.pointer, keyword), part.synthetic)
                    )
                    break
        alternatives: list[str] = []
        free_allowed = not forbidden and not has_patterns
        if self.mode == "generation" and not explicit:
            free_allowed = False
        if free_allowed:
            value = self.gen(explicit, refs) if explicit else self.any_value(self.any_depth)
            if not isinstance(value, _Never):
                key = self.free_key(names, name_parts, refs)
                if key is not None:
                    alternatives.append(key + self.colon + value)
        if has_patterns:
            if name_parts:
                raise self.refuse(
                    "propertyNames",
                    name_parts[0].pointer,
                    "cannot be combined with patternProperties",
                )
            alternatives.extend(self.pattern_members(flat, names, refs))
        return _alt(alternatives)

    def free_key(
        self, names: list[str], name_parts: list[_Part], refs: tuple[str, ...]
    ) -> str | None:
        if not name_parts:
            body = _except(_PLAIN, names, 0, None)
            plain = None if body is None else f'"{body}"'
            if any(_ESCAPED_CHAR.search(name) for name in names):
                return plain
            return _alt([x for x in (plain, _ESCAPED_KEY) if x is not None])
        flat, _, never = self.flatten(name_parts, refs)
        if never is not None:
            return None
        candidates = self.enum_candidates(flat)
        if candidates is not None:
            allowed = [
                v
                for v in candidates
                if isinstance(v, str) and v not in names and self.valid(v, flat)
            ]
            return _alt(self.literal(v) for v in allowed)
        saved = self.plain_strings, self.sharing
        self.plain_strings, self.sharing = True, False  # the key is matched with re below
        try:
            key = self.gen(
                [*name_parts, _Part({"type": "string"}, name_parts[0].pointer, True)], refs
            )
        finally:
            self.plain_strings, self.sharing = saved
        if isinstance(key, _Never):
            return None
        for name in names:
            if re.fullmatch(key, _dumps(name)):
                raise self.refuse(
                    "propertyNames",
                    name_parts[0].pointer,
                    f"allowed extra names include the declared name {name!r}, which cannot be "
                    "excluded",
                )
        return key

    def pattern_members(
        self, flat: list[_Part], names: list[str], refs: tuple[str, ...]
    ) -> list[str]:
        out = []
        for part in flat:
            patterns = part.schema.get("patternProperties") or {}
            for pattern, sub in patterns.items():
                ptr = join_pointer(part.pointer, "patternProperties", pattern)
                key = self.pattern_for_key(pattern, part.pointer, "patternProperties")
                if key is None:
                    continue
                declared = [name for name in names if re.fullmatch(key, _dumps(name))]
                if declared:
                    try:
                        key = _pattern_except(pattern, declared)
                    except _DfaTooLarge:
                        raise self.refuse(
                            "patternProperties",
                            part.pointer,
                            f"pattern {pattern!r} matches the declared property "
                            f"{declared[0]!r}, which cannot be excluded from the extra names",
                        ) from None
                    if key is None:
                        continue
                value_parts = [_Part(sub, ptr, part.synthetic)]
                for other_part in flat:
                    other_patterns = other_part.schema.get("patternProperties") or {}
                    for other, other_sub in other_patterns.items():
                        if other_part is part and other == pattern:
                            continue
                        other_key = self.pattern_for_key(
                            other, other_part.pointer, "patternProperties"
                        )
                        if other_key is not None and not _regex_disjoint(key, other_key):
                            value_parts.append(
                                _Part(
                                    other_sub,
                                    join_pointer(other_part.pointer, "patternProperties", other),
                                    other_part.synthetic,
                                )
                            )
                    if other_part is not part:
                        for keyword in ("additionalProperties", "unevaluatedProperties"):
                            if keyword in other_part.schema:
                                value_parts.append(
                                    _Part(
                                        other_part.schema[keyword],
                                        join_pointer(other_part.pointer, keyword),
                                        other_part.synthetic,
                                    )
                                )
                                break
                value = self.gen(value_parts, refs)
                if not isinstance(value, _Never):
                    out.append(key + self.colon + value)
        return out


def _nonempty(elements: list[tuple[str, str, str, bool]]) -> str:
    """Non-empty member list of optional elements, in order (divide and conquer).

    ``F(A + B) = F(A) C(B) | F(B)`` where ``C`` chains the comma forms; each element regex
    appears ``O(log k)`` times, so ``k`` optional properties cost ``O(k log k)``.
    """
    if len(elements) == 1:
        return elements[0][0]
    middle = len(elements) // 2
    head, tail = elements[:middle], elements[middle:]
    return _alt([_nonempty(head) + "".join(e[1] for e in tail), _nonempty(tail)]) or ""


def _negation_groups(schema: dict[str, Any], keys: list[str]) -> list[list[str]]:
    """Split keywords into groups that must be negated together."""
    together = [
        {"properties", "patternProperties", "additionalProperties"},
        {"items", "additionalItems", "prefixItems"},
        {"contains", "minContains", "maxContains"},
        {"if", "then", "else"},
        {"type", "nullable"},
    ]
    if isinstance(schema.get("exclusiveMinimum"), bool):
        together.append({"minimum", "exclusiveMinimum"})
    if isinstance(schema.get("exclusiveMaximum"), bool):
        together.append({"maximum", "exclusiveMaximum"})
    groups: list[list[str]] = []
    used: set[str] = set()
    for key in keys:
        if key in used:
            continue
        group = [key]
        for bundle in together:
            if key in bundle:
                group = [k for k in keys if k in bundle]
        used.update(group)
        groups.append(group)
    return groups


def _quote_pointer(pointer: str) -> str:
    from urllib.parse import quote

    return quote(pointer, safe="/~")


def schema_to_regex(
    schema: Mapping[str, Any] | bool | str | type[pydantic.BaseModel],
    *,
    mode: Mode = "generation",
    whitespace: bool | int = False,
    max_recursion_depth: int = 3,
    from_text: FromText | bool | None = None,
) -> str:
    """Compile ``schema`` into a regex matching JSON texts that validate against it.

    Args:
        schema: a Pydantic model class, a JSON Schema mapping, JSON text, or a boolean
            schema (read with :func:`formcast.schema.load_schema`).
        mode: ``"generation"`` (Pydantic semantics: only declared properties) or
            ``"specification"`` (JSON Schema semantics: extra properties allowed unless
            ``additionalProperties: false``); see :data:`formcast.schema.Mode`.
        whitespace: ``False``/``0`` for compact JSON, ``N`` for at most ``N`` of
            ``[ \\n\\t]`` at each place inside arrays and objects where JSON allows
            whitespace, ``True`` for :data:`WHITESPACE_DEFAULT`.
        max_recursion_depth: how many times a definition may be nested inside itself
            through ``$ref`` (``0``: recursive references are never followed).
        from_text: copy every plain string value (``str`` or ``Optional[str]``, without
            a format, pattern or enum) from the request's text, with these options
            (``True``: the defaults of :class:`formcast.FromText`). Values with their
            own ``x-formcast-from-text`` keyword keep theirs.

    Returns:
        A regex in the dialect described in the module docstring. Values copied from the
        text are slots (:mod:`formcast.text`), listed in a comment at the end.

    Raises:
        SchemaError: the input is not a schema (see ``load_schema``).
        UnsupportedSchemaError: a keyword cannot be enforced exactly (``.keyword``,
            ``.pointer`` say which and where), or the schema allows no value.
        InvalidOptionError: an option is out of range.

    Cost: pure Python, proportional to the size of the output (see the module docstring);
    compile once and reuse the result.
    """
    if mode not in ("generation", "specification"):
        raise InvalidOptionError(f"expected mode 'generation' or 'specification', found {mode!r}")
    if isinstance(whitespace, bool):
        spaces = WHITESPACE_DEFAULT if whitespace else 0
    elif isinstance(whitespace, int) and whitespace >= 0:
        spaces = whitespace
    else:
        raise InvalidOptionError(
            f"expected whitespace to be a bool or an int >= 0, found {whitespace!r}"
        )
    if (
        not isinstance(max_recursion_depth, int)
        or isinstance(max_recursion_depth, bool)
        or max_recursion_depth < 0
    ):
        raise InvalidOptionError(
            f"expected max_recursion_depth to be an int >= 0, found {max_recursion_depth!r}"
        )
    text_default = _from_text_option(from_text)
    root = load_schema(schema)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    depth = max_recursion_depth
    result: _Result = ""
    try:
        any_depth = ANY_VALUE_DEPTH if mode == "specification" else 1
        share_long = False  # first try plain sub-schemas: concrete NFA states walk faster
        while True:
            translator = _Translator(root, mode, spaces, depth, any_depth, share_long, text_default)
            try:
                result = translator.gen([_Part(root, "")], ("",))
                break
            except _TooLarge as error:
                if not share_long and not error.final:
                    share_long = True
                    continue
                if translator.recursive and depth > 0 and not error.final:
                    depth -= 1
                    continue
                raise UnsupportedSchemaError(error.keyword, error.pointer, error.reason) from None
    except RecursionError:
        raise UnsupportedSchemaError("$ref", "", "the schema nests too deeply") from None
    finally:
        sys.setrecursionlimit(limit)
    if depth < max_recursion_depth:
        warnings.warn(
            f"formcast: recursive references unrolled {depth} times instead of "
            f"max_recursion_depth={max_recursion_depth}, to keep the regex under "
            f"MAX_REGEX_LENGTH={MAX_REGEX_LENGTH} characters",
            UserWarning,
            stacklevel=2,
        )
    if isinstance(result, _Never):
        raise UnsupportedSchemaError(result.keyword, result.pointer, result.reason)
    return translator.with_definitions(result)


def _from_text_option(value: FromText | bool | None) -> FromText | None:
    if value is None or value is False:
        return None
    if value is True:
        return FromText()
    if isinstance(value, FromText):
        return value
    raise InvalidOptionError(f"expected from_text to be a bool or a FromText, found {value!r}")

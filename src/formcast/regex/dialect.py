"""The regex text the translation writes, and the helpers every family builds it with.

The text is the dialect described in :mod:`formcast.regex` (what
:mod:`formcast.automaton` reads, and Python's ``re`` once :func:`inline_definitions` has
written the calls out). This module holds everything that is about the text alone:

* the size and shape constants (:data:`MAX_REGEX_LENGTH`, :data:`WHITESPACE_DEFAULT`,
  :data:`ANY_VALUE_DEPTH`, :data:`SHARE_MIN_LENGTH`; the size ones are the defaults of
  :class:`formcast.limits.Limits`, which ``compile(limits=...)`` overrides);
* literal escaping (:func:`escape_literal`), and ``group``/``alt``/``opt``/``repeat``/
  ``trie``, which combine regex texts so that the result concatenates and quantifies
  safely (``alt`` and ``trie`` return ``None`` for no alternative at all);
* definitions: ``(?(DEFINE)(?P<d0>...)...)`` opening a regex, calls ``(?&d0)``, and
  :func:`inline_definitions`;
* character classes over code point ranges (:mod:`formcast.charset`), and the spelling
  of one decoded character inside a JSON string (``encoded_set``: one spelling each);
* the JSON token regexes :data:`STRING`, :data:`NUMBER`, :data:`INTEGER`,
  :data:`BOOLEAN`, :data:`NULL`, and the string-character classes.

Pure string work: no schema, no automaton.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from json.encoder import encode_basestring
from types import ModuleType
from typing import Any

from formcast import charset
from formcast.automaton.choices import CHOICE_MIN_WORDS, LITERAL_ALTERNATION
from formcast.charset import Ranges
from formcast.limits import DEFAULT_LIMITS

native_parse: ModuleType | None
try:  # the scan of _is_atom in C (optional, see pyproject.toml); Python's otherwise
    from formcast import _regex_parse as native_parse
except ImportError:  # pragma: no cover - an install without a C compiler
    native_parse = None

__all__ = [
    "ANY_VALUE_DEPTH",
    "BOOLEAN",
    "INTEGER",
    "MAX_REGEX_LENGTH",
    "NULL",
    "NUMBER",
    "SHARE_MIN_LENGTH",
    "SPECIFICATION_NUMBER",
    "STRING",
    "STRING_CHAR",
    "WHITESPACE_DEFAULT",
    "escape_literal",
    "inline_definitions",
]

MAX_REGEX_LENGTH = DEFAULT_LIMITS.max_regex_length
"""Largest regex :func:`schema_to_regex` returns (characters).

Recursive schemas that would exceed it are unrolled fewer times (with a warning); other
schemas that exceed it are refused with :class:`UnsupportedSchemaError`.
"""

WHITESPACE_DEFAULT = 4
"""Whitespace characters allowed at each place when ``whitespace=True``."""

ANY_VALUE_DEPTH = DEFAULT_LIMITS.any_value_depth
"""Most nesting depth of arrays/objects accepted for an unconstrained value (``true``, ``{}``)
in ``specification`` mode.

Depth 1 allows ``[1,"a"]`` and ``{"k":null}`` but not ``{"k":[1]}``; depth 2 allows
``{"k":[1]}`` but not ``{"k":[{"j":1}]}``. Each level is one definition calling the
level below (see "Definitions" in :mod:`formcast.regex`), so the regex grows by a few
hundred characters per level, not fourfold. ``generation`` mode uses depth 1.
"""

SHARE_MIN_LENGTH = DEFAULT_LIMITS.share_min_length
"""Sub-schema regexes at least this long become definitions called by ``(?&name)``."""

# ----------------------------------------------------------------------------- regex text

_META = frozenset('\\.^$*+?()[]{}|"')
_CLASS_META = frozenset("\\]^-[")


def lit_char(char: str) -> str:
    """One character as regex text that matches exactly that character."""
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


# what ``calls`` reads: a run of anything but a call (escapes and classes whole, so that
# neither hides one), a call (group 1: its name), or any one character (a lone backslash,
# an unclosed class's bracket), as :data:`_TOKEN` reads them
_CALL_SCAN = re.compile(
    r"(?:[^\\\[(]|\\.|\[(?:\\.|[^\]\\])*\]|\((?!\?&\w+\)))+|\(\?&(\w+)\)|.",
    re.DOTALL,
)


def calls(regex: str) -> list[str]:
    """The names of the definitions ``regex`` calls with ``(?&name)``. One C-speed scan
    whose matches are the calls and the runs between them."""
    if "(?&" not in regex:
        return []
    if native_parse is not None:  # the same scan in C (~10x faster)
        return list(native_parse.call_names(regex))
    return [name for name in _CALL_SCAN.findall(regex) if name]


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


def split_definitions(regex: str) -> tuple[dict[str, str], str]:
    """``({name: body}, main)`` of a regex that may open with ``(?(DEFINE)...)``, the
    bodies in the order defined.

    Raises ValueError when the ``(?(DEFINE)`` group is not closed."""
    return _split_definitions(regex)


def rename_definitions(regex: str, prefix: str) -> str:
    """``regex`` (a body or a main part) with every call ``(?&name)`` and named group
    ``(?P<name>`` renamed ``prefix + name``: to merge definitions from several regexes
    into one without clashes."""
    if "(?&" not in regex and "(?P<" not in regex:
        return regex
    pieces = []
    for match in _TOKEN.finditer(regex):
        if match.group(1):
            pieces.append(f"(?&{prefix}{match.group(1)})")
        elif match.group(2):
            pieces.append(f"(?P<{prefix}{match.group(2)}>")
        else:
            pieces.append(match.group())
    return "".join(pieces)


def with_definitions(definitions: Sequence[tuple[str, str]], main: str) -> str:
    """``(?(DEFINE)(?P<name>body)...)main``, or ``main`` alone without definitions."""
    if not definitions:
        return main
    bodies = "".join(f"(?P<{name}>{body})" for name, body in definitions)
    return f"{_DEFINE}{bodies}){main}"


def inline_definitions(regex: str, max_length: int = MAX_REGEX_LENGTH) -> str:
    """``regex`` with every ``(?&name)`` call replaced by its definition, and the leading
    ``(?(DEFINE)...)`` dropped: a plain regex for ``re`` and other engines.

    Raises ValueError when the result would exceed ``max_length`` characters (each level of
    an unconstrained value multiplies the inlined text by about four), or when a
    definition calls itself, directly or not (recursion has no inlined form).
    """
    bodies, main = _split_definitions(regex)
    inlined: dict[str, str] = {}

    def expand(text: str) -> str:
        if "(?&" not in text:
            return text
        pieces = []
        for match in _TOKEN.finditer(text):
            name = match.group(1)
            if name and name not in inlined:
                raise ValueError(
                    f"the definition {name!r} is recursive or not defined before its caller: "
                    "recursive definitions have no inlined form"
                )
            pieces.append(f"(?:{inlined[name]})" if name else match.group())
        out = "".join(pieces)
        if len(out) > max_length:
            raise ValueError(f"the inlined regex would exceed {max_length} characters")
        return out

    for name, body in bodies.items():  # a body calls earlier definitions only
        inlined[name] = expand(body)
    return expand(main)


_LITERAL_ESCAPES = {chr(code): lit_char(chr(code)) for code in [*range(0x20), 0x7F]}
_LITERAL_ESCAPES.update((char, lit_char(char)) for char in _META)
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\x7f\\.^$*+?()\[\]{}|"]')


def _escaped(match: re.Match[str]) -> str:
    return _LITERAL_ESCAPES[match.group()]


def escape_literal(text: str) -> str:
    """Escape ``text`` so that the regex matches exactly that text (one ``re.sub``, a
    call per escaped character only)."""
    return _NEEDS_ESCAPE.sub(_escaped, text)


def _class_char(code: int) -> str:
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    char = chr(code)
    if char in _CLASS_META:
        return "\\" + char
    return char


_SCANNED_ATOM = 1000  # longer candidate atoms are first tried as a literal alternation
_CLASS = re.compile(r"\[(?:\\.|[^\]\\])*\]", re.DOTALL)
# what ``_is_atom`` reads: an opening (1) or closing (2) parenthesis, a run of anything
# else (escapes and classes whole), an unclosed class's bracket (3), a lone backslash
_PAREN_SCAN = re.compile(r"(\()|(\))|(?:[^\\\[()]|\\.|\[(?:\\.|[^\]\\])*\])+|(\[)|\\", re.DOTALL)


def _is_atom(regex: str) -> bool:
    """True when a quantifier may follow ``regex`` directly."""
    if len(regex) == 1:
        return regex not in _META or regex in '"'
    if regex.startswith("\\") and (len(regex) == 2 or (regex[1] == "x" and len(regex) == 4)):
        return True
    if regex[0] not in "[(":
        return False
    if len(regex) > _SCANNED_ATOM and LITERAL_ALTERNATION.fullmatch(regex):
        return True  # a choice of many words: no scan in Python
    if regex[0] == "[":
        whole_class = _CLASS.match(regex)
        return whole_class is not None and whole_class.end() == len(regex)
    if native_parse is not None:  # the same scan in C: O(n) per call, called at each level
        return bool(native_parse.group_spans_all(regex))
    return _group_spans_all(regex)


def _group_spans_all(regex: str) -> bool:
    """Whether the group opening ``regex[0]`` closes at its last character."""
    depth = 0
    for match in _PAREN_SCAN.finditer(regex):
        kind = match.lastindex
        if kind == 1:
            depth += 1
        elif kind == 2:
            depth -= 1
            if depth == 0:
                return match.end() == len(regex)
        elif kind == 3:
            return False  # an unclosed class: everything after it is inside
    return False


def group(regex: str) -> str:
    """``regex`` as one atom, which a quantifier may follow (grouped only when needed)."""
    return regex if _is_atom(regex) else f"(?:{regex})"


def alt(parts: Iterable[str]) -> str | None:
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


def opt(regex: str) -> str:
    """``regex`` made optional (the empty regex stays empty)."""
    return "" if not regex else group(regex) + "?"


def repeat(regex: str, low: int, high: int | None) -> str:
    """``regex`` repeated ``low..high`` times (``high=None``: no upper bound).

    Raises ValueError when ``high < low``."""
    if high is not None and high < low:
        raise ValueError("empty repetition")
    if high == 0 or not regex:
        return ""
    atom = group(regex)
    if low == high:
        return atom if low == 1 else f"{atom}{{{low}}}"
    if high is None:
        return {0: atom + "*", 1: atom + "+"}.get(low, f"{atom}{{{low},}}")
    if (low, high) == (0, 1):
        return atom + "?"
    return f"{atom}{{{low},{high}}}"


def trie(words: Sequence[str]) -> str | None:
    """Alternation of literal ``words`` (duplicates dropped); ``None`` for no words.

    Fewer than :data:`~formcast.automaton.choices.CHOICE_MIN_WORDS` distinct words are
    written with their common prefixes factored out. More are written flat,
    ``(?:w1|w2|...)`` in their first order: the automaton builds such a group directly as
    the words' trie (:mod:`formcast.automaton.choices`), at a fraction of the generic
    cost, and ``Limits.max_regex_length`` counts it at a fraction of its length
    (:func:`~formcast.automaton.choices.pattern_cost`). Either form reads in Python's
    ``re``. Cost: linear in the words' characters.
    """
    return _distinct_trie(list(dict.fromkeys(words)))


def _distinct_trie(words: list[str]) -> str | None:
    """:func:`trie` of distinct ``words``."""
    if not words:
        return None
    if len(words) >= CHOICE_MIN_WORDS:
        return "(?:" + _escape_words(words) + ")"
    tree: dict[str, Any] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        alts = []
        for char, child in node.items():
            alts.append("" if char == "" else lit_char(char) + emit(child))
        return alt(alts) or ""

    return emit(tree)


def _escape_words(words: list[str]) -> str:
    """``escape_literal`` of each word, joined by ``|`` (one substitution over the joined
    words when none holds a NUL, which then stands for the bars)."""
    joined = "\x00".join(words)
    if joined.count("\x00") != len(words) - 1:
        return "|".join(escape_literal(word) for word in words)
    return _NEEDS_ESCAPE_BUT_NUL.sub(_escaped, joined).replace("\x00", "|")


_NEEDS_ESCAPE_BUT_NUL = re.compile(r'[\x01-\x1f\x7f\\.^$*+?()\[\]{}|"]')


def string_choice(values: Sequence[str], *, distinct: bool = False) -> str | None:
    """A regex matching exactly the compact JSON texts of the distinct strings
    ``values`` (a quote, :func:`trie` of their JSON-escaped bodies, a quote); ``None``
    for none. ``distinct``: the caller vouches that no value repeats (no deduplication).

    For a ``Literal``/``enum`` of many names: one C call to write the JSON texts of all
    the values, then :func:`trie`."""
    bodies = _json_bodies(values)
    if _SURROGATE_RE.search("".join(bodies)):
        bodies = [_SURROGATE_RE.sub(_surrogate_escape, body) for body in bodies]
    if not distinct:  # equal bodies are equal values: JSON's escaping is one to one
        bodies = list(dict.fromkeys(bodies))
    inner = _distinct_trie(bodies)
    if inner is None:
        return None
    if len(bodies) < CHOICE_MIN_WORDS and inner:  # factored: may need a group
        inner = group(inner)
    return '\\"' + inner + '\\"'


_SEPARATOR = "\uffff"  # a noncharacter: JSON writes it as itself


def _json_bodies(values: Sequence[str]) -> list[str]:
    """Each value's JSON string text without its quotes: one C call over the values
    joined by :data:`_SEPARATOR` when none holds it (else one call per value)."""
    joined = _SEPARATOR.join(values)
    if joined.count(_SEPARATOR) == max(len(values) - 1, 0):
        return encode_basestring(joined)[1:-1].split(_SEPARATOR) if values else []
    return [encode_basestring(value)[1:-1] for value in values]


def group_alt(regex: str) -> str:
    """``regex`` safe to concatenate: alternations at the top level get a group."""
    return regex if not regex or "|" not in regex or _is_atom(regex) else f"(?:{regex})"


# ----------------------------------------------------------------------------- char sets

_SURROGATES = ((0xD800, 0xDFFF),)


def char_class(ranges: Ranges) -> str | None:
    """A character class matching exactly ``ranges`` (surrogates excluded), or ``None``."""
    positive = charset.minus(charset.normalize(ranges), _SURROGATES)
    if not positive:
        return None
    if len(positive) == 1 and positive[0][0] == positive[0][1]:
        return lit_char(chr(positive[0][0]))
    negative = charset.minus(charset.complement(positive), _SURROGATES)
    if not negative:  # every character: "[^]" is not a class
        return "(?s:.)"

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
def encoded_set(ranges: Ranges, plain: bool) -> str | None:
    """Regex for one *decoded* character in ``ranges``, as it appears inside a JSON string.

    Each character gets one spelling: itself, or its canonical escape for ``"``, ``\\`` and
    controls. ``plain`` drops the characters that need escaping.
    """
    alts = []
    plain_part = char_class(charset.minus(ranges, charset.JSON_SPECIAL))
    if plain_part is not None:
        alts.append(plain_part)
    if not plain:
        special = charset.intersect(ranges, charset.JSON_SPECIAL)
        for lo, hi in special:
            for code in range(lo, hi + 1):
                alts.append(_json_char_escape(code))
    return alt(alts)


# ----------------------------------------------------------------------------- JSON tokens

STRING_CHAR = (
    r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]'
    r"|\\u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))"
)
"""One character inside a JSON string (``\\u`` escapes of surrogates excluded)."""
PLAIN_CHAR = r'[^"\\\x00-\x1f]'
_REQUIRED_ESCAPE = r'\\(?:["\\bfnrt]|u00(?:0[0-7be-f]|1[0-9a-f]))'
ESCAPED_KEY = rf'"{PLAIN_CHAR}*{_REQUIRED_ESCAPE}(?:{PLAIN_CHAR}|{_REQUIRED_ESCAPE})*"'
"""A JSON string with at least one escape, each as ``json.dumps`` writes it (short forms,
else lowercase ``\\u00xx``; one spelling per character): its value holds ``"``, ``\\`` or a
control character, so it differs from every name that holds none."""
ESCAPED_CHAR = re.compile(r'["\\\x00-\x1f]')
STRING = f'"{STRING_CHAR}*"'
"""Any JSON string."""
INTEGER = r"-?(?:0|[1-9][0-9]*)"
"""Any JSON integer literal."""
_LONG_EXPONENTS = r"[1-9](?:\.[0-9]+)?[eE](?:-[0-9]{3}|\+?(?:[0-2][0-9]{2}|30[0-7]))"
"""Unsigned numbers with a three-digit exponent, all finite: one integer digit and
exponents up to 307 (``1.5e+300``, ``5e-324``; not the largest doubles, ``e+308``, which
would lengthen every unconstrained value's regex)."""

EXPONENT_FORMS = rf"(?:0|[1-9][0-9]{{0,15}})(?:\.[0-9]+)?[eE][+-]?[0-9]{{1,2}}|{_LONG_EXPONENTS}"
"""Unsigned JSON numbers written with an exponent, all finite: up to 16 integer digits with
a two-digit exponent, or :data:`_LONG_EXPONENTS` (as ``repr(float)`` writes them)."""

NUMBER = rf"-?(?:(?:0|[1-9][0-9]{{0,15}})(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{{1,2}})?|{_LONG_EXPONENTS})"
"""JSON numbers as ``repr(float)`` writes them, always finite: at most 16 integer digits
and an optional two-digit exponent, or :data:`_LONG_EXPONENTS`.

(A JSON number such as ``1e400`` parses to ``inf``, which ``Decimal`` and many validators
refuse.)"""
SPECIFICATION_NUMBER = rf"(?:{INTEGER}|{NUMBER})"
"""The numbers of specification mode: :data:`NUMBER`, and integers of any length written
without a fraction or exponent (JSON parses them exactly; a third-party document may hold
``234567890123456789``). Generation mode keeps :data:`NUMBER`, whose every value a Python
``float`` holds."""
BOOLEAN = "(?:true|false)"
"""A JSON boolean."""
NULL = "null"
"""The JSON null."""

# ----------------------------------------------------------------------------- JSON values

_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def json_dumps(value: Any) -> str:
    """``value`` as compact JSON text, non-ASCII characters as themselves and lone
    surrogates as ``\\u`` escapes (they have no UTF-8 encoding)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return _SURROGATE_RE.sub(_surrogate_escape, text)


def _surrogate_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def json_literal(value: Any) -> str:
    """A regex matching exactly the compact JSON text of ``value``."""
    return escape_literal(json_dumps(value))


PLAIN = charset.minus(charset.complement(charset.JSON_SPECIAL), _SURROGATES)
_ASCII: Ranges = ((0, 0x7F),)
"""The characters a JSON string holds unescaped (surrogates excluded)."""


def except_words(alphabet: Ranges, words: Iterable[str], low: int, high: int | None) -> str | None:
    """Regex for strings over ``alphabet`` of length ``low..high`` that are not in ``words``.

    Memoised: a schema reached through many references asks for the same names often."""
    return _except_cached(alphabet, tuple(sorted(set(words))), low, high)


@functools.lru_cache(maxsize=1024)
def _class_without(alphabet: Ranges, excluded: str) -> str | None:
    """``char_class`` of ``alphabet`` minus the characters of ``excluded`` (memoised)."""
    return char_class(charset.minus(alphabet, charset.from_chars(excluded)))


@functools.lru_cache(maxsize=256)
def _except_cached(
    alphabet: Ranges, words: tuple[str, ...], low: int, high: int | None
) -> str | None:
    tree: dict[str, Any] = {}
    for word in words:
        if not all(charset.contains(alphabet, ord(c)) for c in word):
            continue
        if high is not None and len(word) > high:
            continue
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = True
    any_char = char_class(alphabet)
    if any_char is None:
        return "" if low == 0 and "" not in tree else None

    if high is None and low <= 1:  # every way out of the trie ends the same way
        return _except_shared_tail(tree, alphabet, any_char, low)

    def emit(node: dict[str, Any], depth: int) -> str | None:
        alts = []
        if depth >= low and "" not in node:
            alts.append("")
        if high is None or depth < high:
            children = [k for k in node if k]
            others = _class_without(alphabet, "".join(sorted(children)))
            if others is not None:
                rest_high = None if high is None else high - depth - 1
                alts.append(others + repeat(any_char, max(0, low - depth - 1), rest_high))
            for child in children:
                sub = emit(node[child], depth + 1)
                if sub is not None:
                    alts.append(lit_char(child) + sub)
        return alt(alts)

    return emit(tree, 0)


def _except_shared_tail(
    tree: dict[str, Any], alphabet: Ranges, any_char: str, low: int
) -> str | None:
    """:func:`except_words` without an upper bound and with ``low <= 1``: the strings that
    leave the words' trie by a character no word has there, then go on freely, or that
    stop inside it short of a word (at ``low`` characters or more).

    Leaving the trie is one alternation whose branches all end at one shared
    ``any_char*``, so the automaton reaches one state however the trie was left (a tail
    per branch made every prefix of the words a state of its own, each with the row of a
    free string: ~50k tokens to walk at each character of an object's keys). Likewise a
    non-ASCII character (several bytes in UTF-8) leaves from any node whose children are
    all ASCII by one shared class after the trie's paths, rather than by a copy of the
    class at each node, whose continuation bytes were states of their own too."""
    non_ascii = charset.minus(alphabet, _ASCII)
    ways_out = []
    left, before, inside = _trie_ways(tree, 0, low, alphabet, charset.intersect(alphabet, _ASCII))
    if left is not None:
        ways_out.append(left)
    beyond = char_class(non_ascii)
    if before is not None and beyond is not None:
        ways_out.append(group(before) + beyond if before else beyond)
    parts = []
    out = alt(ways_out)
    if out is not None:
        parts.append(group(out) + repeat(any_char, 0, None))
    if inside is not None:
        parts.append(inside)
    return alt(parts)


def _trie_ways(
    node: dict[str, Any], depth: int, low: int, alphabet: Ranges, ascii_alphabet: Ranges
) -> tuple[str | None, str | None, str | None]:
    """The three regexes :func:`_except_shared_tail` reads off the trie below ``node``
    (at ``depth``), in one walk (a module function: a nested one that calls itself is a
    reference cycle, which only the garbage collector frees):

    - the ways out of it: a character of ``alphabet`` no child has (of
      ``ascii_alphabet``, its ASCII part, where the children are all ASCII: the
      non-ASCII ways out are then taken by the paths below), or a child then a way out
      below it;
    - the paths to the nodes whose children are all ASCII;
    - the paths that stop inside the trie short of a word, at ``low`` characters or more.
    """
    children = [k for k in node if k]
    ascii_only = all(ord(k) < 0x80 for k in children)
    leave: list[str] = []
    paths: list[str] = [""] if ascii_only else []
    short: list[str] = [""] if depth >= low and "" not in node else []
    others = _class_without(ascii_alphabet if ascii_only else alphabet, "".join(sorted(children)))
    if others is not None:
        leave.append(others)
    for child in children:
        sub_leave, sub_paths, sub_short = _trie_ways(
            node[child], depth + 1, low, alphabet, ascii_alphabet
        )
        char = lit_char(child)
        if sub_leave is not None:
            leave.append(char + sub_leave)
        if sub_paths is not None:
            paths.append(char + sub_paths)
        if sub_short is not None:
            short.append(char + sub_short)
    return alt(leave), alt(paths), alt(short)

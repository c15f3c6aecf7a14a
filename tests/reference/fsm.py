"""Reference implementation for the tests: regular expression -> *eager* byte DFA.

An oracle for :class:`formcast.automaton.LazyAutomaton`, built independently of it: the
character automaton comes from ``interegular`` (a test dependency), and only the
code-point algebra and the UTF-8 splitting are shared (:mod:`formcast.charset`). A
:class:`ByteFSM` accepts exactly the UTF-8 encodings of the strings the expression fully
matches, with every state and transition as numpy arrays, and follows the lazy
automaton's numbering convention: state :data:`DEAD` (0) is the dead sink.

How it works, and what it costs:

1. The pattern is checked with Python's :mod:`re` (syntax errors come with positions),
   then lexed here with ``re``'s rules. Every character set in it (a literal, a class, a
   shorthand such as ``\\d``) becomes code point *ranges*; the code points are cut into
   blocks that no set splits, and the pattern is rewritten over one representative
   character per block. So ``[\\u0080-\\U0010ffff]`` costs the same as ``[a-z]``, and
   interegular's own quirks (a leading ``]`` in a class, a literal ``{``) never apply.
2. ``interegular`` builds a DFA over those representatives; its "anything else" symbol
   stands for the code points that no set of the pattern names.
3. Each transition's character set becomes sorted code point ranges, and each range
   becomes a few sequences of byte ranges (:func:`formcast.charset.utf8_sequences`), so
   a negated class costs a handful of sequences, never an enumeration of 1.1 million
   code points.
4. The sequences leaving one state are determinized byte by byte; intermediate states
   (inside a multi-byte character) are keyed by what remains to be read and shared.
5. The byte DFA is minimised (vectorised Moore refinement), trimmed (every state reachable
   and able to reach an accepting state) and renumbered in breadth-first order from the
   initial state, which is always state 1, after the dead sink.

Measured CPU time (one core, Python 3.11): a JSON string regex bounded with ``{0,50}``
about 85 ms (653 states), an unbounded one 4 ms, a JSON object regex of 330 characters
about 55 ms, ``[\\u0080-\\U0010ffff]+`` 1.5 ms. The pure-Python ``interegular`` step
dominates and grows with bounded repetitions and nested alternations.

Semantics are those of :func:`re.fullmatch` on the decoded text, with two deliberate
differences: the shorthand classes ``\\d \\w \\s`` (and negations) have their ASCII
meaning, as under :data:`re.ASCII`; and text that is not valid UTF-8 (lone surrogates
included) never matches. Anchors (``^ $ \\A \\Z``; the match is always whole),
lookaround, backreferences, word boundaries, conditional and atomic groups, possessive
quantifiers, case-insensitive and verbose modes are refused with a
:class:`~formcast.errors.SchemaError` that names the construct and its position.
"""

from __future__ import annotations

import re
import unicodedata
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import interegular
import numpy as np
import numpy.typing as npt
from interegular.fsm import anything_else

from formcast.charset import (
    DIGIT,
    SPACE,
    WORD,
    ByteSeq,
    Range,
    complement,
    normalize,
    utf8_sequences,
)
from formcast.errors import SchemaError, UserError

__all__ = ["DEAD", "ByteFSM", "compile_regex"]

DEAD = 0
"""The dead sink state, as in :mod:`formcast.automaton`: ``transitions[s, b]`` is DEAD when
byte ``b`` is not allowed in state ``s``, and every byte leads from DEAD to itself."""

_NO_EDGE = -1  # in the arrays under construction, before the dead sink is numbered
_MAX_SHOWN_PATTERN = 160

IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False, repr=False)
class ByteFSM:
    """A deterministic finite automaton over bytes, compiled from a regular expression.

    Contract:
        * ``transitions[s, b]`` is the state reached from ``s`` on byte ``b``;
          :data:`DEAD` (0) when ``b`` is not allowed there. State 0 is the dead sink: its
          row is all DEAD and it does not accept. Shape ``(num_states, 256)``, dtype
          ``int32``, read-only.
        * ``accepting[s]`` says whether input may end in ``s``. Shape ``(num_states,)``,
          dtype ``bool``, read-only.
        * The accepted language is the set of UTF-8 encodings of the strings that
          ``pattern`` fully matches; no invalid UTF-8 is ever accepted.
        * For automata made by :func:`compile_regex`: every state but DEAD is reachable
          from ``initial`` and can reach an accepting state, so a walk that has not died
          can always be completed; ``initial`` is ``1``; the automaton is minimal.

    Instances are immutable, compare by identity, and pickle. Building one by hand
    validates shapes, dtypes and ranges (O(num_states * 256)) and copies the arrays.
    """

    transitions: IntArray
    initial: int
    accepting: BoolArray
    pattern: str
    _distance: IntArray | None = field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        transitions = np.array(self.transitions, dtype=np.int32, copy=True)
        accepting = np.array(self.accepting, dtype=np.bool_, copy=True)
        if transitions.ndim != 2 or transitions.shape[1] != 256 or transitions.shape[0] < 1:
            raise UserError(
                "expected transitions of shape (num_states >= 1, 256), found shape "
                f"{tuple(transitions.shape)}"
            )
        num_states = int(transitions.shape[0])
        if accepting.shape != (num_states,):
            raise UserError(
                f"expected accepting of shape ({num_states},), found shape {tuple(accepting.shape)}"
            )
        if int(transitions.min()) < 0 or int(transitions.max()) >= num_states:
            raise UserError(
                f"expected transition targets in [0, {num_states}), found values in "
                f"[{int(transitions.min())}, {int(transitions.max())}]"
            )
        if transitions[DEAD].any() or accepting[DEAD]:
            raise UserError(
                "expected state 0 to be the dead sink (every byte to 0, not accepting), found "
                f"{np.count_nonzero(transitions[DEAD])} bytes leading elsewhere and "
                f"accepting={bool(accepting[DEAD])}"
            )
        initial = int(self.initial)
        if not 0 <= initial < num_states:
            raise UserError(
                f"expected an initial state in [0, {num_states}), found {self.initial!r}"
            )
        transitions.setflags(write=False)
        accepting.setflags(write=False)
        object.__setattr__(self, "transitions", transitions)
        object.__setattr__(self, "accepting", accepting)
        object.__setattr__(self, "initial", initial)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle, making the arrays read-only again (pickle drops that flag)."""
        for name, value in state.items():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(self, name, value)

    @property
    def num_states(self) -> int:
        """The number of states (rows of ``transitions``)."""
        return int(self.transitions.shape[0])

    def walk(self, data: bytes, state: int | None = None) -> int:
        """Feed ``data`` byte by byte and return the state reached, :data:`DEAD` once dead.

        Starts at ``initial`` unless ``state`` is given; :data:`DEAD` stays dead. A prefix
        of a multi-byte character leaves a live state when some completion is allowed.
        Cost: one array lookup per byte, stopping early at the first dead byte.
        """
        current = self.initial if state is None else int(state)
        if not 0 <= current < self.num_states:
            raise UserError(f"expected a state in [0, {self.num_states}), found {state!r}")
        if current == DEAD:
            return DEAD
        table = self.transitions
        for byte in data:
            current = int(table.item(current, byte))
            if current == DEAD:
                return DEAD
        return current

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` is, in full, the UTF-8 encoding of a string the pattern matches."""
        return bool(self.accepting[self.walk(data)])

    def distance_to_accept(self) -> IntArray:
        """Fewest bytes leading from each state to an accepting state (0 if accepting).

        Returns a read-only ``int32`` array of shape ``(num_states,)``; ``-1`` marks a state
        that cannot reach an accepting state (for :func:`compile_regex` output, only
        :data:`DEAD`). Computed once by a reverse breadth-first search, O(num_states * 256),
        then cached on the instance.
        """
        cached = self._distance
        if cached is None:
            cached = _reverse_bfs(_without_dead_sink(self.transitions), self.accepting)
            cached.setflags(write=False)
            object.__setattr__(self, "_distance", cached)
        return cached

    def __repr__(self) -> str:
        return (
            f"ByteFSM(pattern={_shorten(self.pattern)}, num_states={self.num_states}, "
            f"initial={self.initial}, accepting={int(self.accepting.sum())} states)"
        )


def compile_regex(pattern: str) -> ByteFSM:
    """Compile a regular expression into a minimal byte-level :class:`ByteFSM`.

    The automaton accepts the UTF-8 encoding of ``s`` iff ``re.fullmatch(pattern, s)``
    (with the ASCII shorthand classes noted in the module docstring), and nothing else:
    no overlong encodings, no surrogates, nothing above U+10FFFF.

    Raises:
        SchemaError: the pattern is not a string, does not parse with :mod:`re`, uses a
            construct with no finite-automaton meaning here (anchors, lookaround,
            backreferences, word boundaries, conditional or atomic groups, possessive
            quantifiers, ``(?i)``, ``(?x)``, ``(?u)``), or matches no string at all. The
            message reads "expected a regular expression formcast can compile, found
            <pattern>: <reason>", the reason naming the construct and its position.

    Cost: dominated by ``interegular``'s character DFA (pure Python; grows with bounded
    repetitions such as ``{0,50}`` and nested alternations), then byte expansion linear in
    the character DFA's transitions and a vectorised minimisation. Tens of milliseconds
    for typical JSON regexes, up to seconds for very large schemas: cache the result.
    """
    if not isinstance(pattern, str):
        raise SchemaError(
            "expected a regular expression formcast can compile, found "
            f"{type(pattern).__name__} {pattern!r}: a pattern must be a str"
        )
    char_fsm, blocks = _parse_char_fsm(pattern)
    transitions, accepting = _expand_to_bytes(char_fsm, blocks)
    if transitions.shape[0] == 0:
        _fail(pattern, "it matches no string at all")
    transitions, accepting, initial = _minimise(transitions, accepting, 0)
    transitions, accepting = _renumber_bfs(transitions, accepting, initial)
    transitions, accepting = _with_dead_sink(transitions, accepting)
    return ByteFSM(transitions=transitions, initial=1, accepting=accepting, pattern=pattern)


# --------------------------------------------------------------------------- errors


def _shorten(pattern: str) -> str:
    shown = repr(pattern)
    if len(shown) <= _MAX_SHOWN_PATTERN:
        return shown
    return f"{shown[: _MAX_SHOWN_PATTERN - 3]}... ({len(pattern)} characters)"


def _fail(pattern: str, reason: str, cause: BaseException | None = None) -> NoReturn:
    """Raise the SchemaError of an uncompilable pattern."""
    raise SchemaError(
        f"expected a regular expression formcast can compile, found {_shorten(pattern)}: {reason}"
    ) from cause


# --------------------------------------------------------------------- parsing
#
# interegular enumerates every character of a class (``[\u0080-\U0010ffff]`` is a set of a
# million one-character strings and takes minutes), and it reads a few constructs
# differently from ``re``. So the pattern is lexed here with re's rules: every character
# set (literal, class, shorthand) becomes a set of code point ranges; the code points are
# partitioned into blocks that no set splits; each block is written to interegular as one
# representative character (its smallest code point). interegular then sees a small
# alphabet, and the representatives are mapped back to their blocks' ranges afterwards.


@dataclass(frozen=True)
class _CharSet:
    """Code points matched by one pattern atom: ``ranges``, or all others if ``negated``."""

    ranges: tuple[Range, ...]
    negated: bool = False


@dataclass(frozen=True)
class _Rewritten:
    """A pattern rewritten over block representatives, and what each one stands for."""

    text: str
    blocks: dict[str, tuple[Range, ...]]


_ASCII_SETS: dict[str, tuple[Range, ...]] = {"d": DIGIT, "w": WORD, "s": SPACE}
_CHAR_ESCAPES = {"a": 0x07, "f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_OCTAL = "01234567"
_QUANTIFIER_BODY = re.compile(r"\{(\d*)(,\d*)?\}")
_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")
_NEWLINE = _CharSet(((0x0A, 0x0A),))


class _Lexer:
    """Splits a pattern (already accepted by ``re``) into syntax text and character sets.

    Follows ``re``'s rules where interegular's differ: a ``]`` first in a class and a
    ``{`` that does not open ``{m,n}`` are literals, ``(?#...)`` is a comment, and
    ``\\uXXXX``, ``\\UXXXXXXXX``, ``\\N{...}`` and octal escapes are characters. Constructs
    with no finite-automaton meaning are refused here with a precise reason.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.index = 0
        self.parts: list[str | _CharSet] = []

    def fail(self, reason: str) -> NoReturn:
        _fail(self.pattern, reason)

    def run(self) -> list[str | _CharSet]:
        pattern = self.pattern
        end = len(pattern)
        while self.index < end:
            char = pattern[self.index]
            if char == "\\":
                self.parts.append(self.top_escape())
            elif char == "[":
                self.parts.append(self.char_class())
            elif char == "(":
                self.group_open()
            elif char in ")|.":
                self.parts.append(char)
                self.index += 1
            elif char in "*+?":
                self.parts.append(char)
                self.index += 1
                self.after_quantifier()
            elif char == "{":
                body = _QUANTIFIER_BODY.match(pattern, self.index)
                if body is None or body.group(0) == "{}":
                    self.parts.append(_CharSet(((0x7B, 0x7B),)))
                    self.index += 1
                else:
                    self.parts.append(body.group(0))
                    self.index = body.end()
                    self.after_quantifier()
            elif char in "^$":
                self.fail(
                    f"the anchor {char!r} at position {self.index} is not supported (the "
                    "output always matches the whole pattern, so anchors are not needed)"
                )
            else:
                self.parts.append(_CharSet(((ord(char), ord(char)),)))
                self.index += 1
        return self.parts

    def after_quantifier(self) -> None:
        pattern = self.pattern
        if self.index < len(pattern) and pattern[self.index] == "?":
            self.parts.append("?")  # lazy: the same language under a full match
            self.index += 1
        elif self.index < len(pattern) and pattern[self.index] == "+":
            self.fail(
                f"possessive quantifiers (the '+' at position {self.index}) are not supported"
            )

    def group_open(self) -> None:
        pattern, start = self.pattern, self.index
        if not pattern.startswith("(?", start):
            self.parts.append("(")
            self.index += 1
            return
        if pattern.startswith("(?#", start):  # a comment ends at the first unescaped ')'
            self.index += 3
            while pattern[self.index] != ")":
                self.index += 2 if pattern[self.index] == "\\" else 1
            self.index += 1
            return
        if pattern.startswith("(?:", start):
            self.parts.append("(?:")
            self.index += 3
            return
        if pattern.startswith("(?P<", start):
            close = pattern.index(">", start)
            self.parts.append(pattern[start : close + 1])
            self.index = close + 1
            return
        if pattern.startswith("(?P=", start):
            self.fail(f"backreferences (at position {start}) are not supported")
        for prefix in ("(?=", "(?!", "(?<=", "(?<!"):
            if pattern.startswith(prefix, start):
                self.fail(
                    f"lookahead and lookbehind assertions (at position {start}) are not supported"
                )
        if pattern.startswith("(?(", start):
            self.fail(f"conditional groups (at position {start}) are not supported")
        if pattern.startswith("(?>", start):
            self.fail(f"atomic groups (at position {start}) are not supported")
        flags = _FLAG_GROUP.match(pattern, start)
        if flags is None:  # re accepted it, so this is a construct new to us
            self.fail(f"the group at position {start} is not supported")
        added, removed, closer = flags.group(1), flags.group(2) or "", flags.group(3)
        for flag, meaning in (("i", "case-insensitive matching"), ("x", "verbose mode")):
            if flag in added:
                self.fail(
                    f"the flag (?{flag}) ({meaning}) is not supported; write the pattern "
                    "without it (for case-insensitivity, list both cases: [aA])"
                )
        if "u" in added:
            self.fail(
                "the flag (?u) is not supported: formcast gives \\d, \\w and \\s their ASCII "
                "meaning"
            )
        kept_added = "".join(f for f in added if f in "sm")  # 'a' is formcast's meaning anyway
        kept_removed = "".join(f for f in removed if f in "sm")
        if closer == ")":
            if kept_added:
                self.parts.append(f"(?{kept_added})")
        elif kept_added or kept_removed:
            minus = f"-{kept_removed}" if kept_removed else ""
            self.parts.append(f"(?{kept_added}{minus}:")
        else:
            self.parts.append("(?:")
        self.index = flags.end()

    def top_escape(self) -> str | _CharSet:
        pattern, start = self.pattern, self.index
        kind = pattern[start + 1]
        if kind in "bB":
            self.fail(f"word boundaries (\\{kind} at position {start}) are not supported")
        if kind in "AZ":
            self.fail(
                f"the anchor \\{kind} at position {start} is not supported (the output "
                "always matches the whole pattern, so anchors are not needed)"
            )
        if kind in "123456789":
            digits = pattern[start + 1 : start + 4]
            if not (len(digits) == 3 and all(d in _OCTAL for d in digits)):
                self.fail(f"backreferences (at position {start}) are not supported")
        return self.escape(in_class=False)

    def escape(self, *, in_class: bool) -> _CharSet:
        """The set denoted by the escape at ``self.index`` (a backslash); moves past it."""
        pattern, start = self.pattern, self.index
        kind = pattern[start + 1]
        end = start + 2
        if kind.lower() in _ASCII_SETS:
            self.index = end
            return _CharSet(_ASCII_SETS[kind.lower()], negated=kind.isupper())
        if kind in "xuU":
            end = start + {"x": 4, "u": 6, "U": 10}[kind]
            code = int(pattern[start + 2 : end], 16)
        elif kind == "N":
            end = pattern.index("}", start) + 1
            code = ord(unicodedata.lookup(pattern[start + 3 : end - 1]))
        elif kind in _OCTAL:
            while end < start + 4 and end < len(pattern) and pattern[end] in _OCTAL:
                end += 1
            code = int(pattern[start + 1 : end], 8)
        elif kind in _CHAR_ESCAPES:
            code = _CHAR_ESCAPES[kind]
        elif kind == "b" and in_class:
            code = 0x08
        elif kind.isascii() and kind.isalnum():
            self.fail(f"the escape \\{kind} at position {start} is not supported")
        else:
            code = ord(kind)
        self.index = end
        return _CharSet(((code, code),))

    def char_class(self) -> _CharSet:
        pattern = self.pattern
        self.index += 1
        negated = pattern[self.index] == "^"
        if negated:
            self.index += 1
        ranges: list[Range] = []
        first = True
        while first or pattern[self.index] != "]":
            first = False
            low = self.class_atom()
            if (
                not low.negated
                and len(low.ranges) == 1
                and low.ranges[0][0] == low.ranges[0][1]
                and pattern[self.index] == "-"
                and pattern[self.index + 1] != "]"
            ):
                self.index += 1
                high = self.class_atom()
                ranges.append((low.ranges[0][0], high.ranges[0][1]))
            elif low.negated:
                ranges.extend(complement(low.ranges))
            else:
                ranges.extend(low.ranges)
        self.index += 1
        return _CharSet(normalize(ranges), negated=negated)

    def class_atom(self) -> _CharSet:
        char = self.pattern[self.index]
        if char == "\\":
            return self.escape(in_class=True)
        self.index += 1
        return _CharSet(((ord(char), ord(char)),))


def _rewrite(pattern: str) -> _Rewritten:
    """Lex ``pattern`` and write it back over one representative character per block.

    A block is a maximal set of code points that every character set of the pattern
    either wholly contains or wholly excludes (the newline is always its own block, for
    ``.``). Cost: O(len(pattern) + sets * ranges) plus sorting; never per code point.
    """
    parts = _Lexer(pattern).run()
    sets = {part.ranges for part in parts if isinstance(part, _CharSet)}
    sets.add(_NEWLINE.ranges)
    ordered = sorted(sets)
    cuts = sorted(
        {lo for ranges in ordered for lo, _ in ranges}
        | {hi + 1 for ranges in ordered for _, hi in ranges}
    )
    position = {cut: index for index, cut in enumerate(cuts)}
    members: list[list[int]] = [[] for _ in cuts]
    for set_index, ranges in enumerate(ordered):
        for lo, hi in ranges:
            for piece in range(position[lo], position[hi + 1]):
                members[piece].append(set_index)
    block_of_signature: dict[tuple[int, ...], list[Range]] = {}
    for piece, owners in enumerate(members):
        if owners:
            block = block_of_signature.setdefault(tuple(owners), [])
            block.append((cuts[piece], cuts[piece + 1] - 1))
    blocks = {chr(block[0][0]): normalize(block) for block in block_of_signature.values()}
    reps_of_set: dict[tuple[Range, ...], list[str]] = {ranges: [] for ranges in ordered}
    for signature, block in block_of_signature.items():
        for set_index in signature:
            reps_of_set[ordered[set_index]].append(chr(block[0][0]))
    out: list[str] = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        reps = sorted(reps_of_set[part.ranges])
        if not part.negated and len(reps) == 1 and blocks[reps[0]] == ((ord(reps[0]),) * 2,):
            out.append(_spell(reps[0]))
        else:
            out.append("[" + ("^" if part.negated else "") + "".join(map(_spell, reps)) + "]")
    return _Rewritten(text="".join(out), blocks=blocks)


def _spell(char: str) -> str:
    """Write one character so interegular reads it literally, inside or outside a class."""
    return f"\\x{ord(char):02x}" if ord(char) < 0x80 else char


def _parse_char_fsm(pattern: str) -> tuple[Any, dict[str, tuple[Range, ...]]]:
    """Validate with ``re``, rewrite, and build interegular's character DFA.

    Returns the DFA and the ranges each representative character stands for. Every
    failure becomes a :class:`SchemaError` naming the pattern and the reason.
    """
    try:
        compiled = re.compile(pattern)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        _fail(pattern, f"Python's re rejects it: {exc}", exc)
    if compiled.flags & re.IGNORECASE:
        _fail(pattern, "case-insensitive matching is not supported; list both cases: [aA]")
    if compiled.flags & re.VERBOSE:
        _fail(pattern, "verbose mode (?x) is not supported; write the pattern without it")
    rewritten = _rewrite(pattern)
    try:
        parsed = interegular.parse_pattern(rewritten.text)
        if tuple(parsed.prefix_postfix) != (0, 0):
            _fail(pattern, "lookahead and lookbehind assertions are not supported")
        return parsed.to_fsm(), rewritten.blocks
    except (SchemaError, MemoryError):
        raise
    except interegular.Unsupported as exc:
        _fail(pattern, f"interegular does not support {exc or 'a construct in it'}", exc)
    except interegular.InvalidSyntax as exc:
        _fail(pattern, f"interegular cannot parse it{f': {exc}' if str(exc) else ''}", exc)
    except Exception as exc:  # interegular raises bare Exception/AttributeError on some input
        _fail(pattern, f"interegular failed with {type(exc).__name__}: {exc}", exc)


# ------------------------------------------------------------ interegular's symbols


def _symbol_ranges(alphabet: Any, blocks: dict[str, tuple[Range, ...]]) -> dict[int, list[Range]]:
    """Transition key -> the code point ranges it stands for (surrogates included).

    A named symbol stands for its block; ``anything_else`` for every code point outside
    the blocks of the named symbols.
    """
    named: dict[int, list[Range]] = {}
    all_named: list[Range] = []
    else_key: int | None = None
    for key, symbols in alphabet.by_transition.items():
        ranges = named.setdefault(int(key), [])
        for symbol in symbols:
            if symbol is anything_else:
                else_key = int(key)
                continue
            block = blocks.get(symbol)
            if block is None:
                raise RuntimeError(f"reference fsm: interegular produced unknown symbol {symbol!r}")
            ranges.extend(block)
        all_named.extend(ranges)
    result = {key: list(normalize(ranges)) for key, ranges in named.items()}
    if else_key is not None:
        result[else_key] = list(normalize([*result[else_key], *complement(all_named)]))
    return result


# ---------------------------------------------------------------- byte expansion


class _ByteBuilder:
    """Grows the byte DFA row by row; intermediate states are shared by their suffixes."""

    def __init__(self) -> None:
        self.rows: list[IntArray] = []
        self.nodes: dict[frozenset[tuple[ByteSeq, int]], int] = {}
        self.pending: deque[tuple[int, frozenset[tuple[ByteSeq, int]]]] = deque()

    def new_state(self) -> int:
        self.rows.append(np.full(256, _NO_EDGE, dtype=np.int32))
        return len(self.rows) - 1

    def node(self, items: frozenset[tuple[ByteSeq, int]]) -> int:
        found = self.nodes.get(items)
        if found is None:
            found = self.new_state()
            self.nodes[items] = found
            self.pending.append((found, items))
        return found

    def fill(self, state: int, items: Iterable[tuple[ByteSeq, int]]) -> None:
        """Set ``state``'s row so that it reads each (byte-range sequence, target) item.

        Items must be disjoint as byte-string sets and prefix-free (true of UTF-8). The
        first byte ranges are cut into elementary intervals; bytes sharing an interval
        share a successor: the target itself after a last byte, else the shared node of
        the remaining suffixes.
        """
        row = self.rows[state]
        longer: list[tuple[ByteSeq, int]] = []
        for seq, target in items:
            if len(seq) == 1:
                lo, hi = seq[0]
                row[lo : hi + 1] = target
            else:
                longer.append((seq, target))
        if not longer:
            return
        cuts = sorted({seq[0][0] for seq, _ in longer} | {seq[0][1] + 1 for seq, _ in longer})
        position = {cut: index for index, cut in enumerate(cuts)}
        buckets: list[list[tuple[ByteSeq, int]]] = [[] for _ in cuts]
        for seq, target in longer:
            lo, hi = seq[0]
            for index in range(position[lo], position[hi + 1]):
                buckets[index].append((seq[1:], target))
        for index, bucket in enumerate(buckets):
            if bucket:
                row[cuts[index] : cuts[index + 1]] = self.node(frozenset(bucket))

    def drain(self) -> None:
        while self.pending:
            state, items = self.pending.popleft()
            self.fill(state, items)


def _live_char_states(char_fsm: Any, usable: dict[int, list[Range]]) -> list[int]:
    """States of the character DFA reachable from initial and co-reachable to a final.

    Transitions on keys with no encodable code point (``usable`` empty) are ignored.
    Returns them in breadth-first order from the initial state (initial first).
    """
    forward: dict[int, list[int]] = {}
    backward: dict[int, list[int]] = {}
    for source, arcs in char_fsm.map.items():
        for key, target in arcs.items():
            if usable.get(int(key)):
                forward.setdefault(source, []).append(target)
                backward.setdefault(target, []).append(source)
    order = [char_fsm.initial]
    seen = {char_fsm.initial}
    for state in order:
        for nxt in forward.get(state, ()):
            if nxt not in seen:
                seen.add(nxt)
                order.append(nxt)
    alive = set(char_fsm.finals)
    stack = list(alive)
    while stack:
        state = stack.pop()
        for prev in backward.get(state, ()):
            if prev not in alive:
                alive.add(prev)
                stack.append(prev)
    return [state for state in order if state in alive]


def _expand_to_bytes(
    char_fsm: Any, blocks: dict[str, tuple[Range, ...]]
) -> tuple[IntArray, BoolArray]:
    """Character DFA -> byte DFA (initial state 0). Zero rows if the language is empty."""
    key_ranges = _symbol_ranges(char_fsm.alphabet, blocks)
    usable = {key: [r for r in ranges if utf8_sequences(*r)] for key, ranges in key_ranges.items()}
    live = _live_char_states(char_fsm, usable)
    if not live or live[0] != char_fsm.initial:
        return np.zeros((0, 256), dtype=np.int32), np.zeros(0, dtype=np.bool_)
    builder = _ByteBuilder()
    state_of = {char_state: builder.new_state() for char_state in live}
    for char_state in live:
        by_target: dict[int, list[Range]] = {}
        for key, target in char_fsm.map.get(char_state, {}).items():
            if target in state_of and usable.get(int(key)):
                by_target.setdefault(state_of[target], []).extend(usable[int(key)])
        items = [
            (seq, target)
            for target, ranges in by_target.items()
            for lo, hi in normalize(ranges)
            for seq in utf8_sequences(lo, hi)
        ]
        builder.fill(state_of[char_state], items)
    builder.drain()
    transitions = np.stack(builder.rows).astype(np.int32, copy=False)
    accepting = np.zeros(len(builder.rows), dtype=np.bool_)
    for char_state in live:
        if char_state in char_fsm.finals:
            accepting[state_of[char_state]] = True
    return transitions, accepting


# ------------------------------------------------------- minimise, renumber, distance


def _minimise(
    transitions: IntArray, accepting: BoolArray, initial: int
) -> tuple[IntArray, BoolArray, int]:
    """Merge equivalent states (Moore's partition refinement, vectorised).

    Columns (bytes) that behave identically in every state are collapsed first, so one
    round costs O(num_states * byte_classes). Each round hashes a state's class with its
    successors' classes into a random 64-bit signature; a final exact check that the
    partition is a congruence guards against hash collisions (falling back to exact row
    comparison). Returns the quotient automaton and its initial state. The number of
    rounds is the length of the longest distinguishing suffix needed, at most num_states.
    """
    num_states = int(transitions.shape[0])
    columns = _distinct_columns(transitions)
    successors = np.where(columns < 0, num_states, columns).astype(np.int64)
    width = int(successors.shape[1])
    rng = np.random.default_rng(0x5EED)
    weights = np.asarray(
        rng.integers(1, np.iinfo(np.int64).max, size=width + 1, dtype=np.int64),
        dtype=np.uint64,
    )

    def refine(classes: npt.NDArray[np.int64], exact: bool) -> npt.NDArray[np.int64]:
        extended = np.append(classes, -1)  # the dead sink is a class of its own
        if exact:
            signature = np.column_stack((classes, extended[successors]))
            _, fresh = np.unique(signature, axis=0, return_inverse=True)
        else:
            signed = (extended + 1).astype(np.uint64)
            with np.errstate(over="ignore"):
                hashed = signed[successors] * weights[1:]
                mixed = hashed.sum(axis=1, dtype=np.uint64) + signed[:-1] * weights[0]
            _, fresh = np.unique(mixed, return_inverse=True)
        return np.asarray(fresh, dtype=np.int64).reshape(-1)

    def stable(exact: bool) -> npt.NDArray[np.int64]:
        classes = accepting.astype(np.int64)
        count = len(np.unique(classes))
        while True:
            fresh = refine(classes, exact)
            fresh_count = int(fresh.max()) + 1
            if fresh_count == count:
                return fresh
            classes, count = fresh, fresh_count

    classes = stable(exact=False)
    if not _is_congruence(classes, successors, accepting):
        classes = stable(exact=True)
    count = int(classes.max()) + 1
    if count == num_states:
        return transitions, accepting, initial
    _, representative = np.unique(classes, return_index=True)  # first member of each class
    extended = np.append(classes, _NO_EDGE)
    rows = transitions[representative]
    merged = extended[np.where(rows < 0, num_states, rows)].astype(np.int32)
    return merged, accepting[representative], int(classes[initial])


def _distinct_columns(transitions: IntArray) -> IntArray:
    """One column per class of bytes that every state treats alike (order unspecified).

    Columns are grouped by a random 64-bit hash, then checked exactly; on a (vanishingly
    unlikely) collision the exact but slower ``np.unique(axis=1)`` is used instead.
    """
    rng = np.random.default_rng(0xB17E5)
    weights = np.asarray(
        rng.integers(1, np.iinfo(np.int64).max, size=transitions.shape[0], dtype=np.int64),
        dtype=np.uint64,
    )
    with np.errstate(over="ignore"):
        shifted = (transitions.astype(np.int64) + 2).astype(np.uint64)
        hashed = (shifted * weights[:, None]).sum(axis=0, dtype=np.uint64)
    _, first, group = np.unique(hashed, return_index=True, return_inverse=True)
    columns = transitions[:, first]
    if np.array_equal(columns[:, np.asarray(group).reshape(-1)], transitions):
        return columns
    return np.unique(transitions, axis=1)


def _is_congruence(
    classes: npt.NDArray[np.int64], successors: npt.NDArray[np.int64], accepting: BoolArray
) -> bool:
    """Whether every state agrees with its class's representative on acceptance and moves."""
    count = int(classes.max()) + 1
    representative = np.zeros(count, dtype=np.int64)
    representative[classes] = np.arange(classes.size)
    rep_of = representative[classes]
    if not np.array_equal(accepting, accepting[rep_of]):
        return False
    extended = np.append(classes, -1)
    return bool(np.array_equal(extended[successors], extended[successors[rep_of]]))


def _renumber_bfs(
    transitions: IntArray, accepting: BoolArray, initial: int
) -> tuple[IntArray, BoolArray]:
    """Keep the states reachable from ``initial`` and co-reachable to acceptance.

    They are numbered in breadth-first order (successors by ascending old index), so
    ``initial`` becomes 0. O(num_states * 256) vectorised plus O(edges) in Python.
    """
    num_states = int(transitions.shape[0])
    alive = (_reverse_bfs(transitions, accepting) >= 0).tolist()
    starts, successors = _edge_lists(transitions, reverse=False)
    order: list[int] = [initial]
    seen = [False] * num_states
    seen[initial] = True
    for state in order:
        for nxt in successors[starts[state] : starts[state + 1]]:
            if alive[nxt] and not seen[nxt]:
                seen[nxt] = True
                order.append(nxt)
    keep = np.asarray(order, dtype=np.int64)
    relabel = np.full(num_states + 1, _NO_EDGE, dtype=np.int32)
    relabel[keep] = np.arange(keep.size, dtype=np.int32)
    rows = transitions[keep]
    renumbered = relabel[np.where(rows < 0, num_states, rows)]
    return renumbered.astype(np.int32), accepting[keep].copy()


def _edge_lists(transitions: IntArray, *, reverse: bool) -> tuple[list[int], list[int]]:
    """Deduplicated adjacency in CSR form: neighbours of ``s`` are ``tails[starts[s]:starts[s+1]]``.

    Forward lists successors, ``reverse=True`` predecessors; each list is sorted.
    """
    num_states = int(transitions.shape[0])
    live = transitions >= 0
    sources, _ = np.nonzero(live)
    targets = transitions[live].astype(np.int64)
    heads, tails = (targets, sources) if reverse else (sources, targets)
    pairs = np.unique(heads.astype(np.int64) * num_states + tails)
    starts = np.searchsorted(pairs // num_states, np.arange(num_states + 1))
    return starts.tolist(), (pairs % num_states).tolist()


def _reverse_bfs(transitions: IntArray, accepting: BoolArray) -> IntArray:
    """Fewest bytes from each state to an accepting state; -1 where none is reachable."""
    starts, predecessors = _edge_lists(transitions, reverse=True)
    frontier = np.flatnonzero(accepting).tolist()
    distance = [-1] * int(transitions.shape[0])
    for state in frontier:
        distance[state] = 0
    queue = deque(frontier)
    while queue:
        state = queue.popleft()
        step = distance[state] + 1
        for prev in predecessors[starts[state] : starts[state + 1]]:
            if distance[prev] < 0:
                distance[prev] = step
                queue.append(prev)
    return np.asarray(distance, dtype=np.int32)


def _with_dead_sink(transitions: IntArray, accepting: BoolArray) -> tuple[IntArray, BoolArray]:
    """Number the dead sink :data:`DEAD` (0): states move up by one, and "no edge"
    (``-1``) becomes an edge to the sink."""
    sink = np.full((1, 256), DEAD, dtype=np.int32)
    shifted = np.vstack([sink, transitions + 1]).astype(np.int32)
    return shifted, np.concatenate([[False], accepting])


def _without_dead_sink(transitions: IntArray) -> IntArray:
    """``transitions`` with the edges into :data:`DEAD` as "no edge" (``-1``)."""
    return np.where(transitions == DEAD, _NO_EDGE, transitions).astype(np.int32)

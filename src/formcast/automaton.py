"""Regular expression -> *lazy* deterministic automaton over UTF-8 bytes.

Same contract as :mod:`formcast.fsm` (the automaton reads bytes and accepts exactly the
UTF-8 encodings of the strings the pattern fully matches), but nothing is determinized
up front: compiling costs time linear in the pattern, and a DFA state's row of 256
transitions is computed the first time a walk reaches that state.

Pipeline, and what each step costs:

1. **Parse** (our own iterative parser, no recursion, so nesting depth is unbounded)
   straight into a Thompson NFA over bytes. Character sets (literals, classes,
   shorthands, ``.``) become code point ranges, then UTF-8 byte-range sequences (the
   range is split by encoding length and wherever the continuation bytes do not span
   whole blocks), then a small deterministic byte trie that is cached per set and
   instantiated by offsetting state ids. ``[^"\\\\]`` costs ~10 NFA states, never an
   enumeration of code points. Runs of literal characters become one chain.
2. **Counted repeats** ``X{m,n}``: ``n`` copies of ``X`` chained by epsilon edges, with
   an exit after each of copies ``m..n`` (never nested optionals, so linear in ``n``).
   Small ones (at most 4,096 added states) are copied concretely with numpy. Larger
   ones, and any repeat of a fragment that holds one, become a *virtual block*: ``X``
   is kept once as a template and the copies are id ranges whose edges are derived on
   demand (template edges shifted into the copy, plus the repeat's own glue). Real
   schemas nest them (``maxLength: 32767`` strings inside ``maxItems: 99`` arrays would
   be ~10^8 copied states); as blocks they cost O(1) to build.
3. **Trimmed by construction**: a sub-expression whose language is empty (a class with
   no encodable character, such as ``[\\ud800-\\udfff]``) is never linked in, so every
   NFA state reachable from the start can reach the accepting state. Hence every DFA
   state other than :data:`DEAD` can be completed to an accepted string. Concrete
   states whose only way out is one epsilon edge are then bypassed (pointer jumping).
4. **Lazy subset construction**: a DFA state is the frozenset of the "important" NFA
   states (those with byte edges, plus the final state) in an epsilon closure. A row is
   built by grouping the members' byte-range edges by range, joining their targets,
   and splitting overlapping ranges into segments (one frozenset per segment, never
   per byte); epsilon closures of single NFA states are memoized.

Measured CPU time (one core of a shared 2-core machine, Python 3.11; 360 JSON-Schema
regexes from ``maskbench``, ``tests/test_automaton.py`` prints some): compiling ~2 us
per pattern character (1,000 characters ~1 ms; 3,000 ~5 ms; 100,000 ~0.1 s; 900,000
~1.1 s); a row ~20-100 us (a few hundred us for states with hundreds of NFA members);
:meth:`LazyAutomaton.step` over 49k (state, byte) pairs whose rows exist ~0.3 ms. The
first :meth:`LazyAutomaton.min_bytes_to_accept` call per ``usable`` mask runs a search
backwards over the concrete NFA (~0.05-0.1 s per 100,000 pattern characters; virtual copies
are summarized, never enumerated); later calls are O(members of the state).

Dialect (Python :mod:`re` syntax, full-match semantics): literals (any character),
escapes of punctuation, ``\\n \\t \\r \\f \\v \\a \\0``, octal, ``\\xNN \\uNNNN
\\UNNNNNNNN \\N{name}``, ``\\d \\w \\s`` with their ASCII meaning (as under
:data:`re.ASCII`) and ``\\D \\W \\S`` their complements over all of Unicode, ``.`` (any
character but ``\\n``; any character under ``(?s)``), classes with ranges, negation and
escapes, groups ``( )``, ``(?: )``, ``(?P<name> )``, comments ``(?#...)``, alternation
(empty branches included), greedy and lazy quantifiers ``? * + {m} {m,} {m,n} {,n}``,
the flags ``a m s`` (global at the start, or scoped ``(?s:...)``), ``^`` at the very
start and ``$`` at the very end (no-ops under full match). Also PCRE's definitions and
subroutine calls, which Python's ``re`` lacks: the pattern may open with
``(?(DEFINE)(?P<name>...)...)``, whose named groups match nothing there, and
``(?&name)`` anywhere after a definition matches what its body matches (bodies call
only earlier definitions: no recursion). A call to a definition of more than
:data:`_CALL_COPY_LIMIT` states is a virtual block of one copy (below), so nested calls
cost their text once, however large their expansion. Refused with
:class:`~formcast.errors.SchemaError` (message "expected a regular expression formcast
can compile, found <pattern>: <reason> at position N"): lookarounds, backreferences,
``\\b \\B \\A \\Z``, anchors elsewhere, the flags ``i x u L``, possessive quantifiers,
atomic and conditional groups, and whatever Python's ``re`` itself rejects (unbalanced
parentheses, ``a{3,1}``, bad escapes, nothing to repeat). Text that is not valid UTF-8
(overlong forms, surrogates, beyond U+10FFFF, truncated) is never accepted.

Thread safety: reads (:meth:`LazyAutomaton.step` on built rows) take no lock; building
rows is serialised by a lock with a double check, so concurrent walkers are safe.
Instances pickle with the rows built so far.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable
from functools import lru_cache
from heapq import heappop, heappush
from itertools import pairwise
from operator import itemgetter
from typing import Any, NamedTuple, NoReturn

import numpy as np
import numpy.typing as npt

from formcast.charset import (
    ANY,
    DIGIT,
    MAX_CODE_POINT,
    SPACE,
    WORD,
    ByteSeq,
    Range,
    complement,
    normalize,
    utf8_sequences,
)
from formcast.errors import SchemaError, UserError

__all__ = ["DEAD", "UNREACHABLE", "LazyAutomaton"]

DEAD = 0
"""The dead sink state: every byte leads from it to itself. Its frozenset is empty."""

UNREACHABLE = int(np.iinfo(np.int32).max // 2)
"""What :meth:`LazyAutomaton.min_bytes_to_accept` returns when no accepting state can be
reached (only for :data:`DEAD`, or when ``usable`` forbids every way out)."""

IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
# A class template: (number of local states, src, lo, hi, dst); local 0 = start, 1 = end.
Template = tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]
# A fragment under construction: (start, end, first concrete state, first byte edge,
# first eps edge, first virtual state). start == -1 marks an empty language. Its states
# and edges run from the "first" indices to the current ends of the builder's lists (it
# is always the last one built).
Fragment = tuple[int, int, int, int, int, int]

_VIRTUAL_BASE = 1 << 40  # state ids from here on are virtual copies (see _Block)
_VIRTUAL_LIMIT = 1 << 62
_CONCRETE_COPY_LIMIT = 4096  # repeats adding more states than this become virtual blocks
_MAX_COPIES = 1_000_000
_UNBUILT = -1  # table entries of rows not built yet
_END = -2  # in a template's row: "the copy's end", replaced by what follows each copy
_SHIFT_SAFE = 1 << 23  # below this many states, (state << 8) | byte fits an int32
_CONCRETE_BUDGET = 1_000_000  # past this many concrete states, every repeat is virtual
_DISTANCE_TABLES_KEPT = 8  # distance tables kept per automaton (one per usable mask/costs)
_SHOWN_PATTERN = 80
_INITIAL_CAPACITY = 64

_SHORTHANDS: dict[str, tuple[Range, ...]] = {
    "d": DIGIT,
    "w": WORD,
    "s": SPACE,
    "D": complement(DIGIT),
    "W": complement(WORD),
    "S": complement(SPACE),
}
_ANY_BUT_NEWLINE: tuple[Range, ...] = ((0, 0x09), (0x0B, MAX_CODE_POINT))
_CONTROL_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "a": 0x07}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_OCTAL_DIGITS = frozenset("01234567")
_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


@lru_cache(maxsize=4096)
def _class_template(ranges: tuple[Range, ...]) -> Template | None:
    """A deterministic byte trie reading exactly the UTF-8 encodings of ``ranges``.

    Local state 0 is the start, 1 the end; nodes inside a multi-byte character are keyed
    by the set of byte-range suffixes still to read, so equal suffixes share a node.
    ``None`` when no code point in ``ranges`` has an encoding (e.g. only surrogates).
    """
    sequences = [seq for lo, hi in ranges for seq in utf8_sequences(lo, hi)]
    if not sequences:
        return None
    src: list[int] = []
    lo_: list[int] = []
    hi_: list[int] = []
    dst: list[int] = []
    node_of: dict[frozenset[ByteSeq], int] = {}
    count = 2
    work: list[tuple[int, list[ByteSeq]]] = [(0, sequences)]

    def emit(edge: tuple[int, int, int] | None, state: int) -> None:
        if edge is not None:
            src.append(state)
            lo_.append(edge[0])
            hi_.append(edge[1])
            dst.append(edge[2])

    while work:
        state, items = work.pop()
        cuts = sorted({seq[0][0] for seq in items} | {seq[0][1] + 1 for seq in items})
        pending: tuple[int, int, int] | None = None
        for a, b in pairwise(cuts):
            rests = [seq[1:] for seq in items if seq[0][0] <= a <= seq[0][1]]
            if not rests:
                emit(pending, state)
                pending = None
                continue
            if not rests[0]:  # UTF-8 is prefix-free: all of them end here
                target = 1
            else:
                key = frozenset(rests)
                found = node_of.get(key)
                if found is None:
                    found = count
                    count += 1
                    node_of[key] = found
                    work.append((found, list(key)))
                target = found
            if pending is not None and pending[2] == target and pending[1] == a - 1:
                pending = (pending[0], b - 1, target)
            else:
                emit(pending, state)
                pending = (a, b - 1, target)
        emit(pending, state)
    return count, tuple(src), tuple(lo_), tuple(hi_), tuple(dst)


# ------------------------------------------------------------------------ errors


def _show(pattern: str) -> str:
    if len(pattern) <= _SHOWN_PATTERN:
        return repr(pattern)
    return f"{pattern[:_SHOWN_PATTERN]!r}... ({len(pattern)} characters)"


def _refuse(pattern: str, reason: str, position: int | None) -> NoReturn:
    where = "" if position is None else f" at position {position}"
    raise SchemaError(
        "expected a regular expression formcast can compile, found "
        f"{_show(pattern)}: {reason}{where}"
    )


# ------------------------------------------------------------------ parser + builder

# A run of characters that stand for themselves: plain ones and escaped punctuation.
_LITERAL_RUN = re.compile(r"(?:[^\\^$.|?*+()\[{]|\\[^A-Za-z0-9])+", re.DOTALL)
_UNESCAPE = re.compile(r"\\(.)", re.DOTALL)
_GROUP_1 = itemgetter(1)
# Where a class ends (Python's rules: a ']' right after '[' or '[^' is a literal).
_CLASS_SPAN = re.compile(r"\[\^?\]?(?:[^\]\\]|\\.)*\]", re.DOTALL)
_COUNTED = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_GLOBAL_FLAGS = re.compile(r"\(\?([a-zA-Z]+)\)")
_SCOPED_FLAGS = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?:")
_QUANTIFIER_START = frozenset("*+?{")


class _Block(NamedTuple):
    """The virtual copies of one counted repeat ``X{m,n}`` (or ``X{m,}``, ``m >= 2``).

    ``X`` (the template) is the concrete states ``[s0, s0 + size_c)`` plus the virtual
    states ``[v0, v0 + span - size_c)`` of blocks nested in it. Copy ``j`` (0-based) of
    the template occupies the virtual ids ``[base + j * span, base + (j + 1) * span)``:
    concrete template states first, then nested virtual ones, in order. A virtual state's
    edges are its template state's edges mapped into the copy, plus, at the end of a copy,
    the repeat's own glue (derived here, never stored: on to the next copy; out to the
    last copy's end once ``low`` copies are done; for ``X{m,}`` the last copy loops and
    leaves to ``exit``), plus the epsilon edges a parent attached to that very id.
    """

    base: int
    span: int
    copies: int
    s0: int
    size_c: int
    v0: int
    x_start: int
    x_end: int
    low: int
    bounded: bool
    exit: int  # X{m,}: the concrete state after the loop; -1 when bounded

    def copy_of(self, j: int, state: int) -> int:
        """The id in copy ``j`` of the template state ``state``."""
        concrete_shift, virtual_shift = self.shifts(j)
        return state + (concrete_shift if state < _VIRTUAL_BASE else virtual_shift)

    def shifts(self, j: int) -> tuple[int, int]:
        """What copy ``j`` adds to a concrete and to a virtual template state's id."""
        first = self.base + j * self.span
        return first - self.s0, first + self.size_c - self.v0

    def locate(self, state: int) -> tuple[int, int]:
        """``(copy index, template state)`` of the virtual ``state`` of this block."""
        j, local = divmod(state - self.base, self.span)
        if local < self.size_c:
            return j, self.s0 + local
        return j, self.v0 + local - self.size_c

    def glue(self, j: int) -> list[int]:
        """Where the end of copy ``j`` leads (epsilon edges derived from the repeat)."""
        last = self.copies - 1
        out = []
        if j < last:
            out.append(self.copy_of(j + 1, self.x_start))
            if self.bounded and j >= max(self.low, 1) - 1:
                out.append(self.copy_of(last, self.x_end))
        elif not self.bounded:
            out.append(self.copy_of(last, self.x_start))
            out.append(self.exit)
        return out

    @property
    def template(self) -> tuple[int, int, int, int, int, int]:
        """What identifies the template: the calls to one definition share it, and with it
        their relative edges and distance tables."""
        return (self.s0, self.size_c, self.v0, self.span, self.x_start, self.x_end)

    def copies_still_needed(self, j: int) -> int:
        """Copies after copy ``j`` that a shortest way out must still read."""
        return max(0, max(self.low, 1) - 1 - j)


_CALL_COPY_LIMIT = 64
"""Definitions with at most this many (all concrete) states are copied concretely per call."""

_MEMO_MIN_GROUP = 40
"""Groups at least this many characters long are parsed once per distinct text."""

# a remembered group: (fragment, concrete state end, byte-edge end, epsilon-edge end)
_MemoEntry = tuple[Fragment, int, int, int]


class _Builder:
    """Parses a pattern and builds its Thompson NFA over bytes in flat edge lists.

    Fragments are built in post-order, so each occupies a contiguous range of state ids
    and edge indices ending at the current list ends; that is what makes counted repeats
    a vectorized offset copy. Invariant of every fragment: its start has no incoming
    edge and its end no outgoing edge inside the fragment (``X?`` relies on it).
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.n = 0  # concrete states
        self.vn = _VIRTUAL_BASE  # next virtual state id
        self.blocks: list[_Block] = []
        self.bsrc: list[int] = []
        self.blo: list[int] = []
        self.bhi: list[int] = []
        self.bdst: list[int] = []
        self.esrc: list[int] = []
        self.edst: list[int] = []
        self.class_cache: dict[str, tuple[Range, ...]] = {}
        self.group_names: set[str] = set()
        # first characters of a group -> (group text, dotall, (fragment, concrete end,
        # bsrc end, esrc end)) of the first instance of each long group with that start;
        # repeats are copied instead of parsed again.
        self.group_memo: dict[str, list[tuple[str, bool, _MemoEntry]]] = {}
        # name -> (fragment, concrete state end, virtual state end, byte-edge end,
        # epsilon-edge end) of each definition
        self.definitions: dict[str, tuple[Fragment, int, int, int, int]] = {}
        self.define_level = -1  # stack depth inside (?(DEFINE)...), -1 outside it

    def fail(self, reason: str, position: int | None) -> NoReturn:
        _refuse(self.pattern, reason, position)

    def _empty(self, s0: int, b0: int, e0: int, v0: int) -> Fragment:
        return (-1, -1, s0, b0, e0, v0)

    # -- primitive fragments -----------------------------------------------------------
    def literal(self, text: str) -> Fragment:
        """A chain reading the UTF-8 encoding of ``text``."""
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: no encoding, empty language
            s = self.fresh()
            return self._empty(s, len(self.bsrc), len(self.esrc), self.vn)
        s = self.n
        k = len(data)
        b0 = len(self.bsrc)
        self.bsrc.extend(range(s, s + k))
        self.blo.extend(data)
        self.bhi.extend(data)
        self.bdst.extend(range(s + 1, s + k + 1))
        self.n = s + k + 1
        return (s, s + k, s, b0, len(self.esrc), self.vn)

    def char_set(self, ranges: tuple[Range, ...]) -> Fragment:
        """A fragment reading one character of ``ranges`` (normalized)."""
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            return self.literal(chr(ranges[0][0]))
        template = _class_template(ranges)
        s = self.n
        b0 = len(self.bsrc)
        if template is None:
            self.n += 1
            return self._empty(s, b0, len(self.esrc), self.vn)
        count, tsrc, tlo, thi, tdst = template
        self.bsrc.extend([x + s for x in tsrc])
        self.blo.extend(tlo)
        self.bhi.extend(thi)
        self.bdst.extend([x + s for x in tdst])
        self.n = s + count
        return (s, s + 1, s, b0, len(self.esrc), self.vn)

    def fresh(self) -> int:
        self.n += 1
        return self.n - 1

    def eps(self, a: int, b: int) -> None:
        self.esrc.append(a)
        self.edst.append(b)

    def epsilon_fragment(self) -> Fragment:
        s = self.fresh()
        return (s, s, s, len(self.bsrc), len(self.esrc), self.vn)

    # -- combinators -------------------------------------------------------------------
    def sequence(self, items: list[Fragment]) -> Fragment:
        if not items:
            return self.epsilon_fragment()
        first = items[0]
        if len(items) == 1:
            return first
        for item in items:
            if item[0] < 0:
                return self._empty(first[2], first[3], first[4], first[5])
        esrc, edst = self.esrc, self.edst
        previous = first[1]
        for item in items[1:]:
            esrc.append(previous)
            edst.append(item[0])
            previous = item[1]
        return (first[0], previous, first[2], first[3], first[4], first[5])

    def alternation(self, branches: list[Fragment]) -> Fragment:
        first = branches[0]
        if len(branches) == 1:
            return first
        live = [branch for branch in branches if branch[0] >= 0]
        if not live:
            return self._empty(first[2], first[3], first[4], first[5])
        if len(live) == 1:
            return (live[0][0], live[0][1], first[2], first[3], first[4], first[5])
        start = self.fresh()
        end = self.fresh()
        esrc, edst = self.esrc, self.edst
        for branch in live:
            esrc.append(start)
            edst.append(branch[0])
            esrc.append(branch[1])
            edst.append(end)
        return (start, end, first[2], first[3], first[4], first[5])

    def repeat(self, frag: Fragment, low: int, high: int | None, position: int) -> Fragment:
        """``frag{low,high}`` (``high`` None: unbounded); ``frag`` is the last one built.

        ``X{m,n}`` is ``n`` copies of ``X`` chained by epsilon edges, with an exit after
        each of copies ``m..n`` (``X{m,}``: ``m`` copies, the last one looping). Small
        repeats copy ``X`` concretely (``X`` itself is the first copy); large ones, and
        any repeat of a fragment holding virtual states, make a virtual block: ``X``
        becomes a template and every copy is virtual, resolved on demand.
        """
        start, end, s0, b0, e0, v0 = frag
        if start < 0:
            return self.epsilon_fragment() if low == 0 else frag
        if high == 0:
            return self.epsilon_fragment()
        if low == 1 and high == 1:
            return frag
        if low == 0 and high == 1:
            self.eps(start, end)
            return frag
        if high is None and low <= 1:
            s = self.fresh()
            t = self.fresh()
            self.eps(s, start)
            self.eps(end, start)
            self.eps(end, t)
            if low == 0:
                self.eps(s, t)
            return (s, t, s0, b0, e0, v0)
        copies = high if high is not None else low
        shown = f"{{{low},{'' if high is None else high}}}"
        if copies > _MAX_COPIES:
            self.fail(
                f"the counted repeat {shown} asks for more than {_MAX_COPIES} copies", position
            )
        size_c = self.n - s0
        size_v = self.vn - v0
        added = size_c * (copies - 1)
        if size_v > 0 or added > _CONCRETE_COPY_LIMIT or self.n + added > _CONCRETE_BUDGET:
            return self.virtual_repeat(frag, low, high, copies, shown, position)
        shifts = self.copy_last(s0, b0, e0, copies - 1)
        starts = [start] + [start + shift for shift in shifts]
        ends = [end] + [end + shift for shift in shifts]
        esrc, edst = self.esrc, self.edst
        for i in range(copies - 1):
            esrc.append(ends[i])
            edst.append(starts[i + 1])
        if high is None:  # X{m,}: the last copy loops
            t = self.fresh()
            self.eps(ends[-1], starts[-1])
            self.eps(ends[-1], t)
            return (starts[0], t, s0, b0, e0, v0)
        last = ends[-1]
        for i in range(max(low, 1) - 1, copies - 1):
            esrc.append(ends[i])
            edst.append(last)
        if low == 0:
            s = self.fresh()
            self.eps(s, starts[0])
            self.eps(s, last)
            return (s, last, s0, b0, e0, v0)
        return (starts[0], last, s0, b0, e0, v0)

    def virtual_repeat(
        self, frag: Fragment, low: int, high: int | None, copies: int, shown: str, position: int
    ) -> Fragment:
        """``X{low,high}`` as a virtual block: O(1) here, whatever the number of copies."""
        start, end, s0, b0, e0, v0 = frag
        size_c = self.n - s0
        span = size_c + self.vn - v0
        base = self.vn
        self.vn += span * copies
        if self.vn >= _VIRTUAL_LIMIT:
            self.fail(f"the counted repeat {shown} makes the automaton too large", position)
        exit_state = self.fresh() if high is None else -1
        block = _Block(
            base, span, copies, s0, size_c, v0, start, end, low, high is not None, exit_state
        )
        self.blocks.append(block)
        first = block.copy_of(0, start)
        if high is None:
            return (first, exit_state, s0, b0, e0, v0)
        last = block.copy_of(copies - 1, end)
        if low == 0:
            s = self.fresh()
            self.eps(s, first)
            self.eps(s, last)
            return (s, last, s0, b0, e0, v0)
        return (first, last, s0, b0, e0, v0)

    def copy_last(self, s0: int, b0: int, e0: int, count: int) -> list[int]:
        """Append ``count`` copies of the (all concrete) states/edges from ``(s0, b0, e0)``
        to the current ends. Returns the id shift of each copy."""
        return self.copy_range(s0, self.n, b0, len(self.bsrc), e0, len(self.esrc), count)

    def copy_range(
        self, s0: int, s1: int, b0: int, b1: int, e0: int, e1: int, count: int
    ) -> list[int]:
        """Append ``count`` copies of the concrete states ``[s0, s1)`` with their byte edges
        ``[b0, b1)`` and epsilon edges ``[e0, e1)``, one after another past the last state.

        Returns the id shift of each copy. Vectorized with numpy: O(copies x size).
        """
        size = s1 - s0
        shifts = [self.n - s0 + size * i for i in range(count)]
        if count == 0:
            return shifts
        if count * (b1 - b0 + e1 - e0) < 256:  # small: plain Python beats numpy's overhead
            bsrc, bdst, esrc, edst = self.bsrc, self.bdst, self.esrc, self.edst
            piece_bsrc, piece_bdst = bsrc[b0:b1], bdst[b0:b1]
            piece_esrc, piece_edst = esrc[e0:e1], edst[e0:e1]
            for shift in shifts:
                bsrc.extend([x + shift for x in piece_bsrc])
                bdst.extend([x + shift for x in piece_bdst])
                esrc.extend([x + shift for x in piece_esrc])
                edst.extend([x + shift for x in piece_edst])
            self.blo.extend(self.blo[b0:b1] * count)
            self.bhi.extend(self.bhi[b0:b1] * count)
            self.n += size * count
            return shifts
        offsets = np.asarray(shifts, dtype=np.int64)[:, None]
        if b1 > b0:
            src = np.asarray(self.bsrc[b0:b1], dtype=np.int64)[None, :]
            dst = np.asarray(self.bdst[b0:b1], dtype=np.int64)[None, :]
            self.bsrc.extend((src + offsets).ravel().tolist())
            self.bdst.extend((dst + offsets).ravel().tolist())
            self.blo.extend(self.blo[b0:b1] * count)
            self.bhi.extend(self.bhi[b0:b1] * count)
        if e1 > e0:
            src = np.asarray(self.esrc[e0:e1], dtype=np.int64)[None, :]
            dst = np.asarray(self.edst[e0:e1], dtype=np.int64)[None, :]
            self.esrc.extend((src + offsets).ravel().tolist())
            self.edst.extend((dst + offsets).ravel().tolist())
        self.n += size * count
        return shifts

    # -- escapes and classes -----------------------------------------------------------
    def escape(self, pos: int, *, in_class: bool) -> tuple[tuple[Range, ...] | None, int, int]:
        """Read the escape at ``pos`` (a backslash).

        Returns ``(ranges, code, next_pos)``: ``ranges`` for a shorthand class (then
        ``code`` is -1), else ``None`` and the code point.
        """
        p = self.pattern
        if pos + 1 >= len(p):
            self.fail("bad escape (end of pattern)", pos)
        kind = p[pos + 1]
        if kind in _SHORTHANDS:
            return _SHORTHANDS[kind], -1, pos + 2
        if kind in _CONTROL_ESCAPES:
            return None, _CONTROL_ESCAPES[kind], pos + 2
        if kind in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[kind]
            digits = p[pos + 2 : pos + 2 + width]
            if len(digits) < width or not all(d in _HEX_DIGITS for d in digits):
                self.fail(f"incomplete escape \\{kind}{digits}", pos)
            code = int(digits, 16)
            if code > MAX_CODE_POINT:
                self.fail(f"bad escape \\{kind}{digits} (beyond U+10FFFF)", pos)
            return None, code, pos + 2 + width
        if kind == "N":
            close = p.find("}", pos)
            if not p.startswith("{", pos + 2) or close < 0:
                self.fail("missing {...} after \\N", pos)
            name = p[pos + 3 : close]
            try:
                return None, ord(unicodedata.lookup(name)), close + 1
            except KeyError:
                self.fail(f"undefined character name {name!r}", pos)
        if kind in _OCTAL_DIGITS:
            end = pos + 2
            if in_class or kind == "0":
                while end < pos + 4 and end < len(p) and p[end] in _OCTAL_DIGITS:
                    end += 1
            elif pos + 3 < len(p) and p[pos + 2] in _OCTAL_DIGITS and p[pos + 3] in _OCTAL_DIGITS:
                end = pos + 4
            else:
                self.fail(f"backreferences (\\{kind}) are not supported", pos)
            code = int(p[pos + 1 : end], 8)
            if code > 0o377:
                self.fail(f"octal escape value {p[pos:end]} outside of range 0-0o377", pos)
            return None, code, end
        if kind in "89":
            if in_class:
                self.fail(f"bad escape \\{kind}", pos)
            self.fail(f"backreferences (\\{kind}) are not supported", pos)
        if kind == "b" and in_class:
            return None, 0x08, pos + 2
        if kind in "bB":
            self.fail(f"word boundaries (\\{kind}) are not supported", pos)
        if kind in "AZz":
            self.fail(
                f"the anchor \\{kind} is not supported (the output always matches the whole "
                "pattern, so it is not needed)",
                pos,
            )
        if kind in _ASCII_ALNUM:
            self.fail(f"bad escape \\{kind}", pos)
        return None, ord(kind), pos + 2

    def char_class(self, pos: int) -> tuple[tuple[Range, ...], int]:
        """Parse the class opening at ``pos``; return its normalized ranges and the end."""
        p = self.pattern
        size = len(p)
        i = pos + 1
        negated = i < size and p[i] == "^"
        if negated:
            i += 1
        ranges: list[Range] = []
        first = True
        while True:
            if i >= size:
                self.fail("unterminated character set", pos)
            char = p[i]
            if char == "]" and not first:
                i += 1
                break
            first = False
            atom_pos = i
            if char == "\\":
                shorthand, code, i = self.escape(i, in_class=True)
            else:
                shorthand, code, i = None, ord(char), i + 1
            has_range = i + 1 < size and p[i] == "-" and p[i + 1] != "]"
            if shorthand is not None:
                if has_range:
                    self.fail(f"bad character range {p[atom_pos : i + 2]}", atom_pos)
                ranges.extend(shorthand)
                continue
            if not has_range:
                ranges.append((code, code))
                continue
            j = i + 1
            if p[j] == "\\":
                high_set, high, j = self.escape(j, in_class=True)
                if high_set is not None:
                    self.fail(f"bad character range {p[atom_pos:j]}", atom_pos)
            else:
                high, j = ord(p[j]), j + 1
            if high < code:
                self.fail(f"bad character range {p[atom_pos:j]}", atom_pos)
            ranges.append((code, high))
            i = j
        result = complement(ranges) if negated else normalize(ranges)
        return result, i

    # -- the parser --------------------------------------------------------------------
    def parse(self) -> Fragment:
        """Parse the whole pattern; returns the top fragment (start == -1 if empty)."""
        p = self.pattern
        pos = 0
        size = len(p)
        dotall = False
        # Global flags, then '^', may open the pattern; '$' may close it.
        while True:
            flags = _GLOBAL_FLAGS.match(p, pos)
            if flags is None:
                break
            dotall = self.flags(flags.group(1), "", pos) or dotall
            pos = flags.end()
        if p.startswith("^", pos):
            pos += 1
        if size > pos and p[size - 1] == "$":
            backslashes = 0
            while size - 2 - backslashes >= pos and p[size - 2 - backslashes] == "\\":
                backslashes += 1
            if backslashes % 2 == 0:
                size -= 1

        # stack of open groups: (items, branches, open position, dotall outside)
        stack: list[tuple[list[Fragment], list[Fragment], int, bool]] = []
        items: list[Fragment] = []
        branches: list[Fragment] = []
        quantifiable = False  # whether items[-1] may take a quantifier
        literal_run = _LITERAL_RUN.match
        class_span = _CLASS_SPAN.match
        class_cache = self.class_cache
        while pos < size:
            char = p[pos]
            if self.define_level == len(stack) and char != ")" and not p.startswith("(?P<", pos):
                self.fail("(?(DEFINE)...) may hold only named groups (?P<name>...)", pos)
            if char == "\\" and pos + 1 < size and p[pos + 1] in _ASCII_ALNUM:
                shorthand, code, pos = self.escape(pos, in_class=False)
                items.append(
                    self.char_set(shorthand) if shorthand is not None else self.literal(chr(code))
                )
                quantifiable = True
                continue
            if char not in "\\^$.|?*+()[{" or char == "\\":
                run = literal_run(p, pos, size)
                if run is None:  # a lone backslash at the end
                    self.fail("bad escape (end of pattern)", pos)
                text = run.group()
                end = run.end()
                if "\\" in text:
                    text = _UNESCAPE.sub(_GROUP_1, text)
                if end < size and p[end] in _QUANTIFIER_START and len(text) > 1:
                    items.append(self.literal(text[:-1]))  # the last char takes the quantifier
                    items.append(self.literal(text[-1]))
                else:
                    items.append(self.literal(text))
                quantifiable = True
                pos = end
                continue
            if char == "[":
                span = class_span(p, pos, size)
                cached = class_cache.get(span.group()) if span is not None else None
                if cached is None:
                    cached, end = self.char_class(pos)
                    class_cache[p[pos:end]] = cached
                else:
                    end = span.end()  # type: ignore[union-attr]
                items.append(self.char_set(cached))
                quantifiable = True
                pos = end
                continue
            if char == ".":
                items.append(self.char_set(ANY if dotall else _ANY_BUT_NEWLINE))
                quantifiable = True
                pos += 1
                continue
            if char in "*+?{":
                if char == "{":
                    counted = _COUNTED.match(p, pos, size)
                    if counted is None or counted.group(0) == "{}":
                        items.append(self.literal("{"))
                        quantifiable = True
                        pos += 1
                        continue
                    low = int(counted.group(1) or 0)
                    if counted.group(2) is None:
                        high: int | None = low
                    else:
                        high = int(counted.group(3)) if counted.group(3) else None
                    if high is not None and low > high:
                        self.fail("min repeat greater than max repeat", pos + 1)
                    end = counted.end()
                else:
                    low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
                    end = pos + 1
                if not quantifiable:
                    self.fail("multiple repeat" if items else "nothing to repeat", pos)
                if end < size and p[end] == "?":
                    end += 1  # lazy: the same language under a full match
                elif end < size and p[end] == "+":
                    self.fail("possessive quantifiers are not supported", end)
                items[-1] = self.repeat(items[-1], low, high, pos)
                quantifiable = False
                pos = end
                continue
            if char == "|":
                branches.append(self.sequence(items))
                items = []
                quantifiable = False
                pos += 1
                continue
            if char == "(" and p.startswith("(?&", pos):
                close = p.find(")", pos, size)
                if close < 0:
                    self.fail("missing ), unterminated subroutine call", pos)
                items.append(self.call(p[pos + 3 : close], pos))
                quantifiable = True
                pos = close + 1
                continue
            if char == "(" and p.startswith("(?(DEFINE)", pos):
                if stack or items or branches or self.definitions:
                    self.fail("(?(DEFINE)...) must open the pattern", pos)
                stack.append((items, branches, pos, dotall))
                self.define_level = len(stack)
                pos += len("(?(DEFINE)")
                continue
            if char == "(":
                reused = self.reuse_group(pos, dotall)
                if reused is not None:
                    items.append(reused[0])
                    quantifiable = True
                    pos = reused[1]
                    continue
                open_pos = pos
                pos = self.open_group(pos, size)
                if pos < 0:  # a comment
                    pos = -pos
                    continue
                stack.append((items, branches, open_pos, dotall))
                scoped = _SCOPED_FLAGS.match(p, open_pos) if pos == open_pos + 1 else None
                if scoped is not None:
                    added, removed = scoped.group(1), scoped.group(2) or ""
                    dotall = self.flags(added, removed, open_pos, dotall)
                    pos = scoped.end()
                items = []
                branches = []
                quantifiable = False
                continue
            if char == ")":
                if not stack:
                    self.fail("unbalanced parenthesis", pos)
                if len(stack) == self.define_level:  # the end of the definitions
                    items, branches, open_pos, dotall = stack.pop()
                    self.define_level = -1
                    pos += 1
                    continue
                branches.append(self.sequence(items))
                group = self.alternation(branches)
                items, branches, open_pos, dotall = stack.pop()
                if len(stack) == self.define_level:
                    self.define(open_pos, group)
                    pos += 1
                    continue
                self.remember_group(open_pos, pos, dotall, group)
                items.append(group)
                quantifiable = True
                pos += 1
                continue
            if char == "^":
                self.fail("the anchor '^' is only supported at the very start of the pattern", pos)
            if char == "$":
                self.fail("the anchor '$' is only supported at the very end of the pattern", pos)
            raise AssertionError(f"unhandled character {char!r}")  # pragma: no cover
        if stack:
            self.fail("missing ), unterminated subpattern", stack[-1][2])
        branches.append(self.sequence(items))
        return self.alternation(branches)

    def define(self, open_pos: int, group: Fragment) -> None:
        """Record the just-closed definition ``(?P<name>...)`` inside ``(?(DEFINE)...)``.

        Its states stay in the NFA, linked to nothing: they are the template that every
        call copies (see :meth:`call`)."""
        name = self.pattern[open_pos + 4 : self.pattern.index(">", open_pos)]
        self.definitions[name] = (group, self.n, self.vn, len(self.bsrc), len(self.esrc))

    def call(self, name: str, pos: int) -> Fragment:
        """The subroutine call ``(?&name)``: a copy of the definition ``name``.

        Small all-concrete definitions are copied concretely; others become a virtual
        block of one copy, O(1) here whatever their size, so a definition nesting calls
        to others (JSON values nesting values) costs its own text once, not the size of
        its expansion."""
        entry = self.definitions.get(name)
        if entry is None:
            self.fail(f"unknown subroutine {name!r}: (?&name) must follow its definition", pos)
        (start, end, s0, b0, e0, v0), n_end, vn_end, b_end, e_end = entry
        if start < 0:
            s = self.fresh()
            return self._empty(s, len(self.bsrc), len(self.esrc), self.vn)
        size_c = n_end - s0
        size_v = vn_end - v0
        if size_v == 0 and size_c <= _CALL_COPY_LIMIT and self.n + size_c <= _CONCRETE_BUDGET:
            return self.copy_group(((start, end, s0, b0, e0, v0), n_end, b_end, e_end))
        block = _Block(self.vn, size_c + size_v, 1, s0, size_c, v0, start, end, 1, True, -1)
        first_virtual = self.vn
        self.vn += block.span
        if self.vn >= _VIRTUAL_LIMIT:
            self.fail(f"the subroutine {name!r} makes the automaton too large", pos)
        self.blocks.append(block)
        return (
            block.copy_of(0, start),
            block.copy_of(0, end),
            self.n,
            len(self.bsrc),
            len(self.esrc),
            first_virtual,
        )

    def remember_group(self, open_pos: int, close_pos: int, dotall: bool, group: Fragment) -> None:
        """Keep a just-closed long group for :meth:`reuse_group` (all-concrete groups with
        no named group inside only: copies must not redefine names)."""
        if close_pos - open_pos < _MEMO_MIN_GROUP or group[0] < 0 or group[5] != self.vn:
            return
        text = self.pattern[open_pos : close_pos + 1]
        if "(?P<" in text:
            return
        known = self.group_memo.setdefault(text[:_MEMO_MIN_GROUP], [])
        if not any(t == text and d == dotall for t, d, _ in known):
            known.append((text, dotall, (group, self.n, len(self.bsrc), len(self.esrc))))

    def reuse_group(self, pos: int, dotall: bool) -> tuple[Fragment, int] | None:
        """A copy of the group opening at ``pos`` and the position after it, if the same
        text was built before (under the same dotall setting).

        A group's text decides its fragment, and fragments occupy contiguous state and
        edge ranges, so a copy is the earlier instance's edges shifted to fresh ids: far
        cheaper than parsing the text again (schema regexes repeat long groups, such as
        "any JSON value", many times)."""
        candidates = self.group_memo.get(self.pattern[pos : pos + _MEMO_MIN_GROUP])
        if not candidates:
            return None
        for text, memo_dotall, entry in candidates:
            if memo_dotall == dotall and self.pattern.startswith(text, pos):
                return self.copy_group(entry), pos + len(text)
        return None

    def copy_group(self, entry: _MemoEntry) -> Fragment:
        """A fresh copy of an all-concrete fragment (a remembered group, a small
        definition), past the last state."""
        (start, end, s0, b0, e0, _), n_end, b_end, e_end = entry
        new_s0, new_b0, new_e0 = self.n, len(self.bsrc), len(self.esrc)
        (shift,) = self.copy_range(s0, n_end, b0, b_end, e0, e_end, 1)
        return (start + shift, end + shift, new_s0, new_b0, new_e0, self.vn)

    def open_group(self, pos: int, size: int) -> int:
        """Validate the group opening at ``pos``; return where its body starts.

        For ``(?:``, ``(?P<name>`` and plain groups the body follows; scoped flags are
        left at ``pos + 1`` (``?``) for the caller. A comment returns ``-(its end)``.
        """
        p = self.pattern
        if not p.startswith("?", pos + 1):
            return pos + 1
        if p.startswith("(?:", pos):
            return pos + 3
        if p.startswith("(?P<", pos):
            close = p.find(">", pos + 4)
            if close < 0 or close >= size:
                self.fail("missing >, unterminated name", pos + 4)
            name = p[pos + 4 : close]
            if not name.isidentifier():
                self.fail(f"bad character in group name {name!r}", pos + 4)
            if name in self.group_names:
                self.fail(f"redefinition of group name {name!r}", pos + 4)
            self.group_names.add(name)
            return close + 1
        if p.startswith("(?P=", pos):
            self.fail("backreferences ((?P=name)) are not supported", pos)
        if p.startswith("(?#", pos):
            i = pos + 3
            while i < size and p[i] != ")":
                i += 2 if p[i] == "\\" else 1
            if i >= size:
                self.fail("missing ), unterminated comment", pos)
            return -(i + 1)
        for prefix, what in (
            ("(?=", "lookahead assertions"),
            ("(?!", "negative lookahead assertions"),
            ("(?<=", "lookbehind assertions"),
            ("(?<!", "negative lookbehind assertions"),
            ("(?(", "conditional groups"),
            ("(?>", "atomic groups"),
        ):
            if p.startswith(prefix, pos):
                self.fail(f"{what} ({prefix}...) are not supported", pos)
        if _SCOPED_FLAGS.match(p, pos):
            return pos + 1
        if _GLOBAL_FLAGS.match(p, pos):
            self.fail("global flags not at the start of the expression", pos)
        self.fail(f"unknown extension {p[pos + 1 : pos + 3]!r}", pos)

    def flags(self, added: str, removed: str, pos: int, dotall: bool = False) -> bool:
        """Check inline flags; return the DOTALL setting they leave."""
        for flag in added + removed:
            if flag in "ix":
                meaning = "case-insensitive matching" if flag == "i" else "verbose mode"
                self.fail(
                    f"the inline flag {flag!r} ({meaning}) is not supported"
                    + ("; list both cases instead, e.g. [aA]" if flag == "i" else ""),
                    pos,
                )
            if flag in "uL":
                self.fail(
                    f"the inline flag {flag!r} is not supported (formcast gives \\d, \\w and \\s "
                    "their ASCII meaning)",
                    pos,
                )
            if flag not in "ams":
                self.fail(f"unknown flag {flag!r}", pos)
        if "a" in removed:
            self.fail("bad inline flags: cannot turn off flag 'a'", pos)
        if "s" in added:
            return True
        if "s" in removed:
            return False
        return dotall


# ----------------------------------------------------------------------- automaton


def _csr(keys: npt.NDArray[np.integer[Any]], count: int) -> tuple[npt.NDArray[np.intp], list[int]]:
    """A stable order of ``keys`` and the offsets of each key's block (length count+1)."""
    order = np.argsort(keys, kind="stable")
    offsets = np.searchsorted(keys[order], np.arange(count + 1)).tolist()
    return order, offsets


class _ScopeDistances(NamedTuple):
    """Distances to a scope's target: the final state (top) or a template's end (block)."""

    lo: int  # the scope's first concrete state
    concrete: list[int]  # per concrete state in [lo, lo + len(concrete))
    skeleton: dict[int, int]  # per child block: its first copy's start, last copy's end
    length: int  # block scopes: shortest way through the template (start to end)


class LazyAutomaton:
    """A deterministic automaton over bytes whose states are determinized on demand.

    Contract:
        * State ids are dense ints; :data:`DEAD` (0) is the dead sink, ``initial`` is 1.
        * ``step``/``row``/``walk`` give the same transitions whenever called: a state's
          row never changes once built.
        * The accepted language is the set of UTF-8 encodings of the strings ``pattern``
          fully matches (see the module docstring for the dialect); no invalid UTF-8.
        * Every state other than :data:`DEAD` can reach an accepting state.

    Construction parses the pattern and builds its NFA (linear time, ~2 us per pattern
    character); rows cost ~20-100 us each the first time a state is reached. Refuses
    patterns outside the dialect, and patterns matching nothing, with SchemaError.
    """

    def __init__(self, pattern: str) -> None:
        if not isinstance(pattern, str):
            raise SchemaError(
                "expected a regular expression formcast can compile, found "
                f"{type(pattern).__name__} {pattern!r}: a pattern must be a str"
            )
        builder = _Builder(pattern)
        top = builder.parse()
        if top[0] < 0:
            _refuse(pattern, "it matches no string at all", None)
        self.pattern = pattern
        self.initial = 1
        self._nfa_states = builder.n
        self._virtual_states = builder.vn - _VIRTUAL_BASE
        self._blocks = builder.blocks
        self._start = top[0]
        self._final = top[1]
        self._bsrc = np.asarray(builder.bsrc, dtype=np.int64)
        self._blo = np.asarray(builder.blo, dtype=np.int32)
        self._bhi = np.asarray(builder.bhi, dtype=np.int32)
        self._bdst = np.asarray(builder.bdst, dtype=np.int64)
        esrc = np.asarray(builder.esrc, dtype=np.int64)
        edst = np.asarray(builder.edst, dtype=np.int64)
        concrete = esrc < _VIRTUAL_BASE
        self._esrc = esrc[concrete]
        self._edst = edst[concrete]
        extra_src, extra_dst = esrc[~concrete], edst[~concrete]
        extra_dst = self._bypass_epsilon_chains(extra_dst)
        # epsilon edges a parent attached to a virtual state (a copy's start or end)
        self._extras: dict[int, list[int]] = {}
        for src, dst in zip(extra_src.tolist(), extra_dst.tolist(), strict=True):
            self._extras.setdefault(src, []).append(dst)
        self._sets: list[frozenset[int]] = []
        self._table: IntArray = np.full((_INITIAL_CAPACITY, 256), _UNBUILT, dtype=np.int32)
        self._flat: IntArray = self._table.reshape(-1)
        self._built: BoolArray = np.zeros(_INITIAL_CAPACITY, dtype=np.bool_)
        self._accepting: BoolArray = np.zeros(_INITIAL_CAPACITY, dtype=np.bool_)
        self._prepare()
        self._add_state(frozenset())
        self._table[DEAD] = DEAD
        self._built[DEAD] = True
        self._add_state(self._closure(self._start))

    def _bypass_epsilon_chains(self, extra_dst: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Point edges past concrete states whose only way out is one epsilon edge.

        Thompson glue (sequence links, alternation exits) leaves many such states; an
        edge into one is equivalent to an edge into its successor, so pointer jumping
        (vectorized, O(n log chain)) redirects every edge to the end of its chain and
        the bypassed states' own epsilon edges are dropped. Halves the epsilon closures
        computed when rows are built and the work of the distance search.
        """
        n = self._nfa_states
        if self._esrc.size == 0:
            return extra_dst
        eps_out = np.bincount(self._esrc, minlength=n)
        byte_out = np.bincount(self._bsrc, minlength=n)
        single = (eps_out == 1) & (byte_out == 0)
        single[self._esrc[self._edst >= _VIRTUAL_BASE]] = False  # keep ids concrete
        if self._final < _VIRTUAL_BASE:
            single[self._final] = False
        for block in self._blocks:  # derived glue refers to these by id
            for state in (block.x_start, block.exit):
                if 0 <= state < _VIRTUAL_BASE:
                    single[state] = False
        following = np.arange(n, dtype=np.int64)
        from_single = single[self._esrc]
        following[self._esrc[from_single]] = self._edst[from_single]
        for _ in range(64):
            jumped = following[following]
            if np.array_equal(jumped, following):
                break
            following = jumped
        else:  # an epsilon cycle among dead states: redirect, but keep every edge
            from_single[:] = False

        def redirect(ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
            concrete = ids < _VIRTUAL_BASE
            return np.where(concrete, following[np.where(concrete, ids, 0)], ids)

        self._bdst = redirect(self._bdst)
        keep = ~from_single
        self._esrc = self._esrc[keep]
        self._edst = redirect(self._edst[keep])
        if self._start < _VIRTUAL_BASE:
            self._start = int(following[self._start])
        return redirect(extra_dst)

    # -- derived structures (rebuilt after unpickling) --------------------------------
    def _prepare(self) -> None:
        n = self._nfa_states
        order, self._boff = _csr(self._bsrc, n)
        self._blo_l: list[int] = self._blo[order].tolist()
        self._bhi_l: list[int] = self._bhi[order].tolist()
        self._bdst_l: list[int] = self._bdst[order].tolist()
        order, self._eoff = _csr(self._esrc, n)
        self._edst_l: list[int] = self._edst[order].tolist()
        important = np.zeros(n, dtype=np.bool_)
        important[self._bsrc] = True
        if self._final < _VIRTUAL_BASE:
            important[self._final] = True
        self._important: list[bool] = important.tolist()
        self._block_bases = [block.base for block in self._blocks]
        self._children, self._top_children = self._block_children()
        self._closures: dict[int, frozenset[int]] = {}
        # (template state, template end) -> its closure in the template, and whether it
        # reaches the end
        self._template_closures: dict[tuple[int, int], tuple[list[int], bool]] = {}
        self._irregular_copies = self._find_irregular_copies()
        self._template_edges: dict[int, list[tuple[int, int, int]]] = {}
        self._template_move_lists: dict[tuple[int, int], list[tuple[int, frozenset[int]]]] = {}
        # (block template, template states) -> the row segments, the copy's end as _END
        self._relative_rows: dict[
            tuple[tuple[int, ...], frozenset[int]], list[tuple[int, int, frozenset[int]]]
        ] = {}
        self._moves: dict[int, list[tuple[int, frozenset[int]]]] = {}
        self._virtual: dict[int, tuple[list[tuple[int, int, int]], list[int]]] = {}
        # (block template, template state) -> its edges relative to a copy
        self._relative: dict[tuple[tuple[int, ...], int], _Relative] = {}
        self._ids: dict[frozenset[int], int] = {s: i for i, s in enumerate(self._sets)}
        self._distances: dict[bytes | None, dict[int, _ScopeDistances]] = {}
        self._lock = threading.Lock()

    def _find_irregular_copies(self) -> set[tuple[int, int]]:
        """The copies ``(block index, copy index)`` with an edge attached to an id other
        than their end, and every copy of a block whose template holds the final state:
        their closures are searched state by state, not shifted from the template's."""
        irregular = set()
        for source in self._extras:
            index = bisect_right(self._block_bases, source) - 1
            block = self._blocks[index]
            j, template = block.locate(source)
            if template != block.x_end:
                irregular.add((index, j))
        final = self._final
        for index, block in enumerate(self._blocks):
            inside = block.s0 <= final < block.s0 + block.size_c or (
                block.v0 <= final < block.v0 + block.span - block.size_c
            )
            if inside:
                irregular.update((index, j) for j in range(block.copies))
        return irregular

    def _block_children(self) -> tuple[list[list[int]], list[int]]:
        """The blocks directly inside each block's template, and those of the top scope.

        A block's template holds the virtual ids ``[v0, v0 + span - size_c)``; the blocks
        whose ids start there are inside it, and its direct children are those not inside
        the template of another one of them. Calls to one definition share a template,
        hence their children."""
        blocks, bases = self._blocks, self._block_bases

        def direct(lo: int, hi: int) -> list[int]:
            inside = range(bisect_left(bases, lo), bisect_left(bases, hi))
            spans = sorted(
                (blocks[i].v0, blocks[i].v0 + blocks[i].span - blocks[i].size_c)
                for i in inside
                if blocks[i].span > blocks[i].size_c
            )
            starts = [a for a, _ in spans]
            reach: list[int] = []  # reach[k]: the furthest end among spans[:k + 1]
            for _, b in spans:
                reach.append(max(b, reach[-1]) if reach else b)
            out = []
            for i in inside:
                k = bisect_right(starts, bases[i]) - 1
                if k < 0 or reach[k] <= bases[i]:
                    out.append(i)
            return out

        by_template: dict[tuple[int, int], list[int]] = {}
        children = []
        for block in blocks:
            key = (block.v0, block.v0 + block.span - block.size_c)
            if key not in by_template:
                by_template[key] = direct(*key)
            children.append(by_template[key])
        return children, direct(_VIRTUAL_BASE, _VIRTUAL_LIMIT)

    def __getstate__(self) -> dict[str, Any]:
        count = len(self._sets)
        return {
            "pattern": self.pattern,
            "initial": self.initial,
            "nfa_states": self._nfa_states,
            "virtual_states": self._virtual_states,
            "blocks": [tuple(block) for block in self._blocks],
            "extras": self._extras,
            "start": self._start,
            "final": self._final,
            "edges": (self._bsrc, self._blo, self._bhi, self._bdst, self._esrc, self._edst),
            "sets": self._sets,
            "table": self._table[:count].copy(),
            "built": self._built[:count].copy(),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.pattern = state["pattern"]
        self.initial = state["initial"]
        self._nfa_states = state["nfa_states"]
        self._virtual_states = state["virtual_states"]
        self._blocks = [_Block(*block) for block in state["blocks"]]
        self._extras = state["extras"]
        self._start = state["start"]
        self._final = state["final"]
        (self._bsrc, self._blo, self._bhi, self._bdst, self._esrc, self._edst) = state["edges"]
        self._sets = list(state["sets"])
        count = len(self._sets)
        capacity = max(_INITIAL_CAPACITY, 2 * count)
        self._table = np.full((capacity, 256), _UNBUILT, dtype=np.int32)
        self._table[:count] = state["table"]
        self._flat = self._table.reshape(-1)
        self._built = np.zeros(capacity, dtype=np.bool_)
        self._built[:count] = state["built"]
        self._accepting = np.zeros(capacity, dtype=np.bool_)
        self._accepting[:count] = [self._final in members for members in self._sets]
        self._prepare()

    # -- NFA edges ---------------------------------------------------------------------
    def _virtual_edges(self, state: int) -> tuple[list[tuple[int, int, int]], list[int]]:
        """``(byte edges, epsilon targets)`` of a virtual state (memoized).

        A copy's state has its template state's edges shifted into the copy. The
        template's edges are cached per (block, template state) relative to the copy's
        first id, so resolving the same state in another copy is one addition per edge;
        only the first time is the template state itself resolved (iteratively down the
        nesting of repeats). Plus the repeat's glue at a copy's end, plus the edges a
        parent attached to this very id.
        """
        memo = self._virtual
        found = memo.get(state)
        if found is not None:
            return found
        relative = self._relative
        chain: list[tuple[int, int, int, int, _Relative | None]] = []
        current = state
        while True:
            index = bisect_right(self._block_bases, current) - 1
            j, template = self._blocks[index].locate(current)
            block = self._blocks[index]
            rel = relative.get((block.template, template))
            chain.append((current, index, j, template, rel))
            if rel is not None:
                break
            current = template
            if current < _VIRTUAL_BASE or current in memo:
                break
        byte_edges: list[tuple[int, int, int]] = []
        eps_targets: list[int] = []
        if chain[-1][4] is None:  # the bottom template state's own edges are needed
            if current >= _VIRTUAL_BASE:
                byte_edges, eps_targets = memo[current]
            else:
                byte_edges = self._concrete_byte_edges(current)
                eps_targets = self._edst_l[self._eoff[current] : self._eoff[current + 1]]
        extras = self._extras
        for virtual, index, j, template, rel in reversed(chain):
            block = self._blocks[index]
            if rel is None:
                rel = _relative_edges(block, template, byte_edges, eps_targets)
                relative[(block.template, template)] = rel
            offset = block.base + j * block.span
            byte_edges = [(lo, hi, offset + r) for lo, hi, r in rel[0]]
            eps_targets = [offset + r for r in rel[1]]
            if rel[2]:
                eps_targets.extend(block.glue(j))
            eps_targets.extend(extras.get(virtual, ()))
            memo[virtual] = (byte_edges, eps_targets)
        return byte_edges, eps_targets

    # -- subset construction -----------------------------------------------------------
    def _closure(self, state: int) -> frozenset[int]:
        """The important NFA states reachable from ``state`` by epsilon edges (memoized).

        Important: states with byte edges, and the final state. A state inside a regular
        copy (see :meth:`_copy_closure`) takes its template state's closure, shifted.
        """
        cached = self._closures.get(state)
        if cached is not None:
            return cached
        result = self._copy_closure(state) if state >= _VIRTUAL_BASE else None
        if result is None:
            result = frozenset(self._epsilon_search(state)[0])
        self._closures[state] = result
        return result

    def _epsilon_search(self, state: int, end: int = -1) -> tuple[list[int], bool]:
        """Depth-first search of the epsilon edges from ``state``: the important states
        found, and whether ``end`` was reached on the way."""
        eoff, edst, important = self._eoff, self._edst_l, self._important
        final = self._final
        if state < _VIRTUAL_BASE and eoff[state] == eoff[state + 1] and important[state]:
            return [state], state == end
        seen = {state}
        stack = [state]
        found = []
        while stack:
            x = stack.pop()
            if x < _VIRTUAL_BASE:
                if important[x]:
                    found.append(x)
                targets = edst[eoff[x] : eoff[x + 1]]
            else:
                byte_edges, targets = self._virtual_edges(x)
                if byte_edges or x == final:
                    found.append(x)
            for y in targets:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        return found, end in seen

    def _copy_closure(self, state: int) -> frozenset[int] | None:
        """The closure of a state of a regular copy from its template state's, or None.

        Inside a copy, epsilon edges are the template's, shifted, until the copy's end,
        where the repeat's glue and the parent's edges lead on. So the closure is the
        template state's closure in the template (computed once for every copy), shifted
        into the copy, plus the closure of the copy's end if the template one reached it.
        A copy is regular when no edge was attached to one of its ids but its end."""
        index = bisect_right(self._block_bases, state) - 1
        block = self._blocks[index]
        j, template = block.locate(state)
        if template == block.x_end or (index, j) in self._irregular_copies:
            return None
        members, reached = self._template_closure(template, block.x_end)
        concrete_shift, virtual_shift = block.shifts(j)
        shifted = [m + (concrete_shift if m < _VIRTUAL_BASE else virtual_shift) for m in members]
        if reached:
            shifted.extend(self._closure(block.copy_of(j, block.x_end)))
        return frozenset(shifted)

    def _moves_of(self, state: int) -> list[tuple[int, frozenset[int]]]:
        """Byte edges of ``state`` as ``(lo << 8 | hi, closure of the target)`` (memoized)."""
        closure = self._closure
        if state < _VIRTUAL_BASE:
            a, b = self._boff[state], self._boff[state + 1]
            blo, bhi, bdst = self._blo_l, self._bhi_l, self._bdst_l
            moves = [(blo[k] << 8 | bhi[k], closure(bdst[k])) for k in range(a, b)]
        else:
            moves = [(lo << 8 | hi, closure(t)) for lo, hi, t in self._copy_byte_edges(state)]
        self._moves[state] = moves
        return moves

    def _copy_byte_edges(self, state: int) -> list[tuple[int, int, int]]:
        """The byte edges of a virtual state: its template state's, shifted into its copy
        (glue and attached edges are epsilon edges, so this holds in every copy)."""
        block = self._blocks[bisect_right(self._block_bases, state) - 1]
        j, template = block.locate(state)
        concrete_shift, virtual_shift = block.shifts(j)
        return [
            (lo, hi, t + (concrete_shift if t < _VIRTUAL_BASE else virtual_shift))
            for lo, hi, t in self._template_byte_edges(template)
        ]

    def _concrete_byte_edges(self, state: int) -> list[tuple[int, int, int]]:
        a, b = self._boff[state], self._boff[state + 1]
        return list(zip(self._blo_l[a:b], self._bhi_l[a:b], self._bdst_l[a:b], strict=True))

    def _template_byte_edges(self, state: int) -> list[tuple[int, int, int]]:
        """The byte edges of a template state (memoized for virtual ones)."""
        if state < _VIRTUAL_BASE:
            return self._concrete_byte_edges(state)
        found = self._template_edges.get(state)
        if found is None:
            found = self._template_edges[state] = self._copy_byte_edges(state)
        return found

    def _template_closure(self, state: int, end: int) -> tuple[list[int], bool]:
        """:meth:`_epsilon_search` of a template state up to the template's ``end``
        (memoized)."""
        key = (state, end)
        found = self._template_closures.get(key)
        if found is None:
            found = self._template_closures[key] = self._epsilon_search(state, end)
        return found

    def _add_state(self, members: frozenset[int]) -> int:
        sid = len(self._sets)
        if sid >= self._built.shape[0]:
            capacity = 2 * sid
            table = np.full((capacity, 256), _UNBUILT, dtype=np.int32)
            table[:sid] = self._table[:sid]
            built = np.zeros(capacity, dtype=np.bool_)
            built[:sid] = self._built[:sid]
            accepting = np.zeros(capacity, dtype=np.bool_)
            accepting[:sid] = self._accepting[:sid]
            # A reader that sees row s built in any table sees it in every later one.
            self._table = table
            self._flat = table.reshape(-1)
            self._built = built
            self._accepting = accepting
        self._accepting[sid] = self._final in members
        self._sets.append(members)
        self._ids[members] = sid
        return sid

    def _build_row(self, sid: int) -> None:
        """Compute and store the row of ``sid`` (caller holds the lock).

        A state inside one regular copy takes its row from the template's (see
        :meth:`_copy_segments`); any other joins its members' moves."""
        members = self._sets[sid]
        segments = self._copy_segments(members)
        if segments is None:
            moves, moves_of = self._moves, self._moves_of
            segments = _segments(
                moves_of(member) if (found := moves.get(member)) is None else found
                for member in members
            )
        ids = self._ids
        row = np.zeros(256, dtype=np.int32)
        for lo, hi, successors in segments:
            target = ids.get(successors)
            if target is None:
                target = self._add_state(successors)
            row[lo : hi + 1] = target
        self._table[sid] = row  # readers see each entry as UNBUILT or final, never stale
        self._built[sid] = True

    def _copy_segments(
        self, members: frozenset[int]
    ) -> list[tuple[int, int, frozenset[int]]] | None:
        """The row segments of a state whose members all lie in one regular copy, or None.

        Such a state's moves are its template states' moves, shifted into the copy, except
        where they reach the copy's end, where the repeat's glue and the parent's edges
        lead on. So the row is computed once per set of template states, with the end as a
        marker (:data:`_END`), and each copy shifts it and puts the closure of its own end
        in place of the marker: a few set operations per segment, however many copies of
        a definition or repeat the input walks through. When the template states lie in
        one copy of a block nested in the template, the innermost such copy is used, so
        that every copy of that block, in whichever outer copy, shares the row."""
        located = self._innermost_copy(members)
        if located is None:
            return None
        block, j, templates, outer_shift = located
        key = (block.template, templates)
        relative = self._relative_rows.get(key)
        if relative is None:
            relative = _segments(self._template_moves(t, block.x_end) for t in templates)
            self._relative_rows[key] = relative
        concrete_shift, virtual_shift = block.shifts(j)
        concrete_shift += outer_shift
        virtual_shift += outer_shift
        end_closure: frozenset[int] | None = None
        segments = []
        for lo, hi, successors in relative:
            shifted = [
                m + (concrete_shift if m < _VIRTUAL_BASE else virtual_shift)
                for m in successors
                if m != _END
            ]
            if _END in successors:
                if end_closure is None:
                    x_end = block.x_end
                    end = x_end + (concrete_shift if x_end < _VIRTUAL_BASE else virtual_shift)
                    end_closure = self._closure(end)
                shifted.extend(end_closure)
            segments.append((lo, hi, frozenset(shifted)))
        return segments

    def _innermost_copy(
        self, members: frozenset[int]
    ) -> tuple[_Block, int, frozenset[int], int] | None:
        """The innermost regular copy holding every member: its block, its index, the
        members' states in the block's template, and what maps the virtual ids of the
        space around the copy to the members' own. None when the members are not all in
        one regular copy."""
        states = members
        found = None
        outer_shift = 0
        shift_to_here = 0
        while True:
            some = next(iter(states), -1)
            if some < _VIRTUAL_BASE:
                return found
            index = bisect_right(self._block_bases, some) - 1
            block = self._blocks[index]
            j = (some - block.base) // block.span
            first = block.base + j * block.span
            if (index, j) in self._irregular_copies or not all(
                first <= state < first + block.span for state in states
            ):
                return found
            states = frozenset(block.locate(state)[1] for state in states)
            outer_shift = shift_to_here
            found = (block, j, states, outer_shift)
            shift_to_here += block.shifts(j)[1]

    def _template_moves(self, state: int, end: int) -> list[tuple[int, frozenset[int]]]:
        """Like :meth:`_moves_of` for a template state, in the template: each target's
        closure stops at the template's ``end``, marked :data:`_END` if reached
        (memoized)."""
        key = (state, end)
        found = self._template_move_lists.get(key)
        if found is not None:
            return found
        moves = []
        for lo, hi, target in self._template_byte_edges(state):
            members, reached = self._template_closure(target, end)
            moves.append((lo << 8 | hi, frozenset([*members, _END] if reached else members)))
        self._template_move_lists[key] = moves
        return moves

    def _ensure(self, states: Iterable[int]) -> None:
        with self._lock:
            built = self._built
            for state in states:
                if not built[state]:
                    self._build_row(state)
                    built = self._built

    def _check(self, state: int) -> int:
        value = int(state)
        if not 0 <= value < len(self._sets):
            raise UserError(f"expected a state in [0, {len(self._sets)}), found {state!r}")
        return value

    # -- public API --------------------------------------------------------------------
    @property
    def num_states(self) -> int:
        """DFA states materialized so far, :data:`DEAD` included (grows as walks go on)."""
        return len(self._sets)

    @property
    def nfa_size(self) -> tuple[int, int, int]:
        """``(concrete states, byte edges, epsilon edges)`` of the NFA (diagnostics)."""
        return self._nfa_states, int(self._bsrc.size), int(self._esrc.size)

    @property
    def virtual_states(self) -> int:
        """NFA states of counted-repeat copies that exist only virtually (diagnostics)."""
        return self._virtual_states

    def step(self, states: npt.NDArray[np.integer[Any]], data: npt.NDArray[np.uint8]) -> IntArray:
        """Advance many (state, byte) pairs at once: ``out[i] = delta(states[i], data[i])``.

        ``states`` are ids returned by this automaton (int32 preferred), ``data`` bytes
        (uint8), same shape. One gather from the flat table; rows not built yet read as
        ``-1`` there, so they are then built (under the lock) and gathered again. Cost when
        all rows exist: one index computation and one gather, ~7 ns per element.
        """
        if states.dtype.itemsize < 4:
            states = states.astype(np.int32)
        if self._table.shape[0] < _SHIFT_SAFE:
            index = (states << 8) | data
        else:
            index = (states.astype(np.intp) << 8) | data
        result: IntArray = self._flat[index]
        unbuilt = result < 0
        if unbuilt.any():
            self._ensure(np.unique(states[unbuilt]).tolist())
            result = self._flat[index]
        return result

    def row(self, state: int) -> IntArray:
        """The 256 transitions of ``state`` (a fresh int32 array; builds the row if needed)."""
        state = self._check(state)
        if not self._built[state]:
            self._ensure((state,))
        row: IntArray = self._table[state].copy()
        return row

    def is_accepting(self, state: int) -> bool:
        """Whether input may end in ``state``."""
        return bool(self._accepting[self._check(state)])

    @property
    def accepting(self) -> BoolArray:
        """Acceptance of the states materialized so far (a copy, shape ``(num_states,)``)."""
        return self._accepting[: len(self._sets)].copy()

    def walk(self, data: bytes, state: int | None = None) -> int:
        """Feed ``data`` byte by byte from ``state`` (default ``initial``); DEAD once dead."""
        current = self.initial if state is None else self._check(state)
        for byte in data:
            if current == DEAD:
                return DEAD
            if not self._built[current]:
                self._ensure((current,))
            current = int(self._table[current, byte])
        return current

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` is, in full, the UTF-8 encoding of a string the pattern matches."""
        end = self.walk(data)  # may grow the arrays: read them afterwards
        return bool(self._accepting[end])

    def live_bytes(self, state: int) -> npt.NDArray[np.uint8]:
        """The bytes with a non-DEAD transition from ``state``, ascending (uint8)."""
        return np.flatnonzero(self.row(state)).astype(np.uint8)

    def min_bytes_to_accept(
        self,
        state: int,
        usable: BoolArray | None = None,
        *,
        costs: npt.NDArray[np.integer[Any]] | None = None,
    ) -> int:
        """Fewest bytes leading from ``state`` to an accepting state (0 if accepting).

        Only bytes ``b`` with ``usable[b]`` (a bool array of 256) may be used; ``None``
        allows all. ``costs`` (256 ints, instead of ``usable``) weighs each byte instead:
        ``costs[b]`` >= 0, :data:`UNREACHABLE` for a byte that may not be used; a byte
        range costs its cheapest byte. Returns :data:`UNREACHABLE` when no accepting state
        can be reached. The first call per ``usable`` mask (or ``costs`` table; the last
        few are kept) runs a search backwards over the concrete NFA (O(NFA size); a
        counted repeat made virtual costs O(copies), not O(copies x size)); later calls
        cost O(members of ``state`` x repeat nesting depth).
        """
        members = self._sets[self._check(state)]
        if not members:
            return UNREACHABLE
        weights = _byte_costs(usable, costs)
        key = None if weights is None else weights.tobytes()
        tables = self._distances.get(key)
        if tables is None:
            tables = self._scope_tables(weights)
            if len(self._distances) >= _DISTANCE_TABLES_KEPT:
                self._distances.pop(next(k for k in self._distances if k is not None), None)
            self._distances[key] = tables
        return min(self._distance_in(tables, -1, member) for member in members)

    def _distance_in(self, tables: dict[int, _ScopeDistances], scope: int, state: int) -> int:
        """Distance from ``state`` to the target of ``scope`` (-1: the top scope).

        A state inside copy ``j`` of a child block is as far as its template state is
        from the template's end, plus the way out from the end of copy ``j``.
        """
        total = 0
        while True:
            table = tables[scope]
            if state < _VIRTUAL_BASE:
                return min(total + _concrete_distance(table, state), UNREACHABLE)
            found = table.skeleton.get(state)
            if found is not None:
                return min(total + found, UNREACHABLE)
            index = bisect_right(self._block_bases, state) - 1
            block = self._blocks[index]
            j, template = block.locate(state)
            after = self._copy_end_distance(table, block, tables[index].length, j)
            if after >= UNREACHABLE:
                return UNREACHABLE
            total += after
            scope, state = index, template

    def _copy_end_distance(self, table: _ScopeDistances, block: _Block, length: int, j: int) -> int:
        """Distance (in the block's parent scope) from the end of copy ``j`` to the target."""
        if block.bounded:
            tail = table.skeleton.get(block.copy_of(block.copies - 1, block.x_end), UNREACHABLE)
            needed = block.copies_still_needed(j)
        else:
            tail = _concrete_distance(table, block.exit)
            needed = block.low - 1 - j
        if needed > 0:
            if length >= UNREACHABLE:
                return UNREACHABLE
            tail += needed * length
        return min(tail, UNREACHABLE)

    def _scope_tables(self, weights: npt.NDArray[np.int64] | None) -> dict[int, _ScopeDistances]:
        """Distances to each scope's target, blocks first (children before parents)."""
        if weights is None:
            byte_ok = np.ones(self._bsrc.size, dtype=np.int64)
        else:
            byte_ok = _range_minima(weights)[self._blo, self._bhi]
        tables: dict[int, _ScopeDistances] = {}
        by_template: dict[tuple[int, ...], _ScopeDistances] = {}
        for index, block in enumerate(self._blocks):
            template = block.template
            if template in by_template:
                tables[index] = by_template[template]
                continue
            table = self._scope_search(
                tables, byte_ok, block.s0, block.s0 + block.size_c, self._children[index],
                block.x_end,
            )  # fmt: skip
            tables[index] = table  # length is read through the table itself:
            length = self._distance_in(tables, index, block.x_start)
            tables[index] = by_template[template] = table._replace(length=length)
        tables[-1] = self._scope_search(
            tables, byte_ok, 0, self._nfa_states, self._top_children, self._final
        )
        return tables

    def _scope_search(
        self,
        tables: dict[int, _ScopeDistances],
        byte_ok: npt.NDArray[np.int64],
        lo: int,
        hi: int,
        children: list[int],
        target: int,
    ) -> _ScopeDistances:
        """Shortest distances to ``target`` over one scope's graph, searched backwards.

        ``byte_ok`` is the cost of each byte edge (:data:`UNREACHABLE`: not usable).
        Nodes: the concrete states ``[lo, hi)`` and, per child block, its first copy's
        start and (bounded) its last copy's end, joined by one edge weighing the fewest
        copies that must be read times the template's shortest length. O(concrete states
        + blocks): copies are never enumerated. 0-1 BFS when all weights are 0/1, else
        Dijkstra.
        """
        blocks = self._blocks
        skeleton_ids: list[int] = []
        summary: list[tuple[int, int, int]] = []
        for child in children:
            block = blocks[child]
            first = block.copy_of(0, block.x_start)
            skeleton_ids.append(first)
            length = tables[child].length
            through = max(block.low, 1) if block.bounded else block.low
            if block.bounded:
                out = block.copy_of(block.copies - 1, block.x_end)
                skeleton_ids.append(out)
            else:
                out = block.exit
            if length < UNREACHABLE:
                summary.append((first, out, min(through * length, UNREACHABLE)))
        skeleton = np.unique(np.asarray(skeleton_ids, dtype=np.int64))
        width = hi - lo

        def index_of(ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
            out = np.full(ids.shape, -1, dtype=np.int64)
            inside = (ids >= lo) & (ids < hi)
            out[inside] = ids[inside] - lo
            virtual = ids >= _VIRTUAL_BASE
            if skeleton.size and virtual.any():
                pos = np.minimum(np.searchsorted(skeleton, ids[virtual]), skeleton.size - 1)
                out[virtual] = np.where(skeleton[pos] == ids[virtual], width + pos, -1)
            return out

        sources: list[npt.NDArray[np.int64]] = []
        targets: list[npt.NDArray[np.int64]] = []
        weights: list[npt.NDArray[np.int64]] = []
        chosen = (byte_ok < UNREACHABLE) & (self._bsrc >= lo) & (self._bsrc < hi)
        sources.append(self._bsrc[chosen] - lo)
        targets.append(index_of(self._bdst[chosen]))
        weights.append(byte_ok[chosen])
        chosen = (self._esrc >= lo) & (self._esrc < hi)
        sources.append(self._esrc[chosen] - lo)
        targets.append(index_of(self._edst[chosen]))
        weights.append(np.zeros(int(chosen.sum()), dtype=np.int64))
        extra: list[tuple[int, int, int]] = [
            (node, successor, 0)
            for node in skeleton.tolist()
            for successor in self._extras.get(node, ())
        ]
        for edges in (extra, summary):
            if edges:
                triples = np.asarray(edges, dtype=np.int64)
                sources.append(index_of(triples[:, 0]))
                targets.append(index_of(triples[:, 1]))
                weights.append(triples[:, 2])
        src = np.concatenate(sources)
        dst = np.concatenate(targets)
        weight = np.concatenate(weights)
        valid = (dst >= 0) & (src >= 0)
        src, dst, weight = src[valid], dst[valid], weight[valid]
        count = width + int(skeleton.size)
        order, offsets = _csr(dst, count)
        predecessors = src[order].tolist()
        costs = weight[order].tolist()
        distance = [UNREACHABLE] * count
        origin = int(index_of(np.asarray([target], dtype=np.int64))[0])
        if origin >= 0:
            distance[origin] = 0
            if weight.size == 0 or int(weight.max()) <= 1:
                _zero_one_bfs(distance, origin, offsets, predecessors, costs)
            else:
                _dijkstra(distance, origin, offsets, predecessors, costs)
        return _ScopeDistances(
            lo=lo,
            concrete=distance[:width],
            skeleton=dict(zip(skeleton.tolist(), distance[width:], strict=True)),
            length=UNREACHABLE,
        )

    def __repr__(self) -> str:
        return (
            f"LazyAutomaton(pattern={_show(self.pattern)}, num_states={self.num_states}, "
            f"nfa_states={self._nfa_states}, virtual_states={self._virtual_states})"
        )


def _byte_costs(
    usable: BoolArray | None, costs: npt.NDArray[np.integer[Any]] | None
) -> npt.NDArray[np.int64] | None:
    """The cost of each byte (``None``: every byte costs 1), checked."""
    if costs is not None:
        weights = np.asarray(costs, dtype=np.int64)
        if weights.shape != (256,) or bool((weights < 0).any()):
            raise UserError(f"expected 256 byte costs >= 0, found shape {weights.shape}")
        return np.minimum(weights, UNREACHABLE)
    if usable is None:
        return None
    mask = np.asarray(usable, dtype=np.bool_)
    if mask.shape != (256,):
        raise UserError(f"expected usable of shape (256,), found {mask.shape}")
    return np.where(mask, 1, UNREACHABLE).astype(np.int64)


def _range_minima(weights: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``table[lo, hi]``: the cheapest byte of ``lo..hi`` (``hi >= lo``)."""
    table = np.full((256, 256), UNREACHABLE, dtype=np.int64)
    for lo in range(256):
        table[lo, lo:] = np.minimum.accumulate(weights[lo:])
    return table


# A template state's edges relative to its copy's first id, and whether it is the end.
_Relative = tuple[list[tuple[int, int, int]], list[int], bool]


def _relative_edges(
    block: _Block, template: int, byte_edges: list[tuple[int, int, int]], eps_targets: list[int]
) -> _Relative:
    def rel(t: int) -> int:
        return t - block.s0 if t < _VIRTUAL_BASE else block.size_c + t - block.v0

    return (
        [(lo, hi, rel(t)) for lo, hi, t in byte_edges],
        [rel(t) for t in eps_targets],
        template == block.x_end,
    )


def _concrete_distance(table: _ScopeDistances, state: int) -> int:
    offset = state - table.lo
    if 0 <= offset < len(table.concrete):
        return table.concrete[offset]
    return UNREACHABLE


def _zero_one_bfs(
    distance: list[int], origin: int, offsets: list[int], predecessors: list[int], costs: list[int]
) -> None:
    queue = deque([origin])
    while queue:
        v = queue.popleft()
        d = distance[v]
        for k in range(offsets[v], offsets[v + 1]):
            u = predecessors[k]
            through = d + costs[k]
            if through < distance[u]:
                distance[u] = through
                if costs[k]:
                    queue.append(u)
                else:
                    queue.appendleft(u)


def _dijkstra(
    distance: list[int], origin: int, offsets: list[int], predecessors: list[int], costs: list[int]
) -> None:
    heap = [(0, origin)]
    while heap:
        d, v = heappop(heap)
        if d > distance[v]:
            continue
        for k in range(offsets[v], offsets[v + 1]):
            u = predecessors[k]
            through = d + costs[k]
            if through < distance[u]:
                distance[u] = through
                heappush(heap, (through, u))


def _segments(
    move_lists: Iterable[list[tuple[int, frozenset[int]]]],
) -> list[tuple[int, int, frozenset[int]]]:
    """Disjoint byte segments ``(lo, hi, successors)`` from several states' moves.

    The byte-range edges are grouped by identical range first (many states share ranges:
    the same class in several alternatives), their target sets joined once per range, and
    only then are overlapping ranges split into segments."""
    groups: dict[int, list[frozenset[int]]] = {}
    for moves in move_lists:
        for key, successors in moves:
            group = groups.get(key)
            if group is None:
                groups[key] = [successors]
            else:
                group.append(successors)
    segments: list[tuple[int, int, frozenset[int]]] = []
    previous_hi = -1
    overlapping = False
    for key in sorted(groups):
        targets = groups[key]
        lo, hi = key >> 8, key & 0xFF
        overlapping = overlapping or lo <= previous_hi
        previous_hi = max(previous_hi, hi)
        joined = targets[0] if len(targets) == 1 else frozenset().union(*targets)
        segments.append((lo, hi, joined))
    return _sweep(segments) if overlapping else segments


def _sweep(edges: list[tuple[int, int, frozenset[int]]]) -> list[tuple[int, int, frozenset[int]]]:
    """Overlapping byte-range edges (sorted by lo) -> disjoint segments with merged targets."""
    points = sorted({edge[0] for edge in edges} | {edge[1] + 1 for edge in edges})
    segments: list[tuple[int, int, frozenset[int]]] = []
    active: list[tuple[int, int, frozenset[int]]] = []
    index = 0
    total = len(edges)
    for a, b in pairwise(points):
        while index < total and edges[index][0] <= a:
            active.append(edges[index])
            index += 1
        active = [edge for edge in active if edge[1] >= a]
        if not active:
            continue
        if len(active) == 1:
            members = active[0][2]
        else:
            members = frozenset().union(*[edge[2] for edge in active])
        segments.append((a, b - 1, members))
    return segments

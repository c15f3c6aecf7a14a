"""Parse a pattern of formcast's regex dialect straight into its byte :class:`Nfa`.

Steps 1 to 3 of :mod:`formcast.automaton`: an iterative parser (no recursion, so nesting
depth is unbounded) builds a Thompson NFA over bytes in flat edge lists; character sets
become small byte tries through :func:`formcast.charset.utf8_sequences`; counted repeats
are copied concretely when small and made virtual blocks otherwise; sub-expressions with
an empty language are never linked in; and :func:`build_nfa` finally bypasses epsilon
chains and freezes the lists into arrays.

A group that is only an alternation of many literals (a ``Literal``/``enum`` of
thousands of names) is built as the words' trie by :mod:`formcast.automaton.choices`
instead of branch by branch.

The parse loop runs in C where the optional extension ``formcast._regex_parse`` was built
(``_regex_parse.c``): the same steps on the same builder, calling its Python methods for
the rarer constructs, so the NFA is the very one the Python loop builds.

Cost: linear in the pattern, ~0.1-0.2 us per pattern character in C (~1-2 us in Python;
a fraction of that inside a literal alternation), plus the arrays :meth:`_Builder.finish`
makes; a virtual block costs O(1) whatever its number of copies.
"""

from __future__ import annotations

import gc
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from itertools import pairwise
from operator import itemgetter
from types import ModuleType
from typing import NoReturn, Protocol, overload

import numpy as np
import numpy.typing as npt

from formcast.automaton.choices import CHOICE_MIN_WORDS, LITERAL_ALTERNATION, word_trie
from formcast.automaton.markers import call_marker, marker_width
from formcast.automaton.nfa import VIRTUAL_BASE, VIRTUAL_LIMIT, Block, Nfa
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
from formcast.errors import SchemaError
from formcast.limits import DEFAULT_LIMITS, Limits

native_parse: ModuleType | None
try:  # the parse loop in C (optional, see pyproject.toml); the Python loop otherwise
    from formcast import _regex_parse as native_parse
except ImportError:  # pragma: no cover - an install without a C compiler
    native_parse = None

__all__ = ["UnresolvedCallError", "build_machines", "build_nfa", "show_pattern"]

IdArray = npt.NDArray[np.int64]

# A class template: (number of local states, src, lo, hi, dst); local 0 = start, 1 = end.
Template = tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]
# A fragment under construction: (start, end, first concrete state, first byte edge,
# first eps edge, first virtual state). start == -1 marks an empty language. Its states
# and edges run from the "first" indices to the current ends of the builder's lists (it
# is always the last one built).
Fragment = tuple[int, int, int, int, int, int]

_SHOWN_PATTERN = 80
_BYPASS_ROUNDS = 64  # pointer-jumping rounds: chains up to 2**64 long


def build_nfa(pattern: str, limits: Limits = DEFAULT_LIMITS) -> Nfa:
    """The trimmed byte NFA of ``pattern`` (see :mod:`formcast.automaton` for the dialect).

    Raises:
        SchemaError: ``pattern`` is not a str, is outside the dialect, or matches no
            string at all ("expected a regular expression formcast can compile, found
            <pattern>: <reason> at position N").
    """
    _check_str(pattern)
    builder = _Builder(pattern, limits)
    top = builder.parse()
    if top[0] < 0:
        _refuse(pattern, "it matches no string at all", None)
    return builder.finish(top[0], top[1])[0]


def build_machines(
    pattern: str, recursive: tuple[str, ...], limits: Limits = DEFAULT_LIMITS
) -> tuple[Nfa, list[tuple[int, int]]]:
    """One NFA holding the machines of a pushdown automaton, and each machine's
    ``(start, end)`` in it: machine 0 is the main pattern (its end is the NFA's final
    state), machine ``k + 1`` the definition ``recursive[k]``.

    A call to a recursive definition is compiled as its call marker
    (:mod:`formcast.automaton.markers`); calls to other definitions are copies, as in
    :func:`build_nfa`, so ``pattern`` must define those before their callers
    (:func:`formcast.automaton.definitions.plan_recursion` orders them).

    Raises:
        SchemaError: as :func:`build_nfa`; also when a recursive definition is not
            defined at the top of the DEFINE block.
    """
    _check_str(pattern)
    builder = _Builder(pattern, limits, recursive)
    top = builder.parse()
    if top[0] < 0:
        _refuse(pattern, "it matches no string at all", None)
    ends = [(top[0], top[1])]
    for name in recursive:
        entry = builder.definitions.get(name)
        if entry is None:
            _refuse(pattern, f"the recursive definition {name!r} is not in the DEFINE block", None)
        start, end = entry[0][:2]
        if start < 0:
            _refuse(pattern, f"the definition {name!r} matches no string at all", None)
        ends.append((start, end))
    nfa, starts = builder.finish(top[0], top[1], [start for start, _ in ends[1:]])
    return nfa, [(nfa.start, nfa.final)] + [
        (start, end) for start, (_, end) in zip(starts, ends[1:], strict=True)
    ]


def _check_str(pattern: object) -> None:
    if not isinstance(pattern, str):
        raise SchemaError(
            "expected a regular expression formcast can compile, found "
            f"{type(pattern).__name__} {pattern!r}: a pattern must be a str"
        )


class UnresolvedCallError(SchemaError):
    """A call ``(?&name)`` before (or inside) its definition, or to no definition: the
    plain build refuses it, and :func:`formcast.automaton.compile_automaton` then plans
    the pattern's recursion (:mod:`formcast.automaton.definitions`)."""


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


# What the C loop reads besides the builder: the class templates, the two meanings of
# '.', the size from which an alternation of literals may be a trie, the type of a
# virtual block, and the classes of the shorthand escapes.
_NATIVE_CONTEXT = (_class_template, ANY, _ANY_BUT_NEWLINE, CHOICE_MIN_WORDS, Block, _SHORTHANDS)

# ------------------------------------------------------------------------ errors


def show_pattern(pattern: str) -> str:
    """``pattern`` as error messages and reprs show it: at most 80 characters."""
    if len(pattern) <= _SHOWN_PATTERN:
        return repr(pattern)
    return f"{pattern[:_SHOWN_PATTERN]!r}... ({len(pattern)} characters)"


def _refuse(
    pattern: str, reason: str, position: int | None, error: type[SchemaError] = SchemaError
) -> NoReturn:
    where = "" if position is None else f" at position {position}"
    raise error(
        "expected a regular expression formcast can compile, found "
        f"{show_pattern(pattern)}: {reason}{where}"
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

_HEX_OR_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})|\\(.)", re.DOTALL)


class _IntList(Protocol):
    """What the builder does with an edge list: a ``list`` of ints, or the C loop's
    ``Int64List`` (the same reads, and a buffer numpy copies at C speed)."""

    def __len__(self) -> int: ...
    def append(self, value: int, /) -> None: ...
    def extend(self, values: Iterable[int], /) -> None: ...
    @overload
    def __getitem__(self, index: int, /) -> int: ...
    @overload
    def __getitem__(self, index: slice, /) -> list[int]: ...


def _int_list() -> _IntList:
    """An empty edge list for the loop that will run (:meth:`_Builder.parse`)."""
    return [] if native_parse is None else native_parse.Int64List()


# a remembered group: (fragment, concrete state end, byte-edge end, epsilon-edge end)
_MemoEntry = tuple[Fragment, int, int, int]


class _Builder:
    """Parses a pattern and builds its Thompson NFA over bytes in flat edge lists.

    Fragments are built in post-order, so each occupies a contiguous range of state ids
    and edge indices ending at the current list ends; that is what makes counted repeats
    a vectorized offset copy. Invariant of every fragment: its start has no incoming
    edge and its end no outgoing edge inside the fragment (``X?`` relies on it), but for
    the epsilon self-loop that ``X?`` gives an empty group's single state (harmless).
    :mod:`formcast.automaton.nfa` states the invariants of the finished NFA.
    """

    def __init__(
        self, pattern: str, limits: Limits = DEFAULT_LIMITS, recursive: tuple[str, ...] = ()
    ) -> None:
        self.pattern = pattern
        self.limits = limits
        # calls to these definitions are call markers, not copies (machine k + 1 is
        # recursive[k]; a marker numbers its callee from 0)
        self.recursive = {name: k for k, name in enumerate(recursive)}
        self.marker_width = marker_width(len(recursive))
        self.n = 0  # concrete states
        self.vn = VIRTUAL_BASE  # next virtual state id
        self.blocks: list[Block] = []
        # the edges (byte: src, lo, hi, dst; epsilon: src, dst), in arrays of C ints where
        # the C loop runs (it appends to them without making an int object per item)
        self.bsrc: _IntList = _int_list()
        self.blo: _IntList = _int_list()
        self.bhi: _IntList = _int_list()
        self.bdst: _IntList = _int_list()
        self.esrc: _IntList = _int_list()
        self.edst: _IntList = _int_list()
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

    def finish(
        self, start: int, final: int, entries: list[int] | None = None
    ) -> tuple[Nfa, list[int]]:
        """The NFA of the top fragment ``start -> final``: the edge lists as arrays, the
        epsilon edges leaving virtual ids set apart as extras, epsilon chains bypassed.
        Also ``entries`` (other fragments' starts: the recursive definitions') as edges
        into them now point (their ends have no way out, so they stay)."""
        entries = list(entries or ())
        bsrc = np.array(self.bsrc, dtype=np.int64)  # copies: the NFA keeps none of the lists
        bdst = np.array(self.bdst, dtype=np.int64)
        all_esrc = np.array(self.esrc, dtype=np.int64)
        all_edst = np.array(self.edst, dtype=np.int64)
        concrete = all_esrc < VIRTUAL_BASE
        esrc, edst = all_esrc[concrete], all_edst[concrete]
        extra_src, extra_dst = all_esrc[~concrete], all_edst[~concrete]
        if esrc.size:
            following, bypassed = _chain_ends(self.n, final, self.blocks, bsrc, esrc, edst)
            bdst = _redirect(following, bdst)
            esrc, edst = esrc[~bypassed], _redirect(following, edst[~bypassed])
            extra_dst = _redirect(following, extra_dst)
            start, *entries = [
                int(following[state]) if state < VIRTUAL_BASE else state
                for state in (start, *entries)
            ]
        extras: dict[int, list[int]] = {}
        for source, target in zip(extra_src.tolist(), extra_dst.tolist(), strict=True):
            extras.setdefault(source, []).append(target)
        nfa = Nfa(
            pattern=self.pattern,
            concrete_states=self.n,
            virtual_states=self.vn - VIRTUAL_BASE,
            start=start,
            final=final,
            blocks=tuple(self.blocks),
            byte_src=bsrc,
            byte_lo=np.asarray(self.blo, dtype=np.int32),
            byte_hi=np.asarray(self.bhi, dtype=np.int32),
            byte_dst=bdst,
            eps_src=esrc,
            eps_dst=edst,
            extras={source: tuple(targets) for source, targets in extras.items()},
        )
        return nfa, entries

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
        return self.byte_chain(data)

    def byte_chain(self, data: bytes) -> Fragment:
        """A chain reading ``data`` (non-empty)."""
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
        if copies > self.limits.max_copies:
            self.fail(
                f"the counted repeat {shown} asks for more than {self.limits.max_copies} copies",
                position,
            )
        size_c = self.n - s0
        size_v = self.vn - v0
        added = size_c * (copies - 1)
        if (
            size_v > 0
            or added > self.limits.concrete_copy_limit
            or self.n + added > self.limits.concrete_budget
        ):
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
        if self.vn >= VIRTUAL_LIMIT:
            self.fail(f"the counted repeat {shown} makes the automaton too large", position)
        exit_state = self.fresh() if high is None else -1
        block = Block(
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
        if native_parse is not None:
            # no collection in the middle: the C loop makes few containers and no cycle,
            # while a collection it triggered would scan every object of the process
            collecting = gc.isenabled()
            gc.disable()
            try:
                top: Fragment = native_parse.parse_body(self, pos, size, dotall, _NATIVE_CONTEXT)
            finally:
                if collecting:
                    gc.enable()
            return top
        return self.parse_body(pos, size, dotall)

    def parse_body(self, pos: int, size: int, dotall: bool) -> Fragment:
        """The loop of :meth:`parse` over ``pattern[pos:size]`` (past the global flags and
        anchors). ``formcast._regex_parse`` runs the same loop in C, calling the methods
        below for the rarer constructs, and builds the same NFA."""
        p = self.pattern
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
                    counted = self.counted(pos, size)
                    if counted is None:
                        items.append(self.literal("{"))
                        quantifiable = True
                        pos += 1
                        continue
                    low, high, end = counted
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
                reused = self.reuse_group(pos, dotall) or self.literal_choice(pos, size, dotall)
                if reused is not None:
                    items.append(reused[0])
                    quantifiable = True
                    pos = reused[1]
                    continue
                open_pos = pos
                pos, inner_dotall = self.open_body(pos, size, dotall)
                if pos < 0:  # a comment
                    pos = -pos
                    continue
                stack.append((items, branches, open_pos, dotall))
                dotall = inner_dotall
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
                    quantifiable = False  # "(?(DEFINE)...)*" repeats nothing
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

    def literal_choice(self, pos: int, size: int, dotall: bool) -> tuple[Fragment, int] | None:
        """The group opening at ``pos`` built as a trie, and the position after it, when it
        is an alternation of at least :data:`CHOICE_MIN_WORDS` literals; else None.

        Same language as the generic build (a finite set of strings), but O(bytes) numpy
        work instead of the loop's per-character cost, and a deterministic NFA: a DFA
        state near the start is one trie node, not one NFA state per word."""
        if not self.pattern.startswith("(?:", pos):
            return None
        match = LITERAL_ALTERNATION.match(self.pattern, pos, size)
        if match is None or match.group(1).count("|") < CHOICE_MIN_WORDS - 1:
            return None
        words = _alternatives(match.group(1))
        if words is None:
            return None
        group = self.word_choice(words)
        self.remember_group(pos, match.end() - 1, dotall, group)
        return group, match.end()

    def word_choice(self, words: list[bytes]) -> Fragment:
        """A fragment reading exactly one of ``words`` (UTF-8): their trie, whose word
        ends lead by epsilon edges to a fresh end state."""
        trie = word_trie(words)
        s, b0, e0 = self.n, len(self.bsrc), len(self.esrc)
        if trie.ends.size == 0:
            return self._empty(self.fresh(), b0, e0, self.vn)
        end = s + trie.nodes + 1
        self.bsrc.extend((trie.src + s).tolist())
        byte = trie.byte.tolist()
        self.blo.extend(byte)
        self.bhi.extend(byte)
        self.bdst.extend((trie.dst + s).tolist())
        self.esrc.extend((trie.ends + s).tolist())
        self.edst.extend([end] * trie.ends.size)
        self.n = end + 1
        return (s, end, s, b0, e0, self.vn)

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
        callee = self.recursive.get(name)
        if callee is not None:
            return self.byte_chain(call_marker(callee, self.marker_width))
        entry = self.definitions.get(name)
        if entry is None:
            _refuse(
                self.pattern,
                f"unknown subroutine {name!r}: (?&name) must follow its definition",
                pos,
                UnresolvedCallError,
            )
        (start, end, s0, b0, e0, v0), n_end, vn_end, b_end, e_end = entry
        if start < 0:
            s = self.fresh()
            return self._empty(s, len(self.bsrc), len(self.esrc), self.vn)
        size_c = n_end - s0
        size_v = vn_end - v0
        if (
            size_v == 0
            and size_c <= self.limits.call_copy_limit
            and self.n + size_c <= self.limits.concrete_budget
        ):
            return self.copy_group(((start, end, s0, b0, e0, v0), n_end, b_end, e_end))
        block = Block(self.vn, size_c + size_v, 1, s0, size_c, v0, start, end, 1, True, -1)
        first_virtual = self.vn
        self.vn += block.span
        if self.vn >= VIRTUAL_LIMIT:
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
        if close_pos - open_pos < self.limits.memo_min_group or group[0] < 0 or group[5] != self.vn:
            return
        text = self.pattern[open_pos : close_pos + 1]
        if "(?P<" in text:
            return
        known = self.group_memo.setdefault(text[: self.limits.memo_min_group], [])
        if not any(t == text and d == dotall for t, d, _ in known):
            known.append((text, dotall, (group, self.n, len(self.bsrc), len(self.esrc))))

    def reuse_group(self, pos: int, dotall: bool) -> tuple[Fragment, int] | None:
        """A copy of the group opening at ``pos`` and the position after it, if the same
        text was built before (under the same dotall setting).

        A group's text decides its fragment, and fragments occupy contiguous state and
        edge ranges, so a copy is the earlier instance's edges shifted to fresh ids: far
        cheaper than parsing the text again (schema regexes repeat long groups, such as
        "any JSON value", many times)."""
        candidates = self.group_memo.get(self.pattern[pos : pos + self.limits.memo_min_group])
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

    def counted(self, pos: int, size: int) -> tuple[int, int | None, int] | None:
        """The counted quantifier ``{m}``, ``{m,}``, ``{,n}`` or ``{m,n}`` at ``pos``:
        ``(low, high, end)`` (``high`` None: unbounded); None when the brace is a literal."""
        counted = _COUNTED.match(self.pattern, pos, size)
        if counted is None or counted.group(0) == "{}":
            return None
        low = int(counted.group(1) or 0)
        if counted.group(2) is None:
            high: int | None = low
        else:
            high = int(counted.group(3)) if counted.group(3) else None
        if high is not None and low > high:
            self.fail("min repeat greater than max repeat", pos + 1)
        return low, high, counted.end()

    def open_body(self, open_pos: int, size: int, dotall: bool) -> tuple[int, bool]:
        """Where the body of the group opening at ``open_pos`` starts, and the DOTALL
        setting inside it (scoped flags ``(?s:...)`` change it); ``-(its end)`` for a
        comment."""
        pos = self.open_group(open_pos, size)
        if pos == open_pos + 1:
            scoped = _SCOPED_FLAGS.match(self.pattern, open_pos)
            if scoped is not None:
                added, removed = scoped.group(1), scoped.group(2) or ""
                return scoped.end(), self.flags(added, removed, open_pos, dotall)
        return pos, dotall

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


def _alternatives(body: str) -> list[bytes] | None:
    """The UTF-8 encodings of the branches of ``body``, an alternation of literal units
    (``_LITERAL_UNIT``), words that have none (a lone surrogate) left out; None when
    ``body`` holds one of the control characters this reading uses as marks.

    Whole-text replacements (C speed), not a pass per branch: escaped backslashes and
    escaped bars are set aside (a backslash always opens a two-character escape, read
    left to right), the bars left are the branch ends, and ``\\xNN`` escapes (which may
    stand for a mark) are undone word by word."""
    if any(mark in body for mark in _MARKS):
        return None
    text = body.replace("\\\\", "\x01").replace("\\|", "\x02").replace("|", "\x00")
    if "\\x" in text:
        words = [
            _HEX_OR_ESCAPE.sub(_unescape, word.replace("\x01", "\\\\").replace("\x02", "|"))
            for word in text.split("\x00")
        ]
        return [word.encode("utf-8") for word in words if _encodable(word)]
    if "\\" in text:
        text = _unescape_punctuation(text)
    text = text.replace("\x01", "\\").replace("\x02", "|")
    if _encodable(text):
        return text.encode("utf-8").split(b"\x00")
    return [word.encode("utf-8") for word in text.split("\x00") if _encodable(word)]


_MARKS = ("\x00", "\x01", "\x02")
_PUNCTUATION = "\"'.^$*+?{}[]()-/#&~,:;<=>!@%`_ "


def _unescape_punctuation(text: str) -> str:
    """``text`` (no escaped backslash left in it) with every ``\\X`` made ``X``: one
    ``str.replace`` per punctuation character (``re.sub`` expands its template in Python,
    once per escape), then ``re.sub`` for any other escaped character."""
    for char in _PUNCTUATION:
        escaped = "\\" + char
        if escaped in text:
            text = text.replace(escaped, char)
    return _UNESCAPE.sub(_GROUP_1, text) if "\\" in text else text


def _encodable(text: str) -> bool:
    """Whether ``text`` has a UTF-8 encoding (no lone surrogate)."""
    return _SURROGATE.search(text) is None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unescape(match: re.Match[str]) -> str:
    return chr(int(match.group(1), 16)) if match.group(1) else match.group(2)


# ----------------------------------------------------------------- epsilon chains


def _chain_ends(
    n: int, final: int, blocks: list[Block], bsrc: IdArray, esrc: IdArray, edst: IdArray
) -> tuple[IdArray, npt.NDArray[np.bool_]]:
    """Where edges into each concrete state may point instead, and the epsilon edges
    (of the concrete ``esrc -> edst``) that are then dropped.

    Thompson glue (sequence links, alternation exits) leaves many concrete states whose
    only way out is one epsilon edge; an edge into one is equivalent to an edge into its
    successor, so pointer jumping (vectorized, O(n log chain)) finds the end of every
    chain, and the bypassed states' own epsilon edges go. Halves the epsilon closures
    computed when rows are built and the work of the distance search. Kept: the final
    state, states leading to virtual ids (ids stay concrete), and the template starts and
    loop exits that derived glue refers to by id.
    """
    eps_out = np.bincount(esrc, minlength=n)
    byte_out = np.bincount(bsrc, minlength=n)
    single = (eps_out == 1) & (byte_out == 0)
    single[esrc[edst >= VIRTUAL_BASE]] = False
    if final < VIRTUAL_BASE:
        single[final] = False
    for block in blocks:
        for state in (block.x_start, block.exit):
            if 0 <= state < VIRTUAL_BASE:
                single[state] = False
    following = np.arange(n, dtype=np.int64)
    from_single = single[esrc]
    following[esrc[from_single]] = edst[from_single]
    for _ in range(_BYPASS_ROUNDS):
        jumped = following[following]
        if np.array_equal(jumped, following):
            break
        following = jumped
    else:  # an epsilon cycle among dead states: redirect, but keep every edge
        from_single[:] = False
    return following, from_single


def _redirect(following: IdArray, ids: IdArray) -> IdArray:
    """``ids`` with each concrete id replaced by the end of its chain."""
    concrete = ids < VIRTUAL_BASE
    return np.where(concrete, following[np.where(concrete, ids, 0)], ids)

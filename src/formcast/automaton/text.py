"""The per-request automaton of a ``FromText`` slot: the values one text allows.

A :class:`TextAutomaton` reads the values a slot (:class:`~formcast.text.TextSlot`)
allows in one request's text: its substrings (spelled as JSON or raw) or the numbers
written in it (:func:`number_candidates`). :class:`~formcast.automaton.bound.BoundAutomaton`
walks it wherever the schema's automaton reaches the slot; what each option means is
documented with :class:`~formcast.text.FromText`.

This module lays the text out as an NFA; its states and their rows are kept by
:mod:`formcast.automaton.text_states` (in C where that extension was built).

Cost: building a text automaton is linear in the text (~0.3 ms for 2,000 characters of a
string slot); a row (the live transitions of one state) is built when first needed, in
O(positions in the state).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from formcast.automaton.distances import UNREACHABLE
from formcast.automaton.table import DEAD
from formcast.automaton.text_states import Layout, SparseRow, dense_row, text_states
from formcast.text import MARKER_BYTES, FromText, Spelling, TextSlot

__all__ = ["TextAutomaton", "memoized", "number_candidates"]

IntArray = npt.NDArray[np.int32]
_T = TypeVar("_T")

_INF = np.int64(1) << 40  # a separator unit's cost: larger than any text


def memoized(cache: dict[int, _T], key: int, build: Callable[[int], _T]) -> _T:
    """``cache[key]``, built by ``build(key)`` the first time."""
    found = cache.get(key)
    if found is None:
        found = build(key)
        cache[key] = found
    return found


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SHORT_ESCAPES |= {"\b": "\\b", "\f": "\\f"}


def _json_spelling(char: str) -> bytes | None:
    """The bytes of ``char`` inside a JSON string (None for a lone surrogate)."""
    short = _SHORT_ESCAPES.get(char)
    if short is not None:
        return short.encode()
    if ord(char) < 0x20:
        return f"\\u{ord(char):04x}".encode()
    try:
        return char.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _raw_spelling(char: str) -> bytes | None:
    """The UTF-8 bytes of ``char`` (None for a lone surrogate or a marker byte)."""
    if ord(char) in MARKER_BYTES:
        return None
    try:
        return char.encode("utf-8")
    except UnicodeEncodeError:
        return None


_SPELLINGS = {"json": _json_spelling, "raw": _raw_spelling}


def _char_class(char: str) -> str:
    """``s`` whitespace, ``d`` digit, ``l`` letter, ``m`` mark, ``p`` punctuation or symbol,
    ``w`` a character that is a word on its own (scripts written without spaces)."""
    if char.isspace():
        return "s"
    category = unicodedata.category(char)
    if category == "Nd":
        return "d"
    if category[0] == "M":
        return "m"
    if category[0] in ("L", "N"):
        if category == "Lo" and unicodedata.east_asian_width(char) in ("W", "F"):
            return "w"
        if "\u0e00" <= char <= "\u0eff" or "\u1000" <= char <= "\u109f":  # Thai, Lao, Myanmar
            return "w"
        return "l"
    if category[0] in ("P", "S"):
        return "p"
    return "w"


_CLASS_CODES = {"s": 0, "d": 1, "l": 2, "w": 3, "m": 4, "p": 5}
_ASCII_CLASSES = np.array([_CLASS_CODES[_char_class(chr(c))] for c in range(128)], dtype=np.uint8)
_STANDALONE = np.zeros(len(_CLASS_CODES), dtype=bool)  # by class code: a word on its own
_STANDALONE[[_CLASS_CODES["w"], _CLASS_CODES["s"], _CLASS_CODES["p"]]] = True


def _classes(chars: str) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """Each character's class code (a mark takes its base's), and where marks are."""
    codes = np.frombuffer(chars.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    classes = np.full(codes.size, _CLASS_CODES["w"], dtype=np.uint8)
    ascii_ = codes < 128
    classes[ascii_] = _ASCII_CLASSES[codes[ascii_]]
    for i in np.flatnonzero(~ascii_).tolist():
        classes[i] = _CLASS_CODES[_char_class(chars[i])]
    marks = classes == _CLASS_CODES["m"]
    for i in np.flatnonzero(marks).tolist():  # a mark belongs to the character before it
        classes[i] = classes[i - 1] if i else _CLASS_CODES["w"]
    if codes.size > 2:  # punctuation between two letters or two digits joins them
        before, after = classes[:-2], classes[2:]
        joins = (classes[1:-1] == _CLASS_CODES["p"]) & (before == after)
        joins &= (before == _CLASS_CODES["d"]) | (before == _CLASS_CODES["l"])
        classes[1:-1] = np.where(joins, before, classes[1:-1])
    return classes, marks


def _boundaries(chars: str) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per position ``i`` (before ``chars[i]``; ``len(chars)`` is the end): may a value
    start there, may one end there (word boundaries, no whitespace at either end).

    A punctuation or symbol character between two letters or two digits joins them into
    one word (``18/04/2018``, ``1,234.50``, ``D.I.Y``, ``O'Neil``); elsewhere it is a word
    of its own (``RM31.00`` splits into ``RM`` and ``31.00``, ``Date:18/04`` at ``:``)."""
    classes, marks = _classes(chars)
    before, after = classes[:-1], classes[1:]
    cut = np.ones(classes.size + 1, dtype=bool)
    cut[1:-1] = ~marks[1:] & ((before != after) | _STANDALONE[before])
    space = classes == _CLASS_CODES["s"]
    starts = cut & np.append(~space, False)
    ends = cut & np.concatenate(([False], ~space))
    return starts, ends


def _plain_boundaries(chars: str) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Like :func:`_boundaries` without word boundaries: only no outer whitespace."""
    space = np.array([c.isspace() for c in chars], dtype=bool)
    return np.append(~space, False), np.concatenate(([False], ~space))


_WHITESPACE_RUN = re.compile(r"\s+")
#: The characters that end a line, as ``str.splitlines`` reads them.
_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")


def _line_edges(
    text: str, size: int, collapse: bool
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Per boundary of the normalized text (:func:`_normalized`, ``size`` characters, its
    whitespace runs collapsed or not): does a line start or end there. A line starts after
    a run of whitespace that holds a line break (or at the text's start, past any
    whitespace) and ends before such a run (or at the text's end)."""
    starts = np.zeros(size + 1, dtype=bool)
    ends = np.zeros(size + 1, dtype=bool)
    starts[0] = ends[size] = True
    removed = 0  # characters dropped by collapsing the runs before this one
    for run in _WHITESPACE_RUN.finditer(text):
        first, last = run.start(), run.end()
        at, after = first - removed, (first - removed + 1 if collapse else last)
        if first == 0 or last == len(text) or not _LINE_BREAKS.isdisjoint(run.group()):
            ends[at] = starts[after] = True
        if collapse:
            removed += last - first - 1
    return starts, ends


def _value_edges(
    text: str, options: FromText
) -> tuple[str, npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """The normalized text and, per boundary of it, may a value start there and may one
    end there (the options' word boundaries and whole lines; never at whitespace)."""
    chars = _normalized(text, options)
    starts, ends = (_boundaries if options.word_boundaries else _plain_boundaries)(chars)
    if options.whole_lines:
        collapse = options.whitespace == "collapse"
        line_starts, line_ends = _line_edges(text, len(chars), collapse)
        starts, ends = starts & line_starts, ends & line_ends
    return chars, starts, ends


_SURROGATE = re.compile("[\ud800-\udfff]")


class _Lines:
    """Sequences of units (characters), each with one or more spellings (byte strings),
    and the boundaries where a value may start and end. Sequences are flattened with a
    separator unit (no spelling) between them; boundary ``i`` stands before unit ``i``."""

    def __init__(self) -> None:
        self.spellings: list[list[bytes]] = []
        self.starts: list[bool] = [False]
        self.ends: list[bool] = [False]
        self._empty = True

    def add(self, units: list[list[bytes] | None], starts: list[bool], ends: list[bool]) -> None:
        """Append one sequence; a ``None`` unit cannot be written and no value crosses it.
        ``starts``/``ends`` hold one flag per boundary (``len(units) + 1``)."""
        if not self._empty:
            self.spellings.append([])
            self.starts.append(False)
            self.ends.append(False)
        self._empty = False
        writable = [unit is not None for unit in units] + [False]
        self.starts[-1] = starts[0] and writable[0]
        self.ends[-1] = False
        for i, unit in enumerate(units):
            self.spellings.append(unit or [])
            self.starts.append(starts[i + 1] and writable[i + 1])
            self.ends.append(ends[i + 1] and writable[i])


def _normalized(text: str, options: FromText) -> str:
    return _WHITESPACE_RUN.sub(" ", text) if options.whitespace == "collapse" else text


def _string_lines(text: str, options: FromText, spelling: Spelling = "json") -> _Lines:
    """The general form of a string slot's text: each character with its spellings (its
    other cases too when case-insensitive), JSON-escaped or raw."""
    spell = _SPELLINGS[spelling]
    chars, starts, ends = _value_edges(text, options)
    units: list[list[bytes] | None] = []
    for char in chars:
        spelled = spell(char)
        if spelled is None:
            units.append(None)
            continue
        forms = [spelled]
        if not options.case_sensitive:
            folded = char.casefold()
            for other in (char.lower(), char.upper(), folded):
                # only true case variants: equal once case-folded (not "I" for "ı")
                if len(other) == 1 and other != char and other.casefold() == folded:
                    extra = spell(other)
                    if extra is not None and extra not in forms:
                        forms.append(extra)
        units.append(forms)
    lines = _Lines()
    lines.add(units, starts.tolist(), ends.tolist())
    return lines


# the JSON spelling's length of each ASCII character; 0 at 128 stands for the others
_ASCII_SPELLED = np.array([len(_json_spelling(chr(c)) or b"") for c in range(128)] + [0])


def _spelled_lengths(codes: npt.NDArray[np.uint32]) -> npt.NDArray[np.int64]:
    """Bytes of each character inside a JSON string (as :func:`_json_spelling` writes it)."""
    lengths = _ASCII_SPELLED[np.minimum(codes, 128)].astype(np.int64)
    wide = codes >= 0x80
    if wide.any():
        found = codes[wide]
        lengths[wide] = np.where(found < 0x800, 2, np.where(found < 0x10000, 3, 4))
    return lengths


_NUMBER = re.compile(r"[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?")
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")


def number_candidates(text: str, *, integer: bool = False, whole_lines: bool = False) -> list[str]:
    """The numbers written in ``text``, as JSON numbers, in order of first appearance.

    See the module docstring for the reading rules. ``integer``: only whole numbers.
    ``whole_lines``: only the numbers that stand alone on a line (:func:`_lone_number`).
    """
    if whole_lines:
        lone = (_lone_number(line) for line in text.splitlines())
        numbers = (n for body in lone if body for n in number_candidates(body, integer=integer))
        return list(dict.fromkeys(numbers))
    found: dict[str, None] = {}
    for match in _NUMBER.finditer(text):
        written = match.group()
        pieces = [written]
        if "," in written and not _GROUPED.fullmatch(written):
            pieces = written.split(",")  # commas that are not thousands separators
        offset = match.start()
        for piece in pieces:
            number = piece.replace(",", "")
            whole, _, fraction = number.partition(".")
            whole = whole.lstrip("0") or "0"
            if integer:
                if fraction.strip("0"):
                    offset += len(piece) + 1
                    continue
                fraction = ""
            rendered = whole + (f".{fraction}" if fraction else "")
            before = text[offset - 1] if offset > 0 else ""
            earlier = text[offset - 2] if offset > 1 else ""
            if before == "-" and not earlier.isalnum() and rendered.strip("0."):
                rendered = "-" + rendered
            found.setdefault(rendered)
            offset += len(piece) + 1
    return list(found)


_LONE_NUMBER = re.compile(rf"(\S*?)\s*(-?{_NUMBER.pattern})\s*(\S*)")


def _lone_number(line: str) -> str | None:
    """The number written alone on ``line``, or None: the line holds one number and at
    most a currency sign or a code of one to three capital letters before or after it
    (``31.00``, ``RM 31.00``, ``$31.00``, ``31.00 USD``)."""
    match = _LONE_NUMBER.fullmatch(line.strip())
    if match is None:
        return None
    before, number, after = match.groups()
    if not (_currency(before) and _currency(after)) or (before and after):
        return None
    return number


def _currency(mark: str) -> bool:
    """Whether ``mark`` may stand next to a lone number: nothing, one currency sign, or
    one to three capital ASCII letters."""
    if len(mark) == 1 and unicodedata.category(mark) == "Sc":
        return True
    return len(mark) <= 3 and (not mark or (mark.isascii() and mark.isalpha() and mark.isupper()))


def _number_ok(rendered: str, bounds: Iterable[tuple[str, str]]) -> bool:
    value = Decimal(rendered)
    for keyword, limit_text in bounds:
        limit = Decimal(limit_text)
        if keyword == "minimum" and value < limit:
            return False
        if keyword == "maximum" and value > limit:
            return False
        if keyword == "exclusiveMinimum" and value <= limit:
            return False
        if keyword == "exclusiveMaximum" and value >= limit:
            return False
        if keyword == "multipleOf":
            try:
                if limit == 0 or value % limit != 0:
                    return False
            except InvalidOperation:
                return False
    return True


def _number_values(text: str, slot: TextSlot) -> list[str]:
    """The numbers of ``text`` a number slot may copy (within its bounds), as written."""
    integer, whole_lines = slot.value == "integer", slot.options.whole_lines
    return [
        rendered
        for rendered in number_candidates(text, integer=integer, whole_lines=whole_lines)
        if _number_ok(rendered, slot.bounds)
    ]


def _number_lines(values: list[str]) -> _Lines:
    """``values`` as lines whose units are their characters, each a whole value."""
    lines = _Lines()
    for rendered in values:
        units: list[list[bytes] | None] = [[c.encode()] for c in rendered]
        marks = [False] * (len(units) + 1)
        starts, ends = list(marks), list(marks)
        starts[0] = ends[-1] = True
        lines.add(units, starts, ends)
    return lines


# -- the automaton ---------------------------------------------------------------------------


class TextAutomaton:
    """The values one slot allows for one text, as a lazily determinized automaton.

    The NFA is a set of lines: a node before each unit (character) of the text, and nodes
    inside each spelling of a unit; edges read one byte. A DFA state is the set of nodes
    reached plus the characters read so far (capped where length bounds need it). State
    ids are small ints, :data:`0 <formcast.automaton.DEAD>` the dead state.

    Args:
        text: the request's text.
        slot: the kind of value (string or number, options, numeric bounds).
        usable: the bytes the vocabulary can emit one at a time (for distances).
    """

    def __init__(
        self, text: str, slot: TextSlot, usable: npt.NDArray[np.bool_], *, native: bool = True
    ) -> None:
        self.slot = slot
        options = slot.options
        minimum = options.min_length if slot.value == "string" else 1
        self._min = minimum
        self._max = options.max_length if slot.value == "string" else None
        # counts stay exact up to what the bounds need; only the initial state has 0
        self._cap = max(minimum, 1, (self._max + 1) if self._max is not None else 0)
        if slot.value != "string":
            starts = self._build_whole_values(_number_values(text, slot), usable)
        else:
            linear = options.case_sensitive and not _SURROGATE.search(text)
            if linear and slot.spelling == "json":
                starts = self._build_linear(text, options, usable)
            else:
                starts = self._build(_string_lines(text, options, slot.spelling), usable)
        layout = Layout(
            self._offsets,
            self._ebyte,
            self._edst,
            self._efirst,
            self._end_node,
            self._cap,
            self._max,
            minimum,
        )
        self._states = text_states(layout, native=native)
        self._rows: dict[int, IntArray] = {DEAD: np.zeros(256, dtype=np.int32)}
        self.initial = self._states.intern(np.ascontiguousarray(starts, dtype=np.int32), 0)

    def _build_linear(
        self, text: str, options: FromText, usable: npt.NDArray[np.bool_]
    ) -> IntArray:
        """The common case, vectorized: one spelling per character, so the nodes are the
        byte offsets of the JSON-escaped text and each reads the next byte. Returns the
        start nodes."""
        chars, starts, ends = _value_edges(text, options)
        codes = np.frombuffer(chars.encode("utf-32-le"), dtype=np.uint32)
        escaped = np.frombuffer(json.dumps(chars, ensure_ascii=False)[1:-1].encode(), np.uint8)
        lengths = _spelled_lengths(codes)
        boundary = np.concatenate(([0], np.cumsum(lengths)))  # byte offset of each boundary
        size = int(escaped.size)
        if int(boundary[-1]) != size:
            raise AssertionError("JSON spelling lengths disagree with json.dumps")
        unit_first = np.zeros(size + 1, dtype=np.int32)
        unit_first[boundary[:-1]] = 1
        self._ebyte = escaped.copy()
        self._edst = np.arange(1, size + 1, dtype=np.int32)
        self._efirst = unit_first[:size]
        self._offsets = np.append(np.arange(size + 1, dtype=np.int64), size)
        self._end_node = np.zeros(size + 1, dtype=bool)
        self._end_node[boundary[ends]] = True
        self._gate = np.searchsorted(boundary, np.arange(size + 1), side="left").astype(np.int64)
        bad = np.concatenate(([0], np.cumsum(~np.asarray(usable, dtype=bool)[escaped])))
        reach = boundary[self._gate]
        self._left = np.where(
            bad[reach] > bad[np.arange(size + 1)], _INF, reach - np.arange(size + 1)
        )
        cost = np.where(bad[boundary[1:]] > bad[boundary[:-1]], _INF, lengths)
        self._finish_tables(cost, ends)
        return boundary[starts].astype(np.int32)

    def _build_whole_values(self, values: list[str], usable: npt.NDArray[np.bool_]) -> IntArray:
        """The layout :meth:`_build` gives ``values`` as :func:`_number_lines`, vectorized
        for values of ASCII characters other than a line feed (numbers): a node per
        boundary, an edge per character, a separator unit between two values. Returns the
        start nodes."""
        joined = "\n".join(values)
        if not joined.isascii() or joined.count("\n") != max(len(values) - 1, 0):
            return self._build(_number_lines(values), usable)  # not one byte per character
        data = np.frombuffer(joined.encode(), dtype=np.uint8)
        units = int(data.size)
        written = data != 0x0A  # the separators are the line feeds
        self._ebyte = data[written]
        self._edst = (np.flatnonzero(written) + 1).astype(np.int32)
        self._efirst = np.ones(self._ebyte.size, dtype=np.int32)
        self._offsets = np.concatenate(([0], np.cumsum(np.append(written, False)))).astype(np.int64)
        lengths = np.array([len(value) for value in values], dtype=np.int64)
        first = np.cumsum(lengths + 1) - (lengths + 1)  # where each value starts
        starts = np.zeros(units + 1, dtype=bool)
        ends = np.zeros(units + 1, dtype=bool)
        starts[first[lengths > 0]] = True
        ends[(first + lengths)[lengths > 0]] = True
        self._end_node = ends.copy()
        self._gate = np.arange(units + 1, dtype=np.int64)
        self._left = np.zeros(units + 1, dtype=np.int64)
        usable_here = np.asarray(usable, dtype=bool)[data]
        cost = np.where(written & usable_here, 1, _INF).astype(np.int64)
        self._finish_tables(cost, ends)
        return np.flatnonzero(starts).astype(np.int32)

    def _build(self, lines: _Lines, usable: npt.NDArray[np.bool_]) -> IntArray:
        """Nodes, edges (CSR by source) and the tables of :meth:`distance`, in general
        (several spellings per character); returns the start nodes."""
        units = len(lines.spellings)
        boundary = np.arange(units + 1, dtype=np.int32)  # node ids of the boundaries
        src: list[int] = []
        byte: list[int] = []
        dst: list[int] = []
        first: list[bool] = []
        gate: list[int] = list(range(units + 1))  # the boundary each node leads to
        left: list[int] = [0] * (units + 1)  # usable bytes left to reach it (or _INF)
        cost = np.full(units, _INF, dtype=np.int64)  # cheapest usable spelling per unit
        next_id = units + 1
        unusable = frozenset(np.flatnonzero(~np.asarray(usable, dtype=bool)).tolist())
        for u, spellings in enumerate(lines.spellings):
            for spelling in spellings:
                if unusable.isdisjoint(spelling):
                    cost[u] = min(int(cost[u]), len(spelling))
                previous = u
                for k, value in enumerate(spelling):
                    last = k == len(spelling) - 1
                    target = u + 1 if last else next_id
                    src.append(previous)
                    byte.append(value)
                    dst.append(target)
                    first.append(k == 0)
                    if not last:
                        gate.append(u + 1)
                        remaining = spelling[k + 1 :]
                        fine = unusable.isdisjoint(remaining)
                        left.append(len(remaining) if fine else int(_INF))
                        next_id += 1
                    previous = target
        self._end_node = np.zeros(next_id, dtype=bool)
        self._end_node[: units + 1] = np.asarray(lines.ends, dtype=bool)
        order = np.argsort(np.asarray(src, dtype=np.int64), kind="stable")
        self._ebyte = np.asarray(byte, dtype=np.uint8)[order]
        self._edst = np.asarray(dst, dtype=np.int32)[order]
        self._efirst = np.asarray(first, dtype=np.int32)[order]
        counts = np.bincount(np.asarray(src, dtype=np.int64), minlength=next_id)
        self._offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self._gate = np.asarray(gate, dtype=np.int64)
        self._left = np.asarray(left, dtype=np.int64)
        self._finish_tables(cost, np.asarray(lines.ends, dtype=bool))
        starts = np.flatnonzero(np.asarray(lines.starts, dtype=bool))
        return boundary[starts].astype(np.int32)

    def _finish_tables(self, cost: npt.NDArray[np.int64], ends: npt.NDArray[np.bool_]) -> None:
        """The tables of :meth:`distance`: cumulative unit costs and the next end."""
        units = cost.size
        self._prefix = np.concatenate(([0], np.cumsum(cost)))
        # next_end[g]: the first end boundary at or after g (units + 1 when none)
        positions = np.where(ends, np.arange(units + 1), units + 1)
        self._next_end = np.minimum.accumulate(positions[::-1])[::-1]
        self._units = units

    # -- states -------------------------------------------------------------------------
    def _nodes(self, state: int) -> IntArray:
        return np.frombuffer(self._states.nodes(state), dtype=np.int32)

    @property
    def num_states(self) -> int:
        return len(self._states)

    def is_accepting(self, state: int) -> bool:
        """Whether the value read so far is complete (may be closed here)."""
        return self._states.is_accepting(state)

    def row(self, state: int) -> IntArray:
        """The 256 transitions of ``state`` (shared array: do not modify)."""
        return memoized(self._rows, state, self._build_row)

    def _build_row(self, state: int) -> IntArray:
        return dense_row(self._states.sparse_row(state))

    def sparse_row(self, state: int) -> SparseRow:
        """The live transitions of ``state``: ``(byte, state)`` pairs, bytes ascending.
        Built on the first call (:mod:`formcast.automaton.text_states`)."""
        return self._states.sparse_row(state)

    def distance(self, state: int) -> int:
        """Fewest bytes (each one usable) that complete a value from ``state``: 0 when
        accepting, ``UNREACHABLE`` when no value can be completed. Exact: a value is read
        along the text, so the nearest end boundary far enough on is the best one."""
        if state == DEAD:
            return UNREACHABLE
        if self.is_accepting(state):
            return 0
        nodes = self._nodes(state)
        count = self._states.count(state)
        gates = self._gate[nodes]
        need = max(0, self._min - count)
        reach = gates + need
        inside = reach <= self._units
        if not inside.any():
            return UNREACHABLE
        gates, left = gates[inside], self._left[nodes][inside]
        ends = self._next_end[reach[inside]]
        found = ends <= self._units
        if self._max is not None:
            found &= count + (ends - gates) <= self._max
        if not found.any():
            return UNREACHABLE
        ends, gates, left = ends[found], gates[found], left[found]
        costs = left + self._prefix[ends] - self._prefix[gates]
        best = int(costs.min())
        return best if best < _INF else UNREACHABLE

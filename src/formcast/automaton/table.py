"""The transition table behind both byte automata: :class:`TableAutomaton`.

:class:`~formcast.automaton.lazy.LazyAutomaton` (states are sets of NFA states) and
:class:`~formcast.automaton.pushdown.PushdownAutomaton` (states are sets of stacks)
differ in what a state is and how its row is computed, not in how rows are stored and
read. Both intern states to dense ints and keep a ``(capacity, 256)`` int32 table whose
row ``s`` is all :data:`UNBUILT` until ``s`` is first reached, then holds state ids
(>= 0) and never changes. This class holds that table and everything that only reads
it: state checks, batched steps, walks, rows and acceptance. A subclass supplies
``_build_row``, and registers states with :meth:`TableAutomaton._register`.

Thread safety: reads take no lock. A reader that sees an entry :data:`UNBUILT` builds
the row under ``_lock`` with a double check; an entry is written once, from
:data:`UNBUILT` to its final value, so no reader sees a stale one. A large table grows in
place, inside address space reserved for it (see :func:`_new_table`); a small one, or one
past its reservation, grows by copying into a larger one. Either way a row built in one
table is built in every later one.
"""

from __future__ import annotations

import mmap
import sys
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from formcast.errors import UserError

__all__ = [
    "BUILD_ROOM",
    "DEAD",
    "UNBUILT",
    "SetStatesAutomaton",
    "TableAutomaton",
    "arrays_under",
]

DEAD = 0
"""The dead sink state: every byte leads from it to itself. Its set is empty."""

UNBUILT = -1
"""Every entry of a row not built yet."""

IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]

INITIAL_CAPACITY = 64
# The new states a C row construction has room for in the table, at least, before it
# returns to Python (which then grows the table): a row needs room for those of its
# successors not interned yet, so a small automaton's table (64 rows at first) does not
# grow for the room alone.
BUILD_ROOM = 64
# The room a first visit asks first of a table in a reservation of its own, where growing
# copies nothing: a pattern that matches anywhere adds hundreds of states a visit, and a
# visit short of room walks again from its start (see visit_building).
VISIT_ROOM_MAPPED = 1024
_FILL_CHUNK = 256  # rows marked UNBUILT at once ahead of registration (256 KB)
_SHIFT_SAFE = 1 << 23  # below this many states, (state << 8) | byte fits an int32
_MAPPED_BYTES = 1 << 22  # from this size on, a table gets a mapping of its own (_new_table)
# A dead table's mapping is kept for a later table where its capacity was this size at
# most (64 MB), and so many mappings at once (see _kept)
_KEPT_BYTES = 1 << 26
_KEPT_MAPPINGS = 2
_ROW_BYTES = 256 * 4
_RESERVED_ROWS = 1 << 20  # address space a mapped table reserves: 1 GiB, touched as used
_OVERCOMMIT_SETTING = "/proc/sys/vm/overcommit_memory"
# mmap's MAP_NORESERVE (Linux's value where Python's module lacks the name): a
# reservation is then left out of the commit charge, which a fork() copies in full
_NO_RESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)

Members = TypeVar("Members", bound=Hashable)
_Result = TypeVar("_Result")


class TableAutomaton(Generic[Members]):
    """A deterministic byte automaton whose rows are built on demand, then cached.

    Subclasses set ``initial``, ``_sets`` (one entry a state, :data:`DEAD` first) with
    ``_ids`` (its inverse), ``_table``/``_flat``/``_accepting`` (by :meth:`_allocate`)
    and ``_lock``, and implement :meth:`_build_row`. ``Members`` is what a state is made
    of (a set of NFA states, a set of stacks, a bound automaton's parts). A subclass that
    builds single entries rather than whole rows overrides :meth:`_build_entries` and
    :meth:`_ensure_row` (:class:`~formcast.automaton.bound.BoundAutomaton` does).
    """

    initial: int
    _sets: list[Members]
    _ids: dict[Members, int]  # a state's members -> its id
    _table: IntArray
    _flat: IntArray  # _table as one flat view, for the gather of :meth:`step`
    _accepting: BoolArray
    _filled: int  # the rows below this one are written (see _register)
    _lock: threading.Lock
    _mapping: mmap.mmap | None = None  # the memory the table lies in, when mapped
    _released: list[Any]  # [_mapping, capacity], what _release is given when this dies
    _rows_ahead: bool = False  # rows were built before any walk asked (see rows_built_ahead)
    _visit_room: int = BUILD_ROOM  # the room a visit asks first (see visit_building)
    _kept_builder: tuple[Any, ...] | None = None  # see _builder

    # -- storage -------------------------------------------------------------------------
    def _allocate(self, capacity: int) -> None:
        """Give the table and the acceptance flags ``capacity`` states, keeping those
        registered so far. The rows past them are left unwritten: :meth:`_register` fills
        them with :data:`UNBUILT` a chunk at a time as states come, so the memory of a
        large table is touched as it is used rather than all at once when it doubles
        (filling half a GB took ~1 s, one mask's time, in a schema of 260k states).
        Within the table's reservation (:func:`_new_table`) the new table is a longer
        view of the same memory: O(capacity) for the flags, nothing for the rows. Past
        it, O(registered states x 256) to copy them."""
        count = len(self._sets)
        mapping = self._mapping
        accepting = np.zeros(capacity, dtype=np.bool_)
        in_place = mapping is not None and capacity * _ROW_BYTES <= len(mapping)
        if mapping is not None and in_place:
            table = _rows_of(mapping, capacity)  # the rows so far are already there
            self._released[1] = capacity
        else:
            table, self._mapping = _new_table(capacity)
            if self._mapping is not None:  # kept for a later table once this one dies
                self._released = [self._mapping, capacity]
                weakref.finalize(self, _release, self._released).atexit = False
            if count:
                table[:count] = self._table[:count]
        if count:
            accepting[:count] = self._accepting[:count]
        # A reader that sees row s built in any table sees it in every later one.
        self._table = table
        self._flat = table.reshape(-1)
        self._accepting = accepting
        if not in_place:
            self._filled = count  # rows from here on are unwritten (see _register)

    def _register(self, members: Members, accepting: bool) -> int:
        """Append a state (its row not built yet) and return its id; doubles the
        capacity when full. Caller holds the lock, or owns the automaton."""
        sid = len(self._sets)
        if sid >= self._accepting.shape[0]:
            self._allocate(2 * sid)
        if sid >= self._filled:  # before the state exists: no reader sees it unwritten
            self._filled = min(sid + _FILL_CHUNK, self._table.shape[0])
            self._table[sid : self._filled] = UNBUILT
        self._accepting[sid] = accepting
        self._sets.append(members)
        self._ids[members] = sid
        return sid

    def _reserve(self, extra: int) -> None:
        """Capacity for ``extra`` more states than are registered (caller holds the lock)."""
        count = len(self._sets)
        if count + extra > self._accepting.shape[0]:
            self._allocate(max(2 * self._accepting.shape[0], count + extra))

    def _took_in(self) -> None:
        """Note the states a builder appended to ``_sets`` and ``_ids`` itself, within the
        room :meth:`_reserve` gave, having written their acceptance flags and
        :data:`UNBUILT` rows (as :meth:`_register` does): the rows below them count as
        written. Caller holds the lock."""
        self._filled = max(self._filled, len(self._sets))

    def _build_row(self, state: int) -> None:
        """Compute and store the row of ``state`` (caller holds the lock)."""
        raise NotImplementedError

    def _build_rows(self, states: list[int]) -> None:
        """Compute and store the rows of ``states`` not built yet (caller holds the lock):
        one by one here (a row built on the way is not built again); a subclass may build
        them together."""
        for state in states:
            if self._table[state, 0] == UNBUILT:
                self._build_row(state)

    def _ensure(self, states: Iterable[int]) -> None:
        """Build the rows of ``states`` not built yet, under the lock."""
        with self._lock:
            table = self._table
            pending = [state for state in states if table[state, 0] == UNBUILT]
            if pending:
                self._build_rows(pending)

    def _build_entries(
        self, states: npt.NDArray[np.integer[Any]], data: npt.NDArray[np.uint8]
    ) -> None:
        """Build the entries ``(states[i], data[i])``, which read :data:`UNBUILT`: here the
        whole rows of those states."""
        self._ensure(np.unique(states).tolist())

    def _ensure_row(self, state: int) -> None:
        """Build every entry of the row of ``state`` not built yet."""
        if self._table[state, 0] == UNBUILT:
            self._ensure((state,))

    def _check(self, state: int) -> int:
        value = int(state)
        if not 0 <= value < len(self._sets):
            raise UserError(f"expected a state in [0, {len(self._sets)}), found {state!r}")
        return value

    # -- public API ------------------------------------------------------------------------
    @property
    def num_states(self) -> int:
        """States materialised so far, :data:`DEAD` included (grows as walks go on)."""
        return len(self._sets)

    def step(self, states: npt.NDArray[np.integer[Any]], data: npt.NDArray[np.uint8]) -> IntArray:
        """Advance many (state, byte) pairs at once: ``out[i] = delta(states[i], data[i])``.

        ``states`` are ids returned by this automaton (int32 preferred), ``data`` bytes
        (uint8), same shape. One gather from the flat table; rows not built yet read as
        :data:`UNBUILT` there, so they are then built (under the lock) and gathered again.
        Cost when all rows exist: one index computation and one gather, ~7 ns per element.
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
            self._build_entries(states[unbuilt], data[unbuilt])
            result = self._flat[index]
        return result

    @property
    def table(self) -> IntArray:
        """The current ``(capacity, 256)`` table (read-only by contract): rows not built
        read :data:`UNBUILT`; rows past :attr:`num_states` hold nothing meaningful. A later
        build may move to a larger table; this one stays valid for the rows it holds."""
        return self._table

    # -- rows built in C (formcast._subset, formcast._pushdown) ---------------------------
    def _native_rows(self) -> tuple[Any, ...] | None:
        """What builds this automaton's rows in C: ``(builder,)`` or ``(builder, build,
        step, plain step)``, the first item an object with ``build_rows(states, table,
        accepting, sets)`` and the others the capsules of its row, entry and chain-link
        constructions for :mod:`formcast._trie_walk` (none: formcast._subset's); None
        where rows are built in Python. A subclass whose rows a C module builds says so
        here."""
        return None

    @property
    def rows_in_c(self) -> bool:
        """Whether a C module builds this automaton's rows (:meth:`_native_rows`), and so
        walks build the rows they reach as they go (:meth:`walk_building`,
        :meth:`visit_building`)."""
        return self._native_rows() is not None

    def _build_natively(self, native: Any, states: list[int]) -> None:
        """The rows of ``states`` by ``native.build_rows``, straight into the table: it
        registers the new states itself (in ``_sets`` as None: it holds their members)
        with their acceptance flags, so no Python runs, and no Python object is made, per
        state or per row. Between its calls the table grows, so that a row's new states
        (at most 256) always fit (caller holds the lock)."""
        wanted = np.asarray(states, dtype=np.int32)
        done, room = 0, BUILD_ROOM
        while done < wanted.size:
            self._reserve(room)
            made = native.build_rows(wanted[done:], self._table, self._accepting, self._sets)
            self._took_in()
            done += made
            room = BUILD_ROOM if made else 2 * room + 1  # a row adds at most 256 states

    def walk_building(self, run: Callable[[IntArray, tuple[Any, ...] | None], _Result]) -> _Result:
        """``run(table, builder)``: a walk of :mod:`formcast._trie_walk` over the current
        table. Where rows are built in C (:meth:`_native_rows`), under the row lock with
        room in the table for :data:`BUILD_ROOM` new states, ``builder`` being ``(builder
        object, accepting, sets[, build, step, plain step])``: the walk builds the rows it
        reaches without a return to Python per row. Else ``builder`` is None: the walk
        leaves the rows it needs pending, for :meth:`build_rows`."""
        native = self._native_rows()
        if native is None:
            return run(self._table, None)
        with self._lock:
            self._reserve(BUILD_ROOM)
            try:
                return run(self._table, self._builder(native))
            finally:
                self._took_in()

    def _builder(self, native: tuple[Any, ...]) -> tuple[Any, ...]:
        """What a walk of :mod:`formcast._trie_walk` builds rows with: ``(builder object,
        accepting, sets[, build, step, plain step])`` from :meth:`_native_rows`' answer
        (the flags and the list as they are now: read after any growth of the table). Kept
        while the flags are the same array: a first visit asks for it at every call."""
        kept = self._kept_builder
        if kept is not None and kept[0] is native[0] and kept[1] is self._accepting:
            return kept
        kept = self._kept_builder = (native[0], self._accepting, self._sets, *native[1:])
        return kept

    def visit_building(
        self, visit: Callable[[IntArray, int, tuple[Any, ...]], tuple[Any, ...]], state: int
    ) -> tuple[Any, ...] | None:
        """``visit(table, state, builder)`` under the row lock (``builder`` as for
        :meth:`walk_building`), called again with more room in the table while it answers
        ``(0,)``: a :class:`formcast._trie_walk.Visitor`'s visit, which builds the rows it
        reads and stops where a row's new states would not fit (the rows built stay
        built). None where rows are not built in C.

        A visit called again walks again from its start (over rows built by then): its
        second to fifth calls were most of the slowest masks of a pattern that matches
        anywhere (hundreds of new states a visit, where the room doubled from 64). So a
        visit that ran short is offered twice the states the table holds, a table in a
        reservation (where growing copies nothing) offers :data:`VISIT_ROOM_MAPPED` states
        at first, and the room a visit needed is kept and offered to the next ones. A
        small table offers little at first: its growth is a copy into new memory, whose
        first touches raised the grammars' mask p99 by 5-10%."""
        room = self._visit_room
        if self._mapping is not None:
            room = max(room, VISIT_ROOM_MAPPED)
        sets = self._sets
        with self._lock:
            while True:
                # _reserve's check, _took_in and _builder's check inline: the calls were
                # ~0.5 us of a small first visit's ~3 of Python (first_visits.py small)
                if len(sets) + room > self._accepting.shape[0]:
                    self._reserve(room)
                builder = self._kept_builder
                if builder is None or builder[1] is not self._accepting:
                    native = self._native_rows()
                    if native is None:
                        return None
                    builder = self._builder(native)
                try:
                    found = visit(self._table, state, builder)
                finally:
                    if len(sets) > self._filled:
                        self._filled = len(sets)
                if found[0]:
                    return found
                room = max(2 * room + 1, 2 * len(self._sets))
                self._visit_room = max(self._visit_room, room)

    def build_rows(self, states: Iterable[int]) -> None:
        """Build the rows of ``states`` that are not built yet (under the lock)."""
        self._ensure(states)

    def build_breadth_first(self, limit: int) -> list[int]:
        """Build the rows of up to ``limit`` states, breadth-first from ``initial`` (in the
        order of their bytes), and return those states in that order. Deterministic: the
        same automaton always numbers the same states alike. Cost: one row build per
        state not built yet."""
        order = [self.initial] if limit > 0 else []
        seen = set(order)
        for state in order:  # grows while it is read: a queue
            if len(order) >= limit:
                break
            for following in dict.fromkeys(self.row(state).tolist()):
                if following != DEAD and following not in seen and len(order) < limit:
                    seen.add(following)
                    order.append(following)
        self.build_rows(order)
        self._rows_ahead = self._rows_ahead or bool(order)
        return order

    @property
    def rows_built_ahead(self) -> bool:
        """Whether rows were built before walks reached them (at compile, by
        :meth:`build_breadth_first`, or restored from the disk cache): a walk then reads
        built rows first rather than building as it goes (see
        :func:`formcast.index._walk_natively`)."""
        return self._rows_ahead

    def row(self, state: int) -> IntArray:
        """The 256 transitions of ``state`` (a fresh int32 array; builds the row if needed)."""
        state = self._check(state)
        self._ensure_row(state)
        row: IntArray = self._table[state].copy()
        return row

    def is_accepting(self, state: int) -> bool:
        """Whether input may end in ``state``."""
        return bool(self._accepting[self._check(state)])

    def walk(self, data: bytes, state: int | None = None) -> int:
        """Feed ``data`` byte by byte from ``state`` (default ``initial``); DEAD once dead."""
        current = self.initial if state is None else self._check(state)
        for byte in data:
            if current == DEAD:
                return DEAD
            following = int(self._table[current, byte])
            if following == UNBUILT:
                self._build_entries(
                    np.array([current], dtype=np.int32), np.array([byte], dtype=np.uint8)
                )
                following = int(self._table[current, byte])
            current = following
        return current

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` is, in full, the UTF-8 encoding of a string the pattern matches."""
        end = self.walk(data)  # may grow the arrays: read them afterwards
        return bool(self._accepting[end])

    def live_bytes(self, state: int) -> npt.NDArray[np.uint8]:
        """The bytes with a non-DEAD transition from ``state``, ascending (uint8)."""
        return np.flatnonzero(self.row(state)).astype(np.uint8)


class SetStatesAutomaton(TableAutomaton[frozenset[int] | None]):
    """A :class:`TableAutomaton` whose states are sets of ints (NFA states, stacks),
    which a C construction (``_native``, its ``members(state)``) may hold itself: such a
    state is None in ``_sets`` until :meth:`_members` asks for it."""

    _native: Any = None

    def _members(self, sid: int) -> frozenset[int]:
        """The members of state ``sid``: made into a frozenset from the C construction's
        the first time they are asked for, where it made the state (no Python object a
        state until then, ~1 us less a new state)."""
        members = self._sets[sid]
        if members is None:
            members = self._sets[sid] = self._native.members(sid)
        return members


def _new_table(capacity: int) -> tuple[IntArray, mmap.mmap | None]:
    """An unwritten ``(capacity, 256)`` int32 table, and the mapping it lies in, if any.

    From 4 MB on, its memory is an anonymous mapping of its own, in 4 KB pages: numpy
    advises the kernel to back arrays that large with 2 MB pages, and where transparent
    huge pages are given to advised memory (Linux's default ``madvise`` mode) a first
    touch then zeroes, and may have to compact, 2 MB at once. The copy of a table
    doubling to 64 MB took 7-105 ms that way (20-200 ms in a process that had run for a
    while) against 18-23 ms in 4 KB pages; one such copy was a mask's whole time. A
    smaller table stays in numpy's memory: mapped from its first rows, it grew with no
    copy (0.8 ms at 4 MB), but its pages were new to the process at every first touch,
    where numpy's come back from tables freed before: the grammars' mask p99 rose from
    135-139 to 146-154 us.

    Where Linux overcommits (its default), the mapping reserves address space for
    :data:`_RESERVED_ROWS` states (1 GiB, or twice ``capacity`` past that) without
    committing memory: pages are given as rows are first written, so the table later
    grows in place with no copy, and the memory used is what the rows take, as before.
    It is mapped without swap space reserved (``MAP_NORESERVE``): counted in the commit
    charge, which a ``fork()`` copies, tens of reservations made the fork fail for want
    of memory it would never use. Under a limit on the process's address space (``ulimit
    -v``, ``RLIMIT_AS``), which reservations count against in full, a table reserves a
    sixteenth of that limit at most (:func:`_reserved_rows`). Under strict accounting
    (``vm.overcommit_memory = 2``), where a reservation would count in full, or where it
    is refused, the mapping is ``capacity`` rows.

    When the automaton dies, its reservation is kept for the next table that reserves as
    much (:func:`_release`, :func:`_kept_mapping`), unless its table passed 64 MB; the
    two newest are kept. Its pages stay given to the process, so the next table's rows
    are written without page faults: over detekt's 33k rows, 42k faults fell to 31k,
    and a Snowplow schema's 5.7k to 50 (16 ms of masks, from 26). Such a mapping is
    taken only once no array lies over it; one that is not kept is released with the
    last array over it."""
    if capacity * _ROW_BYTES < _MAPPED_BYTES or not hasattr(mmap, "MAP_PRIVATE"):
        return np.empty((capacity, 256), dtype=np.int32), None  # Windows: nothing advised
    # private: a forked process gets its own copy on write, as with numpy's memory (a
    # shared mapping would let a child's new rows, naming states only it has, show here)
    private = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    mapping = None
    if _may_reserve():
        rows = max(_reserved_rows(), 2 * capacity)
        mapping = _kept_mapping(rows * _ROW_BYTES)
        if mapping is not None:
            return _rows_of(mapping, capacity), mapping
        try:
            mapping = mmap.mmap(-1, rows * _ROW_BYTES, flags=private | _NO_RESERVE)
        except OSError:  # a limit on address space (ulimit -v): map what is asked
            mapping = None
    if mapping is None:
        mapping = mmap.mmap(-1, capacity * _ROW_BYTES, flags=private)
    return _rows_of(mapping, capacity), mapping


# Mappings of tables that died, newest last, for the next tables (see _new_table). Their
# pages stay given to the process: a new table's rows then land on memory the kernel
# gave before, where a fresh mapping takes a page fault (~1.3 us) every fourth row.
_kept: list[mmap.mmap] = []
_kept_lock = threading.Lock()  # its sections allocate nothing: no collection runs inside


def _release(released: list[Any]) -> None:
    """Keep the mapping of a table that died (``released``: ``[mapping, capacity]``) for
    a later table, unless its capacity passed :data:`_KEPT_BYTES`; the
    :data:`_KEPT_MAPPINGS` newest are kept. Run by the automaton's finalizer."""
    mapping, capacity = released
    released.clear()
    if capacity * _ROW_BYTES <= _KEPT_BYTES:
        with _kept_lock:
            _kept.append(mapping)
            del _kept[:-_KEPT_MAPPINGS]


def _kept_mapping(size: int) -> mmap.mmap | None:
    """A kept mapping of exactly ``size`` bytes over which no array lies any longer,
    taken out of the kept ones; None where there is none. The finalizer that keeps a
    mapping runs before the dead automaton's arrays are dropped, so whether they are gone
    is read here: the list and this call's argument are then its only references."""
    with _kept_lock:
        for k in range(len(_kept) - 1, -1, -1):
            if len(_kept[k]) == size and sys.getrefcount(_kept[k]) == 2:
                return _kept.pop(k)
    return None


def _rows_of(mapping: mmap.mmap, capacity: int) -> IntArray:
    """The first ``capacity`` rows of the table in ``mapping``."""
    return np.frombuffer(mapping, dtype=np.int32, count=capacity * 256).reshape(capacity, 256)


def _reserved_rows() -> int:
    """The rows a mapped table reserves: :data:`_RESERVED_ROWS`, or a sixteenth of the
    process's limit on address space where one is set (a worker capped at 4 GiB then
    reserves 256 MB a table, and its other allocations keep the room they had)."""
    import resource  # Unix only, and only reserving platforms ask (_may_reserve)

    try:
        limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):
        return _RESERVED_ROWS
    if limit == resource.RLIM_INFINITY:
        return _RESERVED_ROWS
    return min(_RESERVED_ROWS, limit // 16 // _ROW_BYTES)


_reserve_verdict: bool | None = None


def _may_reserve() -> bool:
    """Whether a table may reserve address space beyond its rows: on Linux, unless the
    kernel accounts every private mapping in full (strict overcommit). Read once."""
    global _reserve_verdict
    if _reserve_verdict is None:
        _reserve_verdict = False
        if sys.platform == "linux":
            try:
                with open(_OVERCOMMIT_SETTING) as setting:
                    _reserve_verdict = setting.read().strip() in ("0", "1")
            except OSError:
                pass
    return _reserve_verdict


def arrays_under(
    arrays: Mapping[str, npt.NDArray[Any]], prefix: str
) -> dict[str, npt.NDArray[Any]]:
    """The arrays named ``prefix + name``, by ``name``: a part of a plain-data automaton
    (``to_arrays`` writes its parts' arrays under such prefixes)."""
    return {name[len(prefix) :]: a for name, a in arrays.items() if name.startswith(prefix)}

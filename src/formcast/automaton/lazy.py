"""Lazy subset construction: :class:`LazyAutomaton`, the DFA of a pattern's :class:`Nfa`.

Step 4 of :mod:`formcast.automaton`. A DFA state is the frozenset of the "important" NFA
states (those with byte edges, plus the final state) in an epsilon closure. A row is
built by grouping the members' byte-range edges by range, joining their targets, and
splitting overlapping ranges into segments (one frozenset per segment, never per byte);
epsilon closures of single NFA states are memoized. The edges of a virtual state are
derived from its block's template; a state whose members all lie in one regular copy
takes its row from the template's, shifted (see :meth:`LazyAutomaton._copy_segments`).

The same construction runs in C where the optional extension ``formcast._subset`` was
built at install time (:meth:`LazyAutomaton._native_nfa`): the edges of virtual states
resolved down the nesting of blocks, closures memoized per NFA state, the successors of
a row interned and written into the table in one call. The states it makes are held
there, not as Python frozensets (None in ``_sets`` until :meth:`LazyAutomaton._members`
asks for one). The Python construction stays as its reference (the tests compare the
two state by state) and as the path of an install without a C compiler.

Cost: a row ~5-15 us in C, ~20-100 us in Python (a few hundred us for states with
hundreds of NFA members); :meth:`LazyAutomaton.step` over 49k (state, byte) pairs whose
rows exist ~0.3 ms.

Thread safety: reads (:meth:`LazyAutomaton.step` on built rows) take no lock; building
rows is serialised by a lock with a double check, so concurrent walkers are safe.
Instances pickle as their :class:`Nfa` and the rows built so far. The table of rows,
and what only reads it (:meth:`~LazyAutomaton.step`, :meth:`~LazyAutomaton.walk`, ...),
is :class:`~formcast.automaton.table.TableAutomaton`'s.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from formcast.automaton.choices import choice_characters
from formcast.automaton.deterministic import NO_NODE, DeterministicNodes
from formcast.automaton.distances import DistanceTables, SharedScopes
from formcast.automaton.nfa import VIRTUAL_BASE, Block, BlockTree, Nfa, csr_arrays
from formcast.automaton.parse import build_nfa, show_pattern
from formcast.automaton.table import (
    BUILD_ROOM,
    DEAD,
    INITIAL_CAPACITY,
    UNBUILT,
    SetStatesAutomaton,
)
from formcast.limits import DEFAULT_LIMITS, Limits

native_subset: ModuleType | None
try:  # the subset construction in C, built at install time where a C compiler is found
    from formcast import _subset as native_subset
except ImportError:  # pragma: no cover (the Python construction below does the same work)
    native_subset = None

__all__ = ["DEAD", "LazyAutomaton"]

IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
# A template state's edges relative to its copy's first id, and whether it is the end.
_Relative = tuple[list[tuple[int, int, int]], list[int], bool]

_END = -2  # in a template's row: "the copy's end", replaced by what follows each copy


class LazyAutomaton(SetStatesAutomaton):
    """A deterministic automaton over bytes whose states are determinized on demand.

    Contract:
        * State ids are dense ints; :data:`DEAD` (0) is the dead sink, ``initial`` is 1.
        * ``step``/``row``/``walk`` give the same transitions whenever called: a state's
          row never changes once built.
        * The accepted language is the set of UTF-8 encodings of the strings ``pattern``
          fully matches (see :mod:`formcast.automaton` for the dialect); no invalid UTF-8.
        * Every state other than :data:`DEAD` can reach an accepting state.

    Construction parses the pattern and builds its NFA (linear time, ~0.1-0.2 us per
    pattern character with the C parse loop, ~2 us without); rows cost ~20-100 us each
    the first time a state is reached. Refuses patterns outside the dialect, and
    patterns matching nothing, with SchemaError.
    ``limits`` bound the NFA's copies (:class:`~formcast.limits.Limits`).
    """

    def __init__(self, pattern: str, limits: Limits = DEFAULT_LIMITS) -> None:
        self._start(build_nfa(pattern, limits))

    @classmethod
    def of_nfa(
        cls,
        nfa: Nfa,
        states: Mapping[str, npt.NDArray[Any]] | None = None,
        *,
        edges_of: LazyAutomaton | None = None,
    ) -> LazyAutomaton:
        """The automaton of an NFA built already (a machine of a pushdown automaton:
        see :func:`formcast.automaton.parse.build_machines`), with the DFA states and
        rows of ``states`` (what :meth:`state_arrays` wrote) when given.

        ``edges_of``: an automaton over the same NFA edges (the same arrays, another
        start or final state), whose edge index is then shared instead of derived again.

        Cost: O(NFA size) to index the edges (~15 ms per 100,000 NFA states), a copy of
        one flag per NFA state with ``edges_of``; plus the states.

        Raises:
            ValueError: ``states`` is missing a field or is inconsistent (see
                :meth:`from_arrays`), or ``edges_of`` is over other edges.
        """
        edges = None if edges_of is None else edges_of._edges
        if edges is not None and not edges.indexes(nfa):
            raise ValueError("expected edges_of over the same NFA edges, found other edges")
        automaton = cls.__new__(cls)
        if states is None:
            automaton._start(nfa, edges)
        else:
            automaton._adopt(nfa, *_read_states(states), edges)
        return automaton

    def _start(self, nfa: Nfa, edges: _EdgeIndex | None = None) -> None:
        self._adopt(nfa, [], None, None, edges)
        self._add_state(frozenset())
        self._table[DEAD] = DEAD
        self._add_state(self._closure(self._nfa.start))

    def __getstate__(self) -> dict[str, Any]:
        count = len(self._sets)
        return {
            "nfa": self._nfa,
            "sets": [self._members(sid) for sid in range(count)],
            "table": self._table[:count].copy(),
            "built": self._table[:count, 0] != UNBUILT,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._adopt(state["nfa"], list(state["sets"]), state["table"], state["built"])

    def to_arrays(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        """The automaton as plain data (its :class:`Nfa` and :meth:`state_arrays`), read
        back by :meth:`from_arrays`. Cost: linear in the NFA and the states."""
        meta, arrays = self._nfa.to_arrays()
        stored = {f"nfa.{name}": array for name, array in arrays.items()}
        stored.update(self.state_arrays())
        return {"nfa": meta}, stored

    def state_arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The DFA states reached so far, as a CSR of NFA ids, and their rows (its NFA
        left out: :meth:`of_nfa` reads them back over the same NFA). Taken under the row
        lock, so the table and the states agree. Cost: linear in the states."""
        with self._lock:
            count = len(self._sets)
            members = [sorted(self._members(sid)) for sid in range(count)]
            table = self._table[:count].copy()
        return {
            "set_offsets": np.cumsum([0, *map(len, members)], dtype=np.int64),
            "set_members": np.array([m for group in members for m in group], dtype=np.int64),
            "table": table,
            "built": table[:, 0] != UNBUILT,
        }

    @classmethod
    def from_arrays(
        cls, meta: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]]
    ) -> LazyAutomaton:
        """The automaton :meth:`to_arrays` wrote, with its rows.

        Raises:
            ValueError: a field is missing or inconsistent (the state count of the table,
                the built flags and the states must agree; the dead state comes first).
        """
        prefix = "nfa."
        nfa = Nfa.from_arrays(
            meta.get("nfa", {}),
            {name[len(prefix) :]: a for name, a in arrays.items() if name.startswith(prefix)},
        )
        return cls.of_nfa(nfa, arrays)

    def _adopt(
        self,
        nfa: Nfa,
        sets: list[frozenset[int]],
        table: IntArray | None,
        built: BoolArray | None,
        edges: _EdgeIndex | None = None,
    ) -> None:
        """Take ``nfa`` and the DFA states built so far (``sets``, with the rows ``table``
        and their ``built`` flags; None when there are none), and derive the rest (with
        the edge index ``edges`` of ``nfa`` when it is known already)."""
        self._nfa = nfa
        self.pattern = nfa.pattern
        self.initial = 1
        self._sets = [*sets]  # a C-built state will be None (see _members)
        if table is not None and built is not None:
            self._table = np.where(built[:, None], table, UNBUILT).astype(np.int32)
            self._rows_ahead = bool(built[1:].any())
        self._accepting = np.array([nfa.final in members for members in sets], dtype=np.bool_)
        self._allocate(max(INITIAL_CAPACITY, 2 * len(sets)))
        self._prepare(edges)

    # -- derived structures (rebuilt after unpickling) --------------------------------
    def _prepare(self, edges: _EdgeIndex | None = None) -> None:
        nfa = self._nfa
        if edges is None:
            edges = _EdgeIndex.of(nfa)
        self._edges = edges
        self._boff = edges.byte_offsets
        self._byte_order = edges.byte_order
        self._deterministic: DeterministicNodes | None = None
        self._deterministic_built = False
        self._single_node = np.zeros((3, 0), dtype=np.int64)  # see single_nodes
        self._blo_l, self._bhi_l, self._bdst_l = edges.byte_lo, edges.byte_hi, edges.byte_dst
        self._eoff, self._edst_l = edges.eps_offsets, edges.eps_dst
        important = edges.reads[:]  # a copy: the final state is this automaton's own
        if nfa.final < VIRTUAL_BASE:
            important[nfa.final] = True
        self._important = important
        # read on every row: kept as attributes of their own
        self._final = nfa.final
        self._blocks = nfa.blocks
        self._extras = nfa.extras
        tree = edges.tree
        self._block_bases = tree.bases
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
        self._ids: dict[frozenset[int] | None, int] = {
            members: sid for sid, members in enumerate(self._sets) if members is not None
        }
        self._distances = DistanceTables(nfa, tree, edges.scopes)
        self._native: Any = None  # the C construction's NFA (see _native_nfa)
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
            if block.in_template(final):
                irregular.update((index, j) for j in range(block.copies))
        return irregular

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
            if current < VIRTUAL_BASE or current in memo:
                break
        byte_edges: list[tuple[int, int, int]] = []
        eps_targets: list[int] = []
        if chain[-1][4] is None:  # the bottom template state's own edges are needed
            if current >= VIRTUAL_BASE:
                byte_edges, eps_targets = memo[current]
            else:
                byte_edges = self._concrete_byte_edges(current)
                eps_targets = list(self._edst_l[self._eoff[current] : self._eoff[current + 1]])
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
        result = self._copy_closure(state) if state >= VIRTUAL_BASE else None
        if result is None:
            result = frozenset(self._epsilon_search(state)[0])
        self._closures[state] = result
        return result

    def _epsilon_search(self, state: int, end: int = -1) -> tuple[list[int], bool]:
        """Depth-first search of the epsilon edges from ``state``: the important states
        found, and whether ``end`` was reached on the way."""
        eoff, edst, important = self._eoff, self._edst_l, self._important
        final = self._final
        if state < VIRTUAL_BASE and eoff[state] == eoff[state + 1] and important[state]:
            return [state], state == end
        seen = {state}
        stack = [state]
        found = []
        while stack:
            x = stack.pop()
            targets: Iterable[int]
            if x < VIRTUAL_BASE:
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
        shifted = [m + (concrete_shift if m < VIRTUAL_BASE else virtual_shift) for m in members]
        if reached:
            shifted.extend(self._closure(block.copy_of(j, block.x_end)))
        return frozenset(shifted)

    def _moves_of(self, state: int) -> list[tuple[int, frozenset[int]]]:
        """Byte edges of ``state`` as ``(lo << 8 | hi, closure of the target)`` (memoized)."""
        closure = self._closure
        if state < VIRTUAL_BASE:
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
            (lo, hi, t + (concrete_shift if t < VIRTUAL_BASE else virtual_shift))
            for lo, hi, t in self._template_byte_edges(template)
        ]

    def _concrete_byte_edges(self, state: int) -> list[tuple[int, int, int]]:
        a, b = self._boff[state], self._boff[state + 1]
        return list(zip(self._blo_l[a:b], self._bhi_l[a:b], self._bdst_l[a:b], strict=True))

    def _template_byte_edges(self, state: int) -> list[tuple[int, int, int]]:
        """The byte edges of a template state (memoized for virtual ones)."""
        if state < VIRTUAL_BASE:
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
        return self._register(members, self._final in members)

    def _state_id(self, members: frozenset[int]) -> int | None:
        """The state of these members, if there is one: registered from Python (in
        ``_ids``) or made by the C construction (held there)."""
        found = self._ids.get(members)
        if found is None and self._native is not None:
            sid: int = self._native.find(members)
            return sid if sid >= 0 else None
        return found

    def _build_row(self, sid: int) -> None:
        """Compute and store the row of ``sid`` (caller holds the lock).

        A state inside one regular copy takes its row from the template's (see
        :meth:`_copy_segments`); any other joins its members' moves."""
        native = self._native_nfa()
        if native is not None:  # the same row, in C (see _native_nfa)
            self._build_natively(native, [sid])
            return
        members = self._members(sid)
        segments = self._single_segments(members) if len(members) == 1 else None
        if segments is None:
            segments = self._copy_segments(members)
        if segments is None:
            moves, moves_of = self._moves, self._moves_of
            segments = _segments(
                moves_of(member) if (found := moves.get(member)) is None else found
                for member in members
            )
        row = np.zeros(256, dtype=np.int32)
        for lo, hi, successors in segments:
            target = self._state_id(successors)
            if target is None:
                target = self._add_state(successors)
            row[lo : hi + 1] = target
        self._table[sid] = row  # readers see each entry as UNBUILT or final, never stale

    def _build_rows(self, states: list[int]) -> None:
        """The rows of ``states`` (none built yet; caller holds the lock): together in C
        where the module is built, else one by one."""
        native = self._native_nfa()
        if native is None:
            super()._build_rows(states)
        else:
            self._build_natively(native, states)

    def plain_chain(self, state: int, links: int, plain: npt.NDArray[np.uint8]) -> IntArray | None:
        """``chain[k]`` for ``k < links``: the state ``k`` bytes of ``plain`` lead to from
        ``state``, where every byte of ``plain`` leads from each state to one state (a
        string's characters: the same state while the string is free, one more each
        while a bound counts them; :data:`DEAD` from where none leads on); ``None`` where
        they part ways on the way. The rows on the way are built by the C construction,
        in one call where the table has room. Where that module is not built, the
        caller walks the rows itself (see :meth:`TokenIndex._plain_chain
        <formcast.index.TokenIndex._plain_chain>`): RuntimeError here."""
        native = self._native_nfa()
        if native is None:
            raise RuntimeError("expected the C subset construction (formcast._subset)")
        chain = np.full(links, DEAD, dtype=np.int32)
        chain[0] = state
        filled = 1
        with self._lock:
            room = BUILD_ROOM
            while filled < links:
                self._reserve(room)
                before = filled
                filled, parted = native.plain_chain(
                    chain, filled, plain, self._table, self._accepting, self._sets
                )
                self._took_in()
                if parted:
                    return None
                room = BUILD_ROOM if filled > before else 2 * room + 1
        return chain

    def _native_rows(self) -> tuple[Any, ...] | None:
        """``(nfa,)``, the C subset construction's (:meth:`_native_nfa`), or None where
        that module is not built (see :meth:`TableAutomaton.walk_building
        <formcast.automaton.table.TableAutomaton.walk_building>`)."""
        native = self._native if self._native is not None else self._native_nfa()
        return None if native is None else (native,)

    def _native_nfa(self) -> Any:
        """The NFA of the C subset construction (:mod:`formcast._subset`), made on the
        first row built, or None where that module was not built (or is switched off, as
        the tests do by setting :data:`native_subset` to None). It reads this automaton's
        edge index without copying it, and memoizes closures per NFA state as the Python
        construction does. It takes in the states registered so far on its first row (a
        loaded automaton's: O(their members) once). Cost: O(blocks + extras) once per
        edge index, O(1) after."""
        if self._native is None and native_subset is not None:
            self._native = native_subset.Nfa(*native_arguments(self._edges, self._final))
        return self._native

    def _single_segments(
        self, members: frozenset[int]
    ) -> list[tuple[int, int, frozenset[int]]] | None:
        """The row segments of a state of one concrete NFA state whose byte ranges do not
        overlap (a node of a choice's trie, a character class): its edges as they are,
        without joining moves; None for any other state."""
        (member,) = members
        if member >= VIRTUAL_BASE:
            return None
        a, b = self._boff[member], self._boff[member + 1]
        los, his = self._blo_l[a:b], self._bhi_l[a:b]
        order = sorted(range(b - a), key=los.__getitem__)
        for previous, following in pairwise(order):
            if los[following] <= his[previous]:
                return None
        closure, dst = self._closure, self._bdst_l
        return [(los[k], his[k], closure(dst[a + k])) for k in order]

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
                m + (concrete_shift if m < VIRTUAL_BASE else virtual_shift)
                for m in successors
                if m != _END
            ]
            if _END in successors:
                if end_closure is None:
                    x_end = block.x_end
                    end = x_end + (concrete_shift if x_end < VIRTUAL_BASE else virtual_shift)
                    end_closure = self._closure(end)
                shifted.extend(end_closure)
            segments.append((lo, hi, frozenset(shifted)))
        return segments

    def _innermost_copy(
        self, members: frozenset[int]
    ) -> tuple[Block, int, frozenset[int], int] | None:
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
            if some < VIRTUAL_BASE:
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

    # -- deterministic nodes: the vocabulary walk inside a choice ---------------------
    def deterministic_nodes(self) -> DeterministicNodes | None:
        """The NFA's deterministic states and their edges
        (:mod:`formcast.automaton.deterministic`), or None when the pattern holds no
        trie-built choice (the only place where walking them pays). Built on the first
        call: O(byte edges) numpy work."""
        if not self._deterministic_built:
            if choice_characters(self.pattern):
                self._deterministic = DeterministicNodes(self._nfa, self._byte_order)
            self._deterministic_built = True
        return self._deterministic

    def single_nodes(self, states: IntArray) -> npt.NDArray[np.int64]:
        """Where each DFA state of ``states`` stands when it is one deterministic NFA
        state alone (:mod:`formcast.automaton.deterministic`): an array of shape
        ``(3, len(states))`` holding that state's template node (the state itself when
        concrete), and what its copy adds to a concrete and to a virtual template id
        (0 and 0 when concrete); the node is :data:`NO_NODE` for any other state. Each
        state is looked at once per automaton; later calls are one gather."""
        nodes = self.deterministic_nodes()
        known = self._single_node
        if nodes is None or not states.size:
            found = np.zeros((3, states.size), dtype=np.int64)
            found[0] = NO_NODE
            return found
        if int(states.max()) >= known.shape[1]:
            members = [self._members(sid) for sid in range(known.shape[1], len(self._sets))]
            added = self._standings(members, nodes)
            self._single_node = known = np.concatenate([known, added], axis=1)
        return known[:, states]

    def _standings(
        self, sets: list[frozenset[int]], nodes: DeterministicNodes
    ) -> npt.NDArray[np.int64]:
        """:meth:`single_nodes` of the states with these members: concrete members are
        classified together with numpy, a copy's member by its block."""
        found = np.zeros((3, len(sets)), dtype=np.int64)
        alone = np.fromiter(
            (next(iter(members)) if len(members) == 1 else NO_NODE for members in sets),
            dtype=np.int64,
            count=len(sets),
        )
        concrete = alone < VIRTUAL_BASE
        found[0] = np.where(concrete & nodes.is_deterministic(alone), alone, NO_NODE)
        for k in np.flatnonzero(~concrete).tolist():
            found[:, k] = self._copy_standing(int(alone[k]), nodes)
        return found

    def _copy_standing(self, member: int, nodes: DeterministicNodes) -> tuple[int, int, int]:
        """:meth:`single_nodes` of a state whose one member is a copy's state ``member``."""
        block = self._blocks[bisect_right(self._block_bases, member) - 1]
        j, template = block.locate(member)
        if template >= VIRTUAL_BASE or member in self._extras:
            return NO_NODE, 0, 0
        if not bool(nodes.is_deterministic(np.array([template]))[0]):
            return NO_NODE, 0, 0
        concrete_shift, virtual_shift = block.shifts(j)
        return template, concrete_shift, virtual_shift

    def node_states(self, members: npt.NDArray[np.int64]) -> IntArray:
        """The DFA state of each NFA state of ``members`` alone: the id of its epsilon
        closure, registered when new (the id :meth:`step` would reach it by). Cost per
        distinct member: a closure lookup, plus a registration when new."""
        unique, inverse = np.unique(members, return_inverse=True)
        nodes = self.deterministic_nodes()
        alone = nodes.is_deterministic(unique) if nodes is not None else np.zeros(unique.size, bool)
        found = []
        with self._lock:
            for member, deterministic in zip(unique.tolist(), alone.tolist(), strict=True):
                # a virtual member (a copy's) is found by its closure: shifted from its
                # template state's
                closure = frozenset((member,)) if deterministic else self._closure(member)
                sid = self._state_id(closure)
                found.append(self._add_state(closure) if sid is None else sid)
        return np.asarray(found, dtype=np.int32)[inverse.reshape(-1)].reshape(members.shape)

    # -- public API (the rest is TableAutomaton's) ------------------------------------
    @property
    def nfa_size(self) -> tuple[int, int, int]:
        """``(concrete states, byte edges, epsilon edges)`` of the NFA (diagnostics)."""
        return self._nfa.size

    @property
    def virtual_states(self) -> int:
        """NFA states of counted-repeat copies that exist only virtually (diagnostics)."""
        return self._nfa.virtual_states

    @property
    def accepting(self) -> BoolArray:
        """Acceptance of the states materialized so far (a copy, shape ``(num_states,)``)."""
        return self._accepting[: len(self._sets)].copy()

    def min_bytes_to_accept(
        self,
        state: int,
        usable: BoolArray | None = None,
        *,
        costs: npt.NDArray[np.integer[Any]] | None = None,
        call_costs: tuple[int, ...] | None = None,
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

        ``call_costs`` (machines of a pushdown automaton only): what completing each
        callee costs; a call marker (:mod:`formcast.automaton.markers`) then weighs its
        callee's cost, and its digits nothing.
        """
        members = self._members(self._check(state))
        return self._distances.min_bytes(members, usable, costs, call_costs)

    def __repr__(self) -> str:
        return (
            f"LazyAutomaton(pattern={show_pattern(self.pattern)}, num_states={self.num_states}, "
            f"nfa_states={self._nfa.concrete_states}, virtual_states={self._nfa.virtual_states})"
        )


@dataclass(frozen=True)
class _EdgeIndex:
    """An NFA's edges indexed by source state, as flat int arrays (array.array, not
    lists: a copy of the numpy buffer, and nothing for the garbage collector to
    traverse), read an item at a time. Machines of one pushdown automaton share one NFA's
    edges (each with its own start and final state), hence one index. Read only."""

    byte_order: npt.NDArray[np.intp]
    """The byte edges' indices by source."""
    byte_offsets: array[int]
    byte_lo: array[int]
    byte_hi: array[int]
    byte_dst: array[int]
    eps_offsets: array[int]
    eps_dst: array[int]
    reads: array[int]
    """1 for each concrete state with a byte edge, else 0."""
    tree: BlockTree
    nfa: Nfa
    """The NFA indexed (its edge arrays are compared by identity in :meth:`indexes`)."""
    scopes: SharedScopes
    """The distance tables' parts that do not depend on the final state."""

    @classmethod
    def of(cls, nfa: Nfa) -> _EdgeIndex:
        """The index of ``nfa``'s edges. O(NFA size)."""
        n = nfa.concrete_states
        order, offsets = csr_arrays(nfa.byte_src, n)
        eps_order, eps_offsets = csr_arrays(nfa.eps_src, n)
        reads = np.zeros(n, dtype=np.bool_)
        reads[nfa.byte_src] = True
        return cls(
            byte_order=order,
            byte_offsets=_ints(offsets),
            byte_lo=_ints(nfa.byte_lo[order]),
            byte_hi=_ints(nfa.byte_hi[order]),
            byte_dst=_ints(nfa.byte_dst[order]),
            eps_offsets=_ints(eps_offsets),
            eps_dst=_ints(nfa.eps_dst[eps_order]),
            reads=_ints(reads),
            tree=BlockTree.of(nfa.blocks),
            nfa=nfa,
            scopes=SharedScopes(),
        )

    @cached_property
    def native_parts(self) -> tuple[npt.NDArray[np.int64], ...]:
        """The blocks (a row of :class:`Block`'s fields each) and the extras (a CSR over
        their sorted sources) as int64 arrays, the layout of :mod:`formcast._subset`."""
        nfa = self.nfa
        blocks = np.array([[*block] for block in nfa.blocks], dtype=np.int64)
        sources = sorted(nfa.extras)
        targets = [nfa.extras[source] for source in sources]
        return (
            blocks.reshape(len(nfa.blocks), len(Block._fields)),
            np.array(sources, dtype=np.int64),
            np.cumsum([0, *map(len, targets)], dtype=np.int64),
            np.array([t for group in targets for t in group], dtype=np.int64),
        )

    def indexes(self, nfa: Nfa) -> bool:
        """Whether ``nfa`` has the very edges (and blocks) indexed here."""
        mine = self.nfa
        return all(getattr(mine, name) is getattr(nfa, name) for name in _EDGE_FIELDS) and (
            mine.concrete_states == nfa.concrete_states
        )


_EDGE_FIELDS = (
    "byte_src",
    "byte_lo",
    "byte_hi",
    "byte_dst",
    "eps_src",
    "eps_dst",
    "blocks",
    "extras",
)


def _ints(values: npt.NDArray[Any]) -> array[int]:
    """``values`` as a flat array of 64-bit ints (one buffer copy)."""
    return array("q", values.astype(np.int64).tobytes())


def _relative_edges(
    block: Block, template: int, byte_edges: list[tuple[int, int, int]], eps_targets: list[int]
) -> _Relative:
    def rel(t: int) -> int:
        return t - block.s0 if t < VIRTUAL_BASE else block.size_c + t - block.v0

    return (
        [(lo, hi, rel(t)) for lo, hi, t in byte_edges],
        [rel(t) for t in eps_targets],
        template == block.x_end,
    )


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


def _read_states(
    arrays: Mapping[str, npt.NDArray[Any]],
) -> tuple[list[frozenset[int]], IntArray, BoolArray]:
    """The states, rows and built flags :meth:`LazyAutomaton.state_arrays` wrote.

    Raises:
        ValueError: a field is missing, or the states, rows and flags disagree.
    """
    try:
        offsets = arrays["set_offsets"].tolist()
        members = arrays["set_members"].tolist()
        table, built = arrays["table"], arrays["built"]
    except KeyError as missing:
        raise ValueError(f"expected an automaton field {missing}, found none") from None
    count = len(offsets) - 1
    if count < 2 or table.shape != (count, 256) or built.shape != (count,):
        raise ValueError(f"expected {count} states with 256-entry rows and flags")
    sets = [frozenset(members[offsets[k] : offsets[k + 1]]) for k in range(count)]
    if sets[DEAD] or not UNBUILT <= int(table.min(initial=0)) <= int(table.max(initial=0)) < count:
        raise ValueError("expected the dead state first and rows within the states")
    return sets, table.astype(np.int32), built.astype(np.bool_)


def native_arguments(edges: Any, final: int) -> tuple[Any, ...]:
    """The arguments of :class:`formcast._subset.Nfa` for an edge index and the NFA's final
    state: the index's arrays, which the C side reads in place."""
    return (
        edges.byte_offsets,
        edges.byte_lo,
        edges.byte_hi,
        edges.byte_dst,
        edges.eps_offsets,
        edges.eps_dst,
        edges.reads,
        *edges.native_parts,
        final,
    )

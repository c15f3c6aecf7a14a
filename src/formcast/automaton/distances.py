"""Shortest distances to acceptance, for budget-safe endings.

:meth:`DistanceTables.min_bytes` answers
:meth:`formcast.automaton.LazyAutomaton.min_bytes_to_accept`: the fewest bytes (or the
cheapest bytes, under a cost per byte) from a DFA state to acceptance. A DFA state is a
set of NFA states, so its distance is its members' least. Members' distances come from
tables searched backwards over the :class:`Nfa`, one *scope* at a time: the top scope
(to the final state) and each block's template (to the template's end). A virtual state
inside copy ``j`` of a block is as far as its template state is from the template's end,
plus the way out from the end of copy ``j``, so copies are never enumerated.

Cost: the first call per byte-cost table runs the backward searches, each scope over
its own edges (found by two binary searches in the edges sorted by source, once per NFA),
O(NFA size x repeat nesting depth) in all (0-1 BFS when every weight is 0 or 1, else
Dijkstra; ~0.05-0.1 s per 100,000 pattern characters); the last few tables are kept,
and later calls cost O(members x repeat nesting depth). The machines of a pushdown
automaton share one NFA: they share the block scopes' tables and the top scope's graph
(:class:`SharedScopes`), and each searches only from its own end, visiting the states
that reach it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from heapq import heappop, heappush
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from formcast.automaton.markers import call_edges, marker_width
from formcast.automaton.nfa import VIRTUAL_BASE, Block, BlockTree, Nfa, csr
from formcast.errors import UserError

__all__ = ["UNREACHABLE", "DistanceTables", "SharedScopes"]

UNREACHABLE = int(np.iinfo(np.int32).max // 2)
"""What :meth:`LazyAutomaton.min_bytes_to_accept` returns when no accepting state can be
reached (only for :data:`DEAD`, or when ``usable`` forbids every way out)."""

BoolArray = npt.NDArray[np.bool_]
_Key = tuple[bytes | None, tuple[int, ...] | None]  # a byte-cost table and call costs
_TABLES_KEPT = 8  # distance tables kept per automaton (one per usable mask/costs)
_T = TypeVar("_T")


class ScopeDistances(NamedTuple):
    """Distances to a scope's target: the final state (top) or a template's end (block)."""

    lo: int  # the scope's first concrete state
    concrete: list[int]  # per concrete state in [lo, lo + len(concrete))
    skeleton: dict[int, int]  # per child block: its first copy's start, last copy's end
    length: int  # block scopes: shortest way through the template (start to end)


class SharedScopes:
    """What the distance tables of automata over the same NFA edges share (the machines
    of a pushdown automaton: one NFA, a start and a final state each): the edges ordered
    by source, the call edges, and the block scopes' tables per cost key, which do not
    depend on the final state. Only the top scope is searched per automaton."""

    def __init__(self) -> None:
        self.by_source: tuple[_SourceOrder, _SourceOrder] | None = None
        self.call_edges: tuple[npt.NDArray[np.intp], list[int], npt.NDArray[np.intp]] | None = None
        # per cost key: the blocks' tables and the top scope's graph
        self.blocks: dict[_Key, tuple[dict[int, ScopeDistances], _ScopeGraph]] = {}


class DistanceTables:
    """The distance tables of one :class:`Nfa`, built per byte-cost table on first use.

    ``shared``: what automata over the same edges share (a fresh one when None).
    Holds no lock: concurrent first calls for one cost table may each run the search
    (their tables are equal; one is kept)."""

    def __init__(self, nfa: Nfa, tree: BlockTree, shared: SharedScopes | None = None) -> None:
        self._nfa = nfa
        self._tree = tree
        self._kept: dict[_Key, dict[int, ScopeDistances]] = {}
        self._shared = SharedScopes() if shared is None else shared

    def _edges_from(self, lo: int, hi: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """The indices of the byte edges and of the epsilon edges leaving the concrete
        states ``[lo, hi)``: two binary searches over the edges ordered by source (sorted
        once per NFA), so that a scope costs its own edges, not the whole NFA's."""
        shared = self._shared
        if shared.by_source is None:
            nfa = self._nfa
            shared.by_source = (_SourceOrder.of(nfa.byte_src), _SourceOrder.of(nfa.eps_src))
        byte_order, eps_order = shared.by_source
        return byte_order.within(lo, hi), eps_order.within(lo, hi)

    def min_bytes(
        self,
        members: frozenset[int],
        usable: BoolArray | None,
        costs: npt.NDArray[np.integer[Any]] | None,
        call_costs: tuple[int, ...] | None = None,
    ) -> int:
        """Fewest bytes from the NFA states ``members`` to the final state (see
        :meth:`LazyAutomaton.min_bytes_to_accept` for ``usable``, ``costs`` and
        ``call_costs``)."""
        if not members:
            return UNREACHABLE
        weights = _byte_costs(usable, costs)
        key = (None if weights is None else weights.tobytes(), call_costs)
        tables = self._kept.get(key)
        if tables is None:
            tables = self._scope_tables(weights, call_costs, key)
            _keep(self._kept, key, tables)
        return min(self._distance_in(tables, -1, member) for member in members)

    def _distance_in(self, tables: dict[int, ScopeDistances], scope: int, state: int) -> int:
        """Distance from ``state`` to the target of ``scope`` (-1: the top scope).

        A state inside copy ``j`` of a child block is as far as its template state is
        from the template's end, plus the way out from the end of copy ``j``.
        """
        bases, blocks = self._tree.bases, self._nfa.blocks
        total = 0
        while True:
            table = tables[scope]
            if state < VIRTUAL_BASE:
                return min(total + _concrete_distance(table, state), UNREACHABLE)
            found = table.skeleton.get(state)
            if found is not None:
                return min(total + found, UNREACHABLE)
            index = bisect_right(bases, state) - 1
            block = blocks[index]
            j, template = block.locate(state)
            after = self._copy_end_distance(table, block, tables[index].length, j)
            if after >= UNREACHABLE:
                return UNREACHABLE
            total += after
            scope, state = index, template

    def _copy_end_distance(self, table: ScopeDistances, block: Block, length: int, j: int) -> int:
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

    def _scope_tables(
        self, weights: npt.NDArray[np.int64] | None, call_costs: tuple[int, ...] | None, key: _Key
    ) -> dict[int, ScopeDistances]:
        """Distances to each scope's target: the blocks' (children before parents) and the
        top scope's graph, built once per cost key for every automaton over these edges,
        then the search from this automaton's own end."""
        nfa = self._nfa
        shared = self._shared
        found = shared.blocks.get(key)
        if found is None:
            byte_ok = self._byte_costs(weights, call_costs)
            blocks = self._block_tables(byte_ok)
            top = self._scope_graph(blocks, byte_ok, 0, nfa.concrete_states, self._tree.top)
            found = (blocks, top)
            _keep(shared.blocks, key, found)
        blocks, top = found
        tables = dict(blocks)
        tables[-1] = top.search(nfa.final)
        return tables

    def _byte_costs(
        self, weights: npt.NDArray[np.int64] | None, call_costs: tuple[int, ...] | None
    ) -> npt.NDArray[np.int64]:
        """The cost of each byte edge (:data:`UNREACHABLE`: not usable); a call edge
        costs its callee's completion, its digits nothing."""
        nfa = self._nfa
        if weights is None:
            byte_ok = np.ones(nfa.byte_src.size, dtype=np.int64)
        else:
            byte_ok = _range_minima(weights)[nfa.byte_lo, nfa.byte_hi]
        if call_costs is not None:
            shared = self._shared
            if shared.call_edges is None:
                shared.call_edges = call_edges(nfa, marker_width(len(call_costs)))
            calls, callees, digits = shared.call_edges
            byte_ok[digits] = 0
            callee_costs = np.asarray(call_costs, dtype=np.int64)[callees]
            byte_ok[calls] = np.minimum(callee_costs, UNREACHABLE)
        return byte_ok

    def _block_tables(self, byte_ok: npt.NDArray[np.int64]) -> dict[int, ScopeDistances]:
        """Distances to each block template's end, children before parents."""
        nfa = self._nfa
        tables: dict[int, ScopeDistances] = {}
        by_template: dict[tuple[int, ...], ScopeDistances] = {}
        for index, block in enumerate(nfa.blocks):
            template = block.template
            if template in by_template:
                tables[index] = by_template[template]
                continue
            scope = self._scope_graph(
                tables, byte_ok, block.s0, block.s0 + block.size_c, self._tree.children[index]
            )
            table = scope.search(block.x_end)
            tables[index] = table  # length is read through the table itself:
            length = self._distance_in(tables, index, block.x_start)
            tables[index] = by_template[template] = table._replace(length=length)
        return tables

    def _scope_graph(
        self,
        tables: dict[int, ScopeDistances],
        byte_ok: npt.NDArray[np.int64],
        lo: int,
        hi: int,
        children: list[int],
    ) -> _ScopeGraph:
        """One scope's graph, its edges reversed for a backward search.

        ``byte_ok`` is the cost of each byte edge (:data:`UNREACHABLE`: not usable).
        Nodes: the concrete states ``[lo, hi)`` and, per child block, its first copy's
        start and (bounded) its last copy's end, joined by one edge weighing the fewest
        copies that must be read times the template's shortest length. O(concrete states
        + blocks): copies are never enumerated.
        """
        nfa = self._nfa
        blocks = nfa.blocks
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
        graph = _ScopeGraph(lo, hi, skeleton)
        sources: list[npt.NDArray[np.int64]] = []
        targets: list[npt.NDArray[np.int64]] = []
        weights: list[npt.NDArray[np.int64]] = []
        byte_edges, eps_edges = self._edges_from(lo, hi)
        byte_edges = byte_edges[byte_ok[byte_edges] < UNREACHABLE]
        sources.append(nfa.byte_src[byte_edges] - lo)
        targets.append(graph.index_of(nfa.byte_dst[byte_edges]))
        weights.append(byte_ok[byte_edges])
        sources.append(nfa.eps_src[eps_edges] - lo)
        targets.append(graph.index_of(nfa.eps_dst[eps_edges]))
        weights.append(np.zeros(eps_edges.size, dtype=np.int64))
        extra: list[tuple[int, int, int]] = [
            (node, successor, 0)
            for node in skeleton.tolist()
            for successor in self._nfa.extras.get(node, ())
        ]
        for edges in (extra, summary):
            if edges:
                triples = np.asarray(edges, dtype=np.int64)
                sources.append(graph.index_of(triples[:, 0]))
                targets.append(graph.index_of(triples[:, 1]))
                weights.append(triples[:, 2])
        src = np.concatenate(sources)
        dst = np.concatenate(targets)
        weight = np.concatenate(weights)
        valid = (dst >= 0) & (src >= 0)
        src, dst, weight = src[valid], dst[valid], weight[valid]
        order, graph.offsets = csr(dst, graph.width + int(skeleton.size))
        graph.predecessors = src[order].tolist()
        graph.costs = weight[order].tolist()
        graph.zero_one = weight.size == 0 or int(weight.max()) <= 1
        return graph


class _ScopeGraph:
    """One scope's nodes (its concrete states, then its skeleton's virtual ids) and its
    edges reversed, as CSR lists; searched from any target (0-1 BFS when every weight is
    0 or 1, else Dijkstra), each search visiting only the nodes that reach the target."""

    def __init__(self, lo: int, hi: int, skeleton: npt.NDArray[np.int64]) -> None:
        self.lo = lo
        self.hi = hi
        self.width = hi - lo
        self.skeleton = skeleton
        self.offsets: list[int] = []
        self.predecessors: list[int] = []
        self.costs: list[int] = []
        self.zero_one = True

    def index_of(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The node of each id (-1: outside the scope)."""
        lo, hi, skeleton = self.lo, self.hi, self.skeleton
        out = np.full(ids.shape, -1, dtype=np.int64)
        inside = (ids >= lo) & (ids < hi)
        out[inside] = ids[inside] - lo
        virtual = ids >= VIRTUAL_BASE
        if skeleton.size and virtual.any():
            pos = np.minimum(np.searchsorted(skeleton, ids[virtual]), skeleton.size - 1)
            out[virtual] = np.where(skeleton[pos] == ids[virtual], self.width + pos, -1)
        return out

    def search(self, target: int) -> ScopeDistances:
        """Shortest distances to ``target``, searched backwards."""
        distance = [UNREACHABLE] * (self.width + int(self.skeleton.size))
        origin = int(self.index_of(np.asarray([target], dtype=np.int64))[0])
        if origin >= 0:
            distance[origin] = 0
            walk = _zero_one_bfs if self.zero_one else _dijkstra
            walk(distance, origin, self.offsets, self.predecessors, self.costs)
        return ScopeDistances(
            lo=self.lo,
            concrete=distance[: self.width],
            skeleton=dict(zip(self.skeleton.tolist(), distance[self.width :], strict=True)),
            length=UNREACHABLE,
        )


def _keep(kept: dict[_Key, _T], key: _Key, tables: _T) -> None:
    """Keep ``tables`` under ``key``, dropping the oldest table of a cost table past
    :data:`_TABLES_KEPT` (the plain one, ``(None, None)``, stays)."""
    if len(kept) >= _TABLES_KEPT:
        kept.pop(next(k for k in list(kept) if k != (None, None)), None)
    kept[key] = tables


class _SourceOrder(NamedTuple):
    """Edges ordered by source state: ``order`` (stable) and the sorted sources."""

    order: npt.NDArray[np.intp]
    sources: npt.NDArray[np.int64]

    @classmethod
    def of(cls, sources: npt.NDArray[np.int64]) -> _SourceOrder:
        order = np.argsort(sources, kind="stable")
        return cls(order, sources[order])

    def within(self, lo: int, hi: int) -> npt.NDArray[np.intp]:
        """The indices of the edges whose source is in ``[lo, hi)``."""
        first, last = np.searchsorted(self.sources, (lo, hi))
        return self.order[first:last]


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


def _concrete_distance(table: ScopeDistances, state: int) -> int:
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

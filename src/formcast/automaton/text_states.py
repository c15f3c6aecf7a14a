"""The states of a ``FromText`` slot's text automaton and their rows.

A :class:`~formcast.automaton.text.TextAutomaton` lays a request's text out as an NFA
(nodes, and byte edges in CSR form by source node); its DFA states are sets of nodes
(ascending) with the characters read so far, capped. This module keeps those states: it
interns them and builds a state's row, the byte edges of its nodes grouped by byte (each
byte's target nodes interned in turn, in ascending byte order), with a byte's count taken
from its edge to the lowest target node.

Two implementations with one interface (:class:`TextStates`) and the same numbering:
``formcast._text_states`` in C where that optional extension was built, else
:class:`PythonTextStates`, which the tests compare it with.

Cost: a row is built once per state, in O(edges of its nodes); in C about a microsecond
for the few nodes most states have (a value read so far occurs at a few places of the
text), in Python a few microseconds.
"""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from formcast.automaton.table import DEAD

native_states: ModuleType | None
try:
    from formcast import _text_states as native_states
except ImportError:  # built without a C compiler: the Python states below
    native_states = None

__all__ = ["PythonTextStates", "SparseRow", "TextStates", "dense_row", "text_states"]

IntArray = npt.NDArray[np.int32]

#: The live transitions of a state: (byte, state) pairs, bytes ascending.
SparseRow = tuple[tuple[int, int], ...]


def dense_row(sparse: SparseRow) -> IntArray:
    """The 256 transitions a sparse row stands for (DEAD on every other byte)."""
    row = np.zeros(256, dtype=np.int32)
    for byte, target in sparse:
        row[byte] = target
    return row


class TextStates(Protocol):
    """What a text automaton reads of its states (see the module)."""

    def intern(self, nodes: IntArray, count: int, /) -> int: ...
    def sparse_row(self, state: int, /) -> SparseRow: ...
    def is_accepting(self, state: int, /) -> bool: ...
    def count(self, state: int, /) -> int: ...
    def nodes(self, state: int, /) -> bytes: ...
    def __len__(self) -> int: ...


class Layout(NamedTuple):
    """A text's NFA: the byte edges (CSR by source node), where a value may end, and the
    bounds on the characters a value has."""

    offsets: npt.NDArray[np.int64]  # nodes + 1
    read: npt.NDArray[np.uint8]  # per edge: the byte it reads
    to: IntArray  # per edge: its target node
    first: IntArray  # per edge: 1 where it starts a character
    ends: npt.NDArray[np.bool_]  # per node: a value may end there
    cap: int  # the largest count kept
    limit: int | None  # the most characters a value may have
    minimum: int  # the fewest


def text_states(layout: Layout, *, native: bool = True) -> TextStates:
    """The states of ``layout``: in C where ``formcast._text_states`` was built (and
    ``native``), else in Python."""
    if native and native_states is not None:
        found: TextStates = native_states.TextStates(
            np.ascontiguousarray(layout.offsets, dtype=np.int64),
            np.ascontiguousarray(layout.read, dtype=np.uint8),
            np.ascontiguousarray(layout.to, dtype=np.int32),
            np.ascontiguousarray(layout.first, dtype=np.uint8),
            np.ascontiguousarray(layout.ends, dtype=np.uint8),
            layout.cap,
            -1 if layout.limit is None else layout.limit,
            layout.minimum,
        )
        return found
    return PythonTextStates(layout)


class _EdgeLists(NamedTuple):
    """The edges and the nodes where a value may end, as Python sequences, for rows
    built in a loop."""

    offsets: list[int]
    read: bytes
    to: list[int]
    first: bytes
    ends: bytes

    @classmethod
    def of(cls, layout: Layout) -> _EdgeLists:
        return cls(
            layout.offsets.tolist(),
            layout.read.tobytes(),
            layout.to.tolist(),
            layout.first.astype(np.uint8).tobytes(),
            layout.ends.astype(np.uint8).tobytes(),
        )


class PythonTextStates:
    """:class:`TextStates` in Python: what ``formcast._text_states`` does in C."""

    def __init__(self, layout: Layout) -> None:
        self._layout = layout
        self._edges: _EdgeLists | None = None
        self._ids: dict[tuple[tuple[int, ...], int], int] = {}
        self._node_lists: list[tuple[int, ...]] = [()]
        self._counts: list[int] = [0]
        self._sparse: dict[int, SparseRow] = {DEAD: ()}

    def __len__(self) -> int:
        return len(self._node_lists)

    def intern(self, nodes: IntArray, count: int) -> int:
        return self._intern(tuple(np.asarray(nodes).tolist()), count)

    def _intern(self, nodes: tuple[int, ...], count: int) -> int:
        if not nodes:
            return DEAD
        key = (nodes, count)
        found = self._ids.get(key)
        if found is None:
            found = len(self._node_lists)
            self._ids[key] = found
            self._node_lists.append(nodes)
            self._counts.append(count)
        return found

    def count(self, state: int) -> int:
        return self._counts[state]

    def nodes(self, state: int) -> bytes:
        return np.array(self._node_lists[state], dtype=np.int32).tobytes()

    def is_accepting(self, state: int) -> bool:
        count = self._counts[state] if state != DEAD else -1
        if count < self._layout.minimum:
            return False
        if count == 0:
            return True
        ends = self._edge_lists().ends
        return any(ends[node] for node in self._node_lists[state])

    def sparse_row(self, state: int) -> SparseRow:
        found = self._sparse.get(state)
        if found is None:
            found = self._sparse[state] = self._build_row(state)
        return found

    def _edge_lists(self) -> _EdgeLists:
        edges = self._edges
        if edges is None:
            edges = self._edges = _EdgeLists.of(self._layout)
        return edges

    def _build_row(self, state: int) -> SparseRow:
        """The byte edges of the state's nodes grouped by byte, each byte's count the one
        of its edge to the lowest target node (in the order the nodes and edges come)."""
        nodes = self._node_lists[state]
        offsets, read, to, first, _ = self._edge_lists()
        base, limit = self._counts[state], self._layout.limit
        found: dict[int, tuple[int, int, set[int]]] = {}  # byte: lowest node, count, nodes
        for node in nodes:
            for edge in range(offsets[node], offsets[node + 1]):
                byte, target, count = read[edge], to[edge], base + first[edge]
                if limit is not None and count > limit:
                    continue
                known = found.get(byte)
                if known is None:
                    found[byte] = (target, count, {target})
                else:
                    known[2].add(target)
                    if target < known[0]:
                        found[byte] = (target, count, known[2])
        cap = self._layout.cap
        return tuple(
            (byte, self._intern(tuple(sorted(targets)), min(count, cap)))
            for byte, (_, count, targets) in sorted(found.items())
        )

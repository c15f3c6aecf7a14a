"""The NFA states that are DFA states on their own: a choice's trie, stepped with numpy.

A concrete NFA state with no epsilon edge out, whose byte edges read single bytes, each
byte at most once, and which ends no block's template, is *deterministic*: its epsilon
closure is itself alone, so the DFA state ``{n}`` moves on byte ``b`` to the closure of
``n``'s one target on ``b`` (or dies).
Every inner node of a word trie (:mod:`formcast.automaton.choices`) is one. Stepping such
nodes needs no DFA row: :meth:`DeterministicNodes.children` looks the targets of many
(node, byte) pairs up at once in the NFA's own edges, sorted by ``(source, byte)``.

The vocabulary walk of :class:`formcast.index.TokenIndex` uses this inside a list of
100,000 names: it follows the tokens' trie and the names' trie together and registers a
DFA state only where a token ends (or leaves the names' trie), instead of building the
256-entry row of every node a token prefix passes, with a DFA state for each of its
children. The transitions are the DFA's by construction; only the cost differs. A copy of
a deterministic template state (a list inside a definition or a counted repeat) is
deterministic too, unless a parent attached an epsilon edge to it: its edges are the
template's, shifted into the copy.

Cost: building is O(byte edges) numpy work (the edges come sorted by source from the
automaton's CSR order, and within a source in byte order when the parser wrote them so,
as it does for a trie; else one more sort); :meth:`~DeterministicNodes.children` is one
``searchsorted`` over the edges, ~50 ns per pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from formcast.automaton.nfa import VIRTUAL_BASE, Nfa

__all__ = ["NO_NODE", "DeterministicNodes"]

IdArray = npt.NDArray[np.int64]

NO_NODE = -1
"""Where :meth:`DeterministicNodes.children` finds no edge, and no deterministic node."""


class DeterministicNodes:
    """The deterministic concrete states of ``nfa`` and their byte edges.

    ``order`` is a stable order of the NFA's byte edges by source (the automaton's CSR
    order). Immutable once built; safe to share between threads.
    """

    def __init__(self, nfa: Nfa, order: npt.NDArray[np.intp]) -> None:
        count = nfa.concrete_states
        sources = nfa.byte_src[order]
        lows = nfa.byte_lo[order].astype(np.int64)
        keys = (sources << 8) | lows
        if keys.size > 1 and not bool(np.all(keys[1:] >= keys[:-1])):
            resorted = np.argsort(keys, kind="stable")
            keys, sources, order = keys[resorted], sources[resorted], order[resorted]
        deterministic = np.zeros(count, dtype=np.bool_)
        deterministic[sources] = True  # has a byte edge out
        deterministic[nfa.eps_src] = False  # has an epsilon edge out
        deterministic[sources[nfa.byte_lo[order] != nfa.byte_hi[order]]] = False
        deterministic[sources[1:][keys[1:] == keys[:-1]]] = False  # a byte read twice
        for block in nfa.blocks:  # a copy's end leads on by the repeat's glue
            if block.x_end < VIRTUAL_BASE:
                deterministic[block.x_end] = False
        self._attached = np.array(sorted(nfa.extras), dtype=np.int64)
        self._deterministic = deterministic
        self._keys = keys
        self._targets = nfa.byte_dst[order]

    @property
    def count(self) -> int:
        """How many concrete states are deterministic (diagnostics)."""
        return int(self._deterministic.sum())

    def is_deterministic(self, states: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.bool_]:
        """Whether each NFA state is a deterministic concrete state (False for
        :data:`NO_NODE`, virtual ids and anything out of range)."""
        size = self._deterministic.size
        inside = (states >= 0) & (states < size)
        found = np.zeros(states.shape, dtype=np.bool_)
        found[inside] = self._deterministic[states[inside]]
        return found

    def is_attached(self, states: IdArray) -> npt.NDArray[np.bool_]:
        """Whether each (virtual) NFA state has epsilon edges a parent attached to it
        (:attr:`Nfa.extras`): such a copy's state is not deterministic, whatever its
        template state is."""
        return np.isin(states, self._attached)

    def children(self, nodes: IdArray, data: npt.NDArray[np.uint8]) -> IdArray:
        """The NFA target of each deterministic ``nodes[i]`` on byte ``data[i]``, or
        :data:`NO_NODE` where it reads no such byte. One ``searchsorted``."""
        if not self._keys.size:
            return np.full(nodes.shape, NO_NODE, dtype=np.int64)
        queries = (nodes << 8) | data.astype(np.int64)
        positions = np.minimum(np.searchsorted(self._keys, queries), self._keys.size - 1)
        found = self._keys[positions] == queries
        return np.where(found, self._targets[positions], NO_NODE)

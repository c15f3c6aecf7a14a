"""Walking a vocabulary's prefix trie through a byte automaton, visiting live nodes only.

:func:`walk_trie` is the loop behind every token row (:class:`~formcast.index.TokenIndex`
and :mod:`formcast.stack_rows`): level by level (byte position), the children of live
nodes are stepped from their parent's state in one gather, so the work is O(live nodes),
never O(trie). Two shortcuts keep it small:

* a node whose state loops on every byte below it in the trie (inside a string, an
  identifier, a run of digits) keeps its whole subtree in that state: a slice of the
  trie's token order, not a walk (only subtrees of more than :data:`WALKED_SUBTREE`
  tokens are checked: smaller ones cost less to walk);
* a stepper may *stop* states (a pushdown frame that may call or return there): a
  stopped node's own token ends there, and its children are handed back unwalked, for
  the caller to walk from the state the stop leads to.

Caches of what a state loops on (:class:`StateFacts`) are per automaton, grown on demand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from formcast.vocabulary import TokenTrie, TrieLevel

__all__ = [
    "WALKED_SUBTREE",
    "StateFacts",
    "Stepper",
    "Walked",
    "loop_bits",
    "root",
    "sorted_by_token",
    "walk_trie",
]

IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
Bits = npt.NDArray[np.uint64]

DEAD = 0
WALKED_SUBTREE = 16
"""Subtrees of at most this many tokens are walked, never checked whole."""


class Stepper(Protocol):
    """What :func:`walk_trie` asks of an automaton."""

    def step(self, states: IntArray, data: npt.NDArray[np.uint8]) -> IntArray:
        """``out[i]``: the state after byte ``data[i]`` from ``states[i]`` (0: dead)."""

    def loops(self, states: IntArray) -> Bits:
        """The bytes each of ``states`` stays in, as 256-bit sets (:func:`loop_bits`)."""

    def stops(self, states: IntArray) -> BoolArray | None:
        """Which of ``states`` end a walk there; ``None``: none ever does."""


def loop_bits(row: IntArray, state: int) -> Bits:
    """The bytes on which ``row`` (the row of ``state``) stays at ``state``: 256 bits as
    four little-endian uint64 words, the layout of :attr:`TrieLevel.below_bytes`."""
    bits: Bits = np.packbits(row == state, bitorder="little").view(np.uint64)
    return bits


class StateFacts:
    """A fixed-width fact per automaton state (``compute(state)``, an array of
    ``width`` values of ``dtype``), computed once, then read for many states in one
    gather. Unsynchronised: two threads may both compute a fact, which is the same."""

    def __init__(self, compute: Callable[[int], npt.NDArray[Any]], width: int, dtype: type):
        self._compute = compute
        self._values: npt.NDArray[Any] = np.zeros((64, width), dtype=dtype)
        self._known = np.zeros(64, dtype=np.bool_)

    def __call__(self, states: IntArray) -> npt.NDArray[Any]:
        if states.size and int(states.max()) >= self._known.size:
            size = max(2 * self._known.size, int(states.max()) + 1)
            values = np.zeros((size, self._values.shape[1]), dtype=self._values.dtype)
            values[: self._known.size] = self._values
            known = np.zeros(size, dtype=np.bool_)
            known[: self._known.size] = self._known
            self._values, self._known = values, known
        values, known = self._values, self._known
        for state in set(states[~known[states]].tolist()):
            values[state] = self._compute(state)
            known[state] = True  # after the value: a reader never sees a half-written one
        return values[states]


@dataclass
class Walked:
    """What a walk found: tokens and their states (parts to concatenate), and the
    stopped nodes' children, not walked: ``(their level index, the children, the
    stopped node's state for each child)``."""

    ids: list[IntArray] = field(default_factory=list)
    states: list[IntArray] = field(default_factory=list)
    stopped: list[tuple[int, IntArray, IntArray]] = field(default_factory=list)
    crossing: int = 0
    """How many tokens lie below the stopped nodes."""


def walk_trie(
    trie: TokenTrie,
    stepper: Stepper,
    depth: int,
    nodes: IntArray,
    parent_states: IntArray,
    crossing_limit: int | None = None,
) -> Walked:
    """Walk ``nodes`` of level ``depth`` of ``trie`` (and their subtrees), each stepped
    from its entry of ``parent_states``; ``walk_trie(trie, s, *root(trie, state))`` walks
    every token from ``state``. With ``crossing_limit``, the walk gives up (and says so
    in :attr:`Walked.crossing`) once more tokens than that lie below stopped nodes."""
    walked = Walked()
    for index in range(depth, len(trie.levels)):
        level = trie.levels[index]
        reached = stepper.step(parent_states, level.node_bytes[nodes])
        alive = reached != DEAD
        nodes, reached = nodes[alive], reached[alive]
        tokens = level.node_token[nodes]
        ending = tokens >= 0
        walked.ids.append(tokens[ending])
        walked.states.append(reached[ending])
        first, stop = level.child_first[nodes], level.child_stop[nodes]
        sizes = stop - first
        stops = stepper.stops(reached)
        if stops is not None and stops.any():
            held = stops & (sizes > 0)
            walked.crossing += int(_below_count(level, nodes[held]).sum())
            if crossing_limit is not None and walked.crossing > crossing_limit:
                return walked
            children = _ranges(first[held], sizes[held])
            walked.stopped.append((index + 1, children, np.repeat(reached[held], sizes[held])))
            sizes = np.where(stops, 0, sizes)
        whole = _staying(level, stepper, nodes, reached, sizes)
        if whole is not None:  # whole subtrees below the node (its own token is counted)
            walked.ids.append(_subtrees(trie, level, nodes[whole]))
            walked.states.append(np.repeat(reached[whole], _below_count(level, nodes[whole])))
            sizes = np.where(whole, 0, sizes)
        total = int(sizes.sum())
        if not total:
            break
        nodes = _ranges(first, sizes, total)
        parent_states = np.repeat(reached, sizes)
    return walked


def root(trie: TokenTrie, state: int) -> tuple[int, IntArray, IntArray]:
    """The arguments of :func:`walk_trie` after ``trie, stepper`` for every token from
    ``state``."""
    size = trie.levels[0].node_bytes.size if trie.levels else 0
    return 0, np.arange(size, dtype=np.int32), np.full(size, state, dtype=np.int32)


def _staying(
    level: TrieLevel, stepper: Stepper, nodes: IntArray, states: IntArray, sizes: IntArray
) -> BoolArray | None:
    """Which of ``nodes`` (live, at ``states``, with ``sizes`` children still to walk)
    loop on every byte below them; ``None`` when none does."""
    large = np.flatnonzero(
        (sizes > 0) & (level.node_stop[nodes] - level.node_first[nodes] > WALKED_SUBTREE)
    )
    if not large.size:
        return None
    escaping = level.below_bytes[nodes[large]] & ~stepper.loops(states[large])
    staying = large[~escaping.any(axis=1)]
    if not staying.size:
        return None
    whole = np.zeros(nodes.size, dtype=np.bool_)
    whole[staying] = True
    return whole


def _subtrees(trie: TokenTrie, level: TrieLevel, nodes: IntArray) -> IntArray:
    """The tokens strictly below ``nodes`` (their subtrees without their own tokens)."""
    first = level.node_first[nodes] + (level.node_token[nodes] >= 0)
    return trie.token_ids[_ranges(first, level.node_stop[nodes] - first)]


def _below_count(level: TrieLevel, nodes: IntArray) -> IntArray:
    return level.node_stop[nodes] - level.node_first[nodes] - (level.node_token[nodes] >= 0)


def _ranges(first: IntArray, sizes: IntArray, total: int | None = None) -> IntArray:
    """The concatenated ranges ``[first[i], first[i] + sizes[i])`` (empty ones add
    nothing; ``total``: ``sizes.sum()`` when known), as one index array."""
    if total is None:
        total = int(sizes.sum())
    offsets = np.repeat(first - np.cumsum(sizes) + sizes, sizes)
    return (offsets + np.arange(total, dtype=np.int32)).astype(np.int32)


def sorted_by_token(
    ids: list[IntArray], states: list[IntArray], size: int, trie: TokenTrie
) -> tuple[IntArray, IntArray]:
    """Concatenate (token, state) pairs and order them by token id (a scatter, not a
    sort); tokens repeating another's bytes in ``trie`` get that token's state."""
    table = np.full(size, DEAD, dtype=np.int32)
    if ids:
        table[np.concatenate(ids)] = np.concatenate(states)
    if trie.repeats.size:
        table[trie.repeats] = table[trie.repeated]
    token_ids = np.flatnonzero(table != DEAD).astype(np.int32)
    return token_ids, table[token_ids]

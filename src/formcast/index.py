"""Automaton x vocabulary: which tokens each automaton state allows, and where they lead.

A :class:`TokenIndex` is the compiled form of a constraint for one vocabulary. It is
immutable in meaning (rows are computed lazily and cached, but a row never changes),
picklable, and safe to share between threads and sequences; per-sequence state lives in
a :class:`formcast.guide.Cursor`.

Cost model: a row (one automaton state) is computed by advancing *all* token byte
strings through the byte automaton at once with numpy, dropping tokens as soon as they
die; a row costs ~0.3-3 ms for a 49k-token vocabulary and is computed once, the first
time a sequence reaches that state.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from formcast.fsm import ByteFSM
from formcast.vocabulary import Vocabulary

if TYPE_CHECKING:
    from formcast.guide import Cursor

__all__ = ["TokenIndex"]

IntArray = npt.NDArray[np.int32]

#: Distance reported for states from which no accepting state can be reached with the
#: vocabulary's single-byte tokens (never the case for byte-level vocabularies).
UNREACHABLE = np.iinfo(np.int32).max // 2


class TokenIndex:
    """The allowed tokens and next states of every automaton state, computed on demand.

    Args:
        fsm: the byte-level automaton of the constraint.
        vocabulary: the tokenizer's token bytes and EOS ids.
        description: a human-readable name of the constraint (shown in errors).

    Construction is cheap (O(states x 256) for the budget distances); rows are built
    lazily. End of sequence is not part of the rows: a cursor allows EOS exactly in
    accepting states.
    """

    def __init__(self, fsm: ByteFSM, vocabulary: Vocabulary, *, description: str = "") -> None:
        self.fsm = fsm
        self.vocabulary = vocabulary
        self.description = description or fsm.pattern
        dead = fsm.num_states
        table = np.full((fsm.num_states + 1, 256), dead, dtype=np.int32)
        live = fsm.transitions >= 0
        table[:-1][live] = fsm.transitions[live]
        self._table = table
        self._dead = dead
        self._accepting = np.asarray(fsm.accepting, dtype=bool)
        self._distance = _token_distances(fsm, vocabulary)
        self._rows: dict[int, tuple[IntArray, IntArray]] = {}
        self._packed: dict[tuple[int, int], npt.NDArray[np.uint32]] = {}
        self._lock = threading.Lock()

    # -- pickling: caches travel, the lock does not -------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def cursor(self) -> Cursor:
        """A fresh per-sequence :class:`~formcast.guide.Cursor` at the initial state (O(1))."""
        from formcast.guide import Cursor

        return Cursor(self)

    # -- queries --------------------------------------------------------------------------
    @property
    def initial_state(self) -> int:
        return self.fsm.initial

    @property
    def num_states(self) -> int:
        return self.fsm.num_states

    @property
    def eos_token_ids(self) -> frozenset[int]:
        return self.vocabulary.eos_token_ids

    def is_accepting(self, state: int) -> bool:
        """Whether the output may end in ``state``."""
        return bool(self._accepting[state])

    def row(self, state: int) -> tuple[IntArray, IntArray]:
        """``(token_ids, next_states)`` of every non-EOS token allowed in ``state``.

        ``token_ids`` is sorted ascending. The arrays are shared: do not modify them.
        First call per state costs one vectorised vocabulary walk; later calls are a dict
        lookup.
        """
        cached = self._rows.get(state)
        if cached is not None:
            return cached
        computed = self._walk_vocabulary(state)
        with self._lock:
            return self._rows.setdefault(state, computed)

    def packed_mask(self, state: int, width: int) -> npt.NDArray[np.uint32]:
        """The packed allowed-token bitmask of ``state`` for logits of ``width`` (EOS set in
        accepting states): bit ``i % 32`` of word ``i // 32``. Cached per (state, width);
        the array is shared and read-only."""
        key = (state, width)
        cached = self._packed.get(key)
        if cached is not None:
            return cached
        ids = self.row(state)[0]
        if self._accepting[state]:
            eos = np.fromiter(sorted(self.vocabulary.eos_token_ids), dtype=np.int32)
            ids = np.union1d(ids, eos).astype(np.int32)
        bits = np.zeros(((width + 31) // 32) * 32, dtype=bool)
        bits[ids] = True
        packed = np.packbits(bits, bitorder="little").view(np.uint32)
        packed.setflags(write=False)
        with self._lock:
            return self._packed.setdefault(key, packed)

    def next_state(self, state: int, token_id: int) -> int:
        """The state after ``token_id``, or -1 if the token is not allowed (EOS excluded)."""
        token_ids, next_states = self.row(state)
        position = int(np.searchsorted(token_ids, token_id))
        if position < token_ids.size and token_ids[position] == token_id:
            return int(next_states[position])
        return -1

    def walk_bytes(self, state: int, data: bytes) -> int:
        """Advance ``state`` over raw bytes; -1 once the automaton dies."""
        for byte in data:
            state = int(self._table[state, byte])
            if state == self._dead:
                return -1
        return state

    def min_tokens_to_accept(self, state: int) -> int:
        """An upper bound on the tokens needed to reach an accepting state from ``state``.

        Computed over the vocabulary's single-byte tokens, so a path of exactly this many
        tokens always exists; 0 in accepting states.
        """
        return int(self._distance[state])

    def budget_row(self, state: int, tokens_left: int) -> tuple[IntArray, IntArray]:
        """The row of ``state`` keeping only tokens after which ``tokens_left - 1`` tokens
        still suffice to reach an accepting state (EOS counts as no token)."""
        token_ids, next_states = self.row(state)
        keep = self._distance[next_states] <= tokens_left - 1
        if keep.all():
            return token_ids, next_states
        return token_ids[keep], next_states[keep]

    def forced_bytes(self, state: int, limit: int = 256) -> bytes:
        """The bytes the automaton forces from ``state``: while a state is not accepting and
        has exactly one live byte, that byte is the only possible continuation."""
        out = bytearray()
        while len(out) < limit and not self._accepting[state]:
            live = np.flatnonzero(self._table[state] != self._dead)
            if live.size != 1:
                break
            byte = int(live[0])
            out.append(byte)
            state = int(self._table[state, byte])
        return bytes(out)

    @property
    def computed_rows(self) -> int:
        """How many states have their row built so far (for benchmarks and tests)."""
        return len(self._rows)

    # -- the vectorised walk ---------------------------------------------------------------
    def _walk_vocabulary(self, state: int) -> tuple[IntArray, IntArray]:
        vocabulary = self.vocabulary
        lengths = vocabulary.lengths
        matrix = vocabulary.byte_matrix
        table = self._table
        dead = self._dead
        candidates = vocabulary.usable_token_ids
        states = table[state, matrix[candidates, 0]]
        done_ids: list[IntArray] = []
        done_states: list[IntArray] = []
        position = 1
        while candidates.size:
            alive = states != dead
            candidates, states = candidates[alive], states[alive]
            finished = lengths[candidates] == position
            done_ids.append(candidates[finished])
            done_states.append(states[finished])
            candidates, states = candidates[~finished], states[~finished]
            if not candidates.size:
                break
            states = table[states, matrix[candidates, position]]
            position += 1
        token_ids = np.concatenate(done_ids) if done_ids else np.empty(0, np.int32)
        next_states = np.concatenate(done_states) if done_states else np.empty(0, np.int32)
        order = np.argsort(token_ids, kind="stable")
        return token_ids[order].astype(np.int32), next_states[order].astype(np.int32)


def _token_distances(fsm: ByteFSM, vocabulary: Vocabulary) -> IntArray:
    """Fewest single-byte tokens from each state to an accepting one (reverse BFS)."""
    n = fsm.num_states
    usable_bytes = np.flatnonzero(vocabulary.single_byte_tokens >= 0)
    sub = fsm.transitions[:, usable_bytes]
    sources, columns = np.nonzero(sub >= 0)
    targets = sub[sources, columns]
    edges = np.unique(np.stack([targets, sources], axis=1), axis=0) if targets.size else None
    predecessors: list[list[int]] = [[] for _ in range(n)]
    if edges is not None:
        for target, source in edges.tolist():
            predecessors[target].append(source)
    distance = np.full(n, UNREACHABLE, dtype=np.int32)
    queue: deque[int] = deque()
    for s in np.flatnonzero(fsm.accepting).tolist():
        distance[s] = 0
        queue.append(s)
    while queue:
        s = queue.popleft()
        for p in predecessors[s]:
            if distance[p] == UNREACHABLE:
                distance[p] = distance[s] + 1
                queue.append(p)
    return distance

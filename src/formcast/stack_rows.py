"""Token rows of a pushdown automaton's states, built per top frame.

A :class:`~formcast.automaton.PushdownAutomaton` state is a set of stacks, so the same
place in a rule under another caller, or one level deeper, is another state, and its
token row would be another walk of the vocabulary through new pushdown states. But a
token whose bytes stay inside the top frame's machine (it neither calls nor returns
before its last byte) does not depend on the frames below. :class:`StackRows` builds a
state's row from three parts:

* **one walk per top frame** ``(machine, machine state)``, cached for every stack with
  that top: the vocabulary trie is walked through the machine's own lazy DFA (real bytes
  only), and stops at each node whose machine state may call or return (its own token
  ends there; its children are kept for the next part). Tokens ending without a stop on
  the way get their state from the machine state they end in, closed over the stack
  below (one closure per distinct end state, not per token);
* **the stopped subtrees**, walked through the pushdown automaton from the state the stop
  leads to under this stack (calls pushed, returns popped): only tokens that cross a
  call or a return;
* a state of several stacks takes the union of its stacks' rows (each stack's row is
  cached as the row of a one-stack state): per token, the state holding every stack's
  successors, interned once per distinct combination.

The result equals walking every token through the automaton: walking a set of stacks
reaches the union of what each stack reaches, and a top frame that neither calls nor
returns steps in its machine alone (``tests/test_stack_rows.py`` checks rows against that
brute force). What it saves: stacks that differ only below the top frame share the
machine walk, and the pushdown states a token passes through inside a frame are never
built.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from formcast.automaton import DEAD, PushdownAutomaton
from formcast.triewalk import (
    StateFacts,
    Stepper,
    Walked,
    loop_bits,
    root,
    sorted_by_token,
    walk_trie,
)
from formcast.vocabulary import TokenTrie

__all__ = ["StackRows"]

IntArray = npt.NDArray[np.int32]
Row = tuple[IntArray, IntArray]

CROSSING_LIMIT = 64
"""Most tokens that may call or return inside a top frame for its rows to be built per
top frame; past it a row is walked through the pushdown automaton directly."""


class _MachineStepper:
    """One machine's lazy DFA as a :class:`~formcast.triewalk.Stepper`: real bytes only,
    stopping where a frame may call or return."""

    def __init__(self, automaton: PushdownAutomaton, machine: int) -> None:
        self._automaton = automaton
        self._machine = machine
        self._loops = StateFacts(self._loop, 4, np.uint64)
        self._stops = StateFacts(self._stop, 1, np.bool_)

    def step(self, states: IntArray, data: npt.NDArray[np.uint8]) -> IntArray:
        return self._automaton.machine_step(self._machine, states, data)

    def loops(self, states: IntArray) -> npt.NDArray[np.uint64]:
        return self._loops(states)

    def stops(self, states: IntArray) -> npt.NDArray[np.bool_]:
        stops: npt.NDArray[np.bool_] = self._stops(states)[:, 0]
        return stops

    def _loop(self, state: int) -> npt.NDArray[np.uint64]:
        return loop_bits(self._automaton.machine_row(self._machine, state), state)

    def _stop(self, state: int) -> npt.NDArray[np.bool_]:
        return np.array([self._automaton.machine_stops(self._machine, state)])


class StackRows:
    """Token rows of ``automaton``'s states over ``trie`` (every usable token).

    ``stepper`` walks the pushdown automaton itself (the index's); ``row_of`` is the
    index's cached row of a state (so a stack's row is built once, whatever state holds
    it). Cost of a row: for a new top frame, one trie walk through its machine (machine
    rows are shared and cached); then one closure per distinct end state, the walk of
    the subtrees that cross a call or a return, and for several stacks one union per
    distinct combination of successors.
    """

    def __init__(
        self,
        automaton: PushdownAutomaton,
        trie: TokenTrie,
        stepper: Stepper,
        row_of: Callable[[int], Row],
        size: int,
    ) -> None:
        self._automaton = automaton
        self._trie = trie
        self._stepper = stepper
        self._row_of = row_of
        self._size = size
        self._machines: dict[int, _MachineStepper] = {}
        self._tops: dict[tuple[int, int], Walked | None] = {}
        self._unions: dict[tuple[int, int], int] = {}

    def row(self, state: int) -> Row | None:
        """``(token ids ascending, next states)`` of every token allowed in ``state``;
        ``None`` when a stack's top frame lets more than :data:`CROSSING_LIMIT` tokens
        call or return on the way (a walk through the automaton itself costs less)."""
        automaton = self._automaton
        singles = automaton.stack_states(state)
        if any(self._top_walk(*automaton.top(single)) is None for single in singles):
            return None
        if len(singles) == 1:
            return self._stack_row(singles[0])
        return self._merged([self._row_of(single) for single in singles])

    def _top_walk(self, machine: int, machine_state: int) -> Walked | None:
        """The trie walk of a top frame through its machine, ``None`` past the
        crossing limit (cached per top frame)."""
        key = (machine, machine_state)
        if key not in self._tops:
            stepper = self._machines.get(machine)
            if stepper is None:
                stepper = self._machines[machine] = _MachineStepper(self._automaton, machine)
            start = root(self._trie, machine_state)
            walked = walk_trie(self._trie, stepper, *start, crossing_limit=CROSSING_LIMIT)
            self._tops[key] = walked if walked.crossing <= CROSSING_LIMIT else None
        return self._tops[key]

    def _stack_row(self, state: int) -> Row:
        """The row of a state of one stack: its top frame's walk, closed over the stack
        below, plus the stopped subtrees walked through the pushdown automaton."""
        automaton = self._automaton
        walked = self._top_walk(*automaton.top(state))
        assert walked is not None  # row() checked every top
        ids: list[IntArray] = list(walked.ids)
        states = [self._after_top(state, ends) for ends in walked.states]
        for depth, nodes, stopped_at in walked.stopped:
            crossing = walk_trie(
                self._trie, self._stepper, depth, nodes, self._after_top(state, stopped_at)
            )
            ids += crossing.ids
            states += crossing.states
        return sorted_by_token(ids, states, self._size, self._trie)

    def _after_top(self, state: int, machine_states: IntArray) -> IntArray:
        """The automaton states after the top frame of ``state`` reached each of
        ``machine_states`` (one closure per distinct machine state)."""
        if not machine_states.size:
            return np.zeros(0, dtype=np.int32)
        distinct, inverse = np.unique(machine_states, return_inverse=True)
        after = np.array(
            [self._automaton.after_top(state, int(m)) for m in distinct.tolist()], np.int32
        )
        reached: IntArray = after[inverse.reshape(-1)]
        return reached

    def _merged(self, rows: list[Row]) -> Row:
        """The row of the union of the stacks whose rows are ``rows``."""
        table = np.zeros((len(rows), self._size), dtype=np.int32)
        for k, (ids, following) in enumerate(rows):
            table[k, ids] = following
        allowed = np.flatnonzero(table.any(axis=0)).astype(np.int32)
        current = table[0, allowed]
        for successors in table[1:, allowed]:
            pairs = (current.astype(np.int64) << 32) | successors
            distinct, inverse = np.unique(pairs, return_inverse=True)
            merged = [self._union(p >> 32, p & 0xFFFFFFFF) for p in distinct.tolist()]
            current = np.array(merged, dtype=np.int32)[inverse.reshape(-1)]
        return allowed, current

    def _union(self, first: int, second: int) -> int:
        if first in (DEAD, second):
            return second
        if second == DEAD:
            return first
        key = (first, second)
        found = self._unions.get(key)
        if found is None:
            found = self._unions[key] = self._automaton.union([first, second])
        return found

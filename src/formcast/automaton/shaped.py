"""Values copied from the text that must also have a shape: ``FromText`` with a pattern.

A ``FromText`` string whose schema also has a ``pattern`` or a known ``format`` may only
hold a substring of the request's text that matches it::

    date: Annotated[str, FromText(), Field(pattern=r"^[0-9]{1,2}/[0-9]{2}/[0-9]{4}$")]

The schema stage writes the pattern as the regex of a JSON string's content (the slot's
``shape``, :class:`~formcast.text.TextSlot`). When a text is bound, :class:`ShapedText`
runs the slot's :class:`~formcast.automaton.text.TextAutomaton` and the shape's automaton side by
side (their product): a byte is allowed where both allow it, and a value may end where
both accept. The shape's automaton is compiled once per shape and shared by every
request (:func:`shape_automaton`); only the pairs of states a request reaches are built.

Cost: a row is the text automaton's row and the shape's, combined in O(256); a distance
(fewest bytes that complete the value) is a breadth-first search of the pairs, stopped
at the first pair where the value may end, and kept per pair.
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from formcast.automaton import DEAD, UNREACHABLE, LazyAutomaton
from formcast.automaton.text import TextAutomaton, memoized
from formcast.automaton.text_states import SparseRow, dense_row
from formcast.text import TextSlot

__all__ = ["ShapedText", "shape_automaton", "slot_automaton"]

IntArray = npt.NDArray[np.int32]

#: Shapes whose automata are kept (each keeps the rows built so far).
SHAPE_CACHE_SIZE = 64


@lru_cache(maxsize=SHAPE_CACHE_SIZE)
def shape_automaton(shape: str) -> LazyAutomaton:
    """The automaton of a JSON string's content regex, compiled once per shape."""
    return LazyAutomaton(shape)


def slot_automaton(
    text: str, slot: TextSlot, usable: npt.NDArray[np.bool_]
) -> TextAutomaton | ShapedText:
    """The automaton of the values ``slot`` allows in ``text``: the text's own, or its
    product with the slot's shape when it has one."""
    values = TextAutomaton(text, slot, usable)
    if slot.shape is None:
        return values
    return ShapedText(values, shape_automaton(slot.shape), usable)


class ShapedText:
    """The values of a text automaton that also match a shape (their product).

    It offers what :class:`~formcast.automaton.bound.BoundAutomaton` reads of a text automaton:
    ``initial``, ``row``, ``is_accepting`` and ``distance``. State ids are small ints,
    ``DEAD`` (0) the dead state.
    """

    def __init__(
        self, values: TextAutomaton, shape: LazyAutomaton, usable: npt.NDArray[np.bool_]
    ) -> None:
        self.values = values
        self.shape = shape
        self.usable = np.asarray(usable, dtype=bool)
        self._pairs: list[tuple[int, int]] = [(DEAD, DEAD)]
        self._ids: dict[tuple[int, int], int] = {(DEAD, DEAD): DEAD}
        self._rows: dict[int, IntArray] = {DEAD: np.zeros(256, dtype=np.int32)}
        self._sparse: dict[int, SparseRow] = {DEAD: ()}
        self._distances: dict[int, int] = {}
        self.initial = self._intern(values.initial, shape.initial)

    def _intern(self, value: int, shaped: int) -> int:
        if value == DEAD or shaped == DEAD:
            return DEAD
        found = self._ids.get((value, shaped))
        if found is None:
            found = len(self._pairs)
            self._ids[(value, shaped)] = found
            self._pairs.append((value, shaped))
        return found

    @property
    def num_states(self) -> int:
        return len(self._pairs)

    def is_accepting(self, state: int) -> bool:
        """Whether the value read so far is complete in the text and has the shape."""
        if state == DEAD:
            return False
        value, shaped = self._pairs[state]
        return self.values.is_accepting(value) and self.shape.is_accepting(shaped)

    def row(self, state: int) -> IntArray:
        """The 256 transitions of ``state`` (shared array: do not modify)."""
        return memoized(self._rows, state, self._build_row)

    def _build_row(self, state: int) -> IntArray:
        return dense_row(self.sparse_row(state))

    def sparse_row(self, state: int) -> SparseRow:
        """The live transitions of ``state``: ``(byte, state)`` pairs, bytes ascending
        (those of the text automaton's row that the shape allows too)."""
        return memoized(self._sparse, state, self._build_sparse_row)

    def _build_sparse_row(self, state: int) -> SparseRow:
        value, shaped = self._pairs[state]
        shapes = self.shape.row(shaped).tolist()
        pairs = ((byte, target, shapes[byte]) for byte, target in self.values.sparse_row(value))
        return tuple(
            (byte, self._intern(target, shape)) for byte, target, shape in pairs if shape != DEAD
        )

    def distance(self, state: int) -> int:
        """Fewest bytes (each one usable) that complete a value from ``state``: 0 when
        accepting, ``UNREACHABLE`` when no value can be completed. Exact (a
        breadth-first search over the pairs reachable from ``state``)."""
        return memoized(self._distances, state, self._search)

    def _search(self, start: int) -> int:
        if start == DEAD:
            return UNREACHABLE
        seen = {start}
        frontier: deque[tuple[int, int]] = deque([(start, 0)])
        while frontier:
            state, steps = frontier.popleft()
            if self.is_accepting(state):
                return steps
            row = self.row(state)
            for target in np.unique(row[self.usable & (row != DEAD)]).tolist():
                if target not in seen:
                    seen.add(target)
                    frontier.append((target, steps + 1))
        return UNREACHABLE

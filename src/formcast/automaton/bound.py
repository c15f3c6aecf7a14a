"""A compiled schema with one request's text bound to its slots.

A schema with ``FromText`` values compiles, once, to an automaton whose slots are marker
bytes (:mod:`formcast.text`). :class:`BoundAutomaton` runs that automaton and, inside
each slot, the :class:`~formcast.automaton.text.TextAutomaton` of the request's text (crossed with
the slot's pattern where it has one, :mod:`formcast.automaton.shaped`), as one lazily
built automaton: a state is a set of schema states plus a set of open slots
``(kind, text state, schema state waiting for the slot's end)``. Marker bytes are never
read nor written: entering a slot, and leaving it once its value is complete, are moves
that read nothing.

Its table and the readers of it (``step``, ``row``, ``is_accepting``, ``walk``) are
those of :class:`~formcast.automaton.table.TableAutomaton`, built one entry at a time
rather than one row at a time (each entry costs a closure); with
``min_bytes_to_accept`` that is what :class:`~formcast.index.TokenIndex` reads, so one
request's index is an ordinary ``TokenIndex`` over it:
:meth:`formcast.index.TokenIndex.bind` builds it.

Cost: binding builds one text automaton per slot kind (linear in the text) and one
weighted distance table of the schema's automaton (linear in its NFA); states and their
transitions are built when first reached, each in O(members) plus the text automaton's
own row.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from formcast.automaton import DEAD, UNREACHABLE, LazyAutomaton
from formcast.automaton.shaped import slot_automaton
from formcast.automaton.table import UNBUILT, TableAutomaton
from formcast.errors import InvalidOptionError, NoTextValueError
from formcast.text import KIND_BYTES, MARKER_BYTES, SLOT_CLOSE, SLOT_OPEN, TextSlot

__all__ = ["BoundAutomaton"]

IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
Member = tuple[int, int, int]  # (slot kind, text state, schema state before the close marker)
Key = tuple[tuple[int, ...], tuple[Member, ...]]

_REAL = np.ones(256, dtype=bool)
_REAL[sorted(MARKER_BYTES)] = False


class BoundAutomaton(TableAutomaton[Key]):
    """The automaton of one request: a schema's automaton with a text in its slots.

    Args:
        schema: the compiled schema's automaton (shared, never modified in meaning).
        slots: the slot table of its pattern (:func:`formcast.text.text_slots`).
        text: the request's text.
        usable: bytes the vocabulary emits as single tokens (distances count those).

    Raises:
        NoTextValueError: the text holds no value for a slot the output cannot do without.
    """

    def __init__(
        self, schema: LazyAutomaton, slots: Sequence[TextSlot], text: str, usable: BoolArray
    ) -> None:
        self.schema = schema
        self.pattern = schema.pattern
        self.slots = tuple(slots)
        self.usable = np.asarray(usable, dtype=bool)
        self.texts = [slot_automaton(text, slot, self.usable) for slot in self.slots]
        self._kinds = [(KIND_BYTES[k], k) for k in range(len(self.slots))]
        self._schema_rows: dict[int, IntArray] = {}
        self._lock = threading.Lock()
        self._sets = []
        self._ids = {}
        self._allocate(64)
        self._register(((), ()), False)  # DEAD
        self._table[DEAD] = DEAD
        self._costs = self._slot_costs()
        self._distances: dict[int, int] = {}
        self.initial = self._closure((schema.initial,), ())
        if self.min_bytes_to_accept(self.initial) >= UNREACHABLE:
            raise self._no_value_error()

    # -- states -----------------------------------------------------------------------
    def _schema_row(self, state: int) -> IntArray:
        row = self._schema_rows.get(state)
        if row is None:
            row = self.schema.row(state)
            self._schema_rows[state] = row
        return row

    def _closure(self, schemas: Iterable[int], members: Iterable[Member]) -> int:
        """Intern the state made of ``schemas`` and ``members`` plus every move that
        reads nothing: into a slot after its open marker, out of a completed slot."""
        pending = [s for s in schemas if s != DEAD]
        kept_members: set[Member] = set()
        for member in members:
            kept_members.add(member)
            pending.extend(self._exits(member))
        seen: set[int] = set()
        kept_schemas: list[int] = []
        while pending:
            state = pending.pop()
            if state in seen:
                continue
            seen.add(state)
            row = self._schema_row(state)
            opened = int(row[SLOT_OPEN])
            if opened != DEAD:
                for member in self._entries(opened):
                    kept_members.add(member)
                    pending.extend(self._exits(member))
            if self.schema.is_accepting(state) or bool(row[_REAL].any()):
                kept_schemas.append(state)
        return self._intern((tuple(sorted(kept_schemas)), tuple(sorted(kept_members))))

    def _entries(self, opened: int) -> list[Member]:
        """The slots that start after the open marker (one per kind byte allowed there)."""
        row = self._schema_row(opened)
        found = []
        for byte, kind in self._kinds:
            inside = int(row[byte])
            start = self.texts[kind].initial
            if inside != DEAD and start != DEAD:
                found.append((kind, start, inside))
        return found

    def _exits(self, member: Member) -> list[int]:
        kind, text_state, inside = member
        if not self.texts[kind].is_accepting(text_state):
            return []
        return [int(self._schema_row(inside)[SLOT_CLOSE])]

    def _intern(self, key: Key) -> int:
        found = self._ids.get(key)
        if found is not None:
            return found
        return self._register(key, any(self.schema.is_accepting(s) for s in key[0]))

    def _next(self, state: int, byte: int) -> int:
        """The state after ``byte`` (computed once, then read from the table)."""
        known = int(self._table[state, byte])
        if known != UNBUILT:
            return known
        found = DEAD
        if _REAL[byte]:
            schemas, members = self._sets[state]
            moved = [int(self._schema_row(s)[byte]) for s in schemas]
            read = [int(self.texts[kind].row(text_state)[byte]) for kind, text_state, _ in members]
            found = self._successor(members, moved, read)
        self._table[state, byte] = found
        return found

    def _successor(
        self, members: Sequence[Member], moved: Sequence[int], read: Sequence[int]
    ) -> int:
        """The state after one byte, from where it moved each schema state (``moved``)
        and each slot's text state (``read``, in the order of ``members``)."""
        live = [
            (kind, text_state, inside)
            for (kind, _, inside), text_state in zip(members, read, strict=True)
            if text_state != DEAD
        ]
        if not live and all(s == DEAD for s in moved):
            return DEAD
        return self._closure(moved, live)

    # -- provenance ---------------------------------------------------------------------
    def slot_bytes(self, data: bytes) -> list[int]:
        """For each byte of ``data`` (an output this automaton accepts, or a prefix of
        one), the slot (its index in ``slots``) whose text automaton read it, or -1: the
        bytes of the values copied from the text. A byte that both a slot and the schema
        could read counts as the slot's when the state after it is still inside a slot.

        Cost: one step per byte (the entries are built already when ``data`` was
        decoded with this automaton)."""
        state = self.initial
        inside: list[int] = []
        for byte in data:
            schemas, members = self._sets[state]
            kinds = [
                kind
                for kind, text_state, _ in members
                if int(self.texts[kind].row(text_state)[byte]) != DEAD
            ]
            nxt = int(self.step(np.array([state], np.int32), np.array([byte], np.uint8))[0])
            if kinds and any(int(self._schema_row(s)[byte]) != DEAD for s in schemas):
                kinds = kinds if nxt != DEAD and self._sets[nxt][1] else []
            inside.append(kinds[0] if kinds else -1)
            state = nxt
            if state == DEAD:
                break
        return inside + [-1] * (len(data) - len(inside))

    # -- how the table is built: one entry at a time, or a whole row -------------------
    def _build_entries(
        self, states: npt.NDArray[np.integer[Any]], data: npt.NDArray[np.uint8]
    ) -> None:
        """Build the entries ``(states[i], data[i])`` alone (each costs a closure)."""
        pairs = np.unique((states.astype(np.int64) << 8) | data)
        for pair in pairs.tolist():
            self._next(pair >> 8, pair & 0xFF)

    def _ensure_row(self, state: int) -> None:
        if bool((self._table[state] == UNBUILT).any()):
            self._build_row(state)

    def _build_row(self, state: int) -> None:
        """Every transition of ``state`` at once: bytes that move each part of the state
        to the same places share one closure (a handful per row, not 256)."""
        schemas, members = self._sets[state]
        columns = [self._schema_row(s) for s in schemas]
        columns += [self.texts[kind].row(text_state) for kind, text_state, _ in members]
        targets = np.zeros(256, dtype=np.int32)
        if columns:
            moves = np.stack(columns, axis=1)
            moves[~_REAL] = DEAD
            if moves.shape[1] == 1:  # the common case: one part (a slot, or a schema state)
                values, inverse = np.unique(moves[:, 0], return_inverse=True)
                unique = values.reshape(-1, 1)
            else:
                unique, inverse = np.unique(moves, axis=0, return_inverse=True)
            split = len(schemas)
            found = np.array(
                [self._successor(members, key[:split], key[split:]) for key in unique.tolist()],
                dtype=np.int32,
            )
            targets = found[inverse.reshape(-1)]
        self._table[state] = targets  # after the closures, which may grow the table

    # -- distances ----------------------------------------------------------------------
    def _slot_costs(self) -> npt.NDArray[np.int64]:
        """Byte costs for the schema's automaton: markers are free, a slot's kind byte
        costs its text's shortest value, other bytes 1 (UNREACHABLE when not usable)."""
        costs = np.where(self.usable, 1, UNREACHABLE).astype(np.int64)
        costs[sorted(MARKER_BYTES)] = UNREACHABLE
        costs[SLOT_OPEN] = costs[SLOT_CLOSE] = 0
        for byte, kind in self._kinds:
            text = self.texts[kind]
            costs[byte] = text.distance(text.initial)
        return costs

    def min_bytes_to_accept(self, state: int, usable: BoolArray | None = None) -> int:
        """Fewest usable bytes to an accepting state (exact: a slot costs the text's
        shortest value from where it stands). ``usable`` must be None or the mask given
        at construction: the text automata were measured with it."""
        if usable is not None and not np.array_equal(usable, self.usable):
            raise InvalidOptionError(
                "expected usable=None or the mask the text was bound with, found another mask"
            )
        found = self._distances.get(state)
        if found is None:
            found = self._distance(state)
            self._distances[state] = found
        return found

    def _distance(self, state: int) -> int:
        schemas, members = self._sets[state]
        best = UNREACHABLE
        for s in schemas:
            best = min(best, self.schema.min_bytes_to_accept(s, costs=self._costs))
        for kind, text_state, inside in members:
            inside_text = self.texts[kind].distance(text_state)
            after = int(self._schema_row(inside)[SLOT_CLOSE])
            if inside_text >= UNREACHABLE or after == DEAD:
                continue
            rest = self.schema.min_bytes_to_accept(after, costs=self._costs)
            best = min(best, inside_text + rest)
        return min(best, UNREACHABLE)

    def _no_value_error(self) -> NoTextValueError:
        empty = [self.slots[kind] for byte, kind in self._kinds if self._costs[byte] >= UNREACHABLE]
        pointers = tuple(p for slot in empty for p in slot.pointers)
        if empty:
            found = "; ".join(slot.describe() for slot in empty)
            return NoTextValueError(
                pointers,
                f"expected a text in which every required value copied from the text can be "
                f"written, found none for {found}",
            )
        return NoTextValueError(
            (), "expected a text from which a complete output can be written, found none"
        )

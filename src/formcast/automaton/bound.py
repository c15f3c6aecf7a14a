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
those of :class:`~formcast.automaton.table.TableAutomaton`, whose entries are built as
walks ask for them, from the live bytes of the state's parts (sparse inside a slot: a
value read so far occurs at a few places of the text); with
``min_bytes_to_accept`` that is what :class:`~formcast.index.TokenIndex` reads, so one
request's index is an ordinary ``TokenIndex`` over it:
:meth:`formcast.index.TokenIndex.bind` builds it.

Cost: binding builds one text automaton per slot kind (linear in the text) and one
weighted distance table of the schema's automaton (linear in its NFA); a state's
live bytes are listed when it is first reached, in O(live bytes of its parts); each
entry asked for then costs a closure, or nothing where no part lives on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from formcast.automaton import DEAD, UNREACHABLE, LazyAutomaton
from formcast.automaton.shaped import slot_automaton
from formcast.automaton.table import UNBUILT, TableAutomaton
from formcast.automaton.text_states import SparseRow
from formcast.errors import InvalidOptionError, NoTextValueError
from formcast.text import KIND_BYTES, MARKER_BYTES, SLOT_CLOSE, SLOT_OPEN, TextSlot

__all__ = ["BoundAutomaton"]

IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]
Member = tuple[int, int, int]  # (slot kind, text state, schema state before the close marker)
Key = tuple[tuple[int, ...], tuple[Member, ...]]

#: Rows with at most this many live bytes mark them one by one (cheaper than fancy indexing).
_FEW_LIVE = 8

_REAL_BYTES = np.setdiff1d(np.arange(256), sorted(MARKER_BYTES))  # all but the markers


class _SchemaPart(NamedTuple):
    """A state of the schema's automaton as the bound one reads it."""

    row: IntArray  # its 256 transitions
    sparse: SparseRow  # its live transitions on the bytes that are not markers


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
        self._schema_parts: dict[int, _SchemaPart] = {}
        self._moves_of: dict[int, dict[int, tuple[int, ...]]] = {}
        self._after_slots: dict[tuple[int, int], tuple[tuple[int, ...], frozenset[Member]]] = {}
        self._successors: dict[tuple[int, tuple[int, ...]], int] = {}
        self._lock = threading.Lock()
        self._sets = []
        self._ids = {}
        self._allocate(512)  # a first row makes a few hundred states: no doubling
        self._register(((), ()), False)  # DEAD
        self._table[DEAD] = DEAD
        self._costs = self._slot_costs()
        self._distances: dict[int, int] = {}
        self.initial = self._closure((schema.initial,), ())
        if self.min_bytes_to_accept(self.initial) >= UNREACHABLE:
            raise self._no_value_error()

    # -- states -----------------------------------------------------------------------
    def _schema_row(self, state: int) -> IntArray:
        return self._schema_part(state).row

    def _schema_part(self, state: int) -> _SchemaPart:
        found = self._schema_parts.get(state)
        if found is None:
            row = self.schema.row(state)
            bytes_ = _REAL_BYTES[np.flatnonzero(row[_REAL_BYTES])]
            sparse = tuple(zip(bytes_.tolist(), row[bytes_].tolist(), strict=True))
            found = self._schema_parts[state] = _SchemaPart(row, sparse)
        return found

    def _closure(self, schemas: Iterable[int], members: Iterable[Member]) -> int:
        """Intern the state made of ``schemas`` and ``members`` plus every move that
        reads nothing: into a slot after its open marker, out of a completed slot."""
        pending = [s for s in schemas if s != DEAD]
        kept_members: set[Member] = set()
        for member in members:
            kept_members.add(member)
            pending.extend(self._exits(member))
        kept_schemas = self._reach(pending, kept_members)
        return self._intern((tuple(sorted(kept_schemas)), tuple(sorted(kept_members))))

    def _reach(self, pending: list[int], kept_members: set[Member]) -> list[int]:
        """The schema states of a closure from ``pending`` worth keeping (they read a
        byte or accept); the slots entered on the way are added to ``kept_members``."""
        seen: set[int] = set()
        kept_schemas: list[int] = []
        while pending:
            state = pending.pop()
            if state in seen:
                continue
            seen.add(state)
            part = self._schema_part(state)
            opened = int(part.row[SLOT_OPEN])
            if opened != DEAD:
                for member in self._entries(opened):
                    kept_members.add(member)
                    pending.extend(self._exits(member))
            if part.sparse or self.schema.is_accepting(state):
                kept_schemas.append(state)
        return kept_schemas

    def _after_slot(self, kind: int, inside: int) -> tuple[tuple[int, ...], frozenset[Member]]:
        """What a value of slot ``kind`` may close into, waiting at ``inside``: the closure
        of its close marker's target, the same for every text state where the value may
        end (computed once per slot and place)."""
        key = (kind, inside)
        found = self._after_slots.get(key)
        if found is None:
            entered: set[Member] = set()
            schemas = self._reach([int(self._schema_row(inside)[SLOT_CLOSE])], entered)
            found = self._after_slots[key] = (tuple(sorted(schemas)), frozenset(entered))
        return found

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
        schemas = key[0]
        return self._register(key, bool(schemas) and any(map(self.schema.is_accepting, schemas)))

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
        if all(s == DEAD for s in moved):
            if len(live) == 1:  # the byte went on inside one slot alone
                return self._slot_successor(live[0])
            if not live:
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

    # -- how the table is built: entries the walks ask for, from the parts' live bytes ---
    def _moves(self, state: int) -> dict[int, tuple[int, ...]]:
        """Per live byte of ``state``, where it moves each part (schema states, then the
        slots' text states; DEAD where a part dies). Built once per state, in O(live
        bytes of its parts): a handful inside a slot."""
        found = self._moves_of.get(state)
        if found is not None:
            return found
        schemas, members = self._sets[state]
        if not schemas and len(members) == 1:  # inside a slot: its text alone moves
            kind, text_state, _ = members[0]
            found = {byte: (target,) for byte, target in self.texts[kind].sparse_row(text_state)}
        else:
            parts = [self._schema_part(s).sparse for s in schemas]
            parts += [self.texts[kind].sparse_row(text_state) for kind, text_state, _ in members]
            found = self._joined_moves(parts)
        self._moves_of[state] = found
        row = self._table[state]
        row[:] = DEAD  # at once where no part lives: a walk asks for the live entries alone
        if len(found) <= _FEW_LIVE:
            for byte in found:
                row[byte] = UNBUILT
        else:
            row[list(found)] = UNBUILT
        return found

    @staticmethod
    def _joined_moves(parts: Sequence[SparseRow]) -> dict[int, tuple[int, ...]]:
        width = len(parts)
        moves: dict[int, list[int]] = {}
        for i, part in enumerate(parts):
            for byte, target in part:
                known = moves.get(byte)
                if known is None:
                    known = moves[byte] = [DEAD] * width
                known[i] = target
        return {byte: tuple(moved) for byte, moved in moves.items()}

    def _entry(self, state: int, byte: int) -> int:
        """The state after ``byte``: a closure per distinct move of ``state``'s parts."""
        moved = self._moves(state).get(byte)
        if moved is None:
            return DEAD
        key = (state, moved)
        found = self._successors.get(key)
        if found is None:
            schemas, members = self._sets[state]
            if not schemas and len(members) == 1:  # inside a slot: its text moved alone
                kind, _, inside = members[0]
                found = self._slot_successor((kind, moved[0], inside)) if moved[0] else DEAD
            else:
                split = len(schemas)
                found = self._successor(members, moved[:split], moved[split:])
            self._successors[key] = found
        return found

    def _slot_successor(self, moved: Member) -> int:
        """The state where one slot alone read a byte, into ``moved`` (a live text
        state): the slot alone while its value cannot end there, else with what it may
        close into (the closure of ``moved``, computed once per slot and place)."""
        kind, text_state, inside = moved
        if not self.texts[kind].is_accepting(text_state):
            return self._intern(((), (moved,)))  # a closure that adds nothing
        schemas, entered = self._after_slot(kind, inside)
        members = tuple(sorted(entered | {moved})) if entered else (moved,)
        return self._intern((schemas, members))

    def _build_entries(
        self, states: npt.NDArray[np.integer[Any]], data: npt.NDArray[np.uint8]
    ) -> None:
        """Build the entries ``(states[i], data[i])`` alone: a walk over the vocabulary
        asks for a few bytes of most states it reaches, and the bytes where no part of a
        state lives are written DEAD when it is first asked (no closure)."""
        asked: dict[int, set[int]] = {}
        for state, byte in zip(states.tolist(), data.tolist(), strict=True):
            asked.setdefault(state, set()).add(byte)
        with self._lock:
            for state, wanted in asked.items():
                for byte in wanted & self._moves(state).keys():
                    self._build_entry(state, byte)

    def build_below(
        self, nodes: Sequence[int], states: Sequence[int], children: Callable[[int], bytes]
    ) -> None:
        """Build the entries from each of ``states`` on the bytes of its node's children
        in a vocabulary trie (``children(node)``, as
        :meth:`formcast.vocabulary.FlatTrie.child_bytes` gives them): where a walk of the
        trie stopped. Only the live bytes of a state are looked up there (a handful
        inside a slot), so a round of the walk costs O(pending pairs) in Python."""
        with self._lock:
            for node, state in zip(nodes, states, strict=True):
                live = self._moves(state)
                if not live:
                    continue
                below = children(node)
                for byte in live:
                    if byte in below:
                        self._build_entry(state, byte)

    def _build_entry(self, state: int, byte: int) -> None:
        """Write the entry ``(state, byte)`` where it is not built yet (caller holds the
        lock)."""
        if int(self._table[state, byte]) == UNBUILT:
            found = self._entry(state, byte)
            self._table[state, byte] = found  # after the closure, which may grow the table

    def _ensure(self, states: Iterable[int]) -> None:
        """Build what is missing of the rows of ``states``, under the lock (a row may hold
        single entries already, so every byte is checked, not the first alone)."""
        with self._lock:
            for state in states:
                if bool((self._table[state] == UNBUILT).any()):
                    self._build_row(state)

    def _ensure_row(self, state: int) -> None:
        self._ensure((state,))

    def _build_row(self, state: int) -> None:
        row = np.zeros(256, dtype=np.int32)  # DEAD everywhere else, markers included
        for byte in self._moves(state):
            row[byte] = self._entry(state, byte)
        self._table[state] = row  # after the closures, which may grow the table

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

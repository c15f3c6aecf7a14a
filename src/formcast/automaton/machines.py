"""The machines of a pushdown automaton: one lazy DFA per recursive definition.

A pattern whose definitions recurse (see :mod:`formcast.automaton.definitions`) is parsed
once into one NFA (:func:`formcast.automaton.parse.build_machines`); each machine is a
:class:`~formcast.automaton.lazy.LazyAutomaton` over that NFA with its own start and end:
machine 0 reads the main pattern, machine ``k + 1`` the recursive definition numbered
``k``. A call is a marker (:mod:`formcast.automaton.markers`) in the caller's bytes, so
a machine state tells which calls it may make and where each returns.

:class:`Machines` answers what the pushdown automaton asks of a machine state (its real
bytes, its calls, whether it may end) and checks, once, what makes a grammar unusable:

* a reachable definition that matches no string (it cannot end without calling itself
  again): every state would have to reach acceptance;
* left recursion, a definition that can call itself again before reading a byte: the
  set of stacks after it would be infinite.

It also computes what completing each definition costs (a fixpoint: a definition's
cost depends on its callees'), for budget-safe endings.

Cost: building is O(NFA size) for the edge index the machines share, plus a copy of one
flag per NFA state a machine; the checks explore only the machine states reachable
without reading a byte; one completion fixpoint runs at most ``machines + 1`` rounds of
one distance search per machine, once per byte-cost table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from formcast.automaton.definitions import EmptyDefinitionError, RecursionPlan, refuse_definition
from formcast.automaton.distances import UNREACHABLE
from formcast.automaton.lazy import DEAD, LazyAutomaton
from formcast.automaton.markers import CALL_BYTE, DIGIT_BYTES, MARKER_BYTES, marker_width
from formcast.automaton.nfa import VIRTUAL_BASE, Nfa
from formcast.automaton.parse import build_machines
from formcast.automaton.table import arrays_under
from formcast.graphs import strongly_connected_components
from formcast.limits import Limits

__all__ = ["MAIN", "FrameInfo", "Machines"]

IntArray = npt.NDArray[np.int32]
BoolArray = npt.NDArray[np.bool_]

MAIN = 0
"""The machine of the main pattern."""

_MARKERS = np.array(sorted(MARKER_BYTES), dtype=np.intp)


class FrameInfo(NamedTuple):
    """What a pushdown configuration needs of one machine state."""

    row: IntArray
    """The state's transitions on real bytes (marker bytes lead to :data:`DEAD`)."""
    reads: bool
    """Whether some real byte leads on."""
    accepting: bool
    """Whether the machine may end here (return to its caller)."""
    calls: tuple[tuple[int, int], ...]
    """``(callee machine, state to return to)`` of each call the state may make."""
    ends_only: bool
    """Accepting with no way on at all: a call returning here is a tail call."""


class Machines:
    """The machines of one pattern's pushdown automaton, and their checks.

    Raises:
        SchemaError: a definition the main pattern reaches matches no string, or is
            left-recursive (both named in the message).
    """

    def __init__(self, pattern: str, plan: RecursionPlan, limits: Limits) -> None:
        nfa, ends = build_machines(plan.pattern, plan.recursive, limits)
        reachable = [MAIN] + [
            k + 1 for k, name in enumerate(plan.recursive) if name in plan.reachable
        ]
        self._setup(pattern, ("(main)", *plan.recursive), nfa, ends, reachable)
        self.automata = _machine_automata(nfa, ends, [None] * len(ends))
        self._check_productive()
        self._check_left_recursion()

    def _setup(
        self,
        pattern: str,
        names: tuple[str, ...],
        nfa: Nfa,
        ends: list[tuple[int, int]],
        reachable: list[int],
    ) -> None:
        self.pattern = pattern  # as written, for messages
        self.names = names
        self.reachable = reachable
        self._nfa = nfa  # shared by the machines, each with its own start and end
        self._ends = ends
        self._width = marker_width(len(names) - 1)
        self._info: list[dict[int, FrameInfo]] = [{} for _ in ends]
        self._completions: dict[bytes | None, tuple[int, ...]] = {}

    # -- plain data (the disk cache) ----------------------------------------------------
    def to_arrays(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        """The machines as plain data, read back by :meth:`from_arrays`: the shared NFA
        once, each machine's start and end and its DFA states built so far
        (:meth:`LazyAutomaton.state_arrays`), and the completion costs computed so far.
        The caller keeps machine rows from being built meanwhile (the pushdown
        automaton's lock). Cost: linear in the NFA and the machine states."""
        nfa_meta, nfa_arrays = self._nfa.to_arrays()
        arrays = {f"nfa.{name}": array for name, array in nfa_arrays.items()}
        for machine, automaton in enumerate(self.automata):
            for name, array in automaton.state_arrays().items():
                arrays[f"machine{machine}.{name}"] = array
        arrays["ends"] = np.array(self._ends, dtype=np.int64).reshape(len(self._ends), 2)
        arrays["reachable"] = np.array(self.reachable, dtype=np.int64)
        completions = [
            [None if key is None else key.hex(), list(costs)]
            for key, costs in list(self._completions.items())  # a copy: it may grow meanwhile
        ]
        meta = {"names": list(self.names), "nfa": nfa_meta, "completions": completions}
        return meta, arrays

    @classmethod
    def from_arrays(
        cls, meta: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]], pattern: str
    ) -> Machines:
        """The machines :meth:`to_arrays` wrote, for ``pattern`` (as written, for
        messages; the caller stores it). The grammar's checks are not run
        again: they passed when the machines were first built. Cost: O(NFA size) (the
        shared edge index) plus the states.

        Raises:
            ValueError: a field is missing or inconsistent.
        """
        nfa = Nfa.from_arrays(meta.get("nfa", {}), arrays_under(arrays, "nfa."))
        names = meta.get("names")
        if not isinstance(names, list) or len(names) < 2:
            raise ValueError(f"expected the names of at least two machines, found {names!r}")
        try:
            ends = [(int(start), int(end)) for start, end in arrays["ends"].tolist()]
            reachable = [int(machine) for machine in arrays["reachable"].tolist()]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"expected each machine's start and end: {error}") from None
        if len(ends) != len(names) or not all(0 <= m < len(names) for m in reachable):
            raise ValueError(f"expected {len(names)} machines, found {len(ends)} ends")
        if not all(_is_state(nfa, state) for end in ends for state in end):
            raise ValueError(f"expected machine starts and ends among the NFA's states: {ends}")
        machines = cls.__new__(cls)
        machines._setup(pattern, tuple(str(name) for name in names), nfa, ends, reachable)
        states = [arrays_under(arrays, f"machine{machine}.") for machine in range(len(ends))]
        machines.automata = _machine_automata(nfa, ends, states)
        machines._completions = _read_completions(meta.get("completions"), len(names) - 1)
        return machines

    def initial(self, machine: int) -> int:
        return self.automata[machine].initial

    def info(self, machine: int, state: int) -> FrameInfo:
        """What ``state`` of ``machine`` reads, calls and ends (computed once per state)."""
        known = self._info[machine]
        found = known.get(state)
        if found is None:
            found = known[state] = self._frame_info(machine, state)
        return found

    def build_breadth_first(self, limit: int) -> int:
        """Build the rows and the :meth:`info` of up to ``limit`` machine states, an equal
        share for each machine the main pattern reaches, breadth-first from its start
        (:meth:`TableAutomaton.build_breadth_first
        <formcast.automaton.table.TableAutomaton.build_breadth_first>`); returns how many.
        What a pushdown row reads of its stacks' tops is then ready."""
        share = limit // max(len(self.reachable), 1)
        built = 0
        for machine in self.reachable:
            for state in self.automata[machine].build_breadth_first(share):
                self.info(machine, state)
                built += 1
        return built

    def _frame_info(self, machine: int, state: int) -> FrameInfo:
        automaton = self.automata[machine]
        row = automaton.row(state)  # a copy: the marker bytes are cleared in it
        accepting = automaton.is_accepting(state)
        ends_only = accepting and not row.any()
        calls = self._calls(automaton, int(row[CALL_BYTE]))
        row[_MARKERS] = DEAD
        return FrameInfo(row, bool(row.any()), accepting, calls, ends_only)

    def _calls(self, automaton: LazyAutomaton, marked: int) -> tuple[tuple[int, int], ...]:
        """The calls after the call byte led to ``marked``: one digit level at a time."""
        if marked == DEAD:
            return ()
        frontier = [(marked, 0)]
        for _ in range(self._width):
            following = []
            for state, number in frontier:
                row = automaton.row(state)
                for value, byte in enumerate(DIGIT_BYTES):
                    target = int(row[byte])
                    if target != DEAD:
                        following.append((target, number * len(DIGIT_BYTES) + value))
            frontier = following
        return tuple((number + 1, state) for state, number in frontier)

    # -- completion costs ---------------------------------------------------------------
    def completions(self, usable: BoolArray | None) -> tuple[int, ...]:
        """What completing each recursive definition (machine ``k + 1`` at entry ``k``)
        from its start costs, in bytes of ``usable`` (``None``: any byte),
        :data:`UNREACHABLE` where it cannot complete. The least fixpoint, computed once
        per ``usable``."""
        key = None if usable is None else np.asarray(usable, dtype=np.bool_).tobytes()
        found = self._completions.get(key)
        if found is None:
            found = self._completions[key] = self._fixpoint(usable)
        return found

    def _fixpoint(self, usable: BoolArray | None) -> tuple[int, ...]:
        """Costs lowered round by round until none changes: after round ``r`` a cost is
        the cheapest over derivations nested at most ``r`` deep, and a cheapest one
        never nests a definition in itself, so ``machines + 1`` rounds suffice."""
        costs = [UNREACHABLE] * (len(self.automata) - 1)
        for _ in range(len(self.automata)):
            changed = False
            for callee, automaton in enumerate(self.automata[1:]):
                cost = automaton.min_bytes_to_accept(
                    automaton.initial, usable, call_costs=tuple(costs)
                )
                if cost < costs[callee]:
                    costs[callee] = cost
                    changed = True
            if not changed:
                break
        return tuple(costs)

    def _productive(self) -> list[bool]:
        """Whether each recursive definition can complete: :meth:`completions` told apart
        from :data:`UNREACHABLE` only, so each round searches the definitions not known to
        complete yet, with a call costing 0 where its callee is known to complete (rather
        than every definition each round, with exact costs): O(definitions) searches
        where most complete by a way of their own. A definition found here has a finite
        completion cost, and the least fixpoint of the costs is finite exactly here."""
        productive = [False] * (len(self.automata) - 1)
        while True:
            call_costs = tuple(0 if known else UNREACHABLE for known in productive)
            found = [
                callee
                for callee, automaton in enumerate(self.automata[1:])
                if not productive[callee]
                and automaton.min_bytes_to_accept(automaton.initial, None, call_costs=call_costs)
                < UNREACHABLE
            ]
            if not found:
                return productive
            for callee in found:
                productive[callee] = True

    def distance(self, machine: int, state: int, usable: BoolArray | None) -> int:
        """Fewest ``usable`` bytes from ``state`` to ``machine``'s end, callees completed."""
        call_costs = self.completions(usable)
        return self.automata[machine].min_bytes_to_accept(state, usable, call_costs=call_costs)

    # -- checks ---------------------------------------------------------------------------
    def _check_productive(self) -> None:
        """Refuse a reachable definition that cannot complete. The main pattern then can:
        its NFA is trimmed with calls counted as edges, and all it calls can complete."""
        productive = self._productive()
        empty = tuple(
            self.names[machine] for machine in self.reachable[1:] if not productive[machine - 1]
        )
        if empty:
            refusal = refuse_definition(
                self.pattern,
                empty[0],
                "matches no string: it cannot end without calling itself again",
            )
            raise EmptyDefinitionError(str(refusal), empty)

    def _left_walk(self, machine: int, nullable: set[int]) -> tuple[set[int], bool]:
        """The machines ``machine`` may call before reading a byte, and whether it may
        end before reading one (calls to ``nullable`` machines return at once)."""
        start = self.initial(machine)
        seen = {start}
        pending = [start]
        callees: set[int] = set()
        ends = False
        while pending:
            info = self.info(machine, pending.pop())
            ends = ends or info.accepting
            for callee, returned in info.calls:
                callees.add(callee)
                if callee in nullable and returned not in seen:
                    seen.add(returned)
                    pending.append(returned)
        return callees, ends

    def _check_left_recursion(self) -> None:
        """Refuse a definition that can call itself again before reading a byte."""
        nullable: set[int] = set()
        changed = True
        while changed:
            changed = False
            for machine in self.reachable[1:]:
                if machine not in nullable and self._left_walk(machine, nullable)[1]:
                    nullable.add(machine)
                    changed = True
        graph = {
            self.names[m]: sorted(self.names[c] for c in self._left_walk(m, nullable)[0])
            for m in self.reachable[1:]
        }
        for component in strongly_connected_components(graph):
            first = component[0]
            if len(component) > 1 or first in graph[first]:
                names = sorted(component)
                cycle = " -> ".join([*names, names[0]])
                raise refuse_definition(
                    self.pattern,
                    names[0],
                    f"is left-recursive: it can call itself again before reading a byte "
                    f"({cycle}); rewrite the recursion to come after something that is read",
                )


def _machine_automata(
    nfa: Nfa,
    ends: list[tuple[int, int]],
    states: Sequence[Mapping[str, npt.NDArray[Any]] | None],
) -> list[LazyAutomaton]:
    """One automaton per machine over ``nfa`` with the machine's start and end (and its
    ``states`` when given), all sharing the first one's edge index."""
    automata: list[LazyAutomaton] = []
    for (start, end), stored in zip(ends, states, strict=True):
        machine_nfa = dataclasses.replace(nfa, start=start, final=end)
        first = automata[0] if automata else None
        automata.append(LazyAutomaton.of_nfa(machine_nfa, stored, edges_of=first))
    return automata


def _is_state(nfa: Nfa, state: int) -> bool:
    """Whether ``state`` is a concrete or a virtual state of ``nfa``."""
    return 0 <= state < nfa.concrete_states or (
        VIRTUAL_BASE <= state < VIRTUAL_BASE + nfa.virtual_states
    )


def _read_completions(stored: Any, definitions: int) -> dict[bytes | None, tuple[int, ...]]:
    """The completion costs :meth:`Machines.to_arrays` wrote: ``[usable bytes as hex, or
    None, [one cost per definition]]`` pairs.

    Raises:
        ValueError: they are not such pairs.
    """
    if not isinstance(stored, list):
        raise ValueError(f"expected a list of completion costs, found {type(stored).__name__}")
    completions: dict[bytes | None, tuple[int, ...]] = {}
    for entry in stored:
        try:
            key, costs = entry
            usable = None if key is None else bytes.fromhex(key)
            values = tuple(int(cost) for cost in costs)
        except (TypeError, ValueError) as error:
            raise ValueError(f"expected [usable bytes, costs], found {entry!r}") from error
        if len(values) != definitions or (usable is not None and len(usable) != 256):
            raise ValueError(f"expected {definitions} costs over 256 bytes, found {entry!r}")
        completions[usable] = values
    return completions

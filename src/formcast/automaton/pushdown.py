"""Exact recursion: :class:`PushdownAutomaton`, a byte automaton over sets of stacks.

A pattern whose definitions call each other in cycles (``(?(DEFINE)(?P<value>\\[(?&value)
(?:,(?&value))*\\]|\\d+))(?&value)``) matches a context-free language, which no finite
automaton reads. Here each recursive definition, and the main pattern, is a *machine*: a
lazy DFA over bytes in which a call is a marker (:mod:`formcast.automaton.machines`). A
*configuration* is a stack of frames ``(machine, machine state)``, the top one reading,
each lower one waiting at the state its callee returns to. Because grammars are
nondeterministic at the byte level (after a digit: another digit, or back to the
caller), a state of this automaton is a **set of stacks**, interned to an int like a DFA
state (:data:`DEAD` = 0 is the empty set), and its row of 256 transitions is built the
first time a walk reaches it, then cached: the same contract as
:class:`~formcast.automaton.lazy.LazyAutomaton`, so a
:class:`~formcast.index.TokenIndex`, its cursors, masks, jump-forward and budget-safe
endings work over it unchanged.

Stacks are interned frames linked to the frame below (a frame is ``(machine, state,
frame below)``, an int), so stacks share their suffixes: pushing costs one frame,
however deep the nesting, and equal stacks are one int.

The closure of a stack (what it becomes without reading a byte):

* a top frame whose state may call ``k`` pushes ``k``'s start above the frame of the
  return state, except for a *tail call* (the return state may only end): then the
  callee replaces the caller, so right recursion (``list := item (, list)?``) keeps
  stacks bounded;
* a top frame whose machine may end pops (its caller's frame already waits at its
  return state);
* stacks whose top can read a byte are kept, and so is a lone frame that may end: the
  input may end there.

Left recursion and definitions matching nothing are refused when the automaton is built
(:class:`~formcast.automaton.machines.Machines`); so every state but :data:`DEAD` can
reach acceptance, and every closure is finite. A state holding more than
:attr:`Limits.max_pushdown_stacks <formcast.limits.Limits.max_pushdown_stacks>` stacks
(a grammar ambiguous enough to track that many parses at once) raises
:class:`~formcast.errors.SchemaError` when a walk reaches it.

Cost: building parses the pattern once and indexes its NFA's edges once for all machines
(O(NFA size)), checks left recursion and runs one completion-cost fixpoint (see
:mod:`~formcast.automaton.machines`). A row costs one machine row per distinct (machine,
state) of its stacks (cached) plus one closure per distinct successor: ~40 us for a
state of one stack and ~150 us for one of several in Python, a few us in C.
:meth:`PushdownAutomaton.step` on built rows is one gather, as for a lazy DFA.
:meth:`~PushdownAutomaton.min_bytes_to_accept` sums, per stack, each frame's distance to
its machine's end with callees completed at their cheapest, memoised per frame.

Where :mod:`formcast._pushdown` is built (at install, with a C compiler), the frames,
closures, sets of stacks and rows live in its ``Stacks`` object, which builds the
machines' rows itself by :mod:`formcast._subset`'s construction, and a walk (or a
:class:`formcast._trie_walk.Visitor`'s first visit) builds the rows it reaches without
a return to Python. A state made there is None in ``_sets`` until its stacks are asked
for. The Python rows below are the reference the tests compare it with, and what runs
without a compiler (or with :data:`native_pushdown` set to None).

What it costs an index: a state is the whole set of stacks, so the same position in a
rule under another caller, or one level deeper, is another state, with a token row of
its own (a vocabulary walk, ~0.1-10 ms for a 49k-token vocabulary, most of it the rows
of the pushdown states its tokens pass through). Grammars whose nesting stays shallow
reuse their rows as a lazy DFA does; deeply nested values, and unconstrained values made
recursive in large schemas, build a row at most new tokens. Sharing rows between stacks
with the same top frame (one walk of the top machine alone, then only the tokens that
call or return walked through the stacks below) was measured slower on the shared
grammars: most of their tokens may end a rule on the way (an atom, a number, an
identifier), so those walks are made anyway, and a state of several stacks needs one row
per stack.

Thread safety: reads of built rows take no lock; rows (and the frames and closures they
create) are built under a lock with a double check. Instances pickle with everything
built so far, so state ids stay valid in the copy; :meth:`PushdownAutomaton.to_arrays`
writes the same as plain arrays for the disk cache.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from formcast.automaton.definitions import RecursionPlan, plan_recursion
from formcast.automaton.distances import UNREACHABLE
from formcast.automaton.machines import MAIN, Machines
from formcast.automaton.markers import CALL_BYTE, DIGIT_BYTES, marker_width
from formcast.automaton.parse import show_pattern
from formcast.automaton.table import (
    DEAD,
    INITIAL_CAPACITY,
    UNBUILT,
    SetStatesAutomaton,
    arrays_under,
)
from formcast.errors import SchemaError
from formcast.limits import DEFAULT_LIMITS, Limits

native_pushdown: ModuleType | None
try:  # the rows of sets of stacks in C, built at install time where a C compiler is found
    from formcast import _pushdown as native_pushdown
except ImportError:  # pragma: no cover (the Python rows below do the same work)
    native_pushdown = None

__all__ = ["PushdownAutomaton"]


BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int32]

BOTTOM = 0
"""The frame id below every stack's last frame (the empty stack)."""

# the bytes some top reads, the distinct columns of the tops' rows there, each byte's column
_Layout = tuple[npt.NDArray[np.intp], list[tuple[int, ...]], npt.NDArray[np.intp]]


class PushdownAutomaton(SetStatesAutomaton):
    """A deterministic automaton over bytes whose states are sets of pushdown stacks.

    Contract (the same as :class:`~formcast.automaton.lazy.LazyAutomaton`'s):
        * State ids are dense ints; :data:`DEAD` (0) is the dead sink, ``initial`` is 1.
        * A state's row never changes once built.
        * The accepted language is the set of UTF-8 encodings of the strings
          ``pattern`` fully matches, its definitions expanded recursively.
        * Every state other than :data:`DEAD` can reach an accepting state.

    Any pattern of the dialect is accepted, recursive or not, and definitions may call
    definitions written after them; :func:`formcast.automaton.compile_automaton` uses a
    :class:`~formcast.automaton.lazy.LazyAutomaton` for patterns without recursion.

    ``plan``: the pattern's :func:`~formcast.automaton.definitions.plan_recursion`, when
    the caller has it already.

    Raises:
        SchemaError: the pattern is outside the dialect, or a definition it reaches
            matches no string or is left-recursive (named in the message).
    """

    def __init__(
        self, pattern: str, limits: Limits = DEFAULT_LIMITS, plan: RecursionPlan | None = None
    ) -> None:
        if plan is None:
            plan = plan_recursion(pattern)
        machines = Machines(pattern, plan, limits)
        self._take(pattern, limits.max_pushdown_stacks, machines, [(-1, -1, -1)], {})
        self._sets, self._ids = [], {}
        self._allocate(INITIAL_CAPACITY)
        self._intern(frozenset())
        self._table[DEAD] = DEAD
        start = self._frame(MAIN, self._machines.initial(MAIN), BOTTOM)
        self.initial = self._intern(self._closure(start))

    def _take(
        self,
        pattern: str,
        max_stacks: int,
        machines: Machines,
        frames: list[tuple[int, int, int]],
        closures: dict[int, frozenset[int]],
    ) -> None:
        """Set what a built or a loaded automaton holds besides its states: the frames,
        closures and row memos in Python, or in a :class:`formcast._pushdown.Stacks`
        (``_native``) where that module is built (closures are then recomputed on
        demand)."""
        self.pattern = pattern
        self._max_stacks = max_stacks
        self._machines = machines
        self._native: Any = None
        if native_pushdown is not None:
            initials = [machines.initial(k) for k in range(len(machines.names))]
            too_many = functools.partial(_too_many_stacks, pattern, max_stacks)
            markers = (CALL_BYTE, DIGIT_BYTES, marker_width(len(machines.names) - 1))
            self._native = native_pushdown.Stacks(
                machines.info, initials, max_stacks, too_many, [*machines.automata], markers
            )
            self._native.take_frames(frames[1:])
            frames, closures = [], {}
        # frame id -> (machine, machine state, frame below); BOTTOM is no frame
        self._frames = frames
        self._frame_ids = {frame: k for k, frame in enumerate(frames) if k != BOTTOM}
        # the frames alone on their stack whose machine may end there: a state holding one
        # accepts
        self._lone_ends = {
            k
            for k, (machine, state, below) in enumerate(frames)
            if k != BOTTOM and below == BOTTOM and machines.info(machine, state).accepting
        }
        self._closures = closures
        # (frame, machine state it steps to) -> the closure of the stepped frame
        self._stepped: dict[tuple[int, int], frozenset[int]] = {}
        # the distinct tops of a set of stacks -> how their rows part the bytes
        self._layouts: dict[tuple[tuple[int, int], ...], _Layout] = {}
        # (machine, state) -> the bytes it reads, its distinct targets, each byte's target
        self._single_layouts: dict[
            tuple[int, int], tuple[npt.NDArray[np.intp], list[int], npt.NDArray[np.intp]]
        ] = {}
        self._distances: dict[bytes | None, dict[int, int]] = {}
        self._lock = threading.Lock()

    # -- pickling: everything built travels, the lock and the table's mapping do not ----
    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            state = self.__dict__.copy()
            del state["_lock"], state["_flat"], state["_native"]
            state.pop("_mapping", None)  # the table travels as an array; a copy maps anew
            state.pop("_released", None)
            state.pop("_kept_builder", None)  # holds the C builder, made anew on use
            state["_sets"] = [self._members(sid) for sid in range(len(self._sets))]
            state["_frames"] = self._all_frames()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._take(
            self.pattern, self._max_stacks, self._machines, state["_frames"], state["_closures"]
        )
        self._ids = {stacks: sid for sid, stacks in enumerate(self._sets)}
        self._flat = self._table.reshape(-1)

    # -- plain data (the disk cache) ----------------------------------------------------
    def to_arrays(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        """The automaton as plain data, read back by :meth:`from_arrays`: its machines
        (:meth:`Machines.to_arrays <formcast.automaton.machines.Machines.to_arrays>`),
        the frames, closures and states (sets of stacks) interned so far, and the rows
        built so far. Taken under the row lock, so all of them agree. The distance memo
        is left out (rebuilt on demand), and so are the closures the C rows hold. Cost:
        linear in the NFA, frames and states."""
        with self._lock:
            machines_meta, machine_arrays = self._machines.to_arrays()
            frames = np.array(self._all_frames(), dtype=np.int64).reshape(-1, 3)
            closed = sorted(self._closures)
            closures = [sorted(self._closures[frame]) for frame in closed]
            stacks = [sorted(self._members(sid)) for sid in range(len(self._sets))]
            count = len(self._sets)
            table = self._table[:count].copy()
            accepting = self._accepting[:count].copy()
        arrays = {f"machines.{name}": array for name, array in machine_arrays.items()}
        arrays.update(
            frames=frames,
            closure_frames=np.array(closed, dtype=np.int64),
            **_csr("closure", closures),
            **_csr("stack", stacks),
            table=table,
            accepting=accepting,
        )
        meta = {
            "pattern": self.pattern,
            "max_stacks": self._max_stacks,
            "initial": self.initial,
            "machines": machines_meta,
        }
        return meta, arrays

    @classmethod
    def from_arrays(
        cls, meta: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]]
    ) -> PushdownAutomaton:
        """The automaton :meth:`to_arrays` wrote, with its states and rows: the same
        state ids, and the same answers, as the one written. Reads plain data only; the
        grammar is not parsed or checked again. Cost: O(NFA size) (the machines' shared
        edge index) plus the frames and states.

        Raises:
            ValueError: a field is missing, or the frames, states and rows disagree.
        """
        pattern, max_stacks = meta.get("pattern"), meta.get("max_stacks")
        initial = meta.get("initial")
        if not isinstance(pattern, str) or not isinstance(max_stacks, int):
            raise ValueError("expected the pattern and the stack limit of a pushdown automaton")
        machines = Machines.from_arrays(
            meta.get("machines", {}), arrays_under(arrays, "machines."), pattern
        )
        try:
            frames = arrays["frames"]
            closed = arrays["closure_frames"].tolist()
            closures = _groups(arrays, "closure")
            sets = _groups(arrays, "stack")
            table, accepting = arrays["table"], arrays["accepting"]
            _check_frames(frames, machines)
            _check_states(arrays, sets, len(closures), frames.shape[0])
        except KeyError as missing:
            raise ValueError(f"expected a pushdown field {missing}, found none") from None
        count = len(sets)
        if table.shape != (count, 256) or accepting.shape != (count,):
            raise ValueError(f"expected {count} states with 256-entry rows and flags")
        if not UNBUILT <= int(table.min()) <= int(table.max()) < count:
            raise ValueError("expected rows within the states")
        if not isinstance(initial, int) or not 0 < initial < count:
            raise ValueError(f"expected an initial state in [1, {count}), found {initial!r}")
        automaton = cls.__new__(cls)
        frame_list = [(m, s, b) for m, s, b in frames.tolist()]
        automaton._take(
            pattern, max_stacks, machines, frame_list, dict(zip(closed, closures, strict=True))
        )
        stored: list[frozenset[int] | None] = [*sets]
        automaton._sets = stored
        automaton._ids = {stacks: sid for sid, stacks in enumerate(sets)}
        automaton._table = table.astype(np.int32)
        automaton._accepting = accepting.astype(np.bool_)
        automaton._allocate(max(INITIAL_CAPACITY, 2 * count))
        automaton.initial = initial
        return automaton

    # -- frames and closures ------------------------------------------------------------
    def _frame(self, machine: int, state: int, below: int) -> int:
        if self._native is not None:
            frame: int = self._native.frame(machine, state, below)
            return frame
        key = (machine, state, below)
        found = self._frame_ids.get(key)
        if found is None:
            found = self._frame_ids[key] = len(self._frames)
            self._frames.append(key)
            if below == BOTTOM and self._machines.info(machine, state).accepting:
                self._lone_ends.add(found)
        return found

    def _closure(self, frame: int) -> frozenset[int]:
        """The stacks ``frame`` (a stack's top) stands for once every call and return
        that reads nothing is made: those whose top reads a byte, and lone frames that
        may end (memoised per frame)."""
        if self._native is not None:
            closure: frozenset[int] = self._native.closure(frame)
            return closure
        cached = self._closures.get(frame)
        if cached is not None:
            return cached
        machines, frames, closures = self._machines, self._frames, self._closures
        kept: set[int] = set()
        seen = {frame}
        pending = [frame]
        while pending:
            current = pending.pop()
            known = closures.get(current)
            if known is not None and current != frame:
                kept.update(known)
                continue
            machine, state, below = frames[current]
            info = machines.info(machine, state)
            if info.reads or (info.accepting and below == BOTTOM):
                kept.add(current)
            following = [below] if info.accepting and below != BOTTOM else []
            for callee, returned in info.calls:
                if machines.info(machine, returned).ends_only:
                    caller = below  # a tail call: nothing is left to do on return
                else:
                    caller = self._frame(machine, returned, below)
                following.append(self._frame(callee, machines.initial(callee), caller))
            for successor in following:
                if successor not in seen:
                    seen.add(successor)
                    pending.append(successor)
        result = frozenset(kept)
        closures[frame] = result
        return result

    def _intern(self, stacks: frozenset[int]) -> int:
        found = self._ids.get(stacks)
        if found is not None:
            return found
        native = self._native
        if native is not None:
            sid: int = native.find(stacks)
            if sid >= 0:
                return sid
        if len(stacks) > self._max_stacks:
            raise _too_many_stacks(self.pattern, self._max_stacks, len(stacks))
        if native is not None:
            return self._register(stacks, native.accepts(stacks))
        return self._register(stacks, not self._lone_ends.isdisjoint(stacks))

    def _frame_of(self, frame: int) -> tuple[int, int, int]:
        """``(machine, machine state, frame below)`` of ``frame``."""
        if self._native is not None:
            found: tuple[int, int, int] = self._native.frame_of(frame)
            return found
        return self._frames[frame]

    def _all_frames(self) -> list[tuple[int, int, int]]:
        """Every frame, in id order, BOTTOM first."""
        if self._native is not None:
            frames: list[tuple[int, int, int]] = self._native.frames()
            return frames
        return list(self._frames)

    def _build_rows(self, states: list[int]) -> None:
        """The rows of ``states`` not built yet (caller holds the lock): by the C rows
        where that module is built, else one by one (:meth:`_build_row`)."""
        if self._native is None:
            super()._build_rows(states)
        else:
            self._build_natively(self._native, states)

    def _native_rows(self) -> tuple[Any, ...] | None:
        """``(stacks, build, step, plain step)``: the C rows'
        :class:`formcast._pushdown.Stacks` and its capsules for :mod:`formcast._trie_walk`
        (a row, one entry of a row, a string chain's next link); None where that module is
        not built (see :meth:`TableAutomaton.walk_building
        <formcast.automaton.table.TableAutomaton.walk_building>`)."""
        if self._native is None or native_pushdown is None:
            return None
        return (
            self._native,
            native_pushdown._build_state,
            native_pushdown._step_state,
            native_pushdown._plain_step,
        )

    def _build_row(self, sid: int) -> None:
        """Compute and store the row of ``sid`` (caller holds the lock): every stack's top
        steps in its machine; bytes on which the tops step alike (:meth:`_layout`) share
        one successor, the union of each stack's stepped closure."""
        if self._native is not None:
            self._build_rows([sid])
            return
        stacks = self._members(sid)
        if len(stacks) == 1:  # the usual state: one parse
            self._table[sid] = self._single_stack_row(next(iter(stacks)))
        else:
            self._table[sid] = self._stacks_row(stacks)

    def _stacks_row(self, stacks: frozenset[int]) -> npt.NDArray[np.int32]:
        """The row of the state of ``stacks``, any number of them (:meth:`_build_row`)."""
        frames = self._frames
        by_top: dict[tuple[int, int], list[int]] = {}
        for frame in stacks:
            machine, state, _ = frames[frame]
            by_top.setdefault((machine, state), []).append(frame)
        tops = tuple(sorted(by_top))
        live, columns, inverse = self._layout(tops)
        row = np.zeros(256, dtype=np.int32)
        if live.size:
            groups = [by_top[top] for top in tops]
            successors = [self._successor(groups, column) for column in columns]
            row[live] = np.asarray(successors, dtype=np.int32)[inverse]
        return row

    def _single_stack_row(self, frame: int) -> npt.NDArray[np.int32]:
        """The row of the state of one stack, topped by ``frame``: :meth:`_build_row`'s
        work with one top and one frame, without the grouping (each distinct target of
        the top's machine row leads to the closure of the top stepped there)."""
        machine, state, below = self._frames[frame]
        live, targets, inverse = self._single_layout(machine, state)
        row = np.zeros(256, dtype=np.int32)
        if live.size:
            stepped, intern = self._stepped, self._intern
            fresh = [target for target in targets if (frame, target) not in stepped]
            if len(fresh) > 1:  # the machine rows the new frames read, in one build
                self._machines.automata[machine].build_rows(fresh)
            successors = []
            for target in targets:
                key = (frame, target)
                closure = stepped.get(key)
                if closure is None:
                    closure = stepped[key] = self._closure(self._frame(machine, target, below))
                successors.append(intern(closure))
            row[live] = np.asarray(successors, dtype=np.int32)[inverse]
        return row

    def _single_layout(
        self, machine: int, state: int
    ) -> tuple[npt.NDArray[np.intp], list[int], npt.NDArray[np.intp]]:
        """:meth:`_layout` of the one top ``(machine, state)``, with each distinct target
        as an int (memoised per top; caller holds the lock)."""
        found = self._single_layouts.get((machine, state))
        if found is None:
            step = self._machines.info(machine, state).row
            live = np.flatnonzero(step)
            first_seen: dict[int, int] = {}
            inverse = [first_seen.setdefault(t, len(first_seen)) for t in step[live].tolist()]
            found = (live, list(first_seen), np.asarray(inverse, dtype=np.intp))
            self._single_layouts[(machine, state)] = found
        return found

    def _layout(self, tops: tuple[tuple[int, int], ...]) -> _Layout:
        """For the distinct tops ``(machine, state)`` of a set of stacks: the bytes some
        top reads, the distinct columns of their machine rows over those bytes (one
        target per top), and each byte's column. It depends on the tops alone, and the
        same tops recur under other frames (the same rule positions one level deeper), so
        it is computed once per tuple of tops (caller holds the lock)."""
        found = self._layouts.get(tops)
        if found is None:
            if len(tops) == 1:  # one top under several stacks: its targets are the columns
                live, targets, single = self._single_layout(*tops[0])
                found = (live, [(target,) for target in targets], single)
            else:
                info = self._machines.info
                steps = np.stack([info(machine, state).row for machine, state in tops])
                live = np.flatnonzero(steps.any(axis=0))
                columns, inverse = _distinct_columns(steps[:, live])
                found = (live, columns, np.asarray(inverse, dtype=np.intp))
            self._layouts[tops] = found
        return found

    def _successor(self, groups: list[list[int]], targets: tuple[int, ...]) -> int:
        """The state reached when the stacks of each group (those sharing a top) step to
        the group's entry of ``targets`` (:data:`DEAD`: they die): the union of the
        stepped tops' closures."""
        stepped, frames = self._stepped, self._frames
        closures = []
        for group, target in zip(groups, targets, strict=True):
            if target == DEAD:
                continue
            for frame in group:
                key = (frame, target)
                closure = stepped.get(key)
                if closure is None:
                    machine, _, below = frames[frame]
                    closure = stepped[key] = self._closure(self._frame(machine, target, below))
                closures.append(closure)
        if len(closures) == 1:
            return self._intern(closures[0])
        return self._intern(frozenset().union(*closures))

    # -- public API (the rest is TableAutomaton's) -------------------------------------
    def build_machine_rows(self, limit: int) -> int:
        """Build the rows of up to ``limit`` states of the machines, shared among them
        (:meth:`Machines.build_breadth_first
        <formcast.automaton.machines.Machines.build_breadth_first>`), and return how
        many. Sets of stacks stay built on demand: nesting makes them unbounded, while
        every row of one is made of its tops' machine rows."""
        with self._lock:
            return self._machines.build_breadth_first(limit)

    @property
    def machine_names(self) -> tuple[str, ...]:
        """``"(main)"`` then the recursive definitions, in machine order (diagnostics)."""
        return self._machines.names

    def stacks(self, state: int) -> list[list[tuple[str, int]]]:
        """The stacks of ``state``, each from its top frame down, a frame as (machine
        name, machine state) (diagnostics and tests)."""
        out = []
        for frame in sorted(self._members(self._check(state))):
            stack = []
            while frame != BOTTOM:
                machine, inner, frame = self._frame_of(frame)
                stack.append((self._machines.names[machine], inner))
            out.append(stack)
        return out

    def min_bytes_to_accept(self, state: int, usable: BoolArray | None = None) -> int:
        """Fewest bytes from ``state`` to acceptance (0 if accepting), using only bytes
        ``b`` with ``usable[b]`` (``None``: all): over the stacks, the least sum over
        frames of the frame's distance to its machine's end, every call on the way
        completed at its cheapest. :data:`UNREACHABLE` for :data:`DEAD`.

        Cost: the first call per ``usable`` runs the completion fixpoint; then each
        frame's distance is searched once (memoised per frame), so a deep stack costs its
        new frames only."""
        stacks = self._members(self._check(state))
        if not stacks:
            return UNREACHABLE
        key = None if usable is None else np.asarray(usable, dtype=np.bool_).tobytes()
        memo = self._distances.setdefault(key, {BOTTOM: 0})
        return min(self._stack_distance(frame, usable, memo) for frame in stacks)

    def _stack_distance(self, frame: int, usable: BoolArray | None, memo: dict[int, int]) -> int:
        """Distance of the stack topped by ``frame`` (iterative: stacks may be deep)."""
        path = []
        while frame not in memo:
            path.append(frame)
            frame = self._frame_of(frame)[2]
        total = memo[frame]
        for below in reversed(path):
            machine, state, _ = self._frame_of(below)
            own = self._machines.distance(machine, state, usable)
            total = min(total + own, UNREACHABLE)
            memo[below] = total
        return total

    def __repr__(self) -> str:
        return (
            f"PushdownAutomaton(pattern={show_pattern(self.pattern)}, "
            f"machines={len(self._machines.names)}, num_states={self.num_states})"
        )


def _too_many_stacks(pattern: str, limit: int, count: int) -> SchemaError:
    """The error of a state of ``count`` stacks, past ``limit``."""
    return SchemaError(
        f"expected a grammar whose states track at most {limit} parses at once "
        f"(Limits.max_pushdown_stacks), found a state with {count} in "
        f"{show_pattern(pattern)}: the grammar is too ambiguous; make its alternatives "
        "start differently, or raise the limit"
    )


def _distinct_columns(steps: npt.NDArray[np.int32]) -> tuple[list[tuple[int, ...]], list[int]]:
    """The distinct columns of ``steps`` (one row per stack, one column per byte) in
    order of first appearance, and for each column the index of its distinct one. A dict
    of tuples: cheaper than a numpy sort for the few dozen columns of a row."""
    first_seen: dict[tuple[int, ...], int] = {}
    inverse = [
        first_seen.setdefault(column, len(first_seen)) for column in map(tuple, steps.T.tolist())
    ]
    return list(first_seen), inverse


def _csr(name: str, groups: list[list[int]]) -> dict[str, npt.NDArray[np.int64]]:
    """Groups of ints as ``{name}_offsets`` and ``{name}_members`` (a CSR)."""
    return {
        f"{name}_offsets": np.cumsum([0, *map(len, groups)], dtype=np.int64),
        f"{name}_members": np.array([m for group in groups for m in group], dtype=np.int64),
    }


def _groups(arrays: Mapping[str, npt.NDArray[Any]], name: str) -> list[frozenset[int]]:
    """The groups :func:`_csr` wrote as ``name`` (KeyError when missing).

    Raises:
        ValueError: the offsets do not cut the members.
    """
    offsets = arrays[f"{name}_offsets"]
    members = arrays[f"{name}_members"].tolist()
    bounds = offsets.tolist()
    if offsets.ndim != 1 or not bounds or bounds[0] != 0 or bounds[-1] != len(members):
        raise ValueError(f"expected {name} offsets from 0 to {len(members)}")
    if bool((np.diff(offsets) < 0).any()):
        raise ValueError(f"expected ascending {name} offsets")
    return [frozenset(members[bounds[k] : bounds[k + 1]]) for k in range(len(bounds) - 1)]


def _check_frames(frames: npt.NDArray[Any], machines: Machines) -> None:
    """Refuse frames that are not ``(machine, state of it, a frame before)``, after the
    empty one.

    Raises:
        ValueError: naming what does not fit.
    """
    if frames.ndim != 2 or frames.shape[1:] != (3,) or not frames.shape[0]:
        raise ValueError(f"expected frames as rows of three ints, found shape {frames.shape}")
    if frames[BOTTOM].tolist() != [-1, -1, -1]:
        raise ValueError("expected the empty frame first")
    machine, state, below = frames[1:].T.astype(np.int64)
    sizes = np.array([automaton.num_states for automaton in machines.automata], dtype=np.int64)
    own = np.arange(1, frames.shape[0], dtype=np.int64)
    known = (machine >= 0) & (machine < sizes.size)
    if not bool(known.all()) or bool((state < 0).any()) or bool((below < 0).any()):
        raise ValueError("expected frames of known machines, states and frames")
    if bool((state >= sizes[machine]).any()) or bool((below >= own).any()):
        raise ValueError("expected each frame's state built and its lower frame before it")


def _check_states(
    arrays: Mapping[str, npt.NDArray[Any]], sets: list[frozenset[int]], closures: int, frames: int
) -> None:
    """Refuse states and closures naming frames that do not exist.

    Raises:
        ValueError: naming what does not fit.
    """
    if len(sets) < 2 or sets[DEAD]:
        raise ValueError("expected the dead state (no stack) first, then the initial one")
    if arrays["closure_frames"].shape != (closures,):
        raise ValueError(f"expected one frame per closure, found {arrays['closure_frames'].shape}")
    for name in ("stack_members", "closure_members", "closure_frames"):
        members = arrays[name]
        if members.size and not (int(members.min()) > BOTTOM and int(members.max()) < frames):
            raise ValueError(f"expected {name} among the frames [1, {frames})")

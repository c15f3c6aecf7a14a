"""The invariants of :class:`formcast.automaton.nfa.Nfa`, as checks.

The lazy automaton derives the edges of every virtual state from its block's template
and shifts whole closures and rows from the template into each copy. That is only
correct while the NFA keeps the invariants that :mod:`formcast.automaton.nfa` states in
prose; :func:`violations` checks each of them and names the ones that fail.

Virtual edges are resolved here from their definition (the template state's edges
shifted into the copy, plus the repeat's glue at a copy's end, plus the edges attached
to the id), independently of :mod:`formcast.automaton.lazy`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterator

import numpy as np

from formcast.automaton.nfa import VIRTUAL_BASE, Block, Nfa

ByteEdge = tuple[int, int, int]

EXPAND_LIMIT = 50_000
"""The trimmed check expands NFAs of at most this many states (concrete + virtual)."""


def violations(nfa: Nfa, *, expand_limit: int = EXPAND_LIMIT) -> list[str]:
    """Every broken invariant of ``nfa`` as ``"<check>: <what is wrong>"``; empty when
    all hold. The checks run in order, and a check whose preconditions fail (edge arrays
    of unequal lengths, say) stops the later ones, which would only repeat the error."""
    found: list[str] = []
    view = View(nfa)
    for name, check in CHECKS.items():
        if name == "trimmed" and nfa.concrete_states + nfa.virtual_states > expand_limit:
            continue
        problems = list(check(view))
        found.extend(f"{name}: {problem}" for problem in problems[:5])
        if problems and name in _PRECONDITIONS:
            break
    return found


def check_names(nfa: Nfa, *, expand_limit: int = EXPAND_LIMIT) -> set[str]:
    """The names of the checks that ``nfa`` fails."""
    return {problem.split(":")[0] for problem in violations(nfa, expand_limit=expand_limit)}


# -- edges, resolved from their definition ----------------------------------------------


class Edges:
    """The byte edges and epsilon targets of any state of an NFA, virtual ones included."""

    def __init__(self, nfa: Nfa) -> None:
        self.nfa = nfa
        self.bases = [block.base for block in nfa.blocks]
        self.byte: dict[int, list[ByteEdge]] = {}
        for src, lo, hi, dst in zip(
            nfa.byte_src.tolist(),
            nfa.byte_lo.tolist(),
            nfa.byte_hi.tolist(),
            nfa.byte_dst.tolist(),
            strict=True,
        ):
            self.byte.setdefault(src, []).append((lo, hi, dst))
        self.eps: dict[int, list[int]] = {}
        for src, dst in zip(nfa.eps_src.tolist(), nfa.eps_dst.tolist(), strict=True):
            self.eps.setdefault(src, []).append(dst)
        self.memo: dict[int, tuple[list[ByteEdge], list[int]]] = {}

    def block_of(self, state: int) -> Block | None:
        """The block whose copies hold the virtual ``state``, or None."""
        index = bisect_right(self.bases, state) - 1
        if index < 0:
            return None
        block = self.nfa.blocks[index]
        return block if state < block.base + block.copies * block.span else None

    def is_state(self, state: int) -> bool:
        """Whether ``state`` is a concrete state or lies in a block's copies."""
        if 0 <= state < self.nfa.concrete_states:
            return True
        return state >= VIRTUAL_BASE and self.block_of(state) is not None

    def of(self, state: int) -> tuple[list[ByteEdge], list[int]]:
        """``(byte edges, epsilon targets)`` of ``state``."""
        if state < VIRTUAL_BASE:
            return self.byte.get(state, []), self.eps.get(state, [])
        found = self.memo.get(state)
        if found is not None:
            return found
        block = self.block_of(state)
        if block is None:
            raise ValueError(f"virtual state {state} lies in no block")
        j, template = block.locate(state)
        byte_edges, eps_targets = self.of(template)
        shifted = (
            [(lo, hi, block.copy_of(j, target)) for lo, hi, target in byte_edges],
            [block.copy_of(j, target) for target in eps_targets],
        )
        if template == block.x_end:
            shifted[1].extend(block.glue(j))
        shifted[1].extend(self.nfa.extras.get(state, ()))
        self.memo[state] = shifted
        return shifted

    def successors(self, state: int) -> list[int]:
        byte_edges, eps_targets = self.of(state)
        return [target for _, _, target in byte_edges] + eps_targets

    def ways_out(self, state: int) -> int:
        """How many edges leave ``state`` for good: an epsilon self-loop is none (``X?``
        of an empty group ``X`` leaves one, harmlessly)."""
        byte_edges, eps_targets = self.of(state)
        return len(byte_edges) + sum(target != state for target in eps_targets)


class View:
    """An NFA with what the checks look up: resolved edges, edges sorted by source."""

    def __init__(self, nfa: Nfa) -> None:
        self.nfa = nfa
        self._edges: Edges | None = None
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None
        self._extras = sorted(_extra_edges(nfa))

    @property
    def edges(self) -> Edges:
        if self._edges is None:
            self._edges = Edges(self.nfa)
        return self._edges

    def leaving(self, block: Block) -> Iterator[tuple[int, int]]:
        """``(source, target)`` of the stored edges and extras leaving a state of
        ``block``'s template."""
        if self._sorted is None:
            nfa = self.nfa
            src = np.concatenate([nfa.byte_src, nfa.eps_src])
            dst = np.concatenate([nfa.byte_dst, nfa.eps_dst])
            order = np.argsort(src, kind="stable")
            self._sorted = src[order], dst[order]
        src, dst = self._sorted
        lo, hi = np.searchsorted(src, [block.s0, block.s0 + block.size_c])
        yield from zip(src[lo:hi].tolist(), dst[lo:hi].tolist(), strict=True)
        start = bisect_left(self._extras, (block.v0, -1))
        for source, target in self._extras[start:]:
            if source >= block.virtual_end:
                break
            yield source, target


# -- the checks -----------------------------------------------------------------------------


def _stored_edges(nfa: Nfa) -> Iterator[tuple[int, int]]:
    """``(source, target)`` of every byte and epsilon edge in the arrays."""
    yield from zip(nfa.byte_src.tolist(), nfa.byte_dst.tolist(), strict=True)
    yield from zip(nfa.eps_src.tolist(), nfa.eps_dst.tolist(), strict=True)


def _extra_edges(nfa: Nfa) -> Iterator[tuple[int, int]]:
    for source, targets in nfa.extras.items():
        for target in targets:
            yield source, target


def _templates(nfa: Nfa) -> list[Block]:
    """One block per distinct template (calls to one definition share theirs)."""
    found: dict[tuple[int, ...], Block] = {}
    for block in nfa.blocks:
        found.setdefault(block.template, block)
    return list(found.values())


def edge_arrays(view: View) -> Iterator[str]:
    """The edge arrays are parallel, and every byte range is ``0 <= lo <= hi <= 255``."""
    nfa = view.nfa
    byte_sizes = {a.size for a in (nfa.byte_src, nfa.byte_lo, nfa.byte_hi, nfa.byte_dst)}
    if len(byte_sizes) != 1:
        yield f"byte edge arrays of unequal lengths {sorted(byte_sizes)}"
    if nfa.eps_src.size != nfa.eps_dst.size:
        yield f"epsilon edge arrays of lengths {nfa.eps_src.size} and {nfa.eps_dst.size}"
    if len(byte_sizes) == 1:
        bad = (nfa.byte_lo < 0) | (nfa.byte_lo > nfa.byte_hi) | (nfa.byte_hi > 255)
        for k in np.flatnonzero(bad).tolist():
            yield f"byte edge {k} reads {int(nfa.byte_lo[k])}..{int(nfa.byte_hi[k])}"


def block_layout(view: View) -> Iterator[str]:
    """Blocks are sorted by base and their copies tile the virtual ids; a template's
    virtual part is a run of whole blocks allocated before the block; the fields are
    consistent (the exit of an unbounded repeat is a concrete state after its template)."""
    nfa = view.nfa
    end = VIRTUAL_BASE + nfa.virtual_states
    boundaries = {block.base for block in nfa.blocks} | {end}
    expected_base = VIRTUAL_BASE
    for index, block in enumerate(nfa.blocks):
        if block.base != expected_base:
            yield f"block {index} starts at {block.base}, expected {expected_base}"
        expected_base = block.base + block.copies * block.span
        if block.copies < 1 or block.size_c < 0 or block.span < max(block.size_c, 1):
            yield (
                f"block {index} has copies={block.copies}, size_c={block.size_c}, span={block.span}"
            )
        if block.s0 < 0 or block.s0 + block.size_c > nfa.concrete_states:
            yield f"block {index}'s template states from {block.s0} are not all concrete"
        if block.span > block.size_c and not (
            block.v0 in boundaries and block.virtual_end in boundaries
            and block.virtual_end <= block.base
        ):  # fmt: skip
            yield f"block {index}'s template virtual part is not a run of earlier blocks"
        if not (block.in_template(block.x_start) and block.in_template(block.x_end)):
            yield f"block {index}'s start {block.x_start} or end {block.x_end} is outside it"
        if block.bounded:
            if block.exit != -1 or not 0 <= block.low <= block.copies:
                yield f"bounded block {index} has exit={block.exit}, low={block.low}"
        elif block.low != block.copies or not 0 <= block.exit < nfa.concrete_states:
            yield f"unbounded block {index} has low={block.low}, exit={block.exit}"
        elif block.in_template(block.exit):
            yield f"unbounded block {index} exits into its own template ({block.exit})"
    if expected_base != end:
        yield f"the blocks end at {expected_base}, the virtual states at {end}"


def edge_ends(view: View) -> Iterator[str]:
    """Stored edges leave concrete states; extras leave virtual ones; every edge, the
    start and the final state are ids of the NFA."""
    nfa, edges = view.nfa, view.edges
    for source, target in _stored_edges(nfa):
        if not 0 <= source < nfa.concrete_states:
            yield f"a stored edge leaves {source}, not a concrete state"
        if not edges.is_state(target):
            yield f"the edge {source} -> {target} enters no state"
    for source, target in _extra_edges(nfa):
        if source < VIRTUAL_BASE or not edges.is_state(source):
            yield f"the extra {source} -> {target} leaves no virtual state"
        if not edges.is_state(target):
            yield f"the extra {source} -> {target} enters no state"
    for name, state in (("start", nfa.start), ("final", nfa.final)):
        if not edges.is_state(state):
            yield f"the {name} {state} is no state"


def closed_templates(view: View) -> Iterator[str]:
    """Every edge leaving a template state enters the same template (so a copy's edges
    are its template's, shifted), and a repeat nested in it exits inside it too."""
    for block in _templates(view.nfa):
        for source, target in view.leaving(block):
            if not block.in_template(target):
                yield f"the edge {source} -> {target} leaves the template {block.template}"
        for nested in view.nfa.blocks:
            inside = block.v0 <= nested.base < block.virtual_end
            if inside and not nested.bounded and not block.in_template(nested.exit):
                yield f"a repeat inside the template {block.template} exits to {nested.exit}"


def template_end_has_no_way_out(view: View) -> Iterator[str]:
    """A template's end has no edge out, epsilon self-loops aside (in a copy, the glue and
    the parent's edges at the copy's end are the only ones, so leaving a copy at its end
    leaves it whole)."""
    for block in _templates(view.nfa):
        if view.edges.ways_out(block.x_end):
            yield f"the end {block.x_end} of the template {block.template} has edges out"


def template_start_has_no_way_in(view: View) -> Iterator[str]:
    """No edge inside a template enters its start (so an edge that skips from a copy's
    start to its end skips nothing else); epsilon self-loops aside."""
    for block in _templates(view.nfa):
        for source, target in view.leaving(block):
            if target == block.x_start != source:
                yield f"the edge {source} -> {target} enters the start of {block.template}"


def extras_at_copy_ends(view: View) -> Iterator[str]:
    """A parent attaches edges to a copy only at its start or its end."""
    for source in view.nfa.extras:
        block = view.edges.block_of(source)
        if block is None:
            continue  # edge_ends reports it
        _, template = block.locate(source)
        if template not in (block.x_start, block.x_end):
            yield f"an extra leaves {source}, template state {template} of {block.template}"


def final_has_no_way_out(view: View) -> Iterator[str]:
    """The final state is where every match ends: no edge leaves it (epsilon self-loops
    aside)."""
    count = view.edges.ways_out(view.nfa.final)
    if count:
        yield f"the final state {view.nfa.final} has {count} edges out"


def trimmed(view: View) -> Iterator[str]:
    """Every state reachable from the start can reach the final state (the NFA, virtual
    copies included, is expanded: only for small ones)."""
    nfa, edges = view.nfa, view.edges
    reached = {nfa.start}
    queue = deque([nfa.start])
    predecessors: dict[int, list[int]] = {}
    while queue:
        state = queue.popleft()
        for target in edges.successors(state):
            predecessors.setdefault(target, []).append(state)
            if target not in reached:
                reached.add(target)
                queue.append(target)
    alive = {nfa.final} & reached
    stack = list(alive)
    while stack:
        for source in predecessors.get(stack.pop(), ()):
            if source not in alive:
                alive.add(source)
                stack.append(source)
    stranded = sorted(reached - alive)
    if stranded:
        yield f"{len(stranded)} reachable states cannot reach the final state: {stranded[:3]}"


CHECKS: dict[str, Callable[[View], Iterator[str]]] = {
    "edge_arrays": edge_arrays,
    "block_layout": block_layout,
    "edge_ends": edge_ends,
    "closed_templates": closed_templates,
    "template_end_has_no_way_out": template_end_has_no_way_out,
    "template_start_has_no_way_in": template_start_has_no_way_in,
    "extras_at_copy_ends": extras_at_copy_ends,
    "final_has_no_way_out": final_has_no_way_out,
    "trimmed": trimmed,
}
# checks whose failure makes the later ones meaningless or unable to run
_PRECONDITIONS = frozenset({"edge_arrays", "block_layout", "edge_ends"})

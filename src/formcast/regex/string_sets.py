"""Sets of strings as character DFAs: the algebra behind several ``pattern`` keywords on
one string, ``not: {pattern: ...}``, and the ``oneOf`` proofs that two patterns share no
string.

A :class:`CharDfa` reads decoded characters (code points, ``0..U+10FFFF``); each state
has disjoint code point ranges to its next states, and a character without a move ends
every word. :func:`pattern_language` builds one from an ECMAScript pattern (its narrow
reading, what every engine matches, for a pattern the value must match; its wide reading,
what some engine matches, for a pattern the value must *not* match, so a negation never
lets through a string some validator finds matching). :func:`intersection` crosses DFAs
(words all the kept ones accept and none of the removed ones does), and
:func:`has_word_between` tells whether a DFA accepts a word of a length in a range.

Costs: the product has at most ``limits.max_pattern_dfa_states`` states (past it:
:class:`~formcast.regex.patterns.DfaTooLarge`), each split at the range bounds of its
components; the length test is one step per length up to the first repeated set of
states.
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from formcast.charset import MAX_CODE_POINT, Ranges, normalize
from formcast.graphs import reachable
from formcast.limits import DEFAULT_LIMITS, Limits
from formcast.regex.patterns import DfaTooLarge, PatternUnsupported, pattern_dfa, pattern_union

Moves = tuple[tuple[tuple[Ranges, int], ...], ...]


@dataclass(frozen=True)
class CharDfa:
    """A deterministic automaton over code points: state 0 starts; ``moves[q]`` are the
    (disjoint ranges, next state) pairs of state ``q``; ``accepting[q]`` whether a word
    may end there."""

    moves: Moves
    accepting: tuple[bool, ...]


_EVERY_CHARACTER: Ranges = ((0, MAX_CODE_POINT),)
ANY_STRING = CharDfa(moves=(((_EVERY_CHARACTER, 0),),), accepting=(True,))
"""Every string."""


def pattern_language(pattern: str, wide: bool, limits: Limits = DEFAULT_LIMITS) -> CharDfa:
    """The strings an ECMAScript ``pattern`` finds a match in (an unanchored search
    unless anchored), in its narrow reading or its ``wide`` one (see the module notes).

    Raises PatternUnsupported for syntax that cannot be read exactly and DfaTooLarge past
    the pattern limits. Cached, failures included: parsing and determinizing cost
    milliseconds (a pattern past the limits, seconds), and ``oneOf`` proofs ask for the
    same patterns pair after pair."""
    built = _built_language(pattern, wide, limits)
    if isinstance(built, Exception):
        raise type(built)(*built.args)
    return built


@functools.lru_cache(maxsize=1024)
def _built_language(
    pattern: str, wide: bool, limits: Limits
) -> CharDfa | PatternUnsupported | DfaTooLarge:
    try:
        built = pattern_dfa(pattern_union(pattern, wide), limits, wide=wide)
    except PatternUnsupported as error:
        return error
    if built is None:
        return DfaTooLarge()
    moves, accepting = built
    return CharDfa(tuple(tuple(row) for row in moves), tuple(accepting))


def word_language(word: str) -> CharDfa:
    """The one string ``word``."""
    moves = tuple(((((ord(c), ord(c)),), i + 1),) for i, c in enumerate(word))
    return CharDfa((*moves, ()), tuple(i == len(word) for i in range(len(word) + 1)))


def intersection(
    kept: Sequence[CharDfa], removed: Sequence[CharDfa], limits: Limits = DEFAULT_LIMITS
) -> CharDfa:
    """The words every DFA of ``kept`` accepts and no DFA of ``removed`` accepts (all
    strings when ``kept`` is empty), by the product construction over the reachable
    tuples of states (a removed DFA with no move left stays out of the way; a kept one
    with no move left ends the word).

    Raises DfaTooLarge past ``limits.max_pattern_dfa_states`` product states."""
    parts = [*(kept or [ANY_STRING]), *removed]
    count_kept = len(kept or [ANY_STRING])
    start = tuple(0 for _ in parts)
    ids = {start: 0}
    order = [start]
    moves: list[tuple[tuple[Ranges, int], ...]] = []
    for states in order:  # grows while iterating
        row: list[tuple[Ranges, int]] = []
        for ranges, target in _product_row(parts, states, count_kept):
            if target not in ids:
                if len(order) >= limits.max_pattern_dfa_states:
                    raise DfaTooLarge
                ids[target] = len(order)
                order.append(target)
            row.append((ranges, ids[target]))
        moves.append(tuple(row))
    accepting = tuple(
        all(parts[i].accepting[q] for i, q in enumerate(states[:count_kept]))
        and not any(
            q >= 0 and parts[count_kept + i].accepting[q] for i, q in enumerate(states[count_kept:])
        )
        for states in order
    )
    return minimized(CharDfa(tuple(moves), accepting))


def minimized(dfa: CharDfa) -> CharDfa:
    """The smallest DFA with the same words: the live states (reached from the start and
    reaching an accepting state) merged by Moore's partition refinement, moves to dead
    states dropped (the empty language is one state without moves). Cost: one pass over
    the moves per refinement round, at most one round per state."""
    live = _live_states(dfa)
    if 0 not in live:
        return CharDfa(((),), (False,))
    states = sorted(live)
    rows = {q: [(normalize(ranges), target) for ranges, target in dfa.moves[q]] for q in states}
    block = {q: int(dfa.accepting[q]) for q in states}
    while True:
        signatures = {q: (block[q], _signature(rows[q], block)) for q in states}
        numbering: dict[tuple[int, tuple[tuple[int, Ranges], ...]], int] = {}
        for q in states:  # numbered in state order: the start's block comes first
            numbering.setdefault(signatures[q], len(numbering))
        refined = {q: numbering[signatures[q]] for q in states}
        if len(numbering) == len(set(block.values())):
            break
        block = refined
    block = refined
    order = sorted(set(block.values()))
    first = {b: min(q for q in states if block[q] == b) for b in order}
    moves = tuple(
        tuple((ranges, target) for target, ranges in _signature(rows[first[b]], block))
        for b in order
    )
    return CharDfa(moves, tuple(dfa.accepting[first[b]] for b in order))


def _signature(
    row: Sequence[tuple[Ranges, int]], block: dict[int, int]
) -> tuple[tuple[int, Ranges], ...]:
    """A state's moves to live states as (target block, ranges), ranges merged per block.
    Each move's ranges are normalized already (see :func:`minimized`): only a block that
    several moves reach has its ranges normalized again."""
    by_block: dict[int, Ranges] = {}
    joined: set[int] = set()
    for ranges, target in row:
        reached = block.get(target)
        if reached is None:
            continue
        known = by_block.get(reached)
        if known is None:
            by_block[reached] = ranges
        else:
            by_block[reached] = (*known, *ranges)
            joined.add(reached)
    for reached in joined:
        by_block[reached] = normalize(by_block[reached])
    return tuple(sorted(by_block.items()))


def _live_states(dfa: CharDfa) -> set[int]:
    """The states reached from state 0 that reach an accepting state."""
    successors = [[target for _, target in row] for row in dfa.moves]
    predecessors: list[list[int]] = [[] for _ in dfa.moves]
    for state, targets in enumerate(successors):
        for target in targets:
            predecessors[target].append(state)
    productive = reachable(predecessors, [q for q, ok in enumerate(dfa.accepting) if ok])
    return reachable(successors, [0]) & productive


def _product_row(
    parts: Sequence[CharDfa], states: tuple[int, ...], count_kept: int
) -> list[tuple[Ranges, tuple[int, ...]]]:
    """The moves of one product state: the code points cut at every range bound of the
    components' moves, each piece sent to the tuple of the components' next states
    (``-1``: no move), pieces with the same target merged."""
    tables = [_move_table(parts[i].moves[q]) if q >= 0 else ((), ()) for i, q in enumerate(states)]
    points = sorted({0, MAX_CODE_POINT + 1, *(p for starts, _ in tables for p in starts)})
    by_target: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for lo, next_lo in pairwise(points):
        target = tuple(_lookup(table, lo) for table in tables)
        if all(q >= 0 for q in target[:count_kept]):
            by_target.setdefault(target, []).append((lo, next_lo - 1))
    return [(normalize(ranges), target) for target, ranges in by_target.items()]


def _move_table(row: Sequence[tuple[Ranges, int]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A state's moves as sorted cut points and, per piece from each cut, the next state
    (``-1`` between ranges)."""
    pieces = sorted((lo, hi, target) for ranges, target in row for lo, hi in ranges)
    starts: list[int] = []
    targets: list[int] = []
    for lo, hi, target in pieces:
        starts += [lo, hi + 1]
        targets += [target, -1]
    return tuple(starts), tuple(targets)


def _lookup(table: tuple[tuple[int, ...], tuple[int, ...]], code: int) -> int:
    starts, targets = table
    index = bisect_right(starts, code) - 1
    return targets[index] if index >= 0 else -1


def has_word_between(dfa: CharDfa, low: int, high: int | None, max_steps: int = 100_000) -> bool:
    """Whether ``dfa`` accepts a word of ``low..high`` characters (``high`` None: no upper
    bound). Walks the set of live states reachable in exactly ``n`` characters for
    growing ``n``; past ``low`` the walk stops at the first set seen before (what follows
    repeats). Raises DfaTooLarge past ``max_steps`` steps."""
    live = _live_states(dfa)
    successors = [[target for _, target in row if target in live] for row in dfa.moves]
    frontier = frozenset({0} & live)
    seen: set[frozenset[int]] = set()
    length = 0
    while frontier:
        if length >= low:
            if high is None or any(dfa.accepting[q] for q in frontier):
                return True  # every live state reaches an accepting one
            if frontier in seen:
                return False
            seen.add(frontier)
        if high is not None and length >= high:
            return False
        if length >= max_steps:
            raise DfaTooLarge
        frontier = frozenset(t for q in frontier for t in successors[q])
        length += 1
    return False

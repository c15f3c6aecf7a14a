"""Rows built when a grammar compiles (``Limits.grammar_rows_at_compile``): which states,
in which order, within the limit, and the same answers as rows built on demand."""

from __future__ import annotations

import random

import numpy as np
import pytest

import formcast
from formcast.automaton import DEAD, LazyAutomaton, PushdownAutomaton, compile_automaton
from formcast.automaton.table import UNBUILT, TableAutomaton
from formcast.compiler import clear_memory_cache
from formcast.limits import Limits
from formcast.vocabulary import Vocabulary

PLAN = 'root ::= "(" ("stack" | "unstack" | "pick-up") " " [a-c] ")" (" " root)?'
NESTED = 'root ::= "[" (root ("," root)*)? "]" | [0-9]+'


def _reachable(automaton: TableAutomaton) -> list[int]:
    """Every state reachable from the start, breadth-first in the order of their bytes
    (the order the method under test promises), read from rows built on demand."""
    order, seen = [automaton.initial], {automaton.initial}
    for state in order:
        for following in automaton.row(state).tolist():
            if following != DEAD and following not in seen:
                seen.add(following)
                order.append(following)
    return order


def _built(automaton: TableAutomaton) -> set[int]:
    table = automaton.table
    return {s for s in range(automaton.num_states) if table[s, 0] != UNBUILT}


@pytest.fixture(scope="module")
def vocabulary() -> Vocabulary:
    pieces = [b"(", b")", b" ", b"stack", b"un", b"pick", b"-up", b"a", b"b", b"c", b"[", b"]"]
    pieces += [b",", b"1", b"23", b"(st", b"ack b)"]
    return Vocabulary.from_token_bytes([*pieces, b"</s>"], [len(pieces)])


@pytest.mark.parametrize("limit", [0, 1, 5, 1000])
def test_breadth_first_builds_the_first_states_up_to_the_limit(limit: int) -> None:
    regex = formcast.Grammar(PLAN).regex()
    warmed = LazyAutomaton(regex)
    order = warmed.build_breadth_first(limit)
    everything = _reachable(LazyAutomaton(regex))
    assert order == everything[:limit]
    assert _built(warmed) >= set(order)
    if limit == 0:
        assert _built(warmed) <= {DEAD}


def test_breadth_first_numbers_states_as_walks_do_and_answers_alike() -> None:
    regex = formcast.Grammar(PLAN).regex()
    warmed, cold = LazyAutomaton(regex), LazyAutomaton(regex)
    warmed.build_breadth_first(10_000)
    rng = random.Random(7)
    for _ in range(200):
        data = bytes(rng.choice(b"( )stackunpi-b") for _ in range(rng.randint(0, 30)))
        assert warmed.matches(data) == cold.matches(data)
    assert warmed.matches(b"(stack a) (pick-up c)")
    for state in _reachable(cold):
        assert np.array_equal(warmed.row(state), cold.row(state))


def test_machine_rows_stay_within_the_limit_and_keep_the_language() -> None:
    regex = formcast.Grammar(NESTED).regex()
    warmed = compile_automaton(regex)
    assert isinstance(warmed, PushdownAutomaton)
    assert warmed.build_machine_rows(2) <= 2
    everything = warmed.build_machine_rows(10_000)
    assert 2 < everything < 10_000
    assert warmed.build_machine_rows(10_000) == everything  # the same states, no new ones
    cold = compile_automaton(regex)
    for text in [b"[]", b"[1,[23,[]],4]", b"[[[[7]]]]", b"[1,]", b"[[]", b"12"]:
        assert warmed.matches(text) == cold.matches(text)


def test_a_grammar_compiles_with_its_reachable_rows(vocabulary: Vocabulary) -> None:
    clear_memory_cache()
    index = formcast.compile(formcast.Grammar(PLAN), vocabulary, cache=False)
    automaton = index.automaton
    assert isinstance(automaton, LazyAutomaton)
    every_state = _reachable(LazyAutomaton(formcast.Grammar(PLAN).regex()))
    assert _built(automaton) >= set(every_state)

    clear_memory_cache()
    lazy = formcast.compile(
        formcast.Grammar(PLAN),
        vocabulary,
        cache=False,
        limits=Limits(grammar_rows_at_compile=0),
    )
    assert len(_built(lazy.automaton)) < len(every_state)
    rng = random.Random(3)
    for _ in range(20):  # the same masks either way
        warm_cursor, lazy_cursor = index.cursor(), lazy.cursor()
        for _ in range(8):
            allowed = warm_cursor.allowed_token_ids()
            assert np.array_equal(allowed, lazy_cursor.allowed_token_ids())
            choices = [t for t in allowed.tolist() if t not in index.eos_token_ids]
            if not choices:
                break
            token = rng.choice(choices)
            warm_cursor.advance(token)
            lazy_cursor.advance(token)


def test_an_automaton_tells_whether_its_rows_were_built_ahead() -> None:
    """Rows built at compile, or restored with an automaton, make a walk read built rows
    first; an automaton whose rows are built as walks reach them does not."""
    regex = formcast.Grammar(PLAN).regex()
    cold = LazyAutomaton(regex)
    assert not cold.rows_built_ahead
    cold.build_breadth_first(0)
    assert not cold.rows_built_ahead
    cold.build_breadth_first(5)
    assert cold.rows_built_ahead
    restored = LazyAutomaton.from_arrays(*cold.to_arrays())
    assert restored.rows_built_ahead
    assert not LazyAutomaton.from_arrays(*LazyAutomaton(regex).to_arrays()).rows_built_ahead


def _same_rows(first: formcast.TokenIndex, second: formcast.TokenIndex) -> int:
    """Walk both indexes side by side from their initial states: the same tokens allowed
    at each pair of states, and each token leading to a pair again. Returns the pairs."""
    pairs = {first.initial_state: second.initial_state}
    frontier = [first.initial_state]
    while frontier:
        state = frontier.pop()
        ids, following = first.row(state)
        other_ids, other_following = second.row(pairs[state])
        assert ids.tolist() == other_ids.tolist()
        assert first.is_accepting(state) == second.is_accepting(pairs[state])
        for target, other in zip(following.tolist(), other_following.tolist(), strict=True):
            if target not in pairs:
                pairs[target] = other
                frontier.append(target)
            assert pairs[target] == other
    return len(pairs)


@pytest.mark.parametrize("grammar", [PLAN, 'root ::= [a-c]+ ("(" [0-9]* ")")?'])
def test_walks_that_build_at_once_or_read_built_rows_first_agree(
    grammar: str, vocabulary: Vocabulary
) -> None:
    """A first visit's walk builds the rows it reaches from its first round, or, where
    rows were built ahead, reads those first: the rows are the same either way."""
    regex = formcast.Grammar(grammar).regex()
    building = LazyAutomaton(regex)
    reading = LazyAutomaton(regex)
    reading.build_breadth_first(3)  # a few rows ahead: the walks read, then build
    assert reading.rows_built_ahead and not building.rows_built_ahead
    first = formcast.TokenIndex(building, vocabulary)
    second = formcast.TokenIndex(reading, vocabulary)
    assert _same_rows(first, second) > 3

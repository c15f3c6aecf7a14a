"""formcast.graphs: reachability, and strongly connected components checked against
mutual reachability on random graphs and on the shapes the compile stages meet."""

from __future__ import annotations

import random
from collections.abc import Iterable

from formcast.graphs import Graph, reachable, strongly_connected_components


def closed_under_successors(graph: Graph[int], starts: Iterable[int]) -> set[int]:
    """The oracle: add every successor of what is there until nothing changes."""
    closed = set(starts)
    while True:
        grown = closed | {target for node in closed for target in graph[node]}
        if grown == closed:
            return closed
        closed = grown


def test_reachable_takes_mappings_and_lists_and_keeps_the_starts() -> None:
    assert reachable({"a": ["b"], "b": ["a"], "c": ["a"], "d": []}, ["a"]) == {"a", "b"}
    assert reachable({"a": [], "d": []}, ["a", "d"]) == {"a", "d"}
    assert reachable([[1], [2], [], [0]], [0]) == {0, 1, 2}
    assert reachable([[1], [0]], []) == set()


def test_reachable_agrees_with_a_fixpoint_on_random_graphs() -> None:
    rng = random.Random(3)
    for _ in range(200):
        size = rng.randint(1, 10)
        graph = [[rng.randrange(size) for _ in range(rng.randint(0, 3))] for _ in range(size)]
        starts = rng.sample(range(size), rng.randint(0, size))
        assert reachable(graph, starts) == closed_under_successors(graph, starts)


def test_components_match_mutual_reachability_callees_first() -> None:
    rng = random.Random(7)
    for _ in range(300):
        size = rng.randint(1, 12)
        graph = {n: [rng.randrange(size) for _ in range(rng.randint(0, 3))] for n in range(size)}
        components = strongly_connected_components(graph)
        assert sorted(n for c in components for n in c) == list(range(size))
        reach = {n: closed_under_successors(graph, [n]) for n in graph}
        position = {n: k for k, c in enumerate(components) for n in c}
        for a in graph:
            for b in graph:
                same = b in reach[a] and a in reach[b]
                assert (position[a] == position[b]) == same, (graph, a, b)
            for b in graph[a]:  # an edge never points into a later component
                assert position[b] <= position[a], (graph, a, b)


def test_members_in_search_order_and_self_loops_kept_alone() -> None:
    graph = {"a": ["b"], "b": ["c", "b"], "c": ["a"], "d": ["d"], "e": []}
    assert strongly_connected_components(graph) == [["a", "b", "c"], ["d"], ["e"]]


def test_long_chain_needs_no_recursion() -> None:
    graph = {n: [n + 1] for n in range(50_000)}
    graph[50_000] = []
    components = strongly_connected_components(graph)
    assert components[0] == [50_000] and components[-1] == [0] and len(components) == 50_001

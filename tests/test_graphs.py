"""formcast.graphs: strongly connected components, checked against a brute-force
reachability oracle on random graphs and on the shapes the compile stages meet."""

from __future__ import annotations

import random

from formcast.graphs import strongly_connected_components


def reachable(graph: dict[int, list[int]], start: int) -> set[int]:
    seen = {start}
    pending = [start]
    while pending:
        for target in graph[pending.pop()]:
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen


def test_components_match_mutual_reachability_callees_first() -> None:
    rng = random.Random(7)
    for _ in range(300):
        size = rng.randint(1, 12)
        graph = {n: [rng.randrange(size) for _ in range(rng.randint(0, 3))] for n in range(size)}
        components = strongly_connected_components(graph)
        assert sorted(n for c in components for n in c) == list(range(size))
        reach = {n: reachable(graph, n) for n in graph}
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

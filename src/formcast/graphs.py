"""Graph algorithms shared by the compile stages (a leaf module: imports no formcast).

A graph gives, indexed by a node, the nodes it points at (every target a node of it
again): a mapping, or a list indexed by int nodes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol, TypeVar

__all__ = ["Graph", "reachable", "strongly_connected_components"]

Node = TypeVar("Node", bound=Hashable)


class Graph(Protocol[Node]):
    """What the algorithms read of a graph: ``graph[node]``, the nodes ``node`` points at."""

    def __getitem__(self, node: Node, /) -> Iterable[Node]: ...


def reachable(graph: Graph[Node], starts: Iterable[Node]) -> set[Node]:
    """The nodes reachable from ``starts`` in ``graph``, ``starts`` included.
    Cost: O(nodes + edges reached)."""
    seen = set(starts)
    pending = list(seen)
    while pending:
        for target in graph[pending.pop()]:
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return seen


def strongly_connected_components(graph: Mapping[Node, Sequence[Node]]) -> list[list[Node]]:
    """Tarjan's strongly connected components of ``graph``, each listed once, a
    component after every component it points into (callees before their callers);
    within a component, members in the order the depth-first search reached them.

    Roots are taken in the mapping's order and edges in each list's order, so the
    result is deterministic. Iterative: no recursion limit on long chains.
    Cost: O(nodes + edges).
    """
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    on_stack: set[Node] = set()
    stack: list[Node] = []
    components: list[list[Node]] = []

    def enter(node: Node) -> tuple[Node, Iterator[Node]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return node, iter(graph[node])

    for root in graph:
        if root in index:
            continue
        work = [enter(root)]
        while work:
            node, successors = work[-1]
            unvisited = None
            for successor in successors:
                if successor not in index:
                    unvisited = successor
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if unvisited is not None:
                work.append(enter(unvisited))
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                components.append(_pop_component(stack, on_stack, node))
    return components


def _pop_component(stack: list[Node], on_stack: set[Node], root: Node) -> list[Node]:
    """Pop the stack down to ``root``, its component's first node; the members popped,
    in the order they were pushed."""
    component: list[Node] = []
    while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == root:
            break
    component.reverse()
    return component

"""The subroutine definitions of a pattern, their call graph and its recursion.

A pattern may open with ``(?(DEFINE)(?P<a>...)(?P<b>...))`` and call ``(?&a)`` anywhere.
:func:`scan_definitions` reads where each definition starts and ends and what it calls,
without building anything; :func:`plan_recursion` then splits the definitions by the
strongly connected components of the call graph: the *recursive* ones (in a cycle, or
calling themselves) become machines of a pushdown automaton, entered by call edges
(:mod:`formcast.automaton.pushdown`); every other call keeps being compiled as a copy of
its definition. Definitions are put in an order where each copied one comes before its
callers, so that the NFA builder, which copies only definitions it has already built,
accepts calls to definitions written later.

Cost: one regular-expression scan of the pattern plus O(definitions + calls); it runs
only for patterns the plain build refused (see :func:`formcast.automaton.compile_automaton`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from formcast.automaton.parse import show_pattern
from formcast.errors import SchemaError
from formcast.graphs import reachable, strongly_connected_components

__all__ = [
    "Definition",
    "RecursionPlan",
    "plan_recursion",
    "refuse_definition",
    "scan_definitions",
]

# The tokens that matter to the structure: escapes and classes (skipped, they may hold
# parentheses), comments, definitions, calls, the DEFINE opener and plain parentheses.
_TOKENS = re.compile(
    r"\\.|\[\^?\]?(?:[^\]\\]|\\.)*\]|\(\?#(?:[^)\\]|\\.)*\)"
    r"|\(\?P<(\w+)>|\(\?&(\w+)\)|(\(\?\(DEFINE\))|[()]",
    re.DOTALL,
)
_LEADING_FLAGS = re.compile(r"(?:\(\?[a-zA-Z]+\))*\^?")


@dataclass(frozen=True)
class Definition:
    """One ``(?P<name>body)`` of the DEFINE block: ``text`` spans the whole group."""

    name: str
    start: int
    end: int  # one past the closing parenthesis
    calls: frozenset[str]


@dataclass(frozen=True)
class Scan:
    """Where the DEFINE block's definitions lie, and what the main pattern calls."""

    definitions: tuple[Definition, ...]
    block_start: int  # the position right after "(?(DEFINE)", -1 without a block
    block_end: int  # the position of the block's closing parenthesis
    main_calls: frozenset[str]


@dataclass(frozen=True)
class RecursionPlan:
    """How a pattern with definitions is built.

    ``pattern`` is the pattern with its definitions reordered so that each definition
    copied by a call comes before its callers (the input itself when already so);
    ``recursive`` names the definitions reached through call edges, in order (machine
    ``k + 1`` of the pushdown automaton is ``recursive[k]``; machine 0 is the main
    pattern). Empty when the pattern has no recursion.
    """

    pattern: str
    recursive: tuple[str, ...]
    reachable: frozenset[str]
    """The definitions the main pattern calls, directly or through others."""


def scan_definitions(pattern: str) -> Scan:
    """The definitions of ``pattern`` and the calls in each (O(pattern) in one regex scan).

    Unbalanced parentheses are left for the parser to report; the scan only needs the
    structure of well-formed patterns."""
    opening = _LEADING_FLAGS.match(pattern)
    head = opening.end() if opening is not None else 0
    definitions: list[Definition] = []
    block_start = block_end = -1
    depth = 0
    current: tuple[str, int, set[str]] | None = None
    main_calls: set[str] = set()
    for token in _TOKENS.finditer(pattern, head):
        defined, called, define_block = token.group(1, 2, 3)
        if called is not None:
            (current[2] if current is not None else main_calls).add(called)
        elif define_block is not None:
            if token.start() == head and depth == 0:
                block_start = token.end()
            depth += 1
        elif defined is not None or token.group() == "(":
            if defined is not None and block_start >= 0 and block_end < 0 and depth == 1:
                current = (defined, token.start(), set())
            depth += 1
        elif token.group() == ")":
            depth -= 1
            if current is not None and depth == 1:
                name, start, calls = current
                definitions.append(Definition(name, start, token.end(), frozenset(calls)))
                current = None
            elif block_start >= 0 and block_end < 0 and depth == 0:
                block_end = token.start()
    return Scan(tuple(definitions), block_start, block_end, frozenset(main_calls))


def plan_recursion(pattern: str) -> RecursionPlan:
    """Split ``pattern``'s definitions into recursive ones and copied ones.

    A definition is recursive when it lies on a cycle of the call graph (a strongly
    connected component of two or more definitions, or one calling itself). Calls to
    names never defined are left for the parser to refuse, as before.
    """
    scan = scan_definitions(pattern)
    by_name = {definition.name: definition for definition in scan.definitions}
    graph = {d.name: sorted(name for name in d.calls if name in by_name) for d in scan.definitions}
    recursive = set()
    for component in strongly_connected_components(graph):
        if len(component) > 1 or component[0] in graph[component[0]]:
            recursive.update(component)
    order = _copy_order(scan.definitions, graph, recursive)
    ordered = pattern
    if [d.name for d in order] != [d.name for d in scan.definitions]:
        texts = "".join(pattern[d.start : d.end] for d in order)
        first, last = scan.definitions[0].start, scan.definitions[-1].end
        ordered = pattern[:first] + texts + pattern[last:]
    names = tuple(d.name for d in order if d.name in recursive)
    called = reachable(graph, (name for name in scan.main_calls if name in graph))
    return RecursionPlan(ordered, names, frozenset(called))


def _copy_order(
    definitions: tuple[Definition, ...], graph: dict[str, list[str]], recursive: set[str]
) -> list[Definition]:
    """The definitions in their written order, moved only as needed for each definition
    copied by a call (a non-recursive callee) to come before its caller (a depth-first
    post-order; the copied calls form no cycle)."""
    by_name = {d.name: d for d in definitions}
    placed: set[str] = set()
    order: list[Definition] = []
    for root in definitions:
        stack = [(root.name, iter(graph[root.name]))]
        if root.name in placed:
            continue
        placed.add(root.name)
        while stack:
            name, callees = stack[-1]
            following = next((c for c in callees if c not in recursive and c not in placed), None)
            if following is None:
                stack.pop()
                order.append(by_name[name])
                continue
            placed.add(following)
            stack.append((following, iter(graph[following])))
    return order


class EmptyDefinitionError(SchemaError):
    """Recursive definitions the main pattern reaches that match no string.

    Attributes:
        names: every such definition, in the order of the plan.
    """

    def __init__(self, message: str, names: tuple[str, ...]) -> None:
        super().__init__(message)
        self.names = names


def refuse_definition(pattern: str, name: str, reason: str) -> SchemaError:
    """The error for a definition the pushdown automaton cannot take."""
    return SchemaError(
        "expected a regular expression formcast can compile, found "
        f"{show_pattern(pattern)}: the definition {name!r} {reason}"
    )

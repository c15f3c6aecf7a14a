"""Spans copied from the request's text inside a grammar (``rules={"name": FromText()}``).

A span is a slot (:mod:`formcast.text`) written raw: the characters of the text as their
UTF-8 bytes, not JSON-escaped. Slots are marked in the regex by control bytes
(:data:`formcast.text.MARKER_BYTES`), so a grammar that holds a span must not itself
read those bytes: :func:`check_no_marker_bytes` refuses, by rule and position, a
character class, a literal or a regex that could. Spans need a grammar without
recursion (the text is bound to the regular automaton, :mod:`formcast.automaton.bound`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import numpy as np

from formcast.automaton import DEAD, LazyAutomaton
from formcast.errors import GrammarError
from formcast.grammar import nodes
from formcast.text import MARKER_BYTES, FromText

__all__ = ["check_no_marker_bytes", "copies_text", "reads_marker_bytes"]

_MARKERS = np.array(sorted(MARKER_BYTES), dtype=np.int64)
_MARKERS_SHOWN = "\\x02-\\x08, \\x0b, \\x0c, \\x0e-\\x1f"


_KINDS = {
    nodes.Literal: "literal",
    nodes.CharClass: "character class",
    nodes.RegexTerminal: "regex",
}


def copies_text(rules: Mapping[str, nodes.Rule]) -> bool:
    """Whether any rule embeds a :class:`~formcast.text.FromText` span."""
    return any(
        isinstance(node, nodes.Embedded) and isinstance(node.source, FromText)
        for rule in rules.values()
        for node in nodes.walk(rule.body)
    )


def reads_marker_bytes(pattern: str) -> bool:
    """Whether some string of the regex ``pattern`` holds a marker byte: a search of
    the states of its automaton (cost: the size of its DFA; terminals are small)."""
    automaton = LazyAutomaton(pattern)
    seen = {automaton.initial}
    queue = deque([automaton.initial])
    while queue:
        row = automaton.row(queue.popleft())
        if bool((row[_MARKERS] != DEAD).any()):
            return True
        for target in np.unique(row[row != DEAD]).tolist():
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return False


def check_no_marker_bytes(node: nodes.Node, rule: str) -> None:
    """Raise :class:`GrammarError` when ``node`` (a leaf of rule ``rule``) may write a
    byte that marks copied spans."""
    reads = False
    if isinstance(node, nodes.Literal):
        reads = any(ord(char) in MARKER_BYTES for char in node.text)
    elif isinstance(node, nodes.CharClass):
        reads = any(low <= marker <= high for low, high in node.ranges for marker in MARKER_BYTES)
    elif isinstance(node, nodes.RegexTerminal):
        reads = reads_marker_bytes(node.pattern)
    if reads:
        where = node.where
        raise GrammarError(
            f"expected rule {rule!r} of a grammar with FromText spans to exclude the control "
            f"characters {_MARKERS_SHOWN}, which mark the spans; found a "
            f"{_KINDS.get(type(node), 'part')} that allows them (exclude them, e.g. "
            "[^\\x00-\\x1f...])",
            where.line,
            where.column,
        )

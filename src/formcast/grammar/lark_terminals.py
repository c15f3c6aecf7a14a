"""What Lark's terminals mean, beyond their text: ``%ignore`` (ignored text between the
terminals of the rules), case-insensitive literals (``"..."i``, as Python's ``re`` folds
case) and the check of ``/regex/`` terminals against formcast's dialect.

Used by :mod:`formcast.grammar.lark`.
"""

from __future__ import annotations

import functools
import re

from formcast import charset
from formcast.automaton.parse import build_nfa
from formcast.errors import SchemaError
from formcast.grammar import nodes
from formcast.grammar.source import Source
from formcast.regex import dialect

__all__ = ["IGNORING_START", "TERMINAL_NAME", "check_regex", "folded", "with_ignored"]

TERMINAL_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*")
"""A Lark terminal's name (a rule's is lowercase)."""

IGNORING_START = "%start"
"""The rule that allows ignored text before the start rule; no grammar can define it."""


def with_ignored(
    rules: dict[str, nodes.Rule], ignored: list[nodes.Node], start: str
) -> nodes.RuleSet:
    """Rules where each terminal of a rule may be followed by ignored text, under a new
    start that may begin with it: ignored text may stand before, between and after the
    terminals, as Lark's lexer skips it."""
    where = ignored[0].where
    skip = nodes.Repeat(
        where, ignored[0] if len(ignored) == 1 else nodes.Choice(where, tuple(ignored)), 0, None
    )
    rewritten = {
        name: rule
        if TERMINAL_NAME.fullmatch(name)
        else nodes.Rule(name, _ignoring(rule.body, skip), rule.where)
        for name, rule in rules.items()
    }
    rewritten[IGNORING_START] = nodes.Rule(
        IGNORING_START, nodes.Seq(where, (skip, nodes.RuleRef(where, start))), nodes.Where(0, 0)
    )
    return nodes.RuleSet(rewritten, IGNORING_START if start in rules else start)


def _ignoring(node: nodes.Node, skip: nodes.Node) -> nodes.Node:
    if isinstance(node, nodes.RuleRef) and not TERMINAL_NAME.fullmatch(node.name):
        return node
    if isinstance(node, nodes.Leaf):
        return nodes.Seq(node.where, (node, skip))
    if isinstance(node, nodes.Seq):
        return nodes.Seq(node.where, tuple(_ignoring(item, skip) for item in node.items))
    if isinstance(node, nodes.Choice):
        return nodes.Choice(node.where, tuple(_ignoring(alt, skip) for alt in node.alternatives))
    return nodes.Repeat(node.where, _ignoring(node.item, skip), node.low, node.high)


def check_regex(src: Source, pattern: str, begin: int) -> None:
    """Refuse a regex formcast's automaton cannot compile, naming why."""
    try:
        build_nfa(pattern)
    except SchemaError as error:
        src.refuse(f"the regex /{pattern}/", str(error), begin)


def folded(where: nodes.Where, text: str) -> nodes.Node:
    """A case-insensitive literal: each character as the class Python's ``re`` matches
    under ``IGNORECASE``; one terminal (ignored text never stands inside it)."""
    pieces = []
    for char in text:
        cases = _case_variants(char)
        pieces.append(dialect.char_class(charset.from_chars("".join(cases))) or "")
    return nodes.RegexTerminal(where, "".join(pieces))


def _case_variants(char: str) -> set[str]:
    """The characters ``re.IGNORECASE`` matches for ``char``: those sharing its lower or
    upper case (checked with ``re`` itself)."""
    table_lower, table_upper = _case_tables()
    candidates = (
        {char} | table_lower.get(char.lower(), set()) | table_upper.get(char.upper(), set())
    )
    matcher = re.compile(re.escape(char), re.IGNORECASE)
    return {other for other in candidates if matcher.fullmatch(other)}


@functools.cache
def _case_tables() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Characters by their lower case and by their upper case, for every cased code
    point (all are below U+20000). Cost: ~0.1 s, once."""
    by_lower: dict[str, set[str]] = {}
    by_upper: dict[str, set[str]] = {}
    for code in range(0x20000):
        char = chr(code)
        lower, upper = char.lower(), char.upper()
        if lower != upper:
            by_lower.setdefault(lower, set()).add(char)
            by_upper.setdefault(upper, set()).add(char)
    return by_lower, by_upper

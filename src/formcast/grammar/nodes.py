"""The one representation both grammar dialects are read into.

A grammar is a set of :class:`Rule`\\ s, each a tree of nodes: :class:`Seq`,
:class:`Choice`, :class:`Repeat`, :class:`Literal`, :class:`CharClass` (code-point ranges,
:mod:`formcast.charset`), :class:`RuleRef`, :class:`RegexTerminal` (a regex in formcast's
dialect, checked when read) and :class:`Embedded` (a constraint given by the caller: a
Pydantic model, a JSON Schema, a :class:`formcast.Regex`, a list of strings). Every node
keeps the line and column (1-based) where its text starts, for error messages.

All nodes are frozen and hashable; the parsers build them, the checks in
:mod:`formcast.grammar.checks` rewrite them, :mod:`formcast.grammar.emit` writes them out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from formcast.charset import Ranges

__all__ = [
    "CharClass",
    "Choice",
    "Embedded",
    "Leaf",
    "Literal",
    "Node",
    "RegexTerminal",
    "Repeat",
    "Rule",
    "RuleRef",
    "RuleSet",
    "Seq",
    "Where",
    "children",
    "references",
    "walk",
]


@dataclass(frozen=True)
class Where:
    """A position in the grammar text: 1-based line and column."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


@dataclass(frozen=True)
class _Located:
    """What every node starts with: where its text starts (the first field, so that a
    node is built as ``Kind(where, ...)``)."""

    where: Where


@dataclass(frozen=True)
class Literal(_Located):
    """Exactly ``text`` (the empty literal matches the empty string)."""

    text: str


@dataclass(frozen=True)
class CharClass(_Located):
    """One character among ``ranges`` (normalized code-point ranges; empty: none)."""

    ranges: Ranges


@dataclass(frozen=True)
class RuleRef(_Located):
    """A reference to the rule (or Lark terminal) ``name``."""

    name: str


@dataclass(frozen=True)
class RegexTerminal(_Located):
    """A regex in formcast's dialect, matched as a whole (``pattern`` carries its flags
    as a scoped group, e.g. ``(?s:...)``)."""

    pattern: str


@dataclass(frozen=True)
class Embedded(_Located):
    """A constraint supplied by the caller, in place of a rule.

    ``label`` names it in messages (the rule name, or ``%json``); ``source`` is the
    hashable form :mod:`formcast.grammar.embed` reads: a Pydantic model class, a JSON
    Schema as compact JSON text, a :class:`formcast.Regex`, or a tuple of strings.
    """

    label: str
    source: Any


@dataclass(frozen=True)
class Seq(_Located):
    """Its items one after another (no items: the empty string)."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Choice(_Located):
    """One of its alternatives (at least one)."""

    alternatives: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat(_Located):
    """``item`` repeated ``low`` to ``high`` times (``high=None``: no upper bound)."""

    item: Node
    low: int
    high: int | None


Leaf: TypeAlias = Literal | CharClass | RuleRef | RegexTerminal | Embedded
"""The nodes without sub-nodes."""

Node: TypeAlias = Leaf | Seq | Choice | Repeat


@dataclass(frozen=True)
class Rule:
    """``name ::= body``, defined at ``where``."""

    name: str
    body: Node
    where: Where


@dataclass(frozen=True)
class RuleSet:
    """Rules by name (in the order defined) and the name of the start rule."""

    rules: Mapping[str, Rule]
    start: str


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-nodes of ``node``."""
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, Choice):
        return node.alternatives
    if isinstance(node, Repeat):
        return (node.item,)
    return ()


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node inside it, in text order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def references(node: Node) -> Iterator[RuleRef]:
    """Every rule reference inside ``node``, in text order."""
    return (current for current in walk(node) if isinstance(current, RuleRef))

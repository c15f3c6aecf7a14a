"""Checks and rewrites between parsing and emission, the same for both dialects.

:func:`check_rules` takes the parsed rules and the names the caller embeds, and returns
the rules reachable from the start, with:

* references to embedded names replaced by :class:`Embedded` nodes, every other
  reference checked to name a defined rule, and the start rule checked to exist;
* **direct left recursion** rewritten: ``a ::= a x | a y | b | c`` becomes
  ``a ::= (b | c) (x | y)*`` (the same language); left recursion that remains
  (through another rule, or after a prefix that may be empty) is refused, naming the
  cycle's rules and the positions of its references;
* **direct tail recursion** rewritten: a rule that refers to itself only at the very end
  of its alternatives (``list ::= item ("," list)?``, ``ws ::= ([ \t] ws)?``) is the
  regular ``a ::= P* R`` (``a ::= P a | R``), which needs no pushdown calls;
* every reachable rule checked to derive at least one string (a productivity fixpoint):
  a rule that can never finish makes the language empty, or is a mistake.

Cost: linear in the grammar per fixpoint round (rounds: at most the number of rules).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from formcast import charset
from formcast.errors import GrammarError
from formcast.grammar import nodes
from formcast.grammar.embed import embedded_may_be_empty

__all__ = ["check_rules"]

_SURROGATES = ((0xD800, 0xDFFF),)


def check_rules(ruleset: nodes.RuleSet, embedded: Mapping[str, Any]) -> nodes.RuleSet:
    """The rules of ``ruleset`` reachable from its start, checked and rewritten (see the
    module docstring). ``embedded`` maps rule names to the hashable sources of
    :class:`Embedded` nodes.

    Raises:
        GrammarError: a name both defined and embedded, a missing start rule, an
            undefined rule, left recursion that cannot be rewritten, or a rule that can
            never finish.
    """
    rules = _resolve(ruleset, embedded)
    rules = {name: _without_direct_left_recursion(rule) for name, rule in rules.items()}
    rules = {name: _without_tail_recursion(rule) for name, rule in rules.items()}
    reachable = _reachable(rules, ruleset.start)
    rules = {name: rules[name] for name in rules if name in reachable}
    _refuse_left_recursion(rules)
    _refuse_unproductive(rules)
    return nodes.RuleSet(rules, ruleset.start)


# ----------------------------------------------------------------------------- names


def _resolve(ruleset: nodes.RuleSet, embedded: Mapping[str, Any]) -> dict[str, nodes.Rule]:
    rules = dict(ruleset.rules)
    for name in embedded:
        if name in rules:
            where = rules[name].where
            raise GrammarError(
                f"expected rule {name!r} either defined in the grammar or given in rules=, "
                "found both",
                where.line,
                where.column,
            )
    start = ruleset.start
    if start not in rules and start not in embedded:
        defined = ", ".join(repr(name) for name in rules) or "none"
        raise GrammarError(f"expected a start rule named {start!r}, found rules {defined}")
    resolved = {
        name: nodes.Rule(name, _embed(rule.body, embedded), rule.where)
        for name, rule in rules.items()
    }
    if start not in resolved:
        resolved[start] = nodes.Rule(
            start, nodes.Embedded(nodes.Where(0, 0), start, embedded[start]), nodes.Where(0, 0)
        )
    for rule in resolved.values():
        for ref in nodes.references(rule.body):
            if ref.name not in resolved:
                raise GrammarError(
                    f"expected a definition of rule {ref.name!r} (used in rule "
                    f"{rule.name!r}), found none",
                    ref.where.line,
                    ref.where.column,
                )
    return resolved


def _embed(node: nodes.Node, embedded: Mapping[str, Any]) -> nodes.Node:
    """``node`` with references to embedded names replaced by :class:`Embedded` nodes."""
    if isinstance(node, nodes.RuleRef) and node.name in embedded:
        return nodes.Embedded(node.where, node.name, embedded[node.name])
    if isinstance(node, nodes.Seq):
        return nodes.Seq(node.where, tuple(_embed(item, embedded) for item in node.items))
    if isinstance(node, nodes.Choice):
        return nodes.Choice(node.where, tuple(_embed(alt, embedded) for alt in node.alternatives))
    if isinstance(node, nodes.Repeat):
        return nodes.Repeat(node.where, _embed(node.item, embedded), node.low, node.high)
    return node


def _reachable(rules: Mapping[str, nodes.Rule], start: str) -> set[str]:
    seen = {start}
    stack = [start]
    while stack:
        for ref in nodes.references(rules[stack.pop()].body):
            if ref.name not in seen:
                seen.add(ref.name)
                stack.append(ref.name)
    return seen


# ----------------------------------------------------------------------------- left recursion


def _alternatives(node: nodes.Node) -> tuple[nodes.Node, ...]:
    return node.alternatives if isinstance(node, nodes.Choice) else (node,)


def _left_tail(node: nodes.Node, name: str) -> nodes.Node | None:
    """What follows a leading reference to ``name`` in alternative ``node``, or None
    when ``node`` does not start with one."""
    if isinstance(node, nodes.RuleRef) and node.name == name:
        return nodes.Seq(node.where, ())
    if isinstance(node, nodes.Seq) and node.items:
        first = node.items[0]
        if isinstance(first, nodes.RuleRef) and first.name == name:
            rest = node.items[1:]
            return rest[0] if len(rest) == 1 else nodes.Seq(node.where, rest)
    return None


def _without_direct_left_recursion(rule: nodes.Rule) -> nodes.Rule:
    """``a ::= a x | b`` as ``a ::= b x*``; other rules unchanged."""
    tails: list[nodes.Node] = []
    bases: list[nodes.Node] = []
    for option in _alternatives(rule.body):
        tail = _left_tail(option, rule.name)
        if tail is None:
            bases.append(option)
        else:
            tails.append(tail)
    if not tails:
        return rule
    where = rule.body.where
    if not bases:
        raise GrammarError(
            f"expected rule {rule.name!r} to have an alternative that does not start with "
            f"{rule.name!r} itself, found none: it can never finish",
            where.line,
            where.column,
        )
    base = bases[0] if len(bases) == 1 else nodes.Choice(where, tuple(bases))
    tail = tails[0] if len(tails) == 1 else nodes.Choice(where, tuple(tails))
    return nodes.Rule(
        rule.name, nodes.Seq(where, (base, nodes.Repeat(where, tail, 0, None))), rule.where
    )


def _least_fixpoint(
    rules: Mapping[str, nodes.Rule], holds: Callable[[nodes.Node, set[str]], bool]
) -> set[str]:
    """The names of the rules whose body ``holds``, given the names found so far: the
    smallest set closed under ``holds`` (``holds`` must be monotone in that set).

    Cost: one pass over the rules per round, at most one round per rule."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, rule in rules.items():
            if name not in found and holds(rule.body, found):
                found.add(name)
                changed = True
    return found


def _nullable_rules(rules: Mapping[str, nodes.Rule]) -> set[str]:
    """The rules that derive the empty string."""
    return _least_fixpoint(rules, _nullable)


def _nullable(node: nodes.Node, nullable: set[str]) -> bool:
    if isinstance(node, nodes.Literal):
        return not node.text
    if isinstance(node, nodes.CharClass):
        return False
    if isinstance(node, nodes.RuleRef):
        return node.name in nullable
    if isinstance(node, nodes.RegexTerminal):
        return _regex_may_be_empty(node.pattern)
    if isinstance(node, nodes.Embedded):
        return embedded_may_be_empty(node.source)
    if isinstance(node, nodes.Seq):
        return all(_nullable(item, nullable) for item in node.items)
    if isinstance(node, nodes.Choice):
        return any(_nullable(alt, nullable) for alt in node.alternatives)
    return node.low == 0 or _nullable(node.item, nullable)


class _NotTail(Exception):
    """The rule refers to itself other than at the very end of an alternative."""


def _without_tail_recursion(rule: nodes.Rule) -> nodes.Rule:
    """``a ::= P a | R`` as ``a ::= P* R`` when every reference of ``a`` to itself ends
    an alternative; other rules unchanged."""
    if all(ref.name != rule.name for ref in nodes.references(rule.body)):
        return rule
    try:
        rest, prefix = _split_tail(rule.body, rule.name)
    except _NotTail:
        return rule
    if rest is None or prefix is None:  # never finishes (checked later), or no recursion
        return rule
    where = rule.body.where
    return nodes.Rule(
        rule.name, nodes.Seq(where, (nodes.Repeat(where, prefix, 0, None), rest)), rule.where
    )


def _split_tail(node: nodes.Node, name: str) -> tuple[nodes.Node | None, nodes.Node | None]:
    """``(R, P)`` with ``node = P name | R``: R the strings that do not end with a
    reference to ``name``, P what comes before such a reference (None: no strings).

    Raises _NotTail when ``name`` stands anywhere but at the end."""
    if all(ref.name != name for ref in nodes.references(node)):
        return node, None
    where = node.where
    if isinstance(node, nodes.RuleRef):
        return None, nodes.Seq(where, ())
    if isinstance(node, nodes.Seq):
        head = node.items[:-1]
        if any(ref.name == name for item in head for ref in nodes.references(item)):
            raise _NotTail
        rest, prefix = _split_tail(node.items[-1], name)
        return (
            None if rest is None else nodes.Seq(where, (*head, rest)),
            None if prefix is None else nodes.Seq(where, (*head, prefix)),
        )
    if isinstance(node, nodes.Choice):
        parts = [_split_tail(option, name) for option in node.alternatives]
        rests = tuple(rest for rest, _ in parts if rest is not None)
        prefixes = tuple(prefix for _, prefix in parts if prefix is not None)
        return (
            (rests[0] if len(rests) == 1 else nodes.Choice(where, rests)) if rests else None,
            (prefixes[0] if len(prefixes) == 1 else nodes.Choice(where, prefixes))
            if prefixes
            else None,
        )
    if isinstance(node, nodes.Repeat) and (node.low, node.high) == (0, 1):
        rest, prefix = _split_tail(node.item, name)
        return (nodes.Seq(where, ()) if rest is None else nodes.Repeat(where, rest, 0, 1)), prefix
    raise _NotTail


def _regex_may_be_empty(pattern: str) -> bool:
    try:
        return re.fullmatch(pattern, "") is not None
    except re.error:
        return True


def _leftmost(node: nodes.Node, nullable: set[str]) -> Iterable[nodes.RuleRef]:
    """References that can stand first in a string ``node`` derives."""
    if isinstance(node, nodes.RuleRef):
        yield node
    elif isinstance(node, nodes.Seq):
        for item in node.items:
            yield from _leftmost(item, nullable)
            if not _nullable(item, nullable):
                break
    elif isinstance(node, nodes.Choice) or (isinstance(node, nodes.Repeat) and node.high != 0):
        for child in nodes.children(node):
            yield from _leftmost(child, nullable)


def _refuse_left_recursion(rules: Mapping[str, nodes.Rule]) -> None:
    nullable = _nullable_rules(rules)
    edges = {name: list(_leftmost(rule.body, nullable)) for name, rule in rules.items()}
    for name in rules:
        cycle = _cycle_from(name, edges)
        if cycle:
            first = cycle[0]
            path = " -> ".join(f"{ref.name} ({ref.where})" for ref in cycle)
            raise GrammarError(
                f"expected no left recursion other than a rule starting with itself "
                f"(a ::= a x | y), found the cycle {name} -> {path}: it cannot be rewritten",
                first.where.line,
                first.where.column,
            )


def _cycle_from(name: str, edges: Mapping[str, list[nodes.RuleRef]]) -> list[nodes.RuleRef]:
    """References leading from ``name`` back to ``name`` through leftmost positions."""
    parent: dict[str, tuple[str, nodes.RuleRef]] = {}
    stack = [name]
    seen = {name}
    while stack:
        current = stack.pop()
        for ref in edges[current]:
            if ref.name == name:
                path = [ref]
                while current != name:
                    current, step = parent[current]
                    path.append(step)
                return path[::-1]
            if ref.name not in seen:
                seen.add(ref.name)
                parent[ref.name] = (current, ref)
                stack.append(ref.name)
    return []


# ----------------------------------------------------------------------------- productivity


def _refuse_unproductive(rules: Mapping[str, nodes.Rule]) -> None:
    productive = _least_fixpoint(rules, _productive)
    stuck = [rule for name, rule in rules.items() if name not in productive]
    if stuck:
        listed = ", ".join(f"{rule.name!r} ({rule.where})" for rule in stuck)
        first = stuck[0].where
        raise GrammarError(
            f"expected every rule to derive at least one string, found rules that can never "
            f"finish: {listed}",
            first.line,
            first.column,
        )


def _productive(node: nodes.Node, productive: set[str]) -> bool:
    if isinstance(node, nodes.CharClass):
        return bool(charset.minus(node.ranges, _SURROGATES))
    if isinstance(node, nodes.RuleRef):
        return node.name in productive
    if isinstance(node, nodes.Seq):
        return all(_productive(item, productive) for item in node.items)
    if isinstance(node, nodes.Choice):
        return any(_productive(alt, productive) for alt in node.alternatives)
    if isinstance(node, nodes.Repeat):
        return node.low == 0 or _productive(node.item, productive)
    return True  # literals, checked regexes and embedded constraints match something

"""Checked rules -> one regex of formcast's dialect.

* A rule that is not recursive is written inline where it is used, except that one
  used more than once whose text is at least ``Limits.share_min_length`` characters
  becomes a definition called by ``(?&name)`` (written once, as the schema translation
  shares long sub-schemas).
* A recursive rule (on a cycle of references, itself included) becomes a definition
  ``(?P<gN_name>...)``, and every reference to it a call. Definitions are written
  callees first wherever the references allow it; recursion needs the automaton's
  pushdown calls, which the plain automaton refuses ("a call must follow its
  definition").
* Embedded constraints keep their own definitions, renamed ``eN_name``.
* A :class:`~formcast.text.FromText` span becomes a slot written raw; the slot table
  ends the regex (:mod:`formcast.grammar.spans` checks the grammar can hold one).

Cost: linear in the output text; the text is bounded by ``Limits.max_regex_length``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from formcast.automaton.choices import pattern_cost
from formcast.errors import GrammarError
from formcast.grammar import nodes
from formcast.grammar.embed import JsonSchemaText, embedded_regex
from formcast.grammar.spans import check_no_marker_bytes, copies_text
from formcast.graphs import strongly_connected_components
from formcast.limits import Limits
from formcast.regex import dialect
from formcast.regex.text_values import TextSlots
from formcast.schema import Mode
from formcast.text import FromText, TextSlot

__all__ = ["emit_regex", "recursive_rules"]


def emit_regex(
    ruleset: nodes.RuleSet, *, mode: Mode, whitespace: bool | int, limits: Limits
) -> str:
    """The regex of checked rules (:func:`formcast.grammar.checks.check_rules`).

    Raises:
        GrammarError: the regex would exceed ``limits.max_regex_length`` characters
            (:func:`~formcast.automaton.choices.pattern_cost`: trie-built lists of names
            count a fraction of theirs, as in a schema's regex).
        SchemaError, UnsupportedSchemaError: an embedded schema cannot be translated.
    """
    writer = _Writer(ruleset.rules, mode, whitespace, limits)
    for component in _components(ruleset.rules):
        writer.write_component(component)
    main = writer.call[ruleset.start]
    if main is None:  # unreachable after the productivity check; kept as a guard
        raise GrammarError(f"expected rule {ruleset.start!r} to match some string, found none")
    regex = dialect.with_definitions(writer.definitions, main) + writer.slots.table_comment()
    cost = pattern_cost(regex)  # a list of many names weighs a fraction of its text
    if cost > limits.max_regex_length:
        raise GrammarError(
            f"expected the grammar's regex to fit in Limits.max_regex_length="
            f"{limits.max_regex_length} characters, found {cost}; raise the limit"
        )
    return regex


def recursive_rules(rules: Mapping[str, nodes.Rule]) -> set[str]:
    """The rules on a cycle of references (a rule calling itself included)."""
    found: set[str] = set()
    for component in _components(rules):
        if len(component) > 1 or any(
            ref.name == component[0] for ref in nodes.references(rules[component[0]].body)
        ):
            found.update(component)
    return found


@dataclass
class _Writer:
    rules: Mapping[str, nodes.Rule]
    mode: Mode
    whitespace: bool | int
    limits: Limits
    call: dict[str, str | None] = field(default_factory=dict)
    definitions: list[tuple[str, str]] = field(default_factory=list)
    _embedded: dict[object, str] = field(default_factory=dict)
    slots: TextSlots = field(default_factory=TextSlots)
    _uses: dict[str, int] = field(default_factory=dict)
    _named: int = 0
    _copies_text: bool = False
    _rule: str = ""  # the rule being written (for messages)

    def __post_init__(self) -> None:
        for rule in self.rules.values():
            for ref in nodes.references(rule.body):
                self._uses[ref.name] = self._uses.get(ref.name, 0) + 1
        self._copies_text = copies_text(self.rules)
        recursive = sorted(recursive_rules(self.rules)) if self._copies_text else []
        if recursive:
            rule = self.rules[recursive[0]]
            raise GrammarError(
                f"expected a grammar without recursion around FromText spans, found rule "
                f"{recursive[0]!r} on a cycle of references",
                rule.where.line,
                rule.where.column,
            )

    def write_component(self, component: list[str]) -> None:
        """Write one strongly connected set of rules (its callees are written)."""
        cycle = recursive_rules({name: self.rules[name] for name in component})
        recursive = [name for name in component if name in cycle]  # in a stable order
        names = {name: self._definition_name(name) for name in recursive}
        for name in recursive:
            self.call[name] = f"(?&{names[name]})"
        for name in component:
            self._rule = name
            text = self.node(self.rules[name].body)
            if name in recursive:
                self.definitions.append((names[name], "" if text is None else text))
                if text is None:
                    raise GrammarError(f"expected rule {name!r} to match some string, found none")
            elif (
                text is not None
                and self._uses.get(name, 0) > 1
                and len(text) >= self.limits.share_min_length
            ):
                definition = self._definition_name(name)
                self.definitions.append((definition, text))
                self.call[name] = f"(?&{definition})"
            else:
                self.call[name] = text

    def _definition_name(self, rule: str) -> str:
        self._named += 1
        return f"g{self._named}_{re.sub(r'[^A-Za-z0-9_]', '_', rule)}"

    def node(self, node: nodes.Node) -> str | None:
        """The regex of ``node``; None when it matches nothing."""
        if self._copies_text:
            check_no_marker_bytes(node, self._rule)
        if isinstance(node, nodes.Literal):
            return dialect.escape_literal(node.text)
        if isinstance(node, nodes.CharClass):
            return dialect.char_class(node.ranges)
        if isinstance(node, nodes.RuleRef):
            text = self.call[node.name]
            return None if text is None else dialect.group_alt(text)
        if isinstance(node, nodes.RegexTerminal):
            return f"(?:{node.pattern})"
        if isinstance(node, nodes.Embedded):
            return self.embedded(node)
        if isinstance(node, nodes.Seq):
            parts = [self.node(item) for item in node.items]
            if any(part is None for part in parts):
                return None
            return "".join(dialect.group_alt(part) for part in parts if part)
        if isinstance(node, nodes.Choice):
            options = [self.node(option) for option in node.alternatives]
            return dialect.alt(option for option in options if option is not None)
        item = self.node(node.item)
        if item is None:
            return "" if node.low == 0 else None
        return dialect.repeat(item, node.low, node.high)

    def embedded(self, node: nodes.Embedded) -> str:
        """The main part of an embedded constraint; its definitions join the grammar's,
        renamed. Written once per distinct source."""
        if isinstance(node.source, FromText):  # one slot kind per options, every rule named
            return self.slots.regex(TextSlot("string", node.source, spelling="raw"), node.label)
        known = self._embedded.get(node.source)
        if known is not None:
            return known
        regex = embedded_regex(
            node.source,
            node.label,
            mode=self.mode,
            whitespace=self.whitespace,
            limits=self.limits,
        )
        if self._copies_text and isinstance(node.source, tuple):
            words = "".join(node.source)
            check_no_marker_bytes(nodes.Literal(node.where, words), node.label)
        elif self._copies_text and not isinstance(node.source, type | JsonSchemaText):
            check_no_marker_bytes(nodes.RegexTerminal(node.where, regex), node.label)
        prefix = f"e{len(self._embedded)}_"
        bodies, main = dialect.split_definitions(regex)
        for name, body in bodies.items():
            self.definitions.append((prefix + name, dialect.rename_definitions(body, prefix)))
        text = f"(?:{dialect.rename_definitions(main, prefix)})" if main else ""
        self._embedded[node.source] = text
        return text


def _components(rules: Mapping[str, nodes.Rule]) -> list[list[str]]:
    """Strongly connected components of the reference graph, callees first, members in
    the order a depth-first search from the first rules reaches them."""
    edges = {
        name: [ref.name for ref in nodes.references(rule.body) if ref.name in rules]
        for name, rule in rules.items()
    }
    return strongly_connected_components(edges)

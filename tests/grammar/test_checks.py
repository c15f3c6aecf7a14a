"""The checks between reading and writing a grammar: left recursion rewritten or refused,
rules that can never finish, what is recursive."""

from __future__ import annotations

import pytest
from grammar_checks import refusal

from formcast.automaton import LazyAutomaton
from formcast.errors import GrammarError
from formcast.grammar import Grammar
from formcast.grammar.nodes import Choice, Repeat, Seq


def matches(grammar: Grammar, text: str) -> bool:
    return LazyAutomaton(grammar.regex()).matches(text.encode("utf-8"))


def test_direct_left_recursion_becomes_a_repeat() -> None:
    grammar = Grammar('root ::= root "+" n | root "-" n | n\nn ::= [0-9]')
    body = grammar.checked.rules["root"].body
    assert isinstance(body, Seq) and isinstance(body.items[1], Repeat)
    assert isinstance(body.items[1].item, Choice)  # the two tails
    assert not grammar.is_recursive
    for text, expected in [("1", True), ("1+2-3", True), ("1+", False), ("-1", False)]:
        assert matches(grammar, text) is expected, text


def test_direct_tail_recursion_becomes_a_repeat() -> None:
    grammar = Grammar('root ::= item ("," root)?\nitem ::= [a-c]\nws ::= ([ \\t] ws)?')
    assert not grammar.is_recursive
    for text, expected in [("a", True), ("a,b,c", True), ("a,", False), ("", False)]:
        assert matches(grammar, text) is expected, text
    json_ws = Grammar('root ::= "[" ws "]"\nws ::= ([ \\t\\n] ws)?')
    assert not json_ws.is_recursive and matches(json_ws, "[ \t\n ]")
    nested = Grammar('root ::= "(" root ")" | ""')  # not at the end: stays recursive
    assert nested.is_recursive


def test_a_rule_that_only_calls_itself_first_never_finishes() -> None:
    message = "to have an alternative that does not start with 'root' itself"
    refusal('root ::= root "x"', "gbnf", 1, 10, message)


def test_indirect_and_hidden_left_recursion_are_refused_with_the_cycle() -> None:
    cycle = "found the cycle a -> b (line 2, column 7) -> a (line 3, column 7)"
    refusal('root ::= a\na ::= b "x" | "y"\nb ::= a "z"', "gbnf", 2, 7, cycle)
    with pytest.raises(GrammarError, match=r"found the cycle root -> root \(line 1, column 15\)"):
        Grammar('root ::= "x"? root "y" | "z"')  # left recursion after an optional prefix


def test_rules_that_can_never_finish_are_named() -> None:
    named = "rules that can never finish: 'loop' (line 2, column 1)"
    refusal('root ::= "a" loop | "b"\nloop ::= "x" loop', "gbnf", 2, 1, named)
    with pytest.raises(GrammarError, match="'root' \\(line 1, column 1\\)"):
        Grammar("root ::= [^\\x00-\\U0010FFFF]")  # a class of no character


def test_an_empty_class_in_an_optional_part_is_fine() -> None:
    grammar = Grammar('root ::= "a" [^\\x00-\\U0010FFFF]?')
    assert matches(grammar, "a") and not matches(grammar, "ab")


def test_unreachable_rules_are_left_out_but_still_resolved() -> None:
    grammar = Grammar('root ::= "a"\nspare ::= "b"')
    assert set(grammar.checked.rules) == {"root"}
    with pytest.raises(GrammarError, match="expected a definition of rule 'missing'"):
        Grammar('root ::= "a"\nspare ::= missing')


def test_what_is_recursive() -> None:
    assert Grammar('root ::= "(" root ")" | ""').is_recursive
    assert Grammar('root ::= a\na ::= "[" b "]" | "x"\nb ::= a*').is_recursive
    assert not Grammar('root ::= a a\na ::= b b\nb ::= "x" | "y"').is_recursive


def test_rules_used_often_are_written_once() -> None:
    levels = 14  # inlined, r0 would be 2**14 copies of "x"
    text = "root ::= r0\n" + "".join(f"r{i} ::= r{i + 1} r{i + 1}\n" for i in range(levels))
    grammar = Grammar(text + f'r{levels} ::= "x" | "y"')
    regex = grammar.regex()
    assert len(regex) < 2_000 and "(?&" in regex  # long rules became definitions
    automaton = LazyAutomaton(regex)
    assert automaton.matches(b"xy" * 2 ** (levels - 1))
    assert not automaton.matches(b"x" * (2**levels - 1))

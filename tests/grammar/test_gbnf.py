"""The GBNF reader: every shared grammar parses; what the syntax means; errors with their
exact line and column."""

from __future__ import annotations

from pathlib import Path

import pytest
from grammar_checks import GRAMMARS, refusal, shared_grammars

from formcast.automaton import LazyAutomaton
from formcast.errors import GrammarError, SchemaError
from formcast.grammar import Grammar
from formcast.grammar.gbnf import parse_gbnf
from formcast.grammar.nodes import CharClass, Choice, Literal, Repeat, RuleRef, Seq, Where


def matches(grammar: Grammar, text: str) -> bool:
    return LazyAutomaton(grammar.regex()).matches(text.encode("utf-8"))


def test_all_shared_grammars_are_found() -> None:
    if not GRAMMARS.is_dir():
        pytest.skip(f"shared grammars not found at {GRAMMARS}")
    assert len(shared_grammars()) >= 22


@pytest.mark.parametrize("path", shared_grammars(), ids=lambda p: str(p.relative_to(GRAMMARS)))
def test_every_shared_grammar_parses_and_is_checked(path: Path) -> None:
    grammar = Grammar(path.read_text(encoding="utf-8"))
    assert "root" in grammar.checked.rules
    assert grammar.regex()


def test_the_representation_keeps_structure_and_positions() -> None:
    rules = parse_gbnf('root ::= "a" x* | [b-d]\nx ::= ("y" | "z"){2,3}\n').rules
    assert rules["root"].body == Choice(
        Where(1, 10),
        (
            Seq(
                Where(1, 10),
                (
                    Literal(Where(1, 10), "a"),
                    Repeat(Where(1, 14), RuleRef(Where(1, 14), "x"), 0, None),
                ),
            ),
            CharClass(Where(1, 19), ((ord("b"), ord("d")),)),
        ),
    )
    body = rules["x"].body
    assert isinstance(body, Repeat) and (body.low, body.high) == (2, 3)
    assert rules["x"].where == Where(2, 1)


@pytest.mark.parametrize(
    ("text", "accepted", "refused"),
    [
        (r'root ::= "\x41\u00e9\U0001F600\t\"\\\[\]"', ['Aé😀\t"\\[]'], ["Ae😀"]),
        ('root ::= [^"\\\\]', ["a", "及", "😀", "\n"], ['"', "\\", "ab"]),
        ("root ::= .", ["a", "\n", "😀"], ["", "ab"]),
        ('root ::= "x"{2,}', ["xx", "xxxx"], ["x", ""]),
        ('root ::= "a" "x"{0,2}', ["a", "ax", "axx"], ["axxx"]),
        ('root ::= "a" "x"{,2}', ["a", "axx"], ["axxx"]),
        ('root ::= "x"{3}', ["xxx"], ["xx", "xxxx"]),
        ('root ::= "x"*? "y"+', ["y", "xxyy"], ["x"]),
        ("root ::= [a-c-]+ [-x]", ["a-b-", "cx"], ["d-"]),
        ('root ::= "(" root ")" | ""', None, None),
        ('root ::= ""', [""], ["a"]),
    ],
)
def test_what_the_syntax_means(
    text: str, accepted: list[str] | None, refused: list[str] | None
) -> None:
    grammar = Grammar(text)
    if accepted is None:  # recursive: read and checked, compiled once pushdown calls exist
        assert grammar.is_recursive
        return
    for string in accepted:
        assert matches(grammar, string), string
    for string in refused or []:
        assert not matches(grammar, string), string


def test_a_rule_goes_on_after_bar_and_inside_parentheses_only() -> None:
    grammar = Grammar('root ::= "a" |\n  "b" (\n "c"\n )\n')
    assert matches(grammar, "a") and matches(grammar, "bc")
    refusal('root ::= "a"\n  | "b"\n', "gbnf", 2, 3, "expected a rule name followed by '::='")


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ('root ::= "abc', 1, 14, "expected '\"' closing the string opened at line 1, column 10"),
        ("root ::= [a-z", 1, 14, "expected ']' closing the class opened at line 1, column 10"),
        ("root ::= [z-a]", 1, 11, "a range whose start is not after its end"),
        ('root ::= ("a" "b"', 1, 18, "expected ')' closing the group opened at line 1, column 10"),
        ('root ::= "\\q"', 1, 11, "expected an escape among"),
        ('root ::= "\\x4"', 1, 11, "expected \\x followed by 2 hexadecimal digits"),
        ('root ::= "\\uD800"', 1, 11, "not a surrogate"),
        ("root ::= * x", 1, 10, "expected an item before '*'"),
        ('root ::= "a"{3,1}', 1, 13, "m <= n"),
        ('root ::= "a"{x}', 1, 13, "expected a count"),
        ('root = "a"', 1, 6, "expected '::=' after the rule name 'root'"),
        ('root ::= "a" ::= "b"', 1, 14, "expected the end of rule 'root'"),
        (
            '\n\nroot ::= "a"\nroot ::= "b"',
            4,
            1,
            "found 'root' defined again (first at line 3, column 1)",
        ),
        ("root ::= <[1000]>", 1, 10, "a token reference"),
        (
            'root ::= "a" other',
            1,
            14,
            "expected a definition of rule 'other' (used in rule 'root')",
        ),
    ],
)
def test_errors_say_where(text: str, line: int, column: int, message: str) -> None:
    assert isinstance(refusal(text, "gbnf", line, column, message), SchemaError)


def test_the_start_rule_must_exist() -> None:
    with pytest.raises(GrammarError, match=r"expected a start rule named 'root', found rules 'a'"):
        Grammar('a ::= "x"')
    assert matches(Grammar('a ::= "x"', start="a"), "x")

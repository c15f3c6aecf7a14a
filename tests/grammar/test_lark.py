"""The Lark reader: supported features mean what Lark's Earley parser gives them (checked
against Lark itself), refused ones are named with their line and column."""

from __future__ import annotations

import pytest
from grammar_checks import lark_oracle, refusal

from formcast.automaton import LazyAutomaton
from formcast.errors import GrammarError
from formcast.grammar import Grammar
from formcast.grammar.lark_common import COMMON_TERMINALS, COMMON_TEXT


def same_verdicts(text: str, strings: list[str], start: str = "start") -> None:
    """formcast's automaton and Lark agree on every string (and both accept some)."""
    oracle = lark_oracle(text, start)
    automaton = LazyAutomaton(Grammar(text, syntax="lark", start=start).regex())
    verdicts = {s: automaton.matches(s.encode("utf-8")) for s in strings}
    assert verdicts == {s: oracle(s) for s in strings}
    assert any(verdicts.values()) and not all(verdicts.values())


def test_literals_ranges_and_case_folding() -> None:
    same_verdicts(
        'start: "Select"i " " "a".."c" "\\t" "\\x41" "\\u00e9"',
        [
            "select a\tAé",
            "SELECT c\tAé",
            "SeLeCt b\tAé",
            "select d\tAé",
            "select a\taé",
            "ſelect a\tAé",
        ],
    )


def test_case_folding_follows_python_re() -> None:
    automaton = LazyAutomaton(Grammar('start: "k"i', syntax="lark").regex())
    assert automaton.matches("\u212a".encode())  # KELVIN SIGN, as re.IGNORECASE folds it
    assert automaton.matches(b"K") and not automaton.matches(b"x")


def test_regexes_and_flags() -> None:
    same_verdicts(
        r"start: /a.c/ /x.y/sm /[0-9]+(\.[0-9]+)?/ /\//",
        ["abcx\ny1.5/", "a\ncxzy1/", "abcxzy1./", "abcxyy12/"],
    )


def test_leading_inline_flags_act_as_flags() -> None:
    # Python's re (hence Lark) refuses "(?s)" once Lark wraps the regex; formcast reads it
    # as the flag s
    automaton = LazyAutomaton(Grammar('start: "x" /(?s)p.q/', syntax="lark").regex())
    assert automaton.matches(b"xp\nq") and not automaton.matches(b"xpq")


def test_repeats_optional_and_groups() -> None:
    same_verdicts(
        'start: "a" ~ 2 "b" ~ 1..3 ["c"] ("d" | "e")* "f"? "g"+',
        ["aabg", "aabbbcdedfgg", "abg", "aabbbbg", "aabcfg", "aabgf"],
    )


def test_ignore_stands_between_terminals_not_inside() -> None:
    text = 'start: "ab" NAME ("," NAME)*\nNAME: /[a-z]+/\n%ignore " "\n%ignore /#[^\\n]*\\n/\n'
    same_verdicts(
        text,
        [" ab x , y ", "abx,y", "a b x", "ab x #c\n, y", "ab xy", "ab x y"],
    )


def test_common_imports() -> None:
    for name in sorted(COMMON_TERMINALS):
        assert f"{name}:" in COMMON_TEXT
    same_verdicts(
        "start: SIGNED_NUMBER WS ESCAPED_STRING WS CNAME NEWLINE? C_COMMENT\n"
        "%import common (SIGNED_NUMBER, ESCAPED_STRING, CNAME, WS, NEWLINE, C_COMMENT)\n",
        [
            '-1.5e3 "a\\"b" _x1\n/* c */',
            '+.5 "" y/**/',
            '1. "\\\\" z\r\n/* ** */',
            '1 "a"b" x/* */',
            '1 "a" 9x/* */',
            '1 "a" x/* */ */',
            '1e "a" x/**/',
        ],
    )


def test_import_with_alias_and_terminals_using_terminals() -> None:
    same_verdicts(
        "start: NAME\n%import common.CNAME -> NAME\n",
        ["abc", "_a1", "1a"],
    )
    same_verdicts(
        "start: PAIR\nPAIR: DIGIT LETTERS\nLETTERS: /[a-z]/+\n%import common.DIGIT\n",
        ["1ab", "12a", "1"],
    )


def test_modifiers_priorities_aliases_and_continuation_lines() -> None:
    same_verdicts(
        '?start: item\n!item.2: "a" -> first\n    | "b" other\nother: "c"\n    | "d"\n',
        ["a", "bc", "bd", "b", "c"],
    )


def test_direct_left_recursion_is_rewritten() -> None:
    text = 'start: start "+" NUM | start "-" NUM | NUM\nNUM: /[0-9]/\n'
    grammar = Grammar(text, syntax="lark")
    assert not grammar.is_recursive
    same_verdicts(text, ["1", "1+2-3", "1+", "+1", "12"])


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("start: x\n_sep{x}: x\n", 2, 1, "the template '_sep' is not supported"),
        ('start: _sep{"a"}\n', 1, 8, "the template use '_sep' is not supported"),
        ("start: A\n%declare A\n", 2, 1, "%declare is not supported"),
        ("start: A\n%import other.A\n", 2, 1, "%import other.A is not supported"),
        ("start: A\n%import common.NOPE\n", 2, 1, "%import common.NOPE is not supported"),
        ("start: /a/i\n", 1, 8, "the regex flag 'i' is not supported"),
        ("start: /(?i)a/\n", 1, 8, "the regex flag 'i' is not supported"),
        ("start: /a/x\n", 1, 8, "the regex flag 'x' is not supported"),
        ("start: /(?=a)a/\n", 1, 8, "the regex /(?=a)a/ is not supported"),
        ("start: /a\n", 1, 8, "expected a regex /.../ closed on the same line"),
        ('start: "a\n', 1, 10, "expected '\"' closing the string opened at line 1, column 8"),
        ('start: ("a"\n', 2, 1, "expected ')' closing the group opened at line 1, column 8"),
        ('start: "ab".."c"\n', 1, 17, "a range of two single characters in order"),
        ('start: A\nA: a\na: "x"\n', 2, 4, "expected terminals only inside a terminal"),
        (
            'start: "a"\nstart: "b"\n',
            2,
            1,
            "found 'start' defined again (first at line 1, column 1)",
        ),
        (
            'start: "a"\n%override other: "b"\n',
            2,
            11,
            "expected 'other' defined above for %override",
        ),
        ('start: "a" ~ 3..1\n', 1, 18, "a range n..m with n <= m"),
        ("start: x\n", 1, 8, "expected a definition of rule 'x' (used in rule 'start')"),
        ("start x\n", 1, 7, "expected ':' after the name 'start'"),
        ('start: "a"\n%json\n', 2, 1, "expected %ignore, %import"),
        ('start: a\na: b\nb: a "x" | "y"\n', 2, 4, "found the cycle a -> b (line 2, column 4)"),
    ],
)
def test_errors_say_where(text: str, line: int, column: int, message: str) -> None:
    refusal(text, "lark", line, column, message)


def test_start_defaults_to_start_and_can_be_chosen() -> None:
    assert Grammar('start: "a"', syntax="lark").start == "start"
    grammar = Grammar('top: "a" | "b"', syntax="lark", start="top")
    assert grammar.start == "top" and LazyAutomaton(grammar.regex()).matches(b"b")
    with pytest.raises(GrammarError, match="expected a start rule named 'start'"):
        Grammar('top: "a"', syntax="lark")

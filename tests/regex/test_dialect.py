"""Tests for formcast.regex.dialect: literal escaping and the JSON token regexes."""

from __future__ import annotations

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from regex_checks import (
    assert_parses,
    fullmatch,
)

from formcast.regex import (
    INTEGER,
    NUMBER,
    STRING,
    escape_literal,
)
from formcast.regex.dialect import PLAIN, except_words


def test_escape_literal() -> None:
    text = 'a.b*c+d?e(f)g[h]i{j}k|l^m$n\\o"p\x00\x1f\x7fé😀'
    assert fullmatch(escape_literal(text), text)
    assert_parses(escape_literal(text))


def test_public_constants_match_json() -> None:
    assert fullmatch(INTEGER, "-12") and not fullmatch(INTEGER, "012")
    assert fullmatch(NUMBER, "-1.5e+10") and not fullmatch(NUMBER, "1.")
    assert not fullmatch(NUMBER, "1e400") and not fullmatch(NUMBER, "1" * 400 + ".5")
    assert fullmatch(STRING, '"a\\"b\\u00e9"') and not fullmatch(STRING, '"\\ud800"')


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.text(alphabet="abé", max_size=4), max_size=6),
    low=st.integers(0, 3),
    high=st.one_of(st.none(), st.integers(0, 6)),
    probes=st.lists(st.text(alphabet="abéx", max_size=7), min_size=1, max_size=30),
)
def test_except_words_matches_exactly_the_other_strings(
    words: list[str], low: int, high: int | None, probes: list[str]
) -> None:
    """The strings of ``low..high`` characters that are not one of ``words``, whichever
    form the regex takes (one shared free tail when unbounded with ``low <= 1``, a tail
    per branch otherwise), checked against the definition."""
    assume(high is None or high >= low)
    regex = except_words(PLAIN, words, low, high)
    for probe in [*probes, *words, *(w[:-1] for w in words), *(w + "x" for w in words)]:
        expected = probe not in words and low <= len(probe) and (high is None or len(probe) <= high)
        found = regex is not None and fullmatch(regex, probe)
        assert bool(found) == expected, (words, low, high, probe, regex)


def _atom_by_characters(regex: str) -> bool:
    """The reference of ``_is_atom``'s scan: one character at a time (escapes skip the
    next one; a class runs to its first unescaped ``]``)."""
    depth, in_class, i = 0, False, 0
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
                if depth == 0 and regex[0] == "[":
                    return i == len(regex) - 1
        elif char == "[":
            in_class = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i == len(regex) - 1
        i += 1
    return False


def _calls_by_tokens(regex: str) -> list[str]:
    """The reference of ``calls``: every token of the dialect read, the calls kept."""
    import re

    token = re.compile(
        r"\\.|\[(?:\\.|[^\]\\])*\]|\(\?&(\w+)\)|\((?:\?P<(\w+)>|\?:?)?|\)|[^\\\[()]+", re.DOTALL
    )
    return [m.group(1) for m in token.finditer(regex) if m.group(1)]


_REGEX_TEXT = st.lists(
    st.sampled_from(
        [
            *("(", ")", "[", "]", "\\", "(?:", "(?&d1)", "(?&x2)", "?&", "a", "|", "^", "*"),
            *("(?&)", "(?&é1)", "é", "_"),  # no name; a name \w reads beyond ASCII
        ]
    ),
    min_size=1,
    max_size=24,
).map("".join)


@settings(max_examples=2000, deadline=None)
@given(text=_REGEX_TEXT)
@example(text="([)")  # an unclosed class holds the rest
@example(text="(a[b)]c)")
@example(text="\\(?&d1)(?&x2)")  # an escaped parenthesis opens no call
@example(text="[(?&d1)](?&x2")
@example(text="((?&d1))\\")
def test_regex_text_scans_read_as_the_token_by_token_references(text: str) -> None:
    """``_is_atom`` and ``calls`` read escapes, classes (closed or not), groups and calls
    as the character and token scans they replace; the scans in C
    (``_regex_parse.group_spans_all``, ``call_names``) and in Python alike."""
    from formcast.regex.dialect import (
        _CALL_SCAN,
        _group_spans_all,
        _is_atom,
        calls,
        native_parse,
    )

    if text[0] in "[(" and len(text) > 1:  # the shapes that reach the scan
        assert _is_atom(text) == _atom_by_characters(text), text
    if text[0] == "(":
        assert _group_spans_all(text) == _atom_by_characters(text), text
        if native_parse is not None:
            assert native_parse.group_spans_all(text) == _atom_by_characters(text), text
    assert calls(text) == _calls_by_tokens(text), text
    assert [name for name in _CALL_SCAN.findall(text) if name] == _calls_by_tokens(text), text
    if native_parse is not None:
        assert native_parse.call_names(text) == _calls_by_tokens(text), text

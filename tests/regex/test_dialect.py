"""Tests for formcast.regex.dialect: literal escaping and the JSON token regexes."""

from __future__ import annotations

from hypothesis import assume, given, settings
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

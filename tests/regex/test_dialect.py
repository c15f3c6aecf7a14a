"""Tests for formcast.regex.dialect: literal escaping and the JSON token regexes."""

from __future__ import annotations

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


def test_escape_literal() -> None:
    text = 'a.b*c+d?e(f)g[h]i{j}k|l^m$n\\o"p\x00\x1f\x7fé😀'
    assert fullmatch(escape_literal(text), text)
    assert_parses(escape_literal(text))


def test_public_constants_match_json() -> None:
    assert fullmatch(INTEGER, "-12") and not fullmatch(INTEGER, "012")
    assert fullmatch(NUMBER, "-1.5e+10") and not fullmatch(NUMBER, "1.")
    assert not fullmatch(NUMBER, "1e400") and not fullmatch(NUMBER, "1" * 400 + ".5")
    assert fullmatch(STRING, '"a\\"b\\u00e9"') and not fullmatch(STRING, '"\\ud800"')

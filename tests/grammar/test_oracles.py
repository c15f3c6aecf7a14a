"""Compiled grammars against the reference recognizers, recursive ones included.

For each grammar: strings derived at random are accepted by the oracle (the parser read
the grammar as the oracle does) and by the compiled index, token by token over the
default tokenizer's vocabulary; random-token decoding ends in strings the oracle
accepts; mutated strings are accepted by the index (byte by byte) exactly when the oracle accepts
them.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from grammar_checks import (
    GRAMMARS,
    Accepts,
    accepts_by_tokens,
    accepts_bytes,
    derive,
    gbnf_oracle,
    lark_oracle,
    mutations,
    random_decode,
    shared_grammars,
)

import formcast
from formcast.grammar import Grammar

# transformers-CFG reads a negated class over U+0000-U+00FF only (llama.cpp and formcast:
# over all of Unicode; test_gbnf.py checks that), so its verdicts are used up to there.
TCFG_NEGATED_LIMIT = 0xFF

SHARED = shared_grammars()

# Hand-written GBNF: escapes, counted repeats, negated classes, left recursion rewritten.
GBNF_CASES = {
    "escapes": r'''root ::= "a\tb" [\x41-\x43] "\u00e9" "\"q\"" [\[\]\\] "\U0001F600"''',
    # transformers-CFG reads {m,} as + and {0,n} as {1,n}: test_gbnf.py checks those
    "counted": r"""root ::= [0-9]{2} "-" [a-c]{1,3} ("x"{2,3})? [xy]{ 1 , 2 }""",
    "negated": r"""root ::= "\"" [^"\\\n]* "\"" [^a]""",
    "left-recursive": """
root ::= list ";"
list ::= list "," item | item
item ::= [a-c] | "(" [0-9]+ ")"
""",
    "right-recursive": """
root ::= pair ("; " root)?
pair ::= key "=" value ws
key  ::= [a-z]+
value ::= [0-9] value | [0-9]
ws   ::= (" " ws)?
""",
    "nested": r"""
root  ::= value
value ::= "[" (value ("," value)*)? "]" | [0-9]+
""",
    "multiline": """
root ::= (
    "one" |
    "two"   # a comment
  ) " " ( [a-z] [0-9]? )+
""",
}

LARK_CASES = {
    "calc-left-recursive": """
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: NUMBER | product "*" NUMBER
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
""",
    "features": r"""
start: greeting name ("," name)~1..2 [PUNCT] tail
greeting: "hello"i | "hi"
name: CNAME | /[A-Z][a-z]+/
PUNCT: "!" | "?"
tail: ("x" | "y")* | DIGIT ~ 2
%import common.CNAME
%import common.DIGIT
%ignore " "
""",
    "regex-flags": r"""
start: /a.b/s ESCAPED_STRING? SIGNED_NUMBER
%import common (ESCAPED_STRING, SIGNED_NUMBER)
""",
    "recursive-calc": r"""
?start: sum
?sum: product | sum "+" product
?product: atom | product "*" atom
?atom: NUMBER | "(" sum ")" | "-" atom
%import common.INT -> NUMBER
%ignore " "
""",
    "override-extend": """
start: item+
item: "a" | "b"
%override item: "c" | "d"
%extend item: "e"
""",
}


@pytest.fixture(scope="module")
def rng() -> random.Random:
    return random.Random(1234)


def _check(
    grammar: Grammar,
    oracle: Accepts,
    vocabulary: Any,
    tokenizer: Any,
    rng: random.Random,
    wide_limit: int | None = None,
) -> None:
    """``wide_limit``: the oracle reads wide (negated) classes up to this code point only;
    decoded strings with characters beyond it are checked by the index alone."""
    index = formcast.compile(grammar, vocabulary, cache=False)
    alphabet = set()
    derived = [derive(grammar, rng, wide_limit=wide_limit) for _ in range(12)]
    for text in derived:
        alphabet.update(text)
        assert oracle(text), f"the oracle refuses a derived string {text!r}"
        ids = tokenizer.encode(text, add_special_tokens=False)
        if tokenizer.decode(ids) == text:  # SmolLM2's tokenizer drops some control bytes
            assert accepts_by_tokens(index, ids), f"the index refuses {text!r} token by token"
        else:
            assert accepts_bytes(index, text), f"the index refuses {text!r}"
    for _ in range(6):
        text = random_decode(index, rng)
        assert accepts_bytes(index, text)
        if wide_limit is None or all(ord(c) <= wide_limit for c in text):
            assert oracle(text), f"decoding produced {text!r}, which the oracle refuses"
            alphabet.update(text)
    letters = "".join(sorted(alphabet | set('aZ0 ,\n"')))
    for text in derived:
        for mutated in mutations(text, letters, rng, 10):
            expected = oracle(mutated)
            found = accepts_bytes(index, mutated)
            assert found == expected, f"{mutated!r}: index {found}, oracle {expected}"


@pytest.mark.parametrize("path", SHARED, ids=lambda p: str(p.relative_to(GRAMMARS)))
def test_shared_grammar_against_transformers_cfg(
    path: Path, vocabulary: Any, tokenizer: Any, rng: random.Random
) -> None:
    text = path.read_text()
    _check(Grammar(text), gbnf_oracle(text), vocabulary, tokenizer, rng, TCFG_NEGATED_LIMIT)


# transformers-CFG's recognizer loops on left recursion: it judges the same language
# written without it.
ORACLE_TEXT = {
    "left-recursive": """
root ::= item ("," item)* ";"
item ::= [a-c] | "(" [0-9]+ ")"
"""
}


@pytest.mark.parametrize("name", sorted(GBNF_CASES))
def test_gbnf_features_against_transformers_cfg(
    name: str, vocabulary: Any, tokenizer: Any, rng: random.Random
) -> None:
    text = GBNF_CASES[name]
    grammar = Grammar(text)
    oracle = gbnf_oracle(ORACLE_TEXT.get(name, text))
    _check(grammar, oracle, vocabulary, tokenizer, rng, TCFG_NEGATED_LIMIT)


@pytest.mark.parametrize("name", sorted(LARK_CASES))
def test_lark_features_against_lark(
    name: str, vocabulary: Any, tokenizer: Any, rng: random.Random
) -> None:
    text = LARK_CASES[name]
    grammar = Grammar(text, syntax="lark")
    _check(grammar, lark_oracle(text), vocabulary, tokenizer, rng)


def test_recursive_grammars_are_among_those_compared() -> None:
    if not GRAMMARS.is_dir():
        pytest.skip(f"shared grammars not found at {GRAMMARS}")
    recursive = {path.name for path in SHARED if Grammar(path.read_text()).is_recursive}
    assert {"json.ebnf", "c.ebnf", "arithmetic.ebnf", "balanced_parentheses.ebnf"} <= recursive

"""Spans copied from the request's text inside a grammar (``rules={"x": FromText()}``):
written raw, bound per request, refused where the grammar could read the marker bytes
or recurses; random-token decoding and extraction through every entry point."""

from __future__ import annotations

import random
import re
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

import formcast
from formcast import FromText, NoTextValueError
from formcast.errors import GrammarError
from formcast.grammar import Grammar
from formcast.text import text_slots
from formcast.vocabulary import Vocabulary

TRIPLET = Grammar(
    """
root     ::= "[s] " subject " [r] " relation " [o] " object
relation ::= "founded" | "located in" | "works for"
""",
    rules={"subject": FromText(), "object": FromText(max_length=20)},
)
TEXT = 'Ana "Lima" founded Acme\nCorp in Porto, 東京 😀.'
TRIPLET_RE = re.compile(r"\[s\] (.+) \[r\] (founded|located in|works for) \[o\] (.+)")


def collapsed(text: str) -> str:
    return " ".join(text.split())


def bound(grammar: Grammar, text: str, vocabulary: Vocabulary) -> Any:
    return formcast.compile(grammar, vocabulary, cache=False).cursor(text=text).index.automaton


@pytest.mark.parametrize(
    ("output", "allowed"),
    [
        ('[s] Ana "Lima" [r] founded [o] Acme Corp', True),  # raw: quotes as they are
        ("[s] Ana [r] located in [o] Porto", True),
        ("[s] 東京 [r] works for [o] 😀", True),  # UTF-8 fragments
        ('[s] Ana \\"Lima\\" [r] founded [o] Acme', False),  # not JSON-escaped
        ("[s] Bob [r] founded [o] Acme", False),  # not in the text
        ("[s] Ana [r] founded [o] Acme Corp in Porto, 東京", False),  # object longer than 20
        ("[s] Ana [r] owns [o] Acme", False),  # the grammar still rules
    ],
)
def test_spans_are_raw_substrings_of_the_text(
    output: str, allowed: bool, vocabulary: Vocabulary
) -> None:
    assert bound(TRIPLET, TEXT, vocabulary).matches(output.encode()) is allowed


def test_every_span_names_its_rule() -> None:
    found = text_slots(TRIPLET.regex())
    assert [s.pointers for s in found] == [("subject",), ("object",)]
    assert {s.spelling for s in found} == {"raw"}


def test_a_text_without_a_span_is_refused_before_decoding(vocabulary: Vocabulary) -> None:
    index = formcast.compile(TRIPLET, vocabulary, cache=False)
    with pytest.raises(NoTextValueError) as caught:
        index.cursor(text="   ")
    assert "subject" in caught.value.pointers


@pytest.mark.parametrize(
    ("grammar", "rules", "message"),
    [
        ("root ::= x [^\\n]*", {"x": FromText()}, "character class that allows them"),
        ('root ::= x "\\x05"', {"x": FromText()}, "literal that allows them"),
        ("root ::= x y", {"x": FromText(), "y": formcast.Regex(".+")}, "regex that allows"),
        ('root ::= x | "(" root ")"', {"x": FromText()}, "without recursion"),
    ],
)
def test_what_a_grammar_with_spans_cannot_hold(
    grammar: str, rules: dict[str, Any], message: str
) -> None:
    with pytest.raises(GrammarError, match=message) as caught:
        Grammar(grammar, rules=rules).regex()
    assert caught.value.line >= 1


def test_random_tokens_write_spans_of_their_text(vocabulary: Vocabulary) -> None:
    index = formcast.compile(TRIPLET, vocabulary, cache=False)
    rng = random.Random(7)
    for _ in range(25):
        cursor = index.cursor(text=TEXT)
        budget = cursor.min_tokens_to_accept() + 12
        pieces = []
        for step in range(budget + 1):
            allowed = cursor.allowed_token_ids(tokens_left=budget - step).tolist()
            ending = [t for t in allowed if t in index.eos_token_ids]
            if ending and (rng.random() < 0.3 or len(ending) == len(allowed)):
                cursor.advance(ending[0])
                break
            token = rng.choice([t for t in allowed if t not in index.eos_token_ids])
            cursor.advance(token)
            pieces.append(vocabulary.token_bytes[token])
        assert cursor.is_finished
        output = b"".join(pieces).decode()
        match = TRIPLET_RE.fullmatch(output)
        assert match, output
        assert match.group(1) in collapsed(TEXT) and match.group(3) in collapsed(TEXT)
        assert len(match.group(3)) <= 20


def test_extract_extract_many_and_the_decorator(tiny_extractor: Any) -> None:
    texts = ["Ana founded Acme in Porto.", "Bo works for Zed Labs."]
    results = tiny_extractor.extract_many(TRIPLET, texts, max_new_tokens=40, progress=False, seed=3)
    for text, result in zip(texts, results, strict=True):
        match = TRIPLET_RE.fullmatch(result.unwrap())
        assert match and match.group(1) in text and match.group(3) in text

    @tiny_extractor.function(max_new_tokens=40)
    def triplet(sentence: str) -> Annotated[str, TRIPLET]:
        """The relation the sentence states."""

    value = triplet(texts[0])
    match = TRIPLET_RE.fullmatch(value)
    assert match and match.group(1) in texts[0]


def test_schemas_that_copy_are_still_refused_inside_a_grammar() -> None:
    class Copied(BaseModel):
        who: Annotated[str, FromText()]

    with pytest.raises(GrammarError, match="copy no values from the text"):
        Grammar("root ::= fact", rules={"fact": Copied}).regex()

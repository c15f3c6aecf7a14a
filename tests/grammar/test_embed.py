"""Constraints embedded in grammars: Pydantic models, JSON Schemas (with their own
definitions), regexes, lists of strings, Lark's %json; what is refused."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from grammar_checks import random_decode
from pydantic import BaseModel

import formcast
from formcast.automaton import LazyAutomaton
from formcast.errors import GrammarError
from formcast.grammar import Grammar
from formcast.vocabulary import Vocabulary


class Person(BaseModel):
    name: str
    age: int


def matches(grammar: Grammar, text: str, **options: Any) -> bool:
    return LazyAutomaton(grammar.regex(**options)).matches(text.encode("utf-8"))


@pytest.fixture(scope="module")
def byte_vocabulary() -> Vocabulary:
    """Every single byte as a token, plus EOS."""
    return Vocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], [256])


def test_a_pydantic_model_stands_for_a_rule(byte_vocabulary: Vocabulary) -> None:
    grammar = Grammar('root ::= "Person: " person "\\n"', rules={"person": Person})
    assert matches(grammar, 'Person: {"name":"Ada","age":36}\n')
    assert not matches(grammar, 'Person: {"age":36,"name":"Ada"}\n')  # field order
    assert not matches(grammar, 'Person: {"name":"Ada"}\n')
    index = formcast.compile(grammar, byte_vocabulary, cache=False)
    rng = random.Random(3)
    for _ in range(5):
        text = random_decode(index, rng, extra_tokens=60)
        assert text.startswith("Person: ") and text.endswith("\n")
        Person.model_validate_json(text[len("Person: ") : -1])  # the model's own check


def test_a_json_schema_with_its_own_definitions_is_merged_twice() -> None:
    schema = {"type": "object", "properties": {"x": {}}, "required": ["x"]}
    grammar = Grammar('root ::= a "|" b', rules={"a": schema, "b": schema})
    regex = grammar.regex(mode="specification")
    assert regex.startswith("(?(DEFINE)(?P<e0_d0>")  # one copy, renamed
    assert "e1_" not in regex
    assert matches(grammar, '{"x":[1,{"k":null}]}|{"x":"s"}', mode="specification")
    assert not matches(grammar, '{"x":1}|{"y":1}', mode="specification")


def test_whitespace_applies_to_embedded_schemas() -> None:
    grammar = Grammar("root ::= p", rules={"p": Person})
    assert not matches(grammar, '{ "name": "A", "age": 1 }')
    assert matches(grammar, '{ "name": "A", "age": 1 }', whitespace=True)


def test_a_regex_and_a_list_of_strings() -> None:
    grammar = Grammar(
        'root ::= code " " unit',
        rules={"code": formcast.Regex(r"(?s)^[A-Z]{2}.\d$"), "unit": ["kg", "g", "lb"]},
    )
    assert matches(grammar, "AB\n7 kg") and matches(grammar, "XYz0 lb")
    assert not matches(grammar, "AB\n7 oz") and not matches(grammar, "A\n7 g")


def test_lark_inline_json_schema_and_ignore_after_it() -> None:
    grammar = Grammar(
        'start: "call" %json {"type": "object", "properties": {"n": {"type": "integer"}},'
        ' "required": ["n"]} ";"\n%ignore " "\n',
        syntax="lark",
    )
    assert matches(grammar, 'call {"n":5};') and matches(grammar, 'call  {"n":-2} ; ')
    assert not matches(grammar, 'call {"n":"5"};') and not matches(grammar, 'call {"n": 5};')


def test_an_embedded_rule_may_be_the_start() -> None:
    assert matches(Grammar('unused ::= "x"', rules={"root": ["a", "b"]}), "b")


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"x": 42}, "expected rule 'x' in rules= to be a Pydantic model class"),
        ({"x": []}, "expected rule 'x' in rules= to be a Pydantic model class"),
        ({"root": ["a"]}, "expected rule 'root' either defined in the grammar or given in rules="),
    ],
)
def test_what_cannot_be_embedded(rules: dict[str, Any], message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        Grammar('root ::= x | "y"', rules=rules)


def test_a_schema_that_copies_from_the_text_is_refused_when_written() -> None:
    schema = {
        "type": "object",
        "properties": {"s": {"type": "string", "x-formcast-from-text": True}},
    }
    grammar = Grammar("root ::= s", rules={"s": schema})
    with pytest.raises(GrammarError, match="copy no values from the text"):
        grammar.regex()


def test_embedded_schemas_are_part_of_the_key() -> None:
    first = Grammar("root ::= s", rules={"s": {"type": "integer"}})
    same = Grammar("root ::= s", rules={"s": {"type": "integer"}})
    other = Grammar("root ::= s", rules={"s": {"type": "string"}})
    assert first == same and hash(first) == hash(same) and first != other
    assert json.dumps(first.key()) == json.dumps(same.key()) != json.dumps(other.key())

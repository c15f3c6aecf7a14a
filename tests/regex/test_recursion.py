"""Exact recursive schemas: ``max_recursion_depth=None`` and ``Limits.any_value_depth=None``.

Recursive ``$ref`` becomes a recursive definition (compiled to a pushdown automaton)
instead of being unrolled; the oracle is jsonschema (instances in formcast's canonical
spelling: compact, properties in declaration order).
"""

from __future__ import annotations

import json
import random
from typing import Annotated, Any, Optional

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict

import formcast
from formcast.automaton import LazyAutomaton, PushdownAutomaton, compile_automaton
from formcast.index import TokenIndex
from formcast.limits import Limits


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid")  # the JSON Schema oracle forbids extra keys too

    name: str
    children: list[Node] = []


class Tree(BaseModel):
    value: int
    left: Optional[Tree] = None  # noqa: UP045 - the anyOf-with-null spelling
    right: Optional[Tree] = None  # noqa: UP045


class Folder(BaseModel):
    name: str
    files: list[File] = []


class File(BaseModel):
    title: str
    attachment: Optional[Folder] = None  # noqa: UP045


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _random_node(rng: random.Random, depth: int) -> dict[str, Any]:
    children = [_random_node(rng, depth - 1) for _ in range(rng.randint(0, 2))] if depth else []
    node: dict[str, Any] = {"name": rng.choice(["a", "é", "x y", ""])}
    if children or rng.random() < 0.5:
        node["children"] = children
    return node


def _deep_node(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"name": "leaf"}
    for level in range(depth):
        node = {"name": str(level), "children": [node, {"name": "x"}]}
    return node


@pytest.mark.parametrize("model", [Node, Tree, Folder])
def test_recursive_models_compile_to_a_pushdown_automaton(model: type[BaseModel]) -> None:
    regex = formcast.schema_to_regex(model, max_recursion_depth=None)
    assert "(?&r0)" in regex
    assert isinstance(compile_automaton(regex), PushdownAutomaton)
    assert formcast.schema_to_regex(model) == regex  # exact is the default
    unrolled = formcast.schema_to_regex(model, max_recursion_depth=3)  # a bound unrolls
    assert isinstance(compile_automaton(unrolled), LazyAutomaton)


def test_deep_instances_are_accepted_at_any_depth() -> None:
    automaton = compile_automaton(formcast.schema_to_regex(Node, max_recursion_depth=None))
    text = _compact(_deep_node(200))
    Node.model_validate_json(_compact(_deep_node(60)))  # pydantic's JSON parser stops at ~100
    assert automaton.matches(_compact(_deep_node(60)))
    assert automaton.matches(text)
    assert not automaton.matches(text[:-1])
    unrolled = compile_automaton(formcast.schema_to_regex(Node, max_recursion_depth=3))
    assert unrolled.matches(_compact(_deep_node(3)))
    assert not unrolled.matches(text)  # three levels only


def test_tree_with_optional_children() -> None:
    automaton = compile_automaton(formcast.schema_to_regex(Tree, max_recursion_depth=None))
    deep: dict[str, Any] = {"value": 0}
    for level in range(1, 40):
        deep = (
            {"value": level, "left": deep, "right": None}
            if level % 2
            else {"value": level, "right": deep}
        )
    assert automaton.matches(_compact(deep))
    assert not automaton.matches(_compact({"value": 1, "left": {"value": "1"}}))


def test_mutual_recursion_through_defs() -> None:
    automaton = compile_automaton(formcast.schema_to_regex(Folder, max_recursion_depth=None))
    value = {"name": "root", "files": [{"title": "a", "attachment": {"name": "in", "files": [
        {"title": "b", "attachment": {"name": "deeper", "files": [{"title": "c"}]}}
    ]}}]}  # fmt: skip
    Folder.model_validate(value)
    assert automaton.matches(_compact(value))
    assert not automaton.matches(_compact({"name": "root", "files": [{"attachment": None}]}))


def test_a_reference_to_the_root_is_a_recursive_definition() -> None:
    schema = {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
        "additionalProperties": False,
    }
    regex = formcast.schema_to_regex(schema, mode="specification", max_recursion_depth=None)
    automaton = compile_automaton(regex)
    assert automaton.matches(b'{"kids":[{},{"kids":[{"kids":[{"kids":[]}]}]}]}')
    assert not automaton.matches(b'{"kids":[{"kids":1}]}')


def test_recursion_combined_with_other_keywords_is_unrolled() -> None:
    """No call can stand for a recursive reference and a sibling keyword at once: that
    reference is unrolled three times (stricter, never looser); plain ones stay exact."""
    string_or_nested = {"minProperties": 1, "anyOf": [{"type": "string"}, {"$ref": "#/$defs/r"}]}
    schema = {
        "$defs": {"r": {"type": "object", "additionalProperties": string_or_nested}},
        "type": "object",
        "additionalProperties": string_or_nested,
    }
    regex = formcast.schema_to_regex(schema, mode="specification", max_recursion_depth=None)
    automaton = compile_automaton(regex)
    nested = {"a": "x"}
    for _ in range(3):
        nested = {"k": nested}
    assert automaton.matches(_compact(nested))
    assert not automaton.matches(_compact({"k": {}}))  # minProperties holds inside
    for _ in range(3):
        nested = {"k": nested}
    assert not automaton.matches(_compact(nested))  # deeper than the three unrollings


def test_a_reference_wrapped_in_a_single_allof_stays_exact() -> None:
    schema = {
        "$defs": {
            "item": {
                "type": "object",
                "properties": {
                    "children": {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/item"}]}}
                },
                "additionalProperties": False,
            }
        },
        "allOf": [{"$ref": "#/$defs/item"}],
    }
    regex = formcast.schema_to_regex(schema, mode="specification", max_recursion_depth=None)
    automaton = compile_automaton(regex)
    assert isinstance(automaton, PushdownAutomaton)
    deep = b'{"children":[' * 30 + b"{}" + b"]}" * 30
    assert automaton.matches(deep)


def test_max_recursion_depth_is_checked() -> None:
    with pytest.raises(formcast.InvalidOptionError, match="an int >= 0 or None"):
        formcast.schema_to_regex(Node, max_recursion_depth=-1)


def test_unconstrained_values_nest_at_any_depth_with_no_bound() -> None:
    limits = Limits(any_value_depth=None)
    regex = formcast.schema_to_regex({"type": "object"}, mode="specification", limits=limits)
    automaton = compile_automaton(regex)
    assert isinstance(automaton, PushdownAutomaton)
    deep = b'{"a":' + b"[" * 40 + b'{"b":null}' + b"]" * 40 + b"}"
    assert automaton.matches(deep)
    assert not automaton.matches(deep[:-2] + b"}")
    bounded = compile_automaton(formcast.schema_to_regex({"type": "object"}, mode="specification"))
    assert not bounded.matches(deep)  # twelve levels by default
    with pytest.raises(
        formcast.InvalidOptionError, match="any_value_depth to be an int >= 0 or None"
    ):
        Limits(any_value_depth=-1)


def test_random_trees_and_mutations_agree_with_jsonschema() -> None:
    schema = Node.model_json_schema()
    automaton = compile_automaton(formcast.schema_to_regex(Node, max_recursion_depth=None))
    rng = random.Random(7)
    checked = {True: 0, False: 0}
    for _ in range(120):
        text = _compact(_random_node(rng, rng.randint(0, 6))).decode()
        assert automaton.matches(text.encode()), text
        chars = list(text)
        position = rng.randrange(len(chars))
        action = rng.choice(["delete", "insert", "replace"])
        if action == "delete":
            del chars[position]
        else:
            piece = rng.choice([*'{}[]",:a1', '"children":[]', '{"name":"q"}'])
            chars[position : position + (action == "replace")] = [piece]
        mutated = "".join(chars)
        try:
            value = json.loads(mutated)
        except json.JSONDecodeError:
            assert not automaton.matches(mutated.encode()), mutated
            checked[False] += 1
            continue
        if _compact(value).decode() != mutated:
            continue  # not formcast's spelling (key order, numbers): not comparable
        valid = jsonschema.Draft202012Validator(schema).is_valid(value)
        assert automaton.matches(mutated.encode()) == valid, mutated
        checked[valid] += 1
    assert checked[False] > 20 and checked[True] > 5


def test_recursive_definitions_have_no_inlined_form() -> None:
    from formcast.regex import inline_definitions

    with pytest.raises(ValueError, match="'r0' is recursive"):
        inline_definitions(formcast.schema_to_regex(Node, max_recursion_depth=None))


class Quoted(BaseModel):
    text: Annotated[str, formcast.FromText()]
    replies: list[Quoted] = []


def test_text_values_inside_exact_recursion_are_refused() -> None:
    from formcast.vocabulary import Vocabulary

    vocabulary = Vocabulary.from_token_bytes([b"", *(bytes([b]) for b in range(32, 127))], [0])
    with pytest.raises(formcast.InvalidOptionError, match="FromText values outside exact"):
        formcast.compile(Quoted, vocabulary, cache=False)  # exact by default
    with pytest.raises(formcast.InvalidOptionError, match="set max_recursion_depth"):
        formcast.compile(Quoted, vocabulary, max_recursion_depth=None, cache=False)
    # unrolled: bound per request
    index = formcast.compile(Quoted, vocabulary, max_recursion_depth=3, cache=False)
    assert index.text_slots


def test_compile_with_exact_recursion_decodes_deep_values() -> None:
    from formcast.vocabulary import Vocabulary

    vocabulary = Vocabulary.from_token_bytes(
        [b"", *(bytes([b]) for b in range(32, 127)), b'{"name":"', b'","children":['], [0]
    )
    index = formcast.compile(Node, vocabulary, max_recursion_depth=None, cache=False)
    assert isinstance(index.automaton, PushdownAutomaton)
    cursor = index.cursor()
    text = _compact(_deep_node(30))
    cursor.advance_bytes(text)
    assert cursor.is_accepting()
    loaded = TokenIndex.from_bytes(index.to_bytes(), vocabulary)  # with the deep states
    assert isinstance(loaded.automaton, PushdownAutomaton)
    assert loaded.walk_bytes(loaded.initial_state, text) == cursor.state
    budget = index.cursor()
    budget.advance_bytes(b'{"name":"a","children":[' * 5)
    assert budget.min_tokens_to_accept() == len(b"]}" * 5)  # every open list and object closed


def test_a_recursive_sub_schema_without_a_finite_value_matches_nothing() -> None:
    """``loop`` requires itself, so no value holds it: where the schema allows leaving it
    out (an optional property, an anyOf branch) the rest still matches, exactly as the
    unrolled translation drops it; the grammar path still refuses such a definition."""
    from formcast.vocabulary import Vocabulary

    schema = {
        "$defs": {
            "loop": {"type": "object", "properties": {"again": {"$ref": "#/$defs/loop"}},
                     "required": ["again"]},
            "tree": {"type": "object", "properties": {
                "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}},
                "stuck": {"$ref": "#/$defs/loop"},
            }, "additionalProperties": False},
        },
        "anyOf": [{"type": "integer"}, {"$ref": "#/$defs/loop"}, {"$ref": "#/$defs/tree"}],
    }  # fmt: skip
    regex = formcast.schema_to_regex(schema, mode="specification")
    with pytest.raises(formcast.SchemaError, match="cannot end without calling itself"):
        compile_automaton(regex)
    exact = compile_automaton(regex, drop_empty_definitions=True)
    assert isinstance(exact, PushdownAutomaton)  # the tree still recurses
    deep = '{"kids":[' * 10 + "{}" + "]}" * 10
    for text in ["7", "{}", '{"kids":[{},{"kids":[]}]}', deep]:
        assert exact.matches(text.encode()), text
    for text in ['{"stuck":{}}', '{"kids":[{"stuck":{"again":{}}}]}', '{"again":{}}']:
        assert not exact.matches(text.encode()), text
    vocabulary = Vocabulary.from_token_bytes([b"", *(bytes([b]) for b in range(32, 127))], [0])
    index = formcast.compile(schema, vocabulary, mode="specification", cache=False)
    assert index.automaton.matches(deep.encode())

"""A Grammar wherever an output type goes: compile, the cache key, Annotated[str, ...],
the prompt, extract / extract_many / the decorator, and transformers' generate."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar

import pytest

import formcast
from formcast import Extractor, Grammar, PromptTemplate, Regex
from formcast.automaton import PushdownAutomaton
from formcast.compiler import clear_memory_cache
from formcast.constraint import DEFAULT_COMPILE_OPTIONS, CompileOptions, OutputSpec, output_spec
from formcast.errors import SchemaError
from formcast.extraction.prompts import MAX_GRAMMAR_SHOWN, grammar_instructions
from formcast.vocabulary import Vocabulary
from support.generate_support import sample_under_processor

CODE = Grammar(
    """
# an order code
root   ::= letter letter "-" digits suffix?
letter ::= [A-Z]
digits ::= [0-9]{3}
suffix ::= "/" ("a" | "b")
"""
)
CODE_RE = r"[A-Z]{2}-[0-9]{3}(/[ab])?"


def constraint_key(output: Any, options: CompileOptions = DEFAULT_COMPILE_OPTIONS) -> str | None:
    """The disk cache's key of ``output`` (:attr:`OutputSpec.key`); None where the type
    cannot be read at all."""
    try:
        return output_spec(output, options).key
    except SchemaError:
        return None


def test_a_grammar_is_a_frozen_hashable_value() -> None:
    again = Grammar(CODE.text)
    assert again == CODE and hash(again) == hash(CODE)
    assert {CODE: 1}[again] == 1
    assert Grammar(CODE.text + "\n") != CODE
    with pytest.raises(AttributeError):
        CODE.text = "x"  # type: ignore[misc]


def test_output_spec_and_key() -> None:
    spec = output_spec(CODE)
    assert spec.regex == CODE.regex() and not spec.is_json and spec.parse("AB-123") == "AB-123"
    key = constraint_key(CODE)
    assert key is not None and json.loads(key)["grammar"] == CODE.text
    assert constraint_key(CODE, CompileOptions(whitespace=True)) != key
    assert constraint_key(Grammar(CODE.text, start="digits")) != key
    with pytest.raises(SchemaError, match=r"found formcast\.Grammar: its output cannot copy"):
        _ = output_spec(CODE, CompileOptions(from_text=True)).regex


def test_annotated_str_carries_a_grammar_or_a_regex() -> None:
    assert output_spec(Annotated[str, CODE]).regex == CODE.regex()
    assert output_spec(Annotated[str, Regex("a+")]).regex == "a+"
    assert output_spec(Annotated[str, CODE]).grammar == CODE
    assert constraint_key(Annotated[str, CODE]) == constraint_key(CODE)
    with pytest.raises(SchemaError, match=r"expected Annotated\[str, formcast.Regex"):
        output_spec(Annotated[int, CODE])


def test_compile_memoises_by_grammar(vocabulary: Vocabulary) -> None:
    index = formcast.compile(CODE, vocabulary, cache=False)
    assert formcast.compile(Grammar(CODE.text), vocabulary, cache=False) is index
    cursor = index.cursor()
    cursor.advance_bytes(b"AB-123/a")
    assert cursor.is_accepting()


def test_the_prompt_shows_the_grammar_briefly() -> None:
    shown = grammar_instructions(CODE.text, "gbnf", "root")
    assert shown.startswith("Answer with text that follows this GBNF grammar, from its rule root:")
    assert 'root   ::= letter letter "-" digits suffix?' in shown and "# an order code" not in shown
    call = Grammar(
        'root ::= "<" name ">" args', rules={"name": ["a", "b"], "args": {"type": "integer"}}
    )
    described = grammar_instructions(
        call.text, call.syntax, call.start, call.embedded_descriptions()
    )
    assert described.endswith(
        'where name is one of "a", "b"\n'
        'where args is compact JSON matching the JSON Schema {"type":"integer"}'
    )
    long = "\n".join(f'r{i} ::= "{i}"' for i in range(400))
    cut = grammar_instructions(long, "lark", "start")
    assert len(cut) < MAX_GRAMMAR_SHOWN + 200 and "more characters)" in cut and "Lark" in cut


def test_extract_returns_the_matched_string(tiny_extractor: Extractor) -> None:
    value = tiny_extractor.extract(CODE, "order AB-123", max_new_tokens=20, seed=1)
    assert isinstance(value, str) and re.fullmatch(CODE_RE, value), value
    results = list(tiny_extractor.extract_many(CODE, ["a", "b"], max_new_tokens=20, progress=False))
    assert all(re.fullmatch(CODE_RE, r.unwrap()) for r in results)


class RecordingTemplate(PromptTemplate):
    """A prompt template that keeps the instructions it renders."""

    seen: ClassVar[list[str]] = []

    def render(
        self, *, text: str, schema: Mapping[str, Any] | None, instructions: str
    ) -> list[dict[str, str]]:
        self.seen.append(instructions)
        return super().render(text=text, schema=schema, instructions=instructions)


def test_the_prompt_of_a_grammar_output(tiny_model: Any, tokenizer: Any) -> None:
    extractor = Extractor(tiny_model, tokenizer, prompt_template=RecordingTemplate())
    value = extractor.extract(CODE, "order AB-123", max_new_tokens=20, share_prefix=False)
    assert re.fullmatch(CODE_RE, value)
    assert RecordingTemplate.seen[-1] == grammar_instructions(CODE.text, "gbnf", "root")


def test_decorator_with_an_annotated_grammar(tiny_extractor: Extractor) -> None:
    @tiny_extractor.function(max_new_tokens=20)
    def order_code(text: str) -> Annotated[str, CODE]:
        """The order code of the text."""

    assert re.fullmatch(CODE_RE, order_code("order AB-123"))


def test_logits_processor_with_generate(
    tiny_model: Any, tokenizer: Any, vocabulary: Vocabulary
) -> None:
    index = formcast.compile(CODE, vocabulary, cache=False)
    for text in sample_under_processor(tiny_model, tokenizer, index, "code:", 12, seed=0):
        assert re.fullmatch(CODE_RE, text), text


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ('root ::= "x" n\n', b"x-12"),
        ('root ::= "[" (root ("," root)*)? "]" | "x" n\n', b"[x1,[[x-2],x3]]"),  # recursive
    ],
    ids=["regular", "recursive"],
)
def test_a_grammar_pickles_and_hits_the_disk_cache(
    text: str,
    accepted: bytes,
    tmp_path: Path,
    vocabulary: Vocabulary,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grammar = Grammar(text, rules={"n": {"type": "integer"}})
    restored = pickle.loads(pickle.dumps(grammar))
    assert restored == grammar and restored.regex() == grammar.regex()
    first = formcast.compile(grammar, vocabulary, cache=tmp_path)
    assert list(tmp_path.rglob("*")), "nothing was written to the disk cache"
    clear_memory_cache()

    def no_compile(*args: Any) -> None:
        raise AssertionError("compiled again instead of loading the disk cache entry")

    monkeypatch.setattr(OutputSpec, "regex", property(no_compile))
    again = formcast.compile(restored, vocabulary, cache=tmp_path)
    assert again is not first
    assert type(again.automaton) is type(first.automaton)
    assert isinstance(again.automaton, PushdownAutomaton) == grammar.is_recursive
    cursor = again.cursor()
    cursor.advance_bytes(accepted)
    assert cursor.is_accepting()


def test_extract_with_a_recursive_grammar(tiny_extractor: Extractor) -> None:
    nested = Grammar('root ::= "[" (root ("," root)*)? "]" | [0-9]')
    assert nested.is_recursive
    for seed in range(3):
        value = tiny_extractor.extract(nested, "a list", max_new_tokens=24, seed=seed)
        depth = 0
        for char in value:  # brackets balance: the pushdown constraint holds at any depth
            depth += {"[": 1, "]": -1}.get(char, 0)
            assert depth >= 0, value
        assert depth == 0 and re.fullmatch(r"[\[\],0-9]+", value), value


def test_a_grammars_regex_does_not_depend_on_the_hash_seed() -> None:
    script = (
        "import formcast;"
        'print(formcast.Grammar(\'\'\'root ::= a\\na ::= "x" | "(" b ")"\\n'
        'b ::= a ("," a)* | c\\nc ::= "[" a "]"\'\'\').regex())'
    )
    regexes = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(4)
    }
    assert len(regexes) == 1, regexes

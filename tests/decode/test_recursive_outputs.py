"""A recursive output type through every path of extraction, under the default of exact
recursion: ``extract``, ``run``, ``extract_many``, the decorator, jump-forward, budget-safe
endings, field steering, ``FormcastLogitsProcessor`` and the command line.

:class:`ScriptedModel` writes a chain of nodes deeper than the old default of three
unrollings, so an output that arrives whole shows the recursion was not bounded; the tiny
random model shows that whatever a model writes ends as a complete, valid value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic import field_validator

import formcast
from formcast.automaton import LazyAutomaton, PushdownAutomaton
from formcast.decode.logits import ForcedTokenizer, generate
from formcast.extraction.extractor import Extractor
from formcast.pipelines.cli import main
from support.decoding_cases import ASSISTANT, Node, nested_node_text
from support.generate_support import sample_under_processor
from support.scripted_model import ScriptedModel, following

DEEP = nested_node_text(6)
"""Six levels below the root: deeper than ``max_recursion_depth=3`` allows."""


def _extractor(tokenizer: Any, targets: Any, **options: Any) -> Extractor:
    model = ScriptedModel(following(tokenizer, targets, ASSISTANT, endings=('"}', "]}", "}")))
    return Extractor(model, tokenizer, max_new_tokens=120, **options)


def _depth(node: Node) -> int:
    return 1 + max((_depth(child) for child in node.children), default=0)


def test_the_default_compiles_recursion_exactly(tokenizer: Any) -> None:
    extractor = _extractor(tokenizer, [DEEP])
    assert isinstance(extractor.compile(Node).automaton, PushdownAutomaton)
    assert isinstance(extractor.compile(Node, max_recursion_depth=3).automaton, LazyAutomaton)
    bounded = Extractor(extractor.model, tokenizer, max_recursion_depth=3)
    assert isinstance(bounded.compile(Node).automaton, LazyAutomaton)


@pytest.mark.parametrize("jump_forward", [True, False])
def test_extract_writes_values_deeper_than_any_unrolling(
    tokenizer: Any, jump_forward: bool
) -> None:
    extractor = _extractor(tokenizer, [DEEP])
    result = extractor.run(Node, "a deep tree", jump_forward=jump_forward)
    assert result.ok and result.raw_text == DEEP
    assert result.value == Node.model_validate_json(DEEP) and _depth(result.value) == 7
    assert (result.forced_tokens > 0) == jump_forward


def test_a_bound_stops_the_same_model_at_that_depth(tokenizer: Any) -> None:
    extractor = _extractor(tokenizer, [DEEP])
    bounded = extractor.run(Node, "a deep tree", max_recursion_depth=3)
    assert bounded.ok and bounded.raw_text != DEEP
    assert _depth(bounded.value) <= 4  # the root and three levels of recursion
    assert DEEP.startswith(bounded.raw_text.split("]}", 1)[0])


def test_extract_many_and_the_decorator(tokenizer: Any) -> None:
    def targets(prompt: str) -> list[str]:
        return [nested_node_text(5, "a") if "first" in prompt else nested_node_text(4, "b")]

    extractor = _extractor(tokenizer, targets)
    results = extractor.extract_many(Node, ["the first tree", "the second"], progress=False)
    assert [r.raw_text for r in results] == [nested_node_text(5, "a"), nested_node_text(4, "b")]
    assert all(r.ok for r in results)

    @extractor.function
    def tree(text: str) -> Node:
        """The tree in the text."""
        raise NotImplementedError

    assert tree("the first tree") == Node.model_validate_json(nested_node_text(5, "a"))


@pytest.mark.parametrize("budget", [11, 14, 23, 40])
def test_small_budgets_still_end_in_complete_values(tokenizer: Any, budget: int) -> None:
    extractor = _extractor(tokenizer, [DEEP])
    result = extractor.run(Node, "a deep tree", max_new_tokens=budget, max_attempts=1)
    assert result.ok, result.error
    assert result.completion_tokens <= budget
    assert Node.model_validate_json(result.raw_text) == result.value
    if budget >= 23:  # room for the root's name: the model's text, then the closing
        assert result.raw_text.startswith('{"name":"n0"')


class CheckedNode(Node):
    """A recursive type whose top-level name is checked while it is written."""

    @field_validator("name")
    @classmethod
    def not_draft(cls, value: str) -> str:
        if value.startswith("draft"):
            raise ValueError("a draft name")
        return value


def test_a_rejected_field_is_rolled_back_inside_a_recursive_type(tokenizer: Any) -> None:
    rejected = nested_node_text(4, "draft")
    kept = nested_node_text(4, "final")
    extractor = _extractor(tokenizer, [rejected, kept])
    result = extractor.run(CheckedNode, "a tree")
    assert result.ok and result.raw_text == kept
    assert result.history[0].field_rollbacks == 1


def test_greedy_generate_over_a_pushdown_index(tokenizer: Any, vocabulary: Any) -> None:
    index = formcast.compile(Node, vocabulary, cache=False)
    model = ScriptedModel(following(tokenizer, [DEEP], ">>", endings=('"}', "]}", "}")))
    prompt = [list(tokenizer.encode("tree >>", add_special_tokens=False))]
    forced = ForcedTokenizer(tokenizer, vocabulary)
    out = generate(model, prompt, [index.cursor()], max_new_tokens=120, forced_tokenizer=forced)
    assert out[0].text == DEEP and out[0].finish_reason == "stop"


def test_logits_processor_samples_complete_values(tiny_model: Any, tokenizer: Any) -> None:
    index = formcast.compile(Node, tokenizer, cache=False)
    assert isinstance(index.automaton, PushdownAutomaton)
    for seed in range(3):
        for text in sample_under_processor(tiny_model, tokenizer, index, "Tree:", 30, seed):
            Node.model_validate_json(text)


def test_the_command_line_extracts_a_recursive_type(
    tiny_model_dir: Path, tiny_extractor: Any, tmp_path: Path
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"text": f"tree {n}"}) + "\n" for n in range(2)))
    out = tmp_path / "out.jsonl"
    args = ["extract", "--output-type", "support.decoding_cases:Node", "--input", source]
    args += ["--output", out, "--model", tiny_model_dir, "--max-new-tokens", "24"]
    result = CliRunner().invoke(main, [str(a) for a in [*args, "--no-progress"]])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    expected = tiny_extractor.extract_many(
        Node, ["tree 0", "tree 1"], progress=False, max_new_tokens=24
    )
    assert [row["value"] for row in rows] == [
        r.value.model_dump(mode="json") if r.ok else None for r in expected
    ]
    assert all(row["error"] is None for row in rows)
